"""The numerics guard on real training: each run is a real train-mode trial in its own process.

The baseline (tiny: two conv + BatchNormalization blocks) trains once at the
guard's 3 seeds for the run; each candidate trains at the same seeds and is
judged by `guard.judge`. Good numerics changes must pass, and a broken learning
rate (the test-only FITSPEED_TEST_FAULT) must fail. Nothing here is timed.
"""

from __future__ import annotations

import dataclasses
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import built_once

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure.runner import run_trial
from fitspeed.search import guard
from fitspeed.trial import faults

pytestmark = pytest.mark.slow
SPEC = TrialSpec(model="tiny", seed=0)


def _records(config: TrialConfig, env: dict[str, str] | None = None) -> list[TrialRecord]:
    spec = dataclasses.replace(SPEC, config=config)
    specs = [guard.guard_spec(spec, TrialConfig(), seed) for seed in guard.seeds(spec)]
    child_env = {k: v for k, v in os.environ.items() if k != faults.ENV} | (env or {})
    with ThreadPoolExecutor(max_workers=2) as pool:  # two trial processes at once on a 2-core machine
        return list(pool.map(lambda s: run_trial(s, env=child_env), specs))


def _runs(records: list[TrialRecord]) -> list[guard.GuardRun]:
    for record in records:
        assert record.status in (Status.OK, Status.NAN), record.reason
    return [guard.GuardRun.from_record(r) for r in records]


def _train_baseline(folder: Path) -> None:
    (folder / "records.json").write_text(json.dumps([r.to_dict() for r in _records(TrialConfig())]))


@pytest.fixture(scope="session")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> list[guard.GuardRun]:
    """The defaults trained at the guard's seeds, once for the run."""
    stored = json.loads((built_once(tmp_path_factory, "guard-baseline", _train_baseline) / "records.json").read_text())
    records = [TrialRecord.from_dict(r) for r in stored]
    runs = _runs(records)
    assert all(r.val_loss is not None and r.val_accuracy is not None for r in runs)
    assert len({r.val_loss for r in runs}) == 3  # the seeds differ: a spread to judge against
    return runs


def test_bfloat16_learns_as_well(baseline: list[guard.GuardRun]) -> None:
    verdict = guard.judge(baseline, _runs(_records(TrialConfig(precision="mixed_bfloat16"))))
    assert verdict.ok, verdict.reason


def test_float16_with_loss_scaling_learns_as_well(baseline: list[guard.GuardRun]) -> None:
    verdict = guard.judge(baseline, _runs(_records(TrialConfig(precision="mixed_float16"))))
    assert verdict.ok, verdict.reason


def test_channels_first_learns_as_well(baseline: list[guard.GuardRun]) -> None:
    # TensorFlow runs NCHW convolutions on a CPU only with oneDNN on, which it leaves off by default on some
    # CPUs (AMD Zen 3): onednn=True runs it on every CPU, so the verdict is always checked
    verdict = guard.judge(baseline, _runs(_records(TrialConfig(data_format="channels_first", onednn=True))))
    assert verdict.ok, verdict.reason


def test_a_broken_learning_rate_is_rejected(baseline: list[guard.GuardRun]) -> None:
    records = _records(TrialConfig(precision="mixed_bfloat16"), {faults.ENV: "lr_x100"})
    assert all(any("test fault injected" in n for n in r.notes) for r in records if r.status == Status.OK)
    verdict = guard.judge(baseline, _runs(records))
    assert not verdict.ok, verdict.reason
