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

`fitspeed run --processes N` (`over_processes`) starts N copies of the command on
this host, each with Keras's KERAS_DISTRIBUTION_* variables and the same order
(each joins in the hook), and watches them as one (`CommandGroup`): the first
to fail stops the others, and none is left behind. Where a launcher set those
variables, it starts that one process as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
        force: bool = False, processes: int | None = None) -> int:
    """`fitspeed run`: the command to its end with `config` applied; its exit status.

    `processes` (`--processes N`) overrides the configuration's own; with more
    than one, the command runs as that many processes (`over_processes`).
    """
    import tempfile

    config = with_processes(config, processes, os.environ)
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
        if config.processes > 1:
            return over_processes(argv, env, config.processes)
        try:
            return subprocess.call(argv, env=env)
        except OSError as error:
            raise ScriptError(f"Could not start `{' '.join(argv)}`: {error.strerror}. Check the command.") from None
        except KeyboardInterrupt:
            return 130


# -- `fitspeed run --processes N`: the command as N processes, watched as one ---------------------------------

STOP_GRACE_S = 5.0  # how long a process may take to end after it was asked to, before it is killed
DATA_NOTE = (
    "each process runs the whole script, and Keras makes their fit() calls one step: what fit() is given, a "
    "batched tf.data.Dataset or NumPy arrays, is sharded by process (the script's batch is the global batch, each "
    "process feeding 1/{n} of every batch; a validation_split is cut first, as Keras cuts it, and every process "
    "judges all of it)"
)


def with_processes(config: TrialConfig, processes: int | None, environ: Mapping[str, str]) -> TrialConfig:
    """`config` over `processes` (`--processes N`), or over its own where None; refused in a sentence on a backend
    with no multi-process route in Keras, or where a launcher's Keras variables in `environ` disagree.

    >>> with_processes(TrialConfig(backend="jax"), 2, {}).processes, with_processes(TrialConfig(), None, {}).processes
    (2, 1)
    >>> with_processes(TrialConfig(backend="torch"), 2, {})
    Traceback (most recent call last):
    ...
    fitspeed.core.errors.UserError: Expected the jax backend to run over 2 processes. Received: backend=torch in best.json, and Keras has no multi-process data parallel for PyTorch; keras.distribution's route runs on JAX: --set backend=jax, or "backend": "jax" in best.json's knobs.
    >>> with_processes(TrialConfig(backend="jax"), 2, {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "h:1"})
    Traceback (most recent call last):
    ...
    fitspeed.core.errors.UserError: Expected KERAS_DISTRIBUTION_NUM_PROCESSES to be the processes asked, 2. Received: nothing. Set it to 2 on every host, or ask --processes N.
    """
    from fitspeed.core.knobs.processes import PROCESSES
    from fitspeed.measure.processes import launcher_refusal

    wanted = config.processes if processes is None else processes
    if wanted == 1:
        return config if processes is None else config.replace(processes=1)
    reason = PROCESSES.refuses(config.backend)
    if reason:
        raise UserError(f"Expected the jax backend to run over {wanted} processes. Received: backend={config.backend} "
                        f"in best.json, and {reason}, or \"backend\": \"jax\" in best.json's knobs.")
    refused = launcher_refusal(wanted, environ, ask="--processes ")
    if refused:
        raise UserError(refused)
    return config.replace(processes=wanted)


def over_processes(argv: list[str], env: dict[str, str], count: int) -> int:
    """The command as `count` processes of one keras.distribution run; the first failed one's exit status, else 0.

    Each process is a copy of the command with Keras's three variables set
    (`fitspeed.measure.processes.environments`, process 0 on a free local
    port), and goes through the same hook, which joins it
    (`keras.distribution.initialize()`) before the devices are placed. Where
    a launcher set those variables already, this command is that one process
    of its run, started with them as they are (`with_processes` checked them).
    """
    from fitspeed.measure import processes

    index = processes.launched(env)
    if index is not None:  # a launcher's: this host runs one process of the run, as it is
        told = (f"KERAS_DISTRIBUTION_* set, the coordinator at {env[processes.ADDRESSES]}" if env.get(processes.ADDRESSES)
                else "a task of SLURM's step: JAX reads the coordinator from SLURM_STEP_NODELIST")
        sys.stderr.write(f"fitspeed: this is process {index} of {count} ({told}); {DATA_NOTE.format(n=count)}.\n")
        environs = [env]
    else:
        address = f"127.0.0.1:{processes.free_port()}"
        sys.stderr.write(f"fitspeed: {count} processes on this host (keras.distribution on JAX, process 0 at "
                         f"{address}; process 0's output as it is, the others' lines marked [process N]); "
                         f"{DATA_NOTE.format(n=count)}.\n")
        environs = processes.environments(count, address, env)
    return CommandGroup(argv, environs, [index] if index is not None else list(range(count)), count).run()


class CommandGroup:
    """The processes of one command run, watched as one.

    The first process's output reaches the terminal as it is; every other
    one's lines are marked with their process (`[process 1] ...`). The first
    process to fail (a status other than 0, or a signal) stops the others at
    once, which would otherwise wait in a collective for XLA's rendezvous
    timeout, and the group exits with its status, its last line on stderr
    naming that process. Ctrl-C (or SIGTERM) is passed on to every process.
    Each process is a process group of its own, killed whole when the run
    ends: none is left behind.
    """

    def __init__(self, argv: list[str], environs: list[dict[str, str]], indices: list[int], count: int) -> None:
        import queue

        self.argv, self.environs, self.indices, self.count = argv, environs, indices, count
        self.procs: list[subprocess.Popen[bytes]] = []
        self.threads: list[Any] = []  # each process's waiter, and the others' output pumps
        self.ended: queue.Queue[int] = queue.Queue()  # the processes' positions, in the order they ended

    def run(self) -> int:
        import signal

        previous = signal.signal(signal.SIGTERM, _interrupt)
        said = ""
        try:
            self._start()
            status, said = self._watch()
            return status
        except KeyboardInterrupt:
            self._stop(signal.SIGINT)
            return 130
        finally:
            self._kill()
            signal.signal(signal.SIGTERM, previous)
            if said:  # the last line, after every process's own
                sys.stderr.write(said)

    def _start(self) -> None:
        import threading

        from fitspeed.measure.warm_start import die_with_parent

        for position, (env, index) in enumerate(zip(self.environs, self.indices, strict=True)):
            own = position == 0  # the first process (process 0 on this host) speaks to the terminal as it is
            try:
                proc = subprocess.Popen(
                    self.argv, env=env if own else {**env, "PYTHONUNBUFFERED": "1"},
                    stdout=None if own else subprocess.PIPE, stderr=None if own else subprocess.PIPE,
                    start_new_session=True, preexec_fn=die_with_parent if sys.platform == "linux" else None)
            except OSError as error:
                raise ScriptError(f"Could not start `{' '.join(self.argv)}`: {error.strerror}. Check the command.") \
                    from None
            self.procs.append(proc)
            waiter = threading.Thread(target=self._wait, args=(proc, position), daemon=True)
            waiter.start()
            self.threads.append(waiter)
            if not own:
                for stream, target in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)):
                    self.threads.append(_pump(stream, target, f"[process {index}] ".encode()))

    def _wait(self, proc: subprocess.Popen[bytes], position: int) -> None:
        proc.wait()
        self.ended.put(position)

    def _watch(self) -> tuple[int, str]:
        """Wait for every process to end well, or for the first to fail; the group's status, and what to say."""
        import queue

        left = len(self.procs)
        while left:
            try:
                position = self.ended.get(timeout=0.5)  # a timeout, so that Ctrl-C is seen at once
            except queue.Empty:
                continue
            left -= 1
            code = int(self.procs[position].returncode)
            if code != 0:
                self._stop()
                return (code if code > 0 else 128 - code,
                        f"fitspeed: process {self.indices[position]} of {self.count} {_ended(code)}, and the others "
                        "were stopped.\n")
        return 0, ""

    def _stop(self, first: int | None = None) -> None:
        """Ask every running process to end (`first`, SIGTERM by default), and kill what still runs after
        `STOP_GRACE_S`."""
        import signal
        import time

        for proc in self.procs:
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM if first is None else first)
        deadline = time.monotonic() + STOP_GRACE_S
        while any(proc.poll() is None for proc in self.procs) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _kill(self) -> None:
        """Kill each process's group, whatever is left in it, and wait for the processes and their output."""
        import signal

        for proc in self.procs:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        for thread in self.threads:
            thread.join(timeout=2.0)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the group as Ctrl-C does


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _ended(code: int) -> str:
    """How a process ended, for the line that names it.

    >>> _ended(3), _ended(-9)
    ('exited with status 3', 'was killed by SIGKILL')
    """
    if code >= 0:
        return f"exited with status {code}"
    import signal

    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def _pump(stream: Any, target: Any, prefix: bytes) -> Any:
    """A thread that copies `stream`'s lines to `target` (stdout or stderr), each marked with `prefix`."""
    import threading

    def copy() -> None:
        out = getattr(target, "buffer", None)
        for line in iter(stream.readline, b""):
            if out is not None:
                out.write(prefix + line)
                out.flush()
            else:
                target.write((prefix + line).decode(errors="replace"))
                target.flush()
        stream.close()

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread
