"""`python -m fitspeed.trial --fork-server`: import keras once, then fork one trial process per request.

A trial process spends most of its start importing keras and its backend
(about 2 of a TensorFlow trial's 3.5 s on 2 cores). The server pays that once
for a given environment, and every trial after is a fresh child forked from
it: its own process, process group and output files, the same code path as
`python -m fitspeed.trial SPEC.json` (`protocol.main`), or of a user's
`python FILE ARGS...` with the hook (`fitspeed.trial.warm_script`), with
nothing but the imports shared. Nothing of a model exists in the server when it forks: no
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
fork, and `exited PID CODE` when that child ends (a negative CODE: killed by
that signal, as `subprocess` reports it). Several children may run at once:
the trials of a lockstep round (`fitspeed.measure.rounds`) are forked from
one server, so that no trial of a round starts cold beside a warm one. A
shared server (`serve_socket`) serves one trial per connection and says
`exited CODE`.

A forked child points its stderr at its own file and turns the fault
handler on again there, so a native abort or a segfault in the trial dumps
its Python stacks into the trial's own stderr tail, as a cold trial does.
"""

from __future__ import annotations

import faulthandler
import importlib
import json
import os
import select
import signal
import socket
import sys
import traceback
from typing import Any

from fitspeed.trial import peak_memory

PR_SET_PDEATHSIG = 1
WAIT_S = 0.05  # how often a shared server looks for a client that went away
PRELOAD = ("fitspeed.trial.protocol", "fitspeed.machine.environment", "fitspeed.trial.doctor", "fitspeed.trial.models",
           "fitspeed.trial.data.layout", "fitspeed.trial.data.sources", "fitspeed.trial.data.kinds",
           "fitspeed.trial.transform.rewrite", "fitspeed.trial.timing", "fitspeed.trial.validation",
           "fitspeed.trial.script_hook", "fitspeed.trial.warm_script")


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
    """Import what every trial of `backend` imports (`protocol.subject`'s list); build nothing."""
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
        if request.get("sigint_ignored"):  # as the process that asked for the trial has it: a cold child inherits it
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
        if request["stderr"] == request["stdout"]:  # a script trial: its output is one log, as 2>&1 makes it
            os.dup2(1, 2)
        else:
            os.dup2(os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        faulthandler.enable(file=sys.stderr)  # fd 2: the trial's own stderr file from here on
        if request.get("cwd"):
            os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("script"):  # a user's `python FILE ARGS...` (fitspeed.trial.warm_script)
            from fitspeed.trial import warm_script

            warm_script.run(request["script"])
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


def _fork(request: dict[str, Any], server: int, close: list[int]) -> int:
    """Fork the trial process `request` describes; in the parent, its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    server_kb = peak_memory.resident_kb()
    pid = os.fork()
    if pid == 0:
        for fd in close:
            os.close(fd)
        _child(request, server, server_kb)
    return pid


def _wait(pid: int, client: int | None) -> int:
    """Wait for the child `pid`; its exit code. With `client`, kill the child's group if the client goes away."""
    if client is None:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if select.select([client], [], [], WAIT_S)[0] and not os.read(client, 1):  # closed: the client died
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _setup_channel() -> int:
    """Point stdin at /dev/null and stdout at stderr (a stray print in an import goes to the log); the replies' fd."""
    replies = os.dup(1)
    os.dup2(2, 1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    return replies


def serve(backend: str) -> int:
    """Import keras for `backend`, then fork a trial per line on stdin until stdin closes (one parent's server)."""
    requests = os.fdopen(os.dup(0), "rb")
    replies = _setup_channel()
    _preload(backend)
    server = os.getpid()

    def reply(line: str) -> None:
        os.write(replies, f"{line}\n".encode())

    reply("ready")
    children: set[int] = set()
    buffer, closed = b"", False
    while not closed or children:
        if not closed and select.select([requests], [], [], WAIT_S if children else None)[0]:
            chunk = os.read(requests.fileno(), 65536)
            closed = not chunk
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    pid = _fork(json.loads(line), server, [requests.fileno(), replies])
                    children.add(pid)
                    reply(f"started {pid}")
        elif closed:
            return 0  # the parent is gone: Linux ends each child with this server
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                reply(f"exited {pid} {os.waitstatus_to_exitcode(status)}")
    return 0


def serve_socket(backend: str, path: str, idle_s: float) -> int:
    """Import keras for `backend`, then serve trials to any process that connects to the Unix socket `path`.

    One connection is one trial: a request line in, `started PID` and
    `exited CODE` out. A client that goes away mid-trial takes its trial
    with it (its process group is killed), as a parent that dies does a
    private server's. The server says `ready` on stdout and closes it, and
    exits after `idle_s` seconds without a client.
    """
    replies = _setup_channel()
    _preload(backend)
    server = os.getpid()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        if os.path.exists(path):
            os.unlink(path)
        listener.bind(path)
        listener.listen(8)
        listener.settimeout(idle_s)
        os.write(replies, b"ready\n")
        os.close(replies)
        try:
            while True:
                try:
                    connection, _ = listener.accept()
                except TimeoutError:
                    return 0
                with connection:
                    connection.settimeout(None)
                    request = json.loads(connection.makefile("rb").readline() or b"null")
                    if not request:
                        continue
                    pid = _fork(request, server, [listener.fileno(), connection.fileno()])
                    connection.sendall(f"started {pid}\n".encode())
                    code = _wait(pid, connection.fileno())
                    try:
                        connection.sendall(f"exited {code}\n".encode())
                    except OSError:  # the client is gone
                        pass
        finally:
            if os.path.exists(path):
                os.unlink(path)
