"""The numerics guard on real training: each run is a real train-mode trial in its own process.

The baseline (tiny: two conv + BatchNormalization blocks) trains once at the
guard's first FIRST_SEEDS seeds for the run; each candidate trains at the same
seeds, both run on to the seeds the tuner's rule asks for (`guard.seeds_needed`),
and the pairs are judged by `guard.judge`. Good numerics changes must pass, and
a broken learning rate (the test-only FITSPEED_TEST_FAULT) must fail. Nothing
here is timed.
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


def _records(config: TrialConfig, env: dict[str, str] | None = None,
             seeds: tuple[int, ...] | None = None) -> list[TrialRecord]:
    spec = dataclasses.replace(SPEC, config=config)
    specs = [guard.guard_spec(spec, TrialConfig(), seed) for seed in seeds or guard.seeds(spec)]
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
    assert len({r.val_loss for r in runs}) == guard.FIRST_SEEDS  # the seeds differ: a spread to judge against
    return runs


_MORE_BASELINE: dict[int, guard.GuardRun] = {}  # the baseline's seeds past the first stage, as a rule asks for them


def _judge(baseline: list[guard.GuardRun], config: TrialConfig,
           env: dict[str, str] | None = None) -> tuple[guard.GuardVerdict, list[TrialRecord]]:
    """`config` judged as the tuner judges it: the first stage, then the seeds `guard.seeds_needed` asks for."""
    records = _records(config, env)
    candidate = _runs(records)
    every = guard.seeds(SPEC, guard.seeds_needed(baseline, candidate))[len(candidate):]
    if every and not guard.stop_early(candidate):
        missing = tuple(s for s in every if s not in _MORE_BASELINE)
        if missing:
            _MORE_BASELINE.update(zip(missing, _runs(_records(TrialConfig(), seeds=missing))))
        more = _records(config, env, every)
        records += more
        candidate += _runs(more)
        baseline = [*baseline, *(_MORE_BASELINE[s] for s in every)]
    return guard.judge(baseline, candidate), records


@pytest.mark.timeout(900)  # the rule may ask for up to guard.MAX_SEEDS seeds a side, two runs at a time
def test_bfloat16_learns_as_well(baseline: list[guard.GuardRun]) -> None:
    verdict, _ = _judge(baseline, TrialConfig(precision="mixed_bfloat16"))
    assert verdict.ok, verdict.reason


@pytest.mark.timeout(900)  # the rule may ask for up to guard.MAX_SEEDS seeds a side, two runs at a time
def test_float16_with_loss_scaling_learns_as_well(baseline: list[guard.GuardRun]) -> None:
    # under XLA: TensorFlow's own float16 kernels on a CPU are emulated, 45-80 s a guard run on a Xeon against
    # 15 s compiled; the candidate still trains in float16 with its loss scaled, and jit_compile is a numerics change
    # the guard judges with it
    verdict, records = _judge(baseline, TrialConfig(precision="mixed_float16", jit_compile=True))
    assert verdict.ok, verdict.reason
    assert {r.spec.config.precision for r in records} == {"mixed_float16"}


@pytest.mark.timeout(900)  # the rule may ask for up to guard.MAX_SEEDS seeds a side, two runs at a time
def test_channels_first_learns_as_well(baseline: list[guard.GuardRun]) -> None:
    # TensorFlow runs NCHW convolutions on a CPU only with oneDNN on, which it leaves off by default on some
    # CPUs (AMD Zen 3): onednn=True runs it on every CPU, so the verdict is always checked
    verdict, _ = _judge(baseline, TrialConfig(data_format="channels_first", onednn=True))
    assert verdict.ok, verdict.reason


@pytest.mark.timeout(900)  # the rule may ask for up to guard.MAX_SEEDS seeds a side, two runs at a time
def test_a_broken_learning_rate_is_rejected(baseline: list[guard.GuardRun]) -> None:
    # a learning rate 100x too small learns worse at every seed; one 100x too large diverges or not by the seed,
    # so its pairs disagree and the rule runs it to 24 seeds a side (benchmarks/guard_power.py measures that one)
    verdict, records = _judge(baseline, TrialConfig(precision="mixed_bfloat16"), {faults.ENV: "lr_x0.01"})
    assert all(any("test fault injected" in n for n in r.notes) for r in records if r.status == Status.OK)
    assert not verdict.ok, verdict.reason


def test_a_guard_run_built_before_fit_trains_exactly_as_a_plain_fit(baseline: list[guard.GuardRun]) -> None:
    # the guard's runs build the training state first (`fitspeed.trial.keras_build`): one trace of the step
    # instead of two; the baseline's first seed, trained again by a plain fit(), must learn bit for bit the same
    seed = guard.seeds(SPEC)[0]
    built = guard.guard_spec(SPEC, TrialConfig(), seed)
    assert built.build_first and built.to_dict()["build_first"] is True
    child_env = {k: v for k, v in os.environ.items() if k != faults.ENV}
    plain = _runs([run_trial(dataclasses.replace(built, build_first=False), env=child_env)])[0]
    assert (plain.curve, plain.val_loss, plain.val_accuracy) == (
        baseline[0].curve, baseline[0].val_loss, baseline[0].val_accuracy)
