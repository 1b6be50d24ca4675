"""`python -m fitspeed.trial --fork-server`: import keras once, then fork one trial process per request.

A trial process spends most of its start importing keras and its backend
(about 2 of a TensorFlow trial's 3.5 s on 2 cores). The server pays that once
for a given environment, and every trial after is a fresh child forked from
it: its own process, process group and output files, the same code path as
`python -m fitspeed.trial SPEC.json` (`protocol.main`), with nothing but the
imports shared. Nothing of a model exists in the server when it forks: no
layer, no tensor, no thread pool (TensorFlow and PyTorch size theirs on first
use, so the child's thread knobs still apply; JAX builds its backend on first
use too).

The environment the server was started with is the one
`core.import_environment` computes for the trials it serves, so what the
backend read at import is what a trial of its own would have read
(`apply.before_import` checks it again in the child). The parent
(`fitspeed.measure.warm_start`) keeps a server per environment.

The control channel is one JSON line per request on the server's stdin, and
lines back on its stdout: `ready` once imported, `started PID` after each
fork, and `exited CODE` when that child ends (a negative CODE: killed by
that signal, as `subprocess` reports it). One child at a time.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import traceback
from typing import Any, BinaryIO

from fitspeed.trial import peak_memory

PR_SET_PDEATHSIG = 1
PRELOAD = ("fitspeed.trial.protocol", "fitspeed.machine.environment", "fitspeed.trial.doctor", "fitspeed.trial.models",
           "fitspeed.trial.data.layout", "fitspeed.trial.data.sources", "fitspeed.trial.data.fit_input",
           "fitspeed.trial.transform.rewrite", "fitspeed.trial.timing", "fitspeed.trial.validation")


def _die_with(parent: int) -> None:
    """Ask Linux to kill this process when its parent dies; exit now if it already has."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def _preload(backend: str) -> None:
    """Import what every trial of `backend` imports (`protocol.measure`'s list); build nothing."""
    from fitspeed.trial.keras_import import import_keras

    import_keras(backend)
    for name in PRELOAD:
        importlib.import_module(name)


def _child(request: dict[str, Any], server: int, server_kb: int) -> None:
    """In the forked child: become the trial process `request` describes, run it, exit. Never returns."""
    code = 1
    try:
        peak_memory.SHARED_KB = max(0, server_kb - peak_memory.resident_kb())
        os.setsid()  # its own process group: the parent kills the group, as it does a cold trial's
        _die_with(server)
        for name in ("SIGINT", "SIGTERM", "SIGPIPE"):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
        os.dup2(os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        if request.get("cwd"):
            os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        from fitspeed.trial import protocol

        sys.argv = [protocol.__file__, request["spec"]]
        code = protocol.main(sys.argv)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:  # noqa: BLE001  (as an uncaught error ends `python -m fitspeed.trial`: traceback, status 1)
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def serve(backend: str, requests: BinaryIO | None = None) -> int:
    """Import keras for `backend`, then fork a trial per line on stdin until stdin closes."""
    requests = requests or os.fdopen(os.dup(0), "rb")
    replies = os.dup(1)
    os.dup2(2, 1)  # a stray print in an import goes to the log, never into the control channel
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    _preload(backend)
    server = os.getpid()

    def reply(line: str) -> None:
        os.write(replies, f"{line}\n".encode())

    reply("ready")
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        server_kb = peak_memory.resident_kb()
        pid = os.fork()
        if pid == 0:
            requests.close()
            os.close(replies)
            _child(request, server, server_kb)
        reply(f"started {pid}")
        _, status = os.waitpid(pid, 0)
        reply(f"exited {os.waitstatus_to_exitcode(status)}")
    return 0
