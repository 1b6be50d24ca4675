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
