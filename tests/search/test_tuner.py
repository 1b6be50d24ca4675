"""`fitspeed tune` for real: a killed parent resumes, and numerics guard the answer."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import optuna
import psutil
import pytest
from conftest import child_env, fitspeed, json_out, sigint_default
from fitspeed.search.budget import SCREEN_GROUP
from fitspeed.search.storages import open_storage
from optuna.trial import TrialState
from waiting import trial_processes, wait_for

FAST = ["--steps", "8", "--repeats", "2", "--pairs", "2"]


def trials(storage: str, name: str) -> list[optuna.trial.FrozenTrial]:
    try:
        # open_storage, as a worker does: the tune being watched may be creating the tables this very moment
        return optuna.load_study(study_name=name, storage=open_storage(storage)).get_trials()
    except KeyError:  # not created yet
        return []


def hold_next_trial(hold: Path, storage: str, study: str, done: int, parent: subprocess.Popen[str]) -> None:
    """Once `done` trials are complete, hold the next timed trial open (`fitspeed.trial.faults.hold`).

    Complete trials and the hold's file stay once there, so neither wait can
    miss its moment: when this returns, a trial child surely holds a trial.
    """
    wait_for(lambda: len([t for t in trials(storage, study) if t.state == TrialState.COMPLETE]) >= done,
             f"{done} complete trial(s)", alive=[parent])
    (hold / "armed").touch()
    taken = wait_for(lambda: list(hold.glob("host-*")), "trial taking the hold", alive=[parent])
    assert len(taken) == 1, f"more than one trial took the hold: {sorted(p.name for p in hold.iterdir())}"


@pytest.mark.slow
def test_killed_parent_loses_at_most_the_running_round(workdir: Path) -> None:
    storage = f"sqlite:///{workdir / 'study.db'}"
    args = ["tune", "mlp", "--trials", "5", "--screen-only", "--knobs", "steps_per_execution,jit_compile,intra_op_threads",
            "--storage", storage, "--study", "k", *FAST]
    hold = workdir / "hold"
    hold.mkdir()
    parent = subprocess.Popen([sys.executable, "-m", "fitspeed", *args], cwd=workdir,
                              env={**child_env(), "FITSPEED_TEST_HOLD": str(hold)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hold_next_trial(hold, storage, "k", 1, parent)
    parent.send_signal(signal.SIGKILL)  # while the screen's round (the baseline and three candidates) surely runs
    parent.wait()
    (hold / "release").touch()  # the held child dies with its parent; were it alive, nothing else waits
    # the trials of the round under way (a lockstep round's trials all run at once) are lost, and no other
    running = [t for t in trials(storage, "k") if t.state == TrialState.RUNNING]
    assert 1 <= len(running) <= SCREEN_GROUP + 1 and not any("record" in t.user_attrs for t in running)
    before = {t.number: t.user_attrs["record"]["id"] for t in trials(storage, "k") if "record" in t.user_attrs}
    assert len(before) >= 1

    result = fitspeed(*args, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "interrupted trial(s) will be measured again" in result.stderr
    after = trials(storage, "k")
    recorded = [t for t in after if "record" in t.user_attrs]
    # the finished trials are all still there, unchanged
    for number, record_id in before.items():
        assert after[number].user_attrs["record"]["id"] == record_id
    # none ran twice, and the study completed its five configurations
    keys = [t.user_attrs["config_key"] for t in recorded]
    assert len(keys) == len(set(keys)) == 5
    # the trial that was running when the parent died is failed, with no record
    assert any(t.state == TrialState.FAIL and "record" not in t.user_attrs for t in after)
    best = json.loads((workdir / "best.json").read_text())
    assert best["kind"] == "best" and "snippet" in best
    assert best["best"]["verdict"]

    shown = fitspeed("show", "k", "--storage", storage, cwd=workdir)
    assert shown.returncode == 0, shown.stderr
    assert "baseline" in shown.stdout and "each knob alone" in shown.stdout
    assert "steps_per_execution=64" in shown.stdout


@pytest.mark.slow
def test_float16_overflow_is_rejected_for_numerics(workdir: Path) -> None:
    storage = f"sqlite:///{workdir / 'study.db'}"
    result = fitspeed("tune", "userwork:overflow_model", "--data", "userwork:arrays", "--knobs", "precision",
                      "--space", "precision=mixed_float16", "--trials", "15", "--storage", storage,
                      "--json", *FAST, cwd=workdir)
    assert result.returncode == 0, result.stderr
    summary = json_out(result)
    rejected = [r for r in summary["rejected"] if r["changes"].get("precision") == "mixed_float16"]
    assert rejected, summary["rejected"]
    assert rejected[0]["outcome"].startswith("numerics")
    assert summary["best"]["config"]["precision"] == "float32"
    assert summary["best"]["verdict"] == "keep the defaults"
    assert "mixed_float16" not in json.loads((workdir / "best.json").read_text())["snippet"]


def test_study_for_another_workload_is_refused(workdir: Path) -> None:
    storage = f"sqlite:///{workdir / 'study.db'}"
    optuna.create_study(study_name="x", storage=storage).set_user_attr("fitspeed", True)
    result = fitspeed("tune", "tiny", "--study", "x", "--storage", storage, *FAST, cwd=workdir)
    assert result.returncode == 2
    assert "was made for model None, not 'tiny'" in " ".join(result.stderr.split())
    missing = fitspeed("show", "nope", "--storage", storage, cwd=workdir)
    assert missing.returncode == 2 and "No study named 'nope'" in missing.stderr


@pytest.mark.slow
def test_batch_sizes_back_off_from_out_of_memory(workdir: Path) -> None:
    storage = f"sqlite:///{workdir / 'study.db'}"
    # fitspeed cycles a whole epoch of arrays, so memory grows with the batch: 1200 MiB caps it
    result = fitspeed("tune", "mlp", "--knobs", "steps_per_execution", "--space", "steps_per_execution=4",
                      "--screen-only", "--batch-sizes", "2048,16384", "--memory-limit", "1200",
                      "--storage", storage, *FAST, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "re-tune the learning rate" in result.stdout
    summary = json_out(fitspeed("show", "--storage", storage, "--json", cwd=workdir))
    batch = summary["batch_sizes"]
    statuses = {row["changes"].get("batch_size", 32): row["status"] for row in batch["rows"]}
    assert statuses[32] == "ok" and statuses[2048] == "ok" and statuses[16384] == "oom"
    assert len(statuses) > 3  # it bisected between the last fit and the first out-of-memory
    assert batch["largest_fitting"] < batch["first_oom"]
    assert batch["recommended_max"] < batch["largest_fitting"]
    assert summary["best"]["config"]["batch_size"] == 32  # batch size is never slipped into "best"


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_resumes(workdir: Path) -> None:
    storage = f"sqlite:///{workdir / 'study.db'}"
    args = ["tune", "mlp", "--trials", "3", "--screen-only", "--knobs", "steps_per_execution", "--storage", storage,
            "--study", "c", *FAST]
    hold = workdir / "hold"
    hold.mkdir()
    parent = subprocess.Popen([sys.executable, "-m", "fitspeed", *args], cwd=workdir,
                              env={**child_env(), "FITSPEED_TEST_HOLD": str(hold)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              preexec_fn=sigint_default)
    try:
        hold_next_trial(hold, storage, "c", 1, parent)
        parent.send_signal(signal.SIGINT)  # while its second trial is surely running: Ctrl-C must end it too
        _, stderr = parent.communicate(timeout=120)
    finally:  # a test that fails here must not leave the tune running for the rest of the session
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    assert parent.returncode == 130, stderr
    assert "run the same command again to resume" in " ".join(stderr.split()) and "Traceback" not in stderr
    _, alive = psutil.wait_procs(trial_processes(workdir), timeout=10)  # killed with the parent: gone at once
    assert not alive, alive
    done = fitspeed(*args, cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert len([t for t in trials(storage, "c") if "record" in t.user_attrs]) == 3


def test_time_budget_stops_the_search(workdir: Path) -> None:
    storage = f"sqlite:///{workdir / 'study.db'}"
    result = fitspeed("tune", "tiny", "--time", "1s", "--knobs", "steps_per_execution", "--storage", storage,
                      "--study", "t", "--json", *FAST, cwd=workdir)
    assert result.returncode == 0, result.stderr
    summary = json_out(result)
    assert [row["phase"] for row in summary["trials"]] == ["baseline"]  # the budget ran out after it
    assert summary["best"]["verdict"] == "keep the defaults"
