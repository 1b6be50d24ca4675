"""`fitspeed tune --processes 2` as a user runs it: every trial two real JAX processes, best.json's join lines."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import optuna
import pytest
from conftest import fitspeed, missing

from fitspeed.core.record import Status, TrialRecord


@pytest.mark.slow
@pytest.mark.timeout(900)  # 2 commands and up to 14 trials of two JAX processes each, started cold
def test_tune_over_two_processes_times_every_trial_as_two_and_writes_the_join(workdir: Path) -> None:
    if importlib.util.find_spec("jax") is None:
        missing("jax is not installed")
    refused = fitspeed("tune", "tiny", "--processes", "2", "--set", "backend=jax", "--trials", "12", cwd=workdir)
    # steps_per_execution alone is searched: its screen (3), one decision (4) and the verification (7) are 14
    assert refused.returncode == 2 and "Pass --trials 14 or more" in " ".join(refused.stderr.split())
    result = fitspeed("tune", "tiny", "--processes", "2", "--set", "backend=jax", "--trials", "14", "--pairs", "2",
                      "--steps", "32", "--repeats", "2", "--storage", "sqlite:///study.db", cwd=workdir, timeout=840)
    assert result.returncode == 0, result.stderr
    best = json.loads((workdir / "best.json").read_text())
    assert best["best"]["config"]["processes"] == 2 and best["knobs"]["processes"] == 2
    assert best["skipped"]["precision"].startswith("left out of a search over 2 processes")
    assert "steps_per_execution" not in best["skipped"]
    snippet = best["snippet"]
    assert snippet.index("keras.distribution.initialize()") < snippet.index("DataParallel(auto_shard_dataset=False)")
    assert "x_train[process::processes]" in snippet and "× 2 processes" in snippet
    study = optuna.load_study(study_name="tiny-synthetic", storage=f"sqlite:///{workdir / 'study.db'}")
    records = [TrialRecord.from_dict(t.user_attrs["record"]) for t in study.trials if "record" in t.user_attrs]
    assert records and all(r.status == Status.OK for r in records), [(r.status, r.reason) for r in records]
    # each a trial of two processes: both processes' own figures kept, the global batch counted
    assert all([p["process"] for p in r.extra["processes"]] == [0, 1] for r in records)
    assert {r.spec.config.steps_per_execution for r in records} - {1} <= {64, 16, 4}
    assert all(r.metrics is not None and r.metrics.batch_size == 64 for r in records)
