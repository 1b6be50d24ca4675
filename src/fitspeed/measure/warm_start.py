"""Start trials from a fork server that imported keras once (`fitspeed.trial.fork_server`).

Built-in trials, and a user's `python FILE ARGS...` (`fitspeed.trial.warm_script`).

`fitspeed.measure.runner` asks `start` for a trial process before it starts
a fresh interpreter. A server is kept per environment the trial's backend
reads at import (`core.import_environment`: backend, oneDNN, determinism,
host devices, and whatever else the parent's environment holds), so a
trial only ever comes from a server whose keras was imported exactly as its
own would have been. The first trial of an environment waits for its
server's import, once; later ones fork in milliseconds. A server is started
only when a trial needs it, never beside a running measurement.

`start` gives None, and the runner starts the trial cold, where warm starts
are off (`FITSPEED_WARM_START=0`), no server can be kept for it (`MAX_SERVERS`
serve trials still running), or it could not start (its failure then
surfaces in the cold trial's own record). A server forks as many trials at
once as are asked of it: the trials of a lockstep round
(`fitspeed.measure.rounds`) all come from it. At most `MAX_SERVERS` are kept,
the least recently used idle one closed first; all close when the parent
exits, and Linux kills a server and its trials if the parent dies.

With `FITSPEED_FORK_SERVERS=FOLDER`, servers live in FOLDER instead and
serve every process that names it (many short commands in a row, a test
suite): a Unix socket per server, `SLOTS` servers per environment, each
slot taken by one trial at a time under a file lock. Such a server outlives
the command that started it and exits after `IDLE_S` seconds without a
trial; a command that dies mid-trial takes its trial with it.

Runs in the parent and never imports a framework.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import os
import select
import socket
import signal
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import IO

SWITCH = "FITSPEED_WARM_START"  # "0": every trial starts a fresh interpreter
SHARED = "FITSPEED_FORK_SERVERS"  # a folder: servers kept there serve every fitspeed process that names it
SLOTS = 2  # shared servers per environment: as many trials of it at once
IDLE_S = 120.0  # a shared server exits after this long without a trial
# Variables read by nothing the server imports: set in the child (from the trial's request), not part of which
# server serves it. fitspeed reads its own (FITSPEED_*: a script trial's order file, a test's fault or hold, the
# host's name) at run time only, and pytest's (PYTEST_*: the worker's name, the current test) are pytest's.
VOLATILE = ("PYTHONHASHSEED",)
VOLATILE_PREFIXES = ("FITSPEED_", "PYTEST_")
MAX_SERVERS = 2
READY_TIMEOUT_S = 600.0
FORK_TIMEOUT_S = 60.0


def die_with_parent() -> None:
    """In a child, before exec: ask Linux to kill it if the parent dies (kill -9 included)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ServerGone(Exception):
    """The fork server closed its channel: it died, or never started."""


class _Lines:
    """Lines from a pipe or a socket, read with a deadline."""

    def __init__(self, stream: IO[bytes] | socket.socket) -> None:
        self.fd = stream.fileno()
        self.buffer = b""

    def read(self, timeout: float | None) -> str | None:
        """The next line; None if none came within `timeout` seconds (None: wait for it). ServerGone at EOF."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                raise ServerGone("the fork server closed its channel")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


class ForkServer:
    """One `python -m fitspeed.trial --fork-server BACKEND`, started with `env`."""

    def __init__(self, python: str, env: Mapping[str, str]) -> None:
        self.log = tempfile.TemporaryFile(prefix="fitspeed-fork-server-")
        self.proc = subprocess.Popen(
            [python, "-P", "-m", "fitspeed.trial", "--fork-server", env["KERAS_BACKEND"]],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=dict(env),
            start_new_session=True, preexec_fn=die_with_parent,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.lines = _Lines(self.proc.stdout)
        self.reading = threading.Lock()  # one reader of the channel at a time: several children share it
        self.live: set[int] = set()
        self.codes: dict[int, int] = {}
        try:
            ready = self.lines.read(READY_TIMEOUT_S)
        except ServerGone:
            ready = None
        if ready != "ready":
            self.close()
            raise ServerGone(f"the fork server did not start (it said {ready!r})")

    def fork(self, request: Mapping[str, object]) -> WarmChild:
        assert self.proc.stdin is not None
        with self.reading:
            try:
                self.proc.stdin.write(json.dumps(request).encode() + b"\n")
                self.proc.stdin.flush()
            except OSError as error:
                raise ServerGone(str(error)) from None
            while True:  # another child's end may come first
                line = self.lines.read(FORK_TIMEOUT_S)
                if line is None or not line.startswith(("started ", "exited ")):
                    raise ServerGone(f"the fork server did not fork (it said {line!r})")
                if line.startswith("started "):
                    break
                self._ended(line)
        pid = int(line.split()[1])
        self.live.add(pid)
        return WarmChild(self, pid)

    def _ended(self, line: str) -> None:
        """`exited PID CODE`: that child's exit code, kept until its `WarmChild` asks."""
        _, pid, code = line.split()
        self.codes[int(pid)] = int(code)
        self.live.discard(int(pid))

    def returncode(self, pid: int, timeout: float | None) -> int | None:
        """Child `pid`'s exit code, waiting up to `timeout` seconds (None: until it ends); None while it runs."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self.reading:
                if pid in self.codes:
                    return self.codes.pop(pid)
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    line = self.lines.read(left)
                except ServerGone:  # the server died, and Linux killed its children with it
                    for child in self.live | {pid}:
                        self.codes[child] = -signal.SIGKILL
                    self.live.clear()
                    self.close()
                    continue
                if line is None:
                    return None
                if line.startswith("exited "):
                    self._ended(line)

    @property
    def busy(self) -> bool:
        """Whether a child of it still runs (such a server is never closed to make room)."""
        return bool(self.live)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


class WarmChild:
    """A trial process a fork server forked, watched as a `subprocess.Popen` is: pid, poll(), wait()."""

    def __init__(self, server: ForkServer | SharedConnection, pid: int) -> None:
        self.server, self.pid = server, pid
        self.returncode: int | None = None

    def _read(self, timeout: float | None) -> None:
        if isinstance(self.server, ForkServer):
            self.returncode = self.server.returncode(self.pid, timeout)
            return
        try:
            line = self.server.lines.read(timeout)
        except ServerGone:  # the server died, and Linux killed its child with it
            line = f"exited {-signal.SIGKILL}"
            self.server.close()
        if line is not None and line.startswith("exited "):
            self.returncode = int(line.split()[-1])
            self.server.done()

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0.0)
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            self._read(None)
        return self.returncode


class SharedConnection:
    """One trial's connection to a shared server (`fitspeed.trial.fork_server.serve_socket`), and its slot's lock."""

    def __init__(self, connection: socket.socket, lock: IO[str]) -> None:
        self.connection, self.lock = connection, lock
        self.lines = _Lines(connection)

    def fork(self, request: Mapping[str, object]) -> WarmChild:
        try:
            self.connection.sendall(json.dumps(request).encode() + b"\n")
            line = self.lines.read(FORK_TIMEOUT_S)
        except OSError as error:
            raise ServerGone(str(error)) from None
        if line is None or not line.startswith("started "):
            raise ServerGone(f"the shared fork server did not fork (it said {line!r})")
        return WarmChild(self, int(line.split()[1]))

    def done(self) -> None:
        self.close()

    def close(self) -> None:
        self.connection.close()
        self.lock.close()  # and with it the slot's lock


def _connect(path: Path) -> socket.socket | None:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(str(path))
    except OSError:
        connection.close()
        return None
    return connection


def _start_shared(python: str, env: Mapping[str, str], base: Path) -> None:
    """Start the shared server for `base` (its socket, log and pid file beside it) and wait until it listens."""
    with open(base.with_suffix(".log"), "ab") as log:
        proc = subprocess.Popen(
            [python, "-P", "-m", "fitspeed.trial", "--fork-server", env["KERAS_BACKEND"], "--socket",
             str(base.with_suffix(".sock")), str(IDLE_S)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=dict(env), start_new_session=True,
            cwd=base.parent,  # not the starting command's folder, which it outlives
        )
    assert proc.stdout is not None
    with proc.stdout:
        try:
            ready = _Lines(proc.stdout).read(READY_TIMEOUT_S)
        except ServerGone:
            ready = None
    if ready != "ready":
        proc.kill()
        proc.wait()
        raise ServerGone(f"the shared fork server did not start (it said {ready!r})")
    base.with_suffix(".pid").write_text(str(proc.pid))


def _shared(folder: Path, python: str, server_env: Mapping[str, str],
            request: Mapping[str, object]) -> WarmChild | None:
    """The trial forked from a free shared server for `server_env` in `folder`, started if none runs; None if all are busy."""
    digest = hashlib.sha256(json.dumps([python, sorted(server_env.items())]).encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    for slot in range(SLOTS):
        base = folder / f"{digest}-{slot}"
        if len(str(base.with_suffix(".sock"))) > 100:  # a Unix socket's path has at most 107 bytes
            return None
        lock = open(base.with_suffix(".lock"), "a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        try:
            connection = _connect(base.with_suffix(".sock"))
            if connection is None:
                _start_shared(python, server_env, base)
                connection = _connect(base.with_suffix(".sock"))
            if connection is None:
                raise ServerGone("the shared fork server does not answer")
            return SharedConnection(connection, lock).fork(request)
        except (OSError, ServerGone):
            lock.close()
            return None
    return None


_servers: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], ForkServer] = OrderedDict()
_failed: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
_lock = threading.Lock()


def enabled(env: Mapping[str, str]) -> bool:
    """Whether trials with environment `env` may fork from a server: not where it says FITSPEED_WARM_START=0."""
    return env.get(SWITCH, "1") != "0" and hasattr(os, "fork")


def start(python: str, env: Mapping[str, str], spec_path: Path, stdout_path: Path, stderr_path: Path,
          cwd: str | Path | None, script: list[str] | None = None) -> WarmChild | None:
    """A trial's process, forked from the server for `env`; None where it must start cold.

    `env` is the trial's whole environment, with `core.import_environment` applied.
    With `script` (`python FILE ARGS...`), the child runs that command with the
    hook (`fitspeed.trial.warm_script`) instead of the built-in trial protocol.
    """
    if not enabled(env):
        return None
    server_env = {name: value for name, value in env.items()
                  if name not in VOLATILE and not name.startswith(VOLATILE_PREFIXES)}
    request = {"spec": str(spec_path), "stdout": str(stdout_path), "stderr": str(stderr_path),
               "cwd": os.getcwd() if cwd is None else str(cwd), "env": dict(env),  # where a cold trial would run
               # a cold child inherits an ignored SIGINT (nohup, a shell's background job), and Python keeps it so
               "sigint_ignored": signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
               **({"script": list(script)} if script else {})}
    if env.get(SHARED):
        return _shared(Path(env[SHARED]), python, server_env, request)
    key = (python, tuple(sorted(server_env.items())))
    with _lock:
        server = _servers.get(key)
        if server is not None and not server.alive():
            _servers.pop(key).close()
            server = None
        if server is None:
            if key in _failed:
                return None
            if len(_servers) >= MAX_SERVERS and not _evict_one():
                return None
            try:
                server = ForkServer(python, server_env)
            except (OSError, ServerGone):
                _failed.add(key)
                return None
            _servers[key] = server
        _servers.move_to_end(key)
        try:
            return server.fork(request)
        except ServerGone:
            _servers.pop(key).close()
            return None


def _evict_one() -> bool:
    """Close the least recently used idle server; False if every one is busy."""
    for key, server in _servers.items():
        if not server.busy:
            _servers.pop(key).close()
            return True
    return False


@atexit.register
def close_all() -> None:
    """Close every server (at exit, and in tests)."""
    with _lock:
        while _servers:
            _servers.popitem()[1].close()
        _failed.clear()
