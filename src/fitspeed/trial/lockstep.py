"""A trial's side of a lockstep round: wait for its turn before each window, hand the turn back after it.

In a lockstep round (`fitspeed.measure.rounds`) the k trial processes of a
comparison live together, and the parent's conductor grants one of them at a
time the machine: a trial times a window only in its turn, while the others
sit blocked on a socket read (no spinning thread of theirs runs Python; their
backends' thread pools are idle). So every configuration in the round is
timed in the same seconds, and the machine's drift falls on all of them.

The conductor names its socket and this trial's slot in `ENV`
("PATH#SLOT"), set in the trial's environment by the parent; a trial without
it (every trial outside a round) gets `NO_GATE`, whose methods do nothing.
The protocol, one line each way:

- the trial sends `hello SLOT` once, when it first asks for a turn;
- `wait`: it is ready to time a window, and blocks until the conductor sends `go`;
- `done`: its window (a whole epoch of the timed fit, or the warm-up) is over;
- `end`: it times nothing more; it blocks until `free`, which the conductor
  sends once every trial of the round has ended, so that the work a trial
  does after its windows (held-out figures, the determinism check, writing
  its record) never falls in another's window.

A conductor that goes away (the parent died) frees the trial: each read that
finds the socket closed lets it go on alone; Linux ends it with its parent anyway.

Who calls it: `fitspeed.trial.measurement.timed_windows` holds a turn for the
warm-up and calls `finish` after the timed fit; `fitspeed.trial.timing.StepTimer`
holds one for each epoch of the timed fit (`on_epoch_begin` to `on_epoch_end`).
A user's script is timed by the same loop, so it is held the same way.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Protocol

ENV = "FITSPEED_LOCKSTEP"  # "PATH#SLOT": the conductor's Unix socket and this trial's slot


class Gate(Protocol):
    """What the measuring loop asks of a round: a turn before a window, its end after it, and the trial's end."""

    def acquire(self) -> None:
        """Block until this trial may time a window."""
        ...

    def release(self) -> None:
        """The window is over: the next trial may time."""
        ...

    def finish(self) -> None:
        """This trial times nothing more; block until every trial of the round has finished timing."""
        ...


class NoGate:
    """A trial outside a round: it never waits."""

    waited_s = 0.0

    def acquire(self) -> None:
        return None

    def release(self) -> None:
        return None

    def finish(self) -> None:
        return None


NO_GATE = NoGate()


class Turns:
    """A trial in a lockstep round, talking to the conductor at `path` as slot `slot`."""

    def __init__(self, path: str, slot: int) -> None:
        self.path, self.slot = path, slot
        self.connection: socket.socket | None = None
        self.buffer = b""
        self.gone = False  # the conductor went away: go on alone
        self.held = False
        self.waited_s = 0.0

    def _send(self, line: str) -> None:
        if self.gone:
            return
        try:
            if self.connection is None:
                self.connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                # "@NAME": Linux's abstract namespace, as the conductor binds it (`fitspeed.measure.rounds`)
                self.connection.connect("\0" + self.path[1:] if self.path.startswith("@") else self.path)
                self.connection.sendall(f"hello {self.slot}\n".encode())
            self.connection.sendall(f"{line}\n".encode())
        except OSError:
            self._lost()

    def _expect(self, word: str) -> None:
        """Block until the conductor sends `word` (or goes away)."""
        began = time.perf_counter()
        while not self.gone:
            if b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                if line.decode().strip() == word:
                    break
                continue
            try:
                assert self.connection is not None
                chunk = self.connection.recv(64)
            except OSError:
                chunk = b""
            if not chunk:
                self._lost()
            self.buffer += chunk
        self.waited_s += time.perf_counter() - began

    def _lost(self) -> None:
        self.gone = True
        if self.connection is not None:
            self.connection.close()

    def acquire(self) -> None:
        if self.held:
            return
        self._send("wait")
        self._expect("go")
        self.held = True

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        self._send("done")

    def finish(self) -> None:
        self.release()
        self._send("end")
        self._expect("free")
        self._lost()  # nothing more to say: close


def parse(value: str) -> tuple[str, int] | None:
    """`ENV`'s value as (socket path, slot); None when it is not of that form.

    >>> parse("/tmp/round/conductor.sock#1"), parse("nonsense")
    (('/tmp/round/conductor.sock', 1), None)
    """
    path, _, slot = value.rpartition("#")
    return (path, int(slot)) if path and slot.isdigit() else None


def from_environment() -> Gate:
    """This trial's gate: `Turns` where the parent put it in a round (`ENV`), else `NO_GATE`.

    The variable is taken out of the environment once read, so that a process
    the trial starts (a user's script running another Python, a data loader's
    worker) never takes the trial's turns.
    """
    found = parse(os.environ.pop(ENV, ""))
    return Turns(*found) if found else NO_GATE
