"""Several `fitspeed tune` workers on one study: each configuration measured once, none lost.

Real workers (3 processes of the CLI), real trials, a real PostgreSQL server or
a journal file. "8 measured configurations" is the search's share of --trials 15
(the smallest budget that pays for an answer on this space: the rest is kept for
the verification, whose trials are counted apart): 8 trial processes with a
record and distinct configuration keys (a decision's pairs carry their pair's tag
in the key), enough for the baseline, the screen and two decisions' pairs.
All workers run on this one machine, so each gets a host name of its own
(FITSPEED_HOST) and --allow-shared-host.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import optuna
import pytest
from conftest import child_env, fitspeed, json_out, postgres_server
from optuna.trial import FrozenTrial, TrialState
from waiting import wait_for

from fitspeed.search.budget import SCREEN_GROUP, VERIFY_RESERVE
from fitspeed.machine import host_lock
from fitspeed.search.ledger import BUDGET_FREE

BUDGET = 15  # the smallest budget that pays on ARGS's space (`budget_plan`): 8 for the search, 7 kept to verify
# 8 configurations without a numerics change (no guard runs), each trial a few steps of mlp (a trial
# traces and builds in about 60% of tiny's CPU time, and nothing here is about convolutions)
ARGS = ["tune", "mlp", "--knobs", "steps_per_execution,intra_op_threads",
        "--space", "steps_per_execution=8,2", "--trials", str(BUDGET), "--steps", "8", "--repeats", "1",
        "--pairs", "2", "--allow-shared-host", "--json"]

# four candidates without a numerics change: a screen of two rounds (the baseline with three, then with one)
SHARED_BUDGET = 18  # the smallest that pays on four knobs
SHARED_ARGS = [*ARGS[:2], "--knobs", "steps_per_execution,intra_op_threads,inter_op_threads,data_autotune",
               *ARGS[4:6], "--trials", str(SHARED_BUDGET), *ARGS[8:]]
assert ARGS[2] == "--knobs" and ARGS[6] == "--trials"


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    with postgres_server(password="s3cret") as url:
        yield url


def start(workdir: Path, storage: str, index: int, study: str = "shared", *extra: str,
          env: dict[str, str] | None = None, args: list[str] = ARGS) -> subprocess.Popen[str]:
    env = {**child_env(), "FITSPEED_HOST": f"node{index}", **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "fitspeed", *args, "--storage", storage, "--study", study,
                             "--best", f"best{index}.json", *extra], cwd=workdir, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def done(storage: str, study: str) -> list[FrozenTrial]:
    """The study's finished trials (none while the study is not made yet)."""
    try:  # through fitspeed's storage, which waits out the workers creating a new study
        return load(storage, study).get_trials(states=(TrialState.COMPLETE,))
    except KeyError:
        return []


T = TypeVar("T")


def wait_until(condition: Callable[[], T], workers: list[subprocess.Popen[str]], what: str) -> T:
    """`condition`'s value once true (it only ever turns true once true); fail after 300 s or when every worker has exited."""
    return wait_for(condition, what, 300, alive=workers, poll_s=0.2)


def finish(workers: list[subprocess.Popen[str]]) -> list[str]:
    outs = []
    for worker in workers:
        out, err = worker.communicate(timeout=600)
        assert worker.returncode == 0, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        outs.append(out)
    return outs


def load(storage: str, study: str) -> optuna.Study:
    from fitspeed.search.storages import open_storage

    return optuna.load_study(study_name=study, storage=open_storage(storage))


def check_study(study: optuna.Study, budget: int = BUDGET) -> list[FrozenTrial]:
    """The Done-when checks; returns the measured trials."""
    trials = study.get_trials()
    measured = [t for t in trials if "record" in t.user_attrs]
    budgeted = [t for t in measured if t.user_attrs["phase"] not in BUDGET_FREE]  # the lean step's pairs too
    assert len(budgeted) == budget - VERIFY_RESERVE, [t.user_attrs["config_key"] for t in budgeted]
    keys = [t.user_attrs["config_key"] for t in measured]
    assert len(keys) == len(set(keys)), "a configuration was measured twice"
    assert all(t.user_attrs.get("host", "").startswith("node") for t in measured)
    took = [t for t in trials if "config_key" in t.user_attrs]  # measured, or lost with a killed worker
    assert len({t.user_attrs["worker"] for t in took}) >= 2, "the workers did not share the work"
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    # nothing failed because of another worker: a failed trial without a record is a dead worker's only
    unrecorded = [t for t in trials if t.state == TrialState.FAIL and "record" not in t.user_attrs]
    assert all(any(a.user_attrs.get("retry_of") == t.number for a in measured) for t in unrecorded)
    verification = study.user_attrs["verification"]
    assert verification["verdict"] and verification["by"].startswith("node")
    verify_decisions = [k for k, v in study.user_attrs.items() if k.startswith("decision:") and v["purpose"] == "verify"]
    assert len(verify_decisions) == len(verification["tried"])  # each tried incumbent verified once
    return measured


def check_answers(outs: list[str]) -> None:
    """Every worker prints the same answer, from the one verification."""
    import json

    answers = [json.loads(out)["best"] for out in outs]
    assert all(answer == answers[0] for answer in answers)


@pytest.mark.slow
@pytest.mark.timeout(900)  # three workers on this machine's two cores
def test_three_workers_share_a_journal_file(workdir: Path) -> None:
    """Three workers finish one study; the work is shared, which no timing decides.

    A worker claims a screen round whole (the baseline and up to SCREEN_GROUP
    candidates, alive together), so four candidates make two rounds, and a
    worker that finds one round claimed takes the next. Trials fork in
    milliseconds, so one worker could still take both before another has
    started: once the baseline is done (every worker waits for it), the next
    timed trial to start is held open (`fitspeed.trial.faults.hold`) until a
    trial of another worker is done.
    """
    storage = f"journal:{workdir / 'study.log'}"
    hold = workdir / "hold"
    hold.mkdir()
    workers = [start(workdir, storage, i, env={"FITSPEED_TEST_HOLD": str(hold)}, args=SHARED_ARGS) for i in range(3)]
    try:
        wait_until(lambda: len(done(storage, "shared")) >= 1, workers, "the baseline done")
        (hold / "armed").touch()
        wait_until(lambda: list(hold.glob("host-*")), workers, "a trial taking the hold")
        held = next(hold.glob("host-*")).read_text()
        wait_until(lambda: [t for t in done(storage, "shared") if t.user_attrs.get("host") != held], workers,
                   f"a trial of a worker other than {held} done while {held} holds one")
    finally:
        (hold / "release").touch()
    outs = finish(workers)
    check_answers(outs)
    check_study(load(storage, "shared"), SHARED_BUDGET)
    shown = fitspeed("show", "shared", "--storage", storage, "--json", cwd=workdir)
    assert json_out(shown)["best"] == __import__("json").loads(outs[0])["best"]


@pytest.mark.slow
@pytest.mark.timeout(900)  # three workers on this machine's two cores
def test_a_killed_worker_s_trial_is_measured_again_by_another(workdir: Path, postgres: str) -> None:
    """Three workers share a PostgreSQL study; SIGKILL one mid-trial: another measures that trial again.

    The two left finish the study with nothing else failed and print the one
    verification's answer (the sharing checks of the journal test, on
    PostgreSQL). After the killed worker's heartbeat lapses (1 s here),
    another worker measures its trial again.

    No poll can miss the moment: once two trials are done the test arms a hold
    (`fitspeed.trial.faults.hold`), the next timed trial to start takes it and
    waits, and its file names its worker. That worker is killed while it surely
    holds a trial open. Counting done trials is a poll too, but that count
    only grows.
    """
    hold = workdir / "hold"
    hold.mkdir()
    workers = [start(workdir, postgres, i, "killed", "--heartbeat", "1", env={"FITSPEED_TEST_HOLD": str(hold)})
               for i in range(3)]
    wait_until(lambda: len(done(postgres, "killed")) >= 2, workers, "two trials done")
    (hold / "armed").touch()
    taken = wait_until(lambda: list(hold.glob("host-*")), workers, "a trial taking the hold")
    assert len(taken) == 1, f"more than one trial took the hold: {sorted(p.name for p in hold.iterdir())}"
    host = taken[0].read_text()
    killed = workers[int(host[len("node"):])]
    os.killpg(killed.pid, signal.SIGKILL)  # the worker and its held trial, as when a node dies
    killed.wait()
    (hold / "release").touch()  # nothing else is held (the hold was taken once); no later trial waits
    others = [w for w in workers if w is not killed]
    # the killed worker's round under way (a lockstep round's trials all run at once), and nothing else
    left = [t for t in optuna.load_study(study_name="killed", storage=postgres).get_trials(states=(TrialState.RUNNING,))
            if t.user_attrs.get("host") == host and "config_key" in t.user_attrs]
    assert 1 <= len(left) <= SCREEN_GROUP + 1, f"{host} left {len(left)} trials running at the kill"
    check_answers(finish(others))
    study = optuna.load_study(study_name="killed", storage=postgres)
    check_study(study)
    for victim in left:
        lost = study.trials[victim.number]
        assert lost.state == TrialState.FAIL and "record" not in lost.user_attrs
        again = [t for t in study.get_trials() if t.user_attrs.get("retry_of") == victim.number]
        assert len(again) == 1 and "record" in again[0].user_attrs  # retried once, and measured
        assert again[0].user_attrs["config_key"] == victim.user_attrs["config_key"]
        assert again[0].user_attrs["host"] != host
    # only the killed worker's trials failed without a record
    assert [t.number for t in study.get_trials() if t.state == TrialState.FAIL and "record" not in t.user_attrs] \
        == sorted(victim.number for victim in left)


# -- bad input: one sentence each, no traceback ------------------------------------------------------


def refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    said = " ".join(result.stderr.split())  # the console wraps long lines
    for word in words:
        assert word in said, said


def test_wrong_password_and_unreachable_server(workdir: Path, postgres: str) -> None:
    wrong = postgres.replace(":s3cret@", ":wrong@")
    result = fitspeed("tune", "tiny", "--storage", wrong, cwd=workdir)
    refused(result, "refused the user name or password")
    assert "wrong" not in result.stderr  # the password is never printed
    nobody = "postgresql://postgres:s3cret@127.0.0.1:1/postgres"
    result = fitspeed("tune", "tiny", "--storage", nobody, cwd=workdir)
    refused(result, "No database server answered at postgresql://postgres:***@127.0.0.1:1/postgres")
    refused(fitspeed("show", "--storage", nobody, cwd=workdir), "No database server answered")


def test_a_study_of_another_fitspeed_version_is_refused(workdir: Path) -> None:
    storage = f"sqlite:///{workdir / 'old.db'}"
    study = optuna.create_study(study_name="tiny-synthetic", storage=storage)
    from fitspeed.core.config import TrialConfig
    from fitspeed.search.studies import plain

    for key, value in {"fitspeed": True, "model": "tiny", "data": None, "base": plain(TrialConfig().to_dict()),
                       "fitspeed_version": "0.0.1"}.items():
        study.set_user_attr(key, value)
    refused(fitspeed("tune", "tiny", "--storage", storage, cwd=workdir), "made by fitspeed 0.0.1", "--study")


def test_a_second_worker_on_one_host_is_refused(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.environ.get(host_lock.ALLOW_ENV) == "1":
        pytest.skip("FITSPEED_ALLOW_SHARED_HOST is set for this whole session")
    # the lock files in a temp folder of the test's own (the test and its child): a real `fitspeed tune` on this
    # host meanwhile holds the host's own lock, which is not this test's to meet
    monkeypatch.setattr(tempfile, "tempdir", str(workdir))
    env = {**{k: v for k, v in child_env().items() if k != host_lock.ALLOW_ENV}, "TMPDIR": str(workdir)}
    with host_lock.hold(host_lock.device(), "the test"):
        result = subprocess.run([sys.executable, "-m", "fitspeed", "tune", "tiny", "--storage",
                                 f"sqlite:///{workdir / 's.db'}"], cwd=workdir, env=env, capture_output=True,
                                text=True, timeout=120)
    refused(result, "Another fitspeed worker already measures on this host", "the test", "--allow-shared-host",
            "FITSPEED_ALLOW_SHARED_HOST=1 bash run.sh")


CLAIMING = """
import pathlib, sys, time
import optuna
from fitspeed.search.storages import open_storage
from fitspeed.search.workers import Worker, Workers

url, flags = sys.argv[1], pathlib.Path(sys.argv[2])
storage = open_storage(url)
workers = Workers(optuna.load_study(study_name="shared", storage=storage), storage, url, Worker(host="node0"))
with workers.lock.held():  # as `Workers.claim` does, with a pause between its two steps
    trial = workers._enqueue("key", {"config": {"batch_size": 32}, "phase": "screen"}, {})
    (flags / "enqueued").touch()
    while not (flags / "go").exists():
        time.sleep(0.05)
    workers._pop(trial, {})
"""


def test_a_trial_another_worker_is_claiming_is_not_taken_for_a_dead_worker_s(workdir: Path) -> None:
    """`waiting()` (a dead worker's trials, for `settle` to run again) never sees a live worker's claim half made.

    A claim enqueues its trial and pops it under the study's lock; a worker that
    read the study unlocked between the two took it for a dead worker's and
    crashed on it (a CI run of three workers: KeyError 'config'). Here another
    process holds the lock between the two steps, as long as the test likes.
    """
    from fitspeed.search.storages import open_storage
    from fitspeed.search.workers import Worker, Workers

    url = f"sqlite:///{workdir / 'study.db'}"
    storage = open_storage(url)
    study = optuna.create_study(study_name="shared", storage=storage)
    flags = workdir / "flags"
    flags.mkdir()
    claiming = subprocess.Popen([sys.executable, "-c", CLAIMING, url, str(flags)], env=child_env(), text=True,
                                stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (flags / "enqueued").exists(), "the other worker's claim half made", 120,
                 alive=[claiming], poll_s=0.05)
        me = Workers(study, storage, url, Worker(host="node1"))
        seen: list[list[FrozenTrial]] = []
        reader = threading.Thread(target=lambda: seen.append(me.waiting()), daemon=True)
        reader.start()
        reader.join(2.0)
        assert reader.is_alive(), f"read the study while another worker held its lock: {seen}"
        (flags / "go").touch()
        reader.join(60)
        assert seen == [[]], seen
        assert claiming.wait(60) == 0, claiming.stderr.read() if claiming.stderr else ""
        [trial] = study.get_trials()
        assert trial.state == TrialState.RUNNING and trial.user_attrs["config"] == {"batch_size": 32}
    finally:
        (flags / "go").touch()
        claiming.kill()
        claiming.wait()
