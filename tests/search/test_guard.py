from __future__ import annotations

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialSpec
from fitspeed.search import guard


def test_close_final_loss_passes_and_far_fails() -> None:
    assert guard.check([2.0, 1.0, 0.50], [2.0, 1.0, 0.52]).ok
    far = guard.check([2.0, 1.0, 0.50], [2.0, 1.5, 0.90])
    assert not far.ok and "over the 10% tolerance" in far.reason
    assert guard.check([2.0, 1.0, 0.50], [2.0, 1.0, 0.60], tolerance=0.25).ok


def test_non_finite_loss_is_rejected_and_curves_are_kept() -> None:
    verdict = guard.check([2.0, 1.0], [2.0, None])
    assert not verdict.ok and verdict.reason == "the loss is not finite"
    assert verdict.to_dict()["curve"] == [2.0, None]
    assert verdict.to_dict()["baseline_curve"] == [2.0, 1.0]
    assert not guard.check([2.0, float("nan")], [2.0, 1.0]).ok


def test_guard_runs_train_the_same_steps_with_only_numeric_knobs_changed() -> None:
    base = TrialConfig()
    fast = TrialConfig(steps_per_execution=64, intra_op_threads=1, precision="mixed_bfloat16")
    assert guard.numeric_changes(fast, base) == {"precision": "mixed_bfloat16"}
    assert guard.numeric_changes(TrialConfig(steps_per_execution=8), base) == {}
    spec = guard.guard_spec(TrialSpec(model="tiny", config=fast, steps=128), base)
    assert spec.mode == "train" and spec.steps == guard.GUARD_STEPS
    assert spec.config == TrialConfig(precision="mixed_bfloat16")
    assert guard.guard_spec(TrialSpec(model="tiny"), base).steps == spec.steps


def test_guard_specs_vary_the_seed_and_keep_the_data() -> None:
    spec = TrialSpec(model="tiny", config=TrialConfig(precision="mixed_bfloat16"), seed=5)
    specs = [guard.guard_spec(spec, TrialConfig(), seed) for seed in guard.seeds(spec)]
    assert [s.seed for s in specs] == [5, 6, 7] and {s.data_seed for s in specs} == {5}
    assert all(s.validate and s.mode == "train" for s in specs)
    assert TrialSpec.from_dict(specs[1].to_dict()) == specs[1]


def _runs(losses: list[float], accuracies: list[float] | None = None) -> list[guard.GuardRun]:
    accuracies = accuracies or [None] * len(losses)  # type: ignore[list-item]
    return [guard.GuardRun("ok", curve=(2.3, 1.7), val_loss=v, val_accuracy=a) for v, a in zip(losses, accuracies)]


BASE = _runs([1.60, 1.65, 1.70], [0.50, 0.55, 0.52])


def test_a_lower_held_out_loss_always_passes() -> None:
    # the Zen 5 case: a loss far lower than the baseline's, once rejected as "17% away"
    verdict = guard.judge(BASE, _runs([1.04, 1.06, 1.05], [0.70, 0.71, 0.72]))
    assert verdict.ok and "below the baseline's" in verdict.reason
    assert verdict.to_dict()["runs"] == {"baseline": 3, "candidate": 3}


def test_worse_than_the_spread_fails_and_within_it_passes() -> None:
    assert guard.judge(BASE, _runs([1.70, 1.72, 1.74], [0.50, 0.53, 0.50])).ok  # 0.07 worse: 3 sd is 0.15
    worse = guard.judge(BASE, _runs([1.85, 1.88, 1.86], [0.50, 0.53, 0.50]))
    assert not worse.ok and "more than the band" in worse.reason
    accuracy = guard.judge(BASE, _runs([1.60, 1.65, 1.70], [0.30, 0.31, 0.29]))
    assert not accuracy.ok and accuracy.reason.startswith("held-out accuracy")


def test_identical_seeds_leave_a_floor_for_rounding() -> None:
    same = _runs([0.50, 0.50, 0.50])
    assert guard.judge(same, _runs([0.505, 0.51, 0.503])).ok  # sd 0: a rounding difference is not a change
    assert not guard.judge(same, _runs([0.60, 0.61, 0.60])).ok


def test_a_stall_and_a_non_finite_loss_fail() -> None:
    stall = guard.judge(BASE, _runs([2.30, 2.30, 2.31], [0.10, 0.10, 0.11]))
    assert not stall.ok and "held-out loss 2.3 is" in stall.reason
    nan = guard.judge(BASE, [guard.GuardRun("ok", curve=(2.3, float("nan")), val_loss=1.6)])
    assert not nan.ok and nan.reason.startswith("the loss is not finite")
    assert not guard.judge(BASE, [guard.GuardRun("failed", "ResourceExhaustedError")]).ok
    broken_base = [guard.GuardRun("nan", "nan at epoch 1", curve=(2.3, None))]
    assert guard.judge(broken_base, BASE).reason.startswith("the baseline cannot judge it")


def test_one_bad_candidate_run_stops_the_seeds() -> None:
    assert not guard.stop_early(BASE)
    assert guard.stop_early([*BASE[:1], guard.GuardRun("nan", curve=(2.3, None))])
    assert guard.stop_early([guard.GuardRun("ok", curve=(2.3, 1.0), output_dtype="float16")])


def test_without_held_out_data_the_final_training_loss_decides_and_says_so() -> None:
    base = [guard.GuardRun("ok", curve=(2.3, c)) for c in (1.00, 1.05, 1.10)]
    verdict = guard.judge(base, [guard.GuardRun("ok", curve=(2.3, c)) for c in (1.50, 1.52, 1.55)], script=True)
    assert not verdict.ok and verdict.reason.startswith("no held-out data") and "final training loss" in verdict.reason
    noisy = [guard.GuardRun("ok", curve=(2.3, c)) for c in (0.4, 1.6, 1.0)]
    unsteady = guard.judge(noisy, [guard.GuardRun("ok", curve=(2.3, 1.0))], script=True)
    assert not unsteady.ok and "varies too much over seeds" in unsteady.reason
    assert guard.judge(noisy, [guard.GuardRun("ok", curve=(2.3, 1.0))]).ok  # a built-in: the band is the spread
