"""Lockstep rounds: real trial processes taking turns through the conductor, and the fallback to sequential trials."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure import rounds
from fitspeed.measure.rounds import LOCKSTEP, SEQUENTIAL, Rounds, lockstep_round, turn_order
from fitspeed.trial import lockstep
from fitspeed.trial.lockstep import ENV

# A child that takes `windows` turns through the real gate, each `hold` seconds long, and writes when it held each
CHILD = """
import json, sys, time
from fitspeed.trial.lockstep import from_environment
log, windows, hold, die_after = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
gate = from_environment()
held = []
for n in range(windows):
    gate.acquire()
    began = time.time()
    time.sleep(hold)
    held.append([began, time.time()])
    if n + 1 == die_after:
        import os; os._exit(3)
    gate.release()
gate.finish()
json.dump({"held": held, "freed": time.time()}, open(log, "w"))
"""


class Child:
    """A stand-in for `TrialProcess` that starts the CHILD above (what the conductor asks of a trial process)."""

    def __init__(self, folder: Path, named: str, slot: int, windows: int = 3, hold: float = 0.15,
                 die_after: int = 0, timeout_s: float | None = None) -> None:
        self.log = folder / f"{slot}.json"
        self.argv = [sys.executable, "-c", CHILD, str(self.log), str(windows), str(hold), str(die_after)]
        self.env = {**os.environ, ENV: f"{named}#{slot}"}
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = time.perf_counter()
        self.timeout_s = timeout_s
        self.own: list[float] = []

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, env=self.env)
        self.started = time.perf_counter()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def limits(self, elapsed: float) -> tuple[Status, str] | None:
        self.own.append(elapsed)
        if self.timeout_s is not None and elapsed > self.timeout_s:
            return Status.TIMEOUT, "past its timeout"
        return None

    def end(self, killed: Any) -> bool:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        return False


def conduct(tmp_path: Path, children: int = 2, first: int = 0, **kwargs: Any) -> tuple[str, list[Child]]:
    address, named = rounds._address()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(address)
        listener.listen(4)
        listener.setblocking(False)
        made = [Child(tmp_path, named, i, **kwargs.get(str(i), {})) for i in range(children)]
        slots = [rounds._Slot(child) for child in made]  # type: ignore[arg-type]
        for child in made:
            child.start()
        return rounds._conduct(listener, slots, turn_order(children, first)), made


def test_the_conductor_grants_one_turn_at_a_time_in_a_balanced_order(tmp_path: Path) -> None:
    turns, children = conduct(tmp_path, first=1)
    assert turns == "BAABBA"
    held = sorted((began, end, i) for i, child in enumerate(children)
                  for began, end in json.loads(child.log.read_text())["held"])
    assert "".join("AB"[i] for _, _, i in held) == turns
    assert all(end <= later for (_, end, _), (later, _, _) in zip(held, held[1:]))  # never two at once
    # a trial is freed only once every trial has timed its last window
    last = max(end for _, end, _ in held)
    assert all(json.loads(child.log.read_text())["freed"] >= last for child in children)


def test_three_trials_follow_a_williams_order_and_wait_outside_their_own_time(tmp_path: Path) -> None:
    each = {"windows": 6, "hold": 0.1}
    began = time.perf_counter()
    turns, children = conduct(tmp_path, children=3, **{"0": each, "1": each, "2": each})
    wall = time.perf_counter() - began
    assert sorted(turns) == sorted("AAAAAABBBBBBCCCCCC")
    # each follows each of the others: no configuration always times right after the same neighbour
    follows = [(a, b) for a, b in zip(turns, turns[1:]) if a != b]
    assert len(set(follows)) == 6
    # the time limit reads a trial's own seconds: each waited through the others' 12 turns of 0.1 s
    assert max(max(child.own) for child in children) < wall - 0.8, ([max(c.own) for c in children], wall)


def test_a_trial_that_dies_holding_its_turn_leaves_the_round_to_the_others(tmp_path: Path) -> None:
    turns, children = conduct(tmp_path, first=0, **{"0": {"die_after": 2}})
    assert not children[0].log.exists()  # died on its second turn
    assert len(json.loads(children[1].log.read_text())["held"]) == 3
    assert turns.count("A") == 2 and turns.count("B") == 3


def test_a_trial_past_its_own_time_is_killed_and_the_others_go_on(tmp_path: Path) -> None:
    turns, children = conduct(tmp_path, **{"0": {"hold": 2.0, "timeout_s": 1.0}})
    assert not children[0].log.exists()
    assert len(json.loads(children[1].log.read_text())["held"]) == 3


def test_turn_orders_are_balanced() -> None:
    from itertools import islice

    for k in (2, 3, 4, 5):
        design = rounds.williams(k)
        pairs = [(a, b) for row in design for a, b in zip(row, row[1:])]
        assert len(set(pairs)) == k * (k - 1)  # every ordered pair of neighbours
        assert len({pairs.count(p) for p in set(pairs)}) == 1  # equally often
        assert sorted(islice(turn_order(k, k - 1), len(design) * k)) == sorted(list(range(k)) * len(design))


@pytest.mark.slow
def test_a_real_round_of_two_trials_times_both_in_turns() -> None:
    spec = TrialSpec(model="tiny", steps=8, repeats=3)
    # a fork server of this test's own (the suite's shared servers serve other workers' trials too)
    private = {k: v for k, v in os.environ.items() if k != "FITSPEED_FORK_SERVERS"}
    done = lockstep_round([spec, spec], first=1, env=private)
    assert done.design == LOCKSTEP and done.turns == "BAABBAAB"  # the warm-ups first, then the windows
    for record, slot in zip(done.records, "AB"):
        assert record.status == Status.OK, record.reason
        assert record.extra["round"]["slot"] == slot and record.extra["round"]["held"] == 4
        assert record.extra["round"]["waited_s"] > 0 and record.throughput
        assert record.warm_start is True  # both from one fork server


@pytest.mark.slow
def test_a_trial_killed_for_memory_beside_the_other_is_measured_again_sequentially() -> None:
    runner = Rounds()
    hungry = TrialSpec(model="tiny", steps=8, repeats=2, memory_limit_mb=50)
    done = runner.round([hungry, TrialSpec(model="tiny", steps=8, repeats=2)], first=0)
    assert done.design == SEQUENTIAL and done.why and "memory" in done.why
    assert done.records[0].status == Status.OOM and done.records[1].status == Status.OK
    assert done.records[1].extra["round"]["design"] == SEQUENTIAL
    again = runner.round([TrialSpec(model="tiny", steps=8, repeats=2)] * 2)  # said once, kept for the next rounds
    assert again.design == SEQUENTIAL and again.why == done.why


def test_rounds_that_time_no_windows_run_sequentially_and_say_why() -> None:
    calls: list[str] = []

    def fake(spec: TrialSpec) -> TrialRecord:
        calls.append(spec.model)
        from fitspeed.core.record import new_record

        return new_record(spec, Status.OK, metrics={"loss_curve": [1.0]})

    guard = TrialSpec(model="a", mode="train", steps=4)
    done = Rounds(run_one=fake).round([guard, TrialSpec(model="b", mode="train", steps=4)], first=1)
    assert done.design == SEQUENTIAL and calls == ["b", "a"] and done.turns == "BA"
    assert done.why == "a train-mode trial times no windows to take turns with"


def test_the_parent_names_the_variable_the_trial_reads() -> None:
    assert rounds.ENV == lockstep.ENV


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "scripts"


def _script_spec(tmp_path: Path, name: str) -> TrialSpec:
    from fitspeed.measure import training_command

    described = training_command.describe([sys.executable, str(FIXTURES / name)], cwd=tmp_path)
    return TrialSpec(model=training_command.label(described), data=training_command.DATA, script=described,
                     steps=8, repeats=2)


@pytest.mark.slow
def test_a_training_script_is_held_between_its_windows_in_a_round(tmp_path: Path) -> None:
    # the hook times the script's own fit() with the same loop, so its windows take turns like a built-in's
    spec = _script_spec(tmp_path, "conv_train.py")
    done = Rounds().round([spec, spec], first=0)
    assert done.design == LOCKSTEP and done.turns == "ABBAAB", done
    for record in done.records:
        assert record.status == Status.OK, record.reason
        assert record.extra["round"]["held"] == 3  # the warm-up and two windows


@pytest.mark.slow
def test_a_script_that_never_reaches_fit_leaves_the_round_to_the_other_trial(tmp_path: Path) -> None:
    done = Rounds().round([_script_spec(tmp_path, "no_fit.py"), TrialSpec(model="tiny", steps=8, repeats=2)], first=0)
    assert done.records[0].status != Status.OK and done.records[0].extra["round"]["held"] == 0
    assert done.records[1].status == Status.OK and done.records[1].extra["round"]["held"] == 3
    assert done.turns == "BBB"
