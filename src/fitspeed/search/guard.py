"""The numerics guard: a speed-up that changes what the model learns is not one.

A configuration whose knobs change numerics (see `Knob.changes_numerics`) is
trained from the same seed, on the same learnable data, for the same fixed
number of steps as the baseline; its final loss must stay within a stated
tolerance of the baseline's, and be finite; the model's output must be float32.
Knobs that do not change numerics
(steps_per_execution, threads) are reset to the baseline's values for the
guard run, so every guard run trains exactly the same steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fitspeed.core.config import TrialConfig
from fitspeed.core.knobs import KNOBS_BY_NAME
from fitspeed.core.record import TrialSpec

GUARD_STEPS = 64
GUARD_EPOCHS = 4
DEFAULT_TOLERANCE = 0.10
FLOOR = 0.10  # a final loss is compared on at least this share of the baseline's first-epoch loss


def scale(baseline_curve: Sequence[float | None]) -> float:
    """What a final loss gap is measured against: the baseline's final loss, or a tenth of its first epoch's.

    Near zero a relative gap measures rounding, not learning: two runs that
    differ only in the order of float additions (oneDNN on and off, say) both
    take a loss from 1.8 to about 0.02 and end at 0.020 and 0.028, 39% apart
    by their own size but 4% of a tenth of where they started.

    >>> round(scale([1.81, 0.27, 0.078, 0.0202]), 3), scale([2.3, 1.5, 1.0])
    (0.181, 1.0)
    """
    base = baseline_curve[-1] if baseline_curve else None
    first = baseline_curve[0] if baseline_curve else None
    floor = FLOOR * abs(first) if first is not None and math.isfinite(first) else 0.0
    return max(abs(base) if base is not None else 0.0, floor, 1e-3)


def numeric_changes(config: TrialConfig, baseline: TrialConfig) -> dict[str, object]:
    """The knobs of `config` that differ from `baseline` and change numerics."""
    ours, theirs = config.to_dict(), baseline.to_dict()
    return {
        name: value
        for name, value in ours.items()
        if value != theirs[name] and KNOBS_BY_NAME[name].changes_numerics
    }


def guard_spec(spec: TrialSpec, baseline: TrialConfig) -> TrialSpec:
    """The train-mode trial that checks `spec`'s numerics against `baseline`."""
    config = baseline.replace(**numeric_changes(spec.config, baseline))
    return TrialSpec(
        model=spec.model,
        data=spec.data,
        config=config,
        steps=GUARD_STEPS,
        repeats=GUARD_EPOCHS,
        seed=spec.seed,
        timeout_s=spec.timeout_s,
        memory_limit_mb=spec.memory_limit_mb,
        mode="train",
        script=spec.script,
    )


@dataclass(frozen=True)
class GuardVerdict:
    ok: bool
    reason: str
    baseline_curve: tuple[float | None, ...]
    curve: tuple[float | None, ...]

    def to_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "reason": self.reason,
                "baseline_curve": list(self.baseline_curve), "curve": list(self.curve)}


def check(
    baseline_curve: Sequence[float | None],
    curve: Sequence[float | None],
    tolerance: float = DEFAULT_TOLERANCE,
    output_dtype: str | None = None,
) -> GuardVerdict:
    """Compare final losses: within `tolerance` of the baseline's, relatively (`scale`); and the output is float32.

    `output_dtype` is the dtype of the candidate model's outputs as its trial
    recorded it (`metrics.output_dtype`; None in records older than the check).
    Under a mixed policy the loss must read float32 outputs (Keras's mixed
    precision guide); the trial's rewrite keeps them so, and a model it could
    not rewrite fails here.

    >>> check([2.3, 1.5, 1.0], [2.3, 1.52, 1.04]).ok
    True
    >>> check([2.3, 1.5, 1.0], [2.3, 2.2, 2.1]).reason
    'final loss 2.1 is 110% away from the baseline 1, over the 10% tolerance'

    A loss near zero is compared on a tenth of the first epoch's (oneDNN on
    against off, measured): the same learning passes, a stall does not:

    >>> check([1.81, 0.275, 0.0778, 0.0202], [1.81, 0.275, 0.0688, 0.0281]).reason
    'final loss within 4.4% of the baseline (on the scale 0.181, a tenth of the first epoch loss)'
    >>> check([1.81, 0.275, 0.0778, 0.0202], [1.81, 0.9, 0.5, 0.2]).ok
    False
    >>> check([2.3, 1.0], [2.3, 1.0], output_dtype="bfloat16").reason
    "the model's output is bfloat16, not float32: the loss would read 16-bit values; give the output layer dtype='float32'"
    """
    keep = (tuple(baseline_curve), tuple(curve))
    if output_dtype is not None and output_dtype != "float32":
        return GuardVerdict(False, f"the model's output is {output_dtype}, not float32: the loss would read 16-bit "
                                   "values; give the output layer dtype='float32'", *keep)
    if not curve or curve[-1] is None or not math.isfinite(curve[-1]):
        return GuardVerdict(False, "the loss is not finite", *keep)
    if not baseline_curve or baseline_curve[-1] is None or not math.isfinite(baseline_curve[-1]):
        return GuardVerdict(False, "the baseline's loss is not finite", *keep)
    base, final = baseline_curve[-1], curve[-1]
    gap = abs(final - base) / scale(baseline_curve)
    on = scale(baseline_curve)
    where = f" (on the scale {on:.3g}, a tenth of the first epoch loss)" if on > abs(base) else ""
    if gap > tolerance:
        return GuardVerdict(
            False,
            f"final loss {final:.3g} is {100 * gap:.0f}% away from the baseline {base:.3g}{where}, "
            f"over the {100 * tolerance:.0f}% tolerance",
            *keep,
        )
    return GuardVerdict(True, f"final loss within {100 * gap:.1f}% of the baseline{where}", *keep)


def unreproducible(
    first: Sequence[float | None], second: Sequence[float | None], tolerance: float = DEFAULT_TOLERANCE
) -> str | None:
    """Why two baseline curves from the same seed cannot judge a candidate, or None when they agree.

    A training script seeds (or does not seed) its own data order and weights;
    when two baseline runs end further apart than half the tolerance, a
    candidate's change cannot be told from the script's own noise:

    >>> unreproducible([2.3, 1.0], [2.3, 1.01]) is None
    True
    >>> unreproducible([2.3, 1.0], [2.3, 1.3])
    "the script's training is not reproducible from a seed: two baseline runs ended at losses 1 and 1.3 (30% apart, over half the 10% tolerance), so the guard cannot tell a numerics change from the script's own noise; seed its data order and weights (keras.utils.set_random_seed, shuffle(seed=...)) or set deterministic=true"
    """
    a = first[-1] if first else None
    b = second[-1] if second else None
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return None  # check() says that the loss is not finite
    gap = abs(a - b) / max(abs(a), 1e-3)  # its own size, not `scale`: two runs from one seed should agree closely
    if gap <= tolerance / 2:
        return None
    return (f"the script's training is not reproducible from a seed: two baseline runs ended at losses {a:.3g} and "
            f"{b:.3g} ({100 * gap:.0f}% apart, over half the {100 * tolerance:.0f}% tolerance), so the guard cannot "
            "tell a numerics change from the script's own noise; seed its data order and weights "
            "(keras.utils.set_random_seed, shuffle(seed=...)) or set deterministic=true")

