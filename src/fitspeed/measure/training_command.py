"""A user's own training command (`fitspeed measure -- python train.py ...`), seen from the parent.

Runs in the parent and never imports a framework. It checks the command before
any trial starts (a missing script file is the user's mistake, said in one
sentence), describes it for `TrialSpec.script`, and starts it with the hook:
`fitspeed/trial/script_site` first on PYTHONPATH (its `sitecustomize` calls
`fitspeed.trial.script_hook.install`) and `FITSPEED_SCRIPT` naming an order file.
The hook writes the trial's record to a file beside the order; the script's
own output is the trial's log. A `python FILE ARGS...` in fitspeed's own Python
may be forked from a fork server instead of started (`forkable`,
`fitspeed.trial.warm_script`).

Supported commands: `python FILE ...`, `python -m MODULE ...`, `sh|bash FILE ...`
(a wrapper that runs python) and an executable `./FILE ...`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.import_environment import start_environment
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import TrialSpec
from fitspeed.core.workloads import origin

DATA = "script"  # TrialSpec.data of a script trial: its data kind is learned from the first trial
SITE = Path(__file__).parent.parent / "trial" / "script_site"  # a folder on PYTHONPATH, never imported here
ENV = "FITSPEED_SCRIPT"  # fitspeed.trial.script_hook.ENV, kept here so the parent need not import the hook
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_SHELLS = ("sh", "bash", "zsh", "dash")
_PYTHON_OPTIONS_WITH_VALUE = ("-W", "-X", "-Q")
_SETS_ENVIRONMENT = re.compile(rb"\b(environ|putenv)\b")  # os.environ[...] = ..., os.putenv(...)


class ScriptError(UserError):
    """A training command that cannot be run as given."""


def describe(command: list[str], fit: int = 1, cwd: str | Path | None = None) -> JSONObject:
    """Check `command` and describe it for `TrialSpec.script`: command, cwd, file, its hash, fit."""
    if not command:
        raise ScriptError("Expected a training command after `--`, such as `-- python train.py`. Received nothing.")
    if fit < 1:
        raise ScriptError(f"Expected --fit to be 1 or more (which fit() call to time). Received: {fit}.")
    folder = Path(cwd or os.getcwd()).absolute()
    file = _script_file(command, folder)
    digest = hashlib.sha256(file.read_bytes()).hexdigest() if file is not None and file.is_file() else None
    return {"command": list(command), "cwd": str(folder), "file": str(file) if file else None,
            "sha256": digest, "fit": fit}


def label(script: JSONObject) -> str:
    """The model name a script trial shows: `script:train.py` (or the module it runs)."""
    file = script.get("file")
    if file:
        return f"script:{Path(file).name}"
    return "script:" + " ".join(script["command"][:3])


def _script_file(command: list[str], folder: Path) -> Path | None:
    """The file the command runs, checked to exist; None for `python -m` or `-c`."""
    program, args = command[0], command[1:]
    if _PYTHON.match(Path(program).name):
        index = 0
        while index < len(args):
            arg = args[index]
            if arg in ("-m", "-c"):
                if arg == "-m" and index + 1 < len(args):
                    return _module_file(args[index + 1], folder)
                return None
            if arg in _PYTHON_OPTIONS_WITH_VALUE:
                index += 2
                continue
            if arg.startswith("-"):
                index += 1
                continue
            return _existing(arg, folder, "the Python script")
        raise ScriptError(
            f"Expected `{program}` to be given a script to run, such as `-- {program} train.py`. "
            f"Received: `{' '.join(command)}`. Name the training script."
        )
    if Path(program).name in _SHELLS:
        files = [arg for arg in args if not arg.startswith("-")]
        return _existing(files[0], folder, "the shell script") if files else None
    if "/" in program or (folder / program).is_file():
        path = _existing(program, folder, "the program")
        if not os.access(path, os.X_OK) or "/" not in program:
            runner = "python" if path.suffix == ".py" else "sh" if path.suffix == ".sh" else None
            how = f"`{runner} {program}`" if runner else f"`./{program}` after `chmod +x {program}`"
            raise ScriptError(
                f"Expected a command that runs your training. Received: `{program}`, a file that cannot be run "
                f"as a command{'' if os.access(path, os.X_OK) else ' (it is not executable)'}. Run it as {how}."
            )
        return path
    if shutil.which(program) is None:
        raise ScriptError(
            f"Expected a command that runs your training, such as `python train.py`. Received: `{program}`, "
            "which is neither a file here nor a program on PATH. Check the spelling, or give its path."
        )
    return None


def _existing(name: str, folder: Path, what: str) -> Path:
    path = (folder / name) if not Path(name).is_absolute() else Path(name)
    if not path.is_file():
        raise ScriptError(
            f"Expected {what} {name!r} to exist. Received a path that is not a file in {folder}. "
            "Check the path, or run fitspeed from the folder you train in."
        )
    return path


def _module_file(module: str, folder: Path) -> Path | None:
    """`python -m pkg.train` from `folder`: pkg/train.py (or its __main__), when it is there."""
    base = folder.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__main__.py"):
        if candidate.is_file():
            return candidate
    return None


def forkable(command: list[str], cwd: str | Path, python: str, path: str | None) -> bool:
    """Whether `command` may run forked from a fork server (`fitspeed.trial.warm_script`) rather than cold.

    Only `PYTHON FILE ARGS...`, where PYTHON is `python` itself (the same
    executable in the same folder: the same packages) and FILE names neither
    `environ` nor `putenv`: a script that sets its environment before it
    imports keras runs cold, as the backend must read what it set.
    """
    if len(command) < 2 or not _PYTHON.match(Path(command[0]).name) or command[1].startswith("-"):
        return False
    found = shutil.which(command[0], path=path) if "/" not in command[0] else str(Path(cwd) / command[0])
    if found is None:
        return False
    given, own = Path(found), Path(python)
    if given.resolve() != own.resolve() or given.absolute().parent.resolve() != own.absolute().parent.resolve():
        return False
    try:
        source = (Path(cwd) / command[1]).read_bytes()
    except OSError:
        return False
    return _SETS_ENVIRONMENT.search(source) is None


def child_env(base: dict[str, str], order: Path) -> dict[str, str]:
    """The environment that hooks the first Python process of the command."""
    env = dict(base)
    package_root = str(Path(__file__).parent.parent.parent)  # the folder that holds the fitspeed package
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE), package_root, env.get("PYTHONPATH")]))
    env[ENV] = str(order)
    return env


def prepare(spec: TrialSpec, folder: Path, base_env: dict[str, str], action: str = "trial") -> tuple[list[str], dict[str, str], Path]:
    """Write the order for the hook; return the command, its environment and where the record will be."""
    if spec.script is None:
        raise ValueError("not a script trial")
    record = folder / "record.json"
    order = folder / "order.json"
    order.write_text(json.dumps({"spec": spec.to_dict(), "record": str(record), "action": action}))
    return list(spec.script["command"]), child_env(base_env, order), record


def read_record(path: Path) -> JSONObject | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def provenance(best: JSONObject, script: JSONObject) -> str | None:
    """Why a best.json may not fit this command: tuned on another workload, another script, or another version of it.

    >>> mine = {"file": "/work/train.py", "sha256": "ab" * 32, "command": ["python", "/work/train.py"]}
    >>> print(provenance({"model": "tiny", "script": None}, mine))  # doctest: +NORMALIZE_WHITESPACE
    best.json was tuned on the built-in workload tiny, not on train.py: its steps_per_execution and input knobs
    were measured on another model and data. Tune this script for an answer of its own: fitspeed tune -- python
    /work/train.py
    >>> provenance({"model": "/w/fitspeed-shipped/functional-1a2b.keras", "script": None}, mine)[:79]
    'best.json was tuned on a model passed to fitspeed.tune from Python (functional)'
    >>> provenance({"model": "script:train.py", "script": {"file": "train.py", "sha256": "ab" * 32}}, mine) is None
    True
    >>> provenance({"model": "script:train.py", "script": {"file": "train.py", "sha256": "cd" * 32}}, mine)
    'best.json was tuned on another version of train.py (SHA-256 cdcdcdcdcdcd…, this one ababababab…): the script changed since'
    """
    here = Path(script["file"]).name if script.get("file") else " ".join(script["command"][:3])
    tuned = best.get("script")
    if not tuned:
        model = best.get("model")
        if not model:
            return None  # a hand-written configuration: nothing to check it against
        return (f"best.json was tuned on {origin(model)}, not on {here}: its steps_per_execution and input knobs "
                f"were measured on another model and data. Tune this script for an answer of its own: fitspeed tune "
                f"-- {' '.join(script['command'])}")
    if tuned.get("file") != here:
        return f"best.json was tuned on {tuned.get('file') or best.get('model')}, not on {here}"
    if tuned.get("sha256") and script.get("sha256") and tuned["sha256"] != script["sha256"]:
        return (f"best.json was tuned on another version of {here} (SHA-256 {tuned['sha256'][:12]}…, this one "
                f"{script['sha256'][:10]}…): the script changed since")
    return None


def run(config: TrialConfig, command: list[str], seed: int = 0, best: JSONObject | None = None,
        force: bool = False) -> int:
    """`fitspeed run`: the command to its end with `config` applied; its exit status."""
    import tempfile

    script = describe(command)
    warning = provenance(best, script) if best is not None and not force else None
    if warning:
        sys.stderr.write(f"fitspeed: {warning} (--force quiets this warning).\n")
    if config.data_format != "channels_last":  # the script holds its own model: fitspeed cannot swap it here
        sys.stderr.write(
            f"fitspeed: data_format={config.data_format} is a rewrite of the script's model, which `fitspeed run` "
            "cannot swap. Add it to the script: model = fitspeed.rewrite_model(model, best_json) before fit() "
            "(best.json's snippet shows it). Running with the other knobs.\n")
        config = config.replace(data_format="channels_last")
    if "batch_size" in config.changed():  # the script's batch is its recipe: the hook never changes it
        sys.stderr.write(
            f"fitspeed: batch_size={config.batch_size} is not applied: a script's batch size is its own (it changes "
            f"the recipe). Pass {config.batch_size} through the script's own arguments to use it.\n")
        config = config.replace(batch_size=TrialConfig().batch_size)
    applied = config.label()
    sys.stderr.write(f"fitspeed: running `{' '.join(command)}` with "
                     f"{'nothing changed (the defaults)' if applied == 'defaults' else applied}\n")
    spec = TrialSpec(model=label(script), data=DATA, config=config, seed=seed, script=script, timeout_s=None)
    with tempfile.TemporaryDirectory(prefix="fitspeed-run-") as tmp:
        argv, env, _ = prepare(spec, Path(tmp), start_environment(config, os.environ), action="run")
        try:
            return subprocess.call(argv, env=env)
        except OSError as error:
            raise ScriptError(f"Could not start `{' '.join(argv)}`: {error.strerror}. Check the command.") from None
        except KeyboardInterrupt:
            return 130

