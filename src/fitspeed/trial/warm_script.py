"""A script trial forked from a fork server: `python FILE ARGS...` without the minutes of imports.

`fitspeed.measure.runner` forks a user's `python train.py ...` trial from a
server that imported keras under the trial's own import environment
(`fitspeed.trial.fork_server`), where the command has exactly that form and
its Python is the runner's (`fitspeed.measure.training_command.forkable`).
`run` makes the child what a fresh `python FILE ARGS...` is at the script's
first line: `sys.argv`, the script's folder first on `sys.path`, a fresh
`__main__` whose `__file__` is the script's absolute path, Python's own
handlers for SIGINT and SIGPIPE, and the hook installed as the script site's
`sitecustomize` installs it. It then runs the script, and ends as an
interpreter ends: non-daemon threads joined, atexit handlers run, the exit
status `python` gives (1 after an uncaught exception, its traceback printed
from the script's own frame down).

Where a warm start cannot be what a cold one is, the child writes the reason
to `COLD` beside the trial's order file and exits before the script trains;
the runner then starts the command cold. That is:
- a file or package in the script's folder has the name of a module the
  server imported already (a cold start would import the script's own);
- the script changes os.environ before it first imports keras or tensorflow
  (a cold start would import the backend under the changed environment). The
  parent sends no script whose source names `environ` or `putenv`, so the
  lines before that import run twice only where a module the script imports
  changes the environment.
"""

from __future__ import annotations

import atexit
import builtins
import importlib
import os
import signal
import sys
import threading
import types
from importlib.machinery import SourceFileLoader
from pathlib import Path
from typing import Any, Callable

COLD = "cold"  # beside the order file: why this trial must start in a fresh interpreter
BACKENDS = ("keras", "tensorflow")  # the modules the hook applies the knobs at
_exit_now = os._exit  # the real one: the hook wraps os._exit once installed


def shadowed(folder: Path) -> str | None:
    """A module in `folder` (the script's, first on sys.path) that this process imported from elsewhere already."""
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return None
    for entry in entries:
        name = entry[:-3] if entry.endswith(".py") else entry
        is_module = entry.endswith(".py") or (folder / entry / "__init__.py").is_file()
        module = sys.modules.get(name)
        if is_module and module is not None and not str(getattr(module, "__file__", "") or "").startswith(str(folder)):
            return f"{entry} in the script's folder has the name of the module {name}, imported before the script"
    return None


class _FirstBackendImport:
    """`import` and `importlib.import_module` watched until the script first imports keras or tensorflow; then `then()`.

    A cold start's hook sees that import on `sys.meta_path`; here keras is in
    `sys.modules` already, so the import statement and `import_module`, the
    two ways a script or a library it imports reaches a module, are watched
    instead, and put back as they were on the first backend import.
    """

    def __init__(self, then: Callable[[], None]) -> None:
        self.then = then
        self.real_import, self.real_import_module = builtins.__import__, importlib.import_module
        self.fired = False

    def install(self) -> None:
        builtins.__import__ = self.import_
        importlib.import_module = self.import_module

    def _first(self, name: str) -> None:
        if not self.fired and name.partition(".")[0] in BACKENDS:
            self.fired = True
            builtins.__import__, importlib.import_module = self.real_import, self.real_import_module
            self.then()

    def import_(self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),  # noqa: A002
                level: int = 0) -> Any:
        if level == 0:
            self._first(name)
        return self.real_import(name, globals, locals, fromlist, level)

    def import_module(self, name: str, package: str | None = None) -> Any:
        if not name.startswith("."):
            self._first(name)
        return self.real_import_module(name, package)


def _cold(order: Path, reason: str) -> None:
    """Send this trial back to a cold start: the reason beside its order, and out at once."""
    (order.parent / COLD).write_text(reason + "\n")
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    _exit_now(0)


def _code(stop: SystemExit) -> int:
    """The status `python` exits with for `SystemExit(stop.code)`; a message is printed as Python prints it."""
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code
    print(stop.code, file=sys.stderr)
    return 1


def _end(code: int, interrupted: bool = False) -> None:
    """End as a Python interpreter ends: threads joined, atexit handlers run, streams flushed; never returns."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # Py_FinalizeEx joins non-daemon threads first
    finally:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    if interrupted:  # an uncaught KeyboardInterrupt: Python ends by SIGINT, as a shell expects
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    _exit_now(code)


def run(argv: list[str]) -> None:
    """In a forked child whose cwd, environment and output are the trial's: be `python FILE ARGS...`; never returns."""
    from fitspeed.trial import script_hook

    order = Path(os.environ[script_hook.ENV])
    file = Path(argv[1]).absolute()
    folder = Path(os.path.realpath(file)).parent
    reason = shadowed(folder)
    if reason:
        _cold(order, reason)
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:  # Python leaves an inherited ignored SIGINT ignored
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        script_hook.install()
    except Exception as error:  # noqa: BLE001 (a cold start says it the way the user's Python says it)
        _cold(order, f"the hook could not start warm: {type(error).__name__}: {error}")
    hook = script_hook.current()
    assert hook is not None  # the order is there: install() took it
    at_start = dict(os.environ)

    def backend_imported() -> None:
        changed = sorted(k for k in at_start.keys() | os.environ.keys() if at_start.get(k) != os.environ.get(k))
        if changed:
            _cold(order, f"the script set {', '.join(changed)} before importing keras")
        hook.imported("keras")  # keras is imported already: the knobs and the Model wrappers now

    _FirstBackendImport(backend_imported).install()
    sys.argv = list(argv[1:])
    sys.path.insert(0, str(folder))
    main = types.ModuleType("__main__")
    main.__file__ = str(file)
    main.__loader__ = SourceFileLoader("__main__", str(file))
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    main.__cached__ = None  # type: ignore[attr-defined]
    sys.modules["__main__"] = main
    try:
        code = compile(file.read_bytes(), str(file), "exec")
        exec(code, main.__dict__)  # noqa: S102 (the user's own script, as `python FILE` runs it)
    except SystemExit as stop:
        _end(_code(stop))
    except BaseException as error:  # noqa: BLE001 (as an uncaught error ends `python FILE`)
        trace = error.__traceback__
        while trace is not None and trace.tb_frame.f_code.co_filename != str(file):
            trace = trace.tb_next  # from the script's own frame down, as `python FILE` prints it
        sys.excepthook(type(error), error, trace or error.__traceback__)
        _end(1, interrupted=isinstance(error, KeyboardInterrupt))
    _end(0)
