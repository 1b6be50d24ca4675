"""Start-up hook for a training script run under fitspeed (see `fitspeed.script_hook`).

`fitspeed.script` puts this folder first on PYTHONPATH, so Python imports this
file before the script's first line. Without FITSPEED_SCRIPT it does nothing
but pass on to the next `sitecustomize` on the path, if there is one.
"""

import importlib.machinery
import importlib.util
import os
import sys

if os.environ.get("FITSPEED_SCRIPT"):
    from fitspeed import script_hook

    script_hook.install()


def _next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or os.path.abspath(spec.origin or "") == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_next_sitecustomize()
