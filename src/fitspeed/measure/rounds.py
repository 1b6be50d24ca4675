"""Lockstep rounds: the trials of a comparison alive together, each timed in its turn, in the same seconds.

A shared machine's speed drifts by 10-30% over tens of seconds, and whole
trials move with it: two trials run one after the other measure the drift as
much as the configurations. In a lockstep round the k trial processes of a
comparison (A and B of a pair; the baseline and candidates) are started
together, fresh as always (forked from one fork server where one serves
them, else cold), and each builds its model and data. When every one of
them is ready, the conductor here grants the machine to one trial at a time,
window by window, in a balanced order (`turn_order`: ABBA for two, a
Williams design for more, so that no configuration always times right after
the same neighbour), while the others wait blocked on a socket read
(`fitspeed.trial.lockstep`). A trial's warm-up is one of its turns, so no
trial compiles beside another's timed window; and a trial that has timed its
last window waits until every trial of the round has, so that nothing it
does after (held-out figures, the determinism check) falls in another's.

Each trial still sends its own record (the median of its own windows), so a
pair's ratio is B's figure over A's, as before, now from one round: the
round is the unit of replication, with fresh processes every round, and no
statistic ever treats a round's windows as independent.

A trial's time limit counts its own time: the seconds it spent waiting for a
turn are not its. Its memory limit is its own process tree's, as always.

Where the trials of a round cannot run together, the round is run as
sequential trials instead, and says why (`Round.why`): a trial mode that
times no windows (the guard's training runs, doctor's input measures), a
round whose trial was killed for memory while the others lived, or a
training script whose fit() was never held (it ends before its windows).
`Rounds` keeps that answer for the rounds after it, so a comparison says it
in one line and does not try again.

Runs in the parent and never imports a framework.
"""

from __future__ import annotations

import os
import random
import select
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from fitspeed.core.record import Mode, Status, TrialRecord, TrialRunner, TrialSpec
from fitspeed.machine import environment
from fitspeed.measure.runner import POLL_S, TrialProcess, run_trial

ENV = "FITSPEED_LOCKSTEP"  # fitspeed.trial.lockstep.ENV, kept here so that the parent never imports a trial module

LOCKSTEP = "lockstep"
SEQUENTIAL = "sequential"
TIMED_MODES = (Mode.TIME, Mode.MODEL, Mode.COMPUTE)  # the modes whose trials time windows through the gate
GPU_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}  # two processes on one GPU
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
Landed = Callable[[int, TrialRecord], None]  # (the spec's index, its record), as each record of a round lands


@dataclass(frozen=True)
class Round:
    """What one round measured: a record per spec (in the specs' order), and how it was measured.

    `design` is LOCKSTEP or SEQUENTIAL; `why` says why a round asked for in
    lockstep ran sequentially; `turns` is the order the turns were granted
    in, one letter per turn (A the first spec), warm-ups first, or the order
    the trials ran in for a sequential round.
    """

    records: tuple[TrialRecord, ...]
    design: str = SEQUENTIAL
    why: str | None = None
    turns: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"design": self.design, "why": self.why, "turns": self.turns}


class RoundRunner(Protocol):
    """Runs trials one at a time (`__call__`, as `run_trial` does) or k at a time as one round (`round`)."""

    def __call__(self, spec: TrialSpec) -> TrialRecord: ...

    def round(self, specs: Sequence[TrialSpec], first: int = 0, landed: Landed | None = None) -> Round: ...


def williams(k: int) -> list[list[int]]:
    """A Williams design for `k` treatments: rows in which each treatment follows every other equally often.

    For an even k, k rows; for an odd k, each of the k rows followed by its mirror image.

    >>> williams(2)
    [[0, 1], [1, 0]]
    >>> williams(4)
    [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]]
    >>> williams(3)[:2]
    [[0, 1, 2], [2, 1, 0]]
    """
    if k < 1:
        raise ValueError(f"Expected at least one treatment. Received: {k}.")
    first, low, high = [0], 1, k - 1
    while len(first) < k:
        first.append(low)
        low += 1
        if len(first) < k:
            first.append(high)
            high -= 1
    rows = [[(value + shift) % k for value in first] for shift in range(k)]
    return rows if k % 2 == 0 else [r for row in rows for r in (row, row[::-1])]


def turn_order(k: int, first: int = 0) -> Iterator[int]:
    """Slots in the order their turns come: Williams rows, one after another, forever; `first` starts.

    >>> from itertools import islice
    >>> "".join("AB"[s] for s in islice(turn_order(2), 8)), "".join("AB"[s] for s in islice(turn_order(2, 1), 6))
    ('ABBAABBA', 'BAABBA')
    >>> from collections import Counter
    >>> sorted(Counter(islice(turn_order(3, 2), 18)).items())  # each slot equally often over the design
    [(0, 6), (1, 6), (2, 6)]
    """
    rows = williams(k)
    shift = rows.index(next(row for row in rows if row[0] == first))
    while True:
        for index in range(len(rows)):
            yield from rows[(index + shift) % len(rows)]


STARTING, WAITING, HOLDING, BETWEEN, ENDED = "starting", "waiting", "holding", "between", "ended"


@dataclass
class _Slot:
    """The conductor's view of one trial of the round.

    Its state: STARTING (started, has asked for no turn yet), WAITING (asked,
    not granted yet), HOLDING (granted, not `done` yet), BETWEEN (has had a
    turn and not asked for the next yet), ENDED (said `end` and waits for
    `free`, or closed its connection, or exited).
    """

    trial: TrialProcess
    connection: socket.socket | None = None
    buffer: bytes = b""
    state: str = STARTING
    since: float = 0.0  # when it began to wait (WAITING, or ENDED while its process runs)
    waited_s: float = 0.0  # seconds it spent waiting for a turn or for the round's end: not its own time
    exited: bool = False
    killed: tuple[Status, str] | None = None
    turns: int = 0

    def own_s(self, now: float) -> float:
        """Seconds of its own: since it started, less its waits."""
        waiting = now - self.since if self.state in (WAITING, ENDED) else 0.0
        return now - self.trial.started - self.waited_s - waiting

    def become(self, state: str, now: float) -> None:
        """Move to `state`, counting the wait it leaves."""
        if self.state in (WAITING, ENDED):
            self.waited_s += now - self.since
        self.state, self.since = state, now

    def said(self, word: str, now: float) -> None:
        """What the trial's line means for its state."""
        if word == "wait" and self.state in (STARTING, BETWEEN):
            self.become(WAITING, now)
        elif word == "done" and self.state == HOLDING:
            self.become(BETWEEN, now)
        elif word == "end" and self.state != ENDED:
            self.become(ENDED, now)

    def send(self, word: str) -> None:
        if self.connection is None:
            return
        try:
            self.connection.sendall(f"{word}\n".encode())
        except OSError:
            pass

    def hang_up(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def _address() -> tuple[str, str]:
    """A Unix socket address for a conductor, and its form in `ENV`: Linux's abstract namespace (nothing on
    disk, no path length limit), else a path in a fresh temporary folder."""
    name = f"fitspeed-round-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    if sys.platform == "linux":
        return "\0" + name, "@" + name
    path = os.path.join(tempfile.mkdtemp(prefix="fsr-"), "c.sock")
    return path, path


def lockstep_round(specs: Sequence[TrialSpec], first: int = 0, *, python: str = sys.executable,
                   env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Round:
    """Run `specs` as one lockstep round, slot `first`'s turn first; a record per spec, in their order."""
    base_env = dict(os.environ if env is None else env)
    if environment.nvidia_gpus()[0]:
        base_env = {**GPU_ENV, **base_env}  # each process takes GPU memory as it needs it, not all of it
    address, named = _address()
    k = len(specs)
    with tempfile.TemporaryDirectory(prefix="fitspeed-round-") as tmp, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(address)
        listener.listen(k + 4)
        listener.setblocking(False)
        slots: list[_Slot] = []
        try:
            for index, spec in enumerate(specs):
                folder = Path(tmp) / str(index)
                folder.mkdir()
                trial = TrialProcess(spec, folder, python=python, env={**base_env, ENV: f"{named}#{index}"}, cwd=cwd)
                slots.append(_Slot(trial))
            for slot in slots:
                slot.trial.start()
            turns = _conduct(listener, slots, turn_order(k, first))
        finally:
            for slot in slots:
                if slot.trial.proc is not None and not slot.exited:
                    slot.trial.end(slot.killed)
                slot.hang_up()
        records = []
        for index, slot in enumerate(slots):
            record = slot.trial.record(slot.killed)
            records.append(replace(record, extra={**record.extra, "round": {
                "design": LOCKSTEP, "slot": LETTERS[index], "size": k, "turns": turns,
                "waited_s": round(slot.waited_s, 3), "held": slot.turns}}))
    return Round(tuple(records), LOCKSTEP, None, turns)


def _conduct(listener: socket.socket, slots: list[_Slot], order: Iterator[int]) -> str:
    """Grant turns until every trial of the round has exited; the turns granted, as letters."""
    strangers: dict[socket.socket, bytes] = {}  # connected, not yet said which slot they are
    upcoming: int | None = None
    freed = False
    granted: list[str] = []
    while not all(slot.exited for slot in slots):
        readable = [listener, *strangers, *(s.connection for s in slots if s.connection is not None)]
        ready = set(select.select(readable, [], [], POLL_S)[0])
        now = time.perf_counter()
        if listener in ready:
            try:
                connection, _ = listener.accept()
                connection.setblocking(True)
                strangers[connection] = b""
            except BlockingIOError:
                pass
        for connection in [c for c in strangers if c in ready]:
            ready.discard(connection)  # read here: a slot's loop below must not read it again
            chunk = _recv(connection)
            buffer = strangers[connection] + chunk
            if b"\n" not in buffer and chunk:
                strangers[connection] = buffer
                continue
            del strangers[connection]
            line, _, rest = buffer.partition(b"\n")
            words = line.decode(errors="replace").split()
            index = int(words[1]) if len(words) == 2 and words[0] == "hello" and words[1].isdigit() else -1
            if 0 <= index < len(slots) and slots[index].connection is None and slots[index].state != ENDED:
                slots[index].connection, slots[index].buffer = connection, rest
                _lines(slots[index], now)
            else:
                connection.close()  # not a trial of this round, or a second process claiming a slot
        for slot in slots:
            if slot.connection is None or slot.connection not in ready:
                continue
            chunk = _recv(slot.connection)
            if chunk:
                slot.buffer += chunk
                _lines(slot, now)
            else:  # it closed the connection (it ended, or died): it holds no turn and waits for none
                slot.hang_up()
                slot.said("end", now)
        for slot in slots:
            if slot.exited:
                continue
            if not slot.trial.running():
                if slot.trial.end(None):  # a warm script that must start cold: the same slot, a fresh process
                    slot.hang_up()
                    slot.trial.start()
                    slot.become(STARTING, now)
                    continue
                slot.said("end", now)
                slot.exited = True
            elif (killed := slot.trial.limits(slot.own_s(now))) is not None:
                slot.killed = killed
                slot.trial.end(killed)
                slot.said("end", now)
                slot.exited = True
        live = [i for i, slot in enumerate(slots) if slot.state != ENDED]
        if live and not any(slots[i].state in (HOLDING, STARTING) for i in live):
            # every live trial is ready: it asked for a turn, or has had one and is between its windows
            if upcoming not in live:
                upcoming = next(i for i in order if i in live)
            assert upcoming is not None
            if slots[upcoming].state == WAITING:
                slots[upcoming].become(HOLDING, now)
                slots[upcoming].send("go")
                slots[upcoming].turns += 1
                granted.append(LETTERS[upcoming])
                upcoming = None
        if not live and not freed:
            for slot in slots:
                slot.send("free")
            freed = True
    for connection in strangers:
        connection.close()
    return "".join(granted)


def _recv(connection: socket.socket) -> bytes:
    try:
        return connection.recv(4096)
    except OSError:
        return b""


def _lines(slot: _Slot, now: float) -> None:
    """Act on every whole line the slot's trial has sent."""
    while b"\n" in slot.buffer:
        line, slot.buffer = slot.buffer.split(b"\n", 1)
        slot.said(line.decode(errors="replace").strip(), now)


def sequential_round(specs: Sequence[TrialSpec], first: int, run: TrialRunner, why: str | None = None,
                     landed: Landed | None = None) -> Round:
    """Run `specs` one after another, slot `first` first, then the rest in their order; `landed` sees each record
    as it lands (a tune stores it then: a run killed mid-round keeps what it measured)."""
    order = [first, *(i for i in range(len(specs)) if i != first)]
    records: dict[int, TrialRecord] = {}
    for index in order:
        record = run(specs[index])
        records[index] = replace(record, extra={**record.extra, "round": {
            "design": SEQUENTIAL, "slot": LETTERS[index], "size": len(specs), "why": why}})
        if landed is not None:
            landed(index, records[index])
    return Round(tuple(records[i] for i in range(len(specs))), SEQUENTIAL, why, "".join(LETTERS[i] for i in order))


def cannot_share(specs: Sequence[TrialSpec], peak_mb: float, free_mb: float) -> str | None:
    """Why `specs` cannot run as one lockstep round, in a sentence; None where they can.

    >>> cannot_share([TrialSpec(model="tiny", mode=Mode.TRAIN, steps=8)] * 2, 0, 1000)
    'a train-mode trial times no windows to take turns with'
    >>> cannot_share([TrialSpec(model="tiny")] * 2, 3000, 5000)
    '2 trials of 3,000 MiB each do not fit in the 5,000 MiB of memory free'
    >>> cannot_share([TrialSpec(model="tiny")] * 2, 1000, 5000) is None
    True
    >>> from fitspeed.core.config import TrialConfig
    >>> cannot_share([TrialSpec(model="tiny"), TrialSpec(model="tiny", config=TrialConfig(backend="jax", processes=2))],
    ...              0, 5000)
    'a trial of 2 processes runs alone: its processes step together in collectives, not in turns'
    """
    for spec in specs:
        if spec.mode not in TIMED_MODES:
            return f"a {spec.mode}-mode trial times no windows to take turns with"
        if spec.config.processes > 1:  # `fitspeed.measure.processes`
            return (f"a trial of {spec.config.processes} processes runs alone: its processes step together in "
                    "collectives, not in turns")
    if peak_mb and len(specs) * peak_mb > 0.9 * free_mb:
        return f"{len(specs)} trials of {peak_mb:,.0f} MiB each do not fit in the {free_mb:,.0f} MiB of memory free"
    return None


def not_together(done: Round) -> str | None:
    """Why a lockstep round's figures cannot stand, in a sentence; None where they can.

    A trial killed for memory beside the others may fit alone; a timed trial
    that finished without one turn was timed beside the others (a training
    script whose fit() ended before fitspeed's windows, or a hook of another
    fitspeed).
    """
    for record in done.records:
        code = (record.stderr_tail or "").rstrip().endswith("killed by SIGKILL]")
        if record.status == Status.OOM or (record.status == Status.CRASHED and code):
            return (f"a trial ran out of memory beside the others ({record.reason}); "
                    "the round is measured again as sequential trials")
        held = (record.extra.get("round") or {}).get("held", 0)
        if record.status == Status.OK and record.spec.mode in TIMED_MODES and not held:
            return ("a trial finished without waiting for its turn (a training script whose fit() could not "
                    "be held); the round is measured again as sequential trials")
    return None


@dataclass
class Rounds:
    """The trial runner of a comparison: its rounds in lockstep where the trials fit together, else sequential.

    Calling it runs one trial (`run_trial`); `round` runs k as one round. Once
    a round could not run in lockstep for a reason that will hold for the
    next (a trial killed for memory beside the others, a script that cannot
    be held, `lockstep=False`), `why` keeps it and every later round runs
    sequentially, so a comparison says it once.
    """

    lockstep: bool = True
    python: str = sys.executable
    env: Mapping[str, str] | None = None
    cwd: str | Path | None = None
    why: str | None = None
    peak_mb: float = 0.0  # the largest trial process seen so far, for the memory check
    designs: list[str] = field(default_factory=list)  # each round's design, in order
    run_one: TrialRunner | None = None  # how one trial runs alone (`run_trial`, unless a caller's own)

    def __post_init__(self) -> None:
        if not self.lockstep and self.why is None:
            self.why = "sequential trials were asked for"

    def __call__(self, spec: TrialSpec) -> TrialRecord:
        record = (self.run_one(spec) if self.run_one is not None
                  else run_trial(spec, python=self.python, env=self.env, cwd=self.cwd))
        self._learn(record)
        return record

    def round(self, specs: Sequence[TrialSpec], first: int = 0, landed: Landed | None = None) -> Round:
        if len(specs) < 2:
            return sequential_round(specs, first, self, landed=landed)
        why = self.why or cannot_share(specs, self.peak_mb, _free_mb())
        if why:
            done = sequential_round(specs, first, self, why, landed)
        else:
            done = lockstep_round(specs, first, python=self.python, env=self.env, cwd=self.cwd)
            for record in done.records:
                self._learn(record)
            problem = not_together(done)
            if problem:
                self.why = problem
                done = sequential_round(specs, first, self, problem, landed)
            elif landed is not None:
                for index, record in enumerate(done.records):
                    landed(index, record)
        self.designs.append(done.design)
        return done

    def _learn(self, record: TrialRecord) -> None:
        peak = record.measured("peak_host_mb")
        if isinstance(peak, (int, float)):
            self.peak_mb = max(self.peak_mb, float(peak))


def _free_mb() -> float:
    import psutil

    return float(psutil.virtual_memory().available) / 2 ** 20


def as_rounds(run: TrialRunner | RoundRunner) -> RoundRunner:
    """A runner with `round`: itself where it has one, else one that runs a round's trials in turn with `run`
    (a test's fake, the simulator's machine without lockstep)."""
    if hasattr(run, "round"):
        return run  # type: ignore[return-value]
    return _Sequential(run)


@dataclass
class _Sequential:
    run: TrialRunner

    def __call__(self, spec: TrialSpec) -> TrialRecord:
        return self.run(spec)

    def round(self, specs: Sequence[TrialSpec], first: int = 0, landed: Landed | None = None) -> Round:
        return sequential_round(specs, first, self.run, landed=landed)
