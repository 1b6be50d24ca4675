"""Start-up hook for a training script run under fitspeed (see `fitspeed.trial.script_hook`).

`fitspeed.measure.training_command` puts this folder first on PYTHONPATH, so Python imports this
file before the script's first line. Without FITSPEED_SCRIPT it does nothing
but pass on to the next `sitecustomize` on the path, if there is one.
"""

import importlib.machinery
import importlib.util
import os
import sys

if os.environ.get("FITSPEED_SCRIPT"):
    try:
        from fitspeed.trial import script_hook

        script_hook.install()
    except Exception as error:  # never let the script run on unhooked: a trial would train it to the end
        sys.stderr.write(f"fitspeed: the script hook could not start in {sys.executable}: "
                         f"{type(error).__name__}: {error}. Run the command with a Python that has fitspeed "
                         "and its dependencies installed.\n")
        os._exit(70)


def _next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or os.path.abspath(spec.origin or "") == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_next_sitecustomize()
