"""The `precision`, `auto_scale_loss` knobs."""

from __future__ import annotations

from typing import Any

from fitspeed.core.knobs.base import Knob, Lines, Offer, Process, Recipe, Where, as_bool, as_choice


class Precision(Knob):
    """Both mixed policies everywhere, each measured; the likelier winner first.

    A CPU with AVX512-FP16 or AMX-FP16 may run float16 fast, and one without it
    may run bfloat16 slow: the measurement decides, never a belief about the
    hardware.

    Applied twice: the global dtype policy in the process stage (`apply`), and
    the model's output layers moved to float32 in the rewrite of the built model
    (`fitspeed.trial.transform.rewrite`).
    """

    step = "dtype_policy"

    def offer(self, where: Where) -> Offer:
        mixed = ("mixed_float16", "mixed_bfloat16") if where.has_gpu else ("mixed_bfloat16", "mixed_float16")
        return Offer(values=mixed, each=True)

    def apply(self, value: Any, process: Process) -> None:
        process.set_dtype_policy(value)

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        """The global policy; the output layers the best trial's rewrite moved to float32 make it a rewritten knob."""
        if value == self.default:
            return {}
        lines = [f'keras.mixed_precision.set_global_policy("{value}")',
                 "# The loss must read float32 outputs: build your output layer with dtype=\"float32\", such as",
                 '# layers.Activation("softmax", dtype="float32")' + (", or rewrite the model (below)." if recipe.fixed
                                                                     else ".")]
        if not recipe.fixed:
            return {"process": lines}
        return {"process": [*lines, f"# fitspeed's trials did so for you: {', '.join(recipe.fixed)} followed the policy."],
                "rewritten": [self.name]}


class AutoScaleLoss(Knob):
    """auto_scale_loss=False, measured under mixed_float16, the one policy Keras scales the loss under."""

    def offer(self, where: Where) -> Offer:
        """
        >>> from fitspeed.core.config import TrialConfig
        >>> AUTO_SCALE_LOSS.offer(Where(TrialConfig(), False, 2, None, "tiny", None)).on
        ('precision', 'mixed_float16')
        >>> AUTO_SCALE_LOSS.offer(Where(TrialConfig(precision="mixed_float16"), False, 2, None, "tiny", None)).on
        """
        under = self.only_under
        if under is None or getattr(where.base, under[0]) == under[1]:
            return Offer(values=(False,))
        return Offer(values=(False,), on=under)


PRECISION = Precision(
    name="precision",
    description="Global dtype policy: keras.mixed_precision.set_global_policy(...); the model's output layers "
    "are kept float32 (rewritten and checked where they follow the policy).",
    values="float32, mixed_float16, mixed_bfloat16",
    default="float32",
    scope="process",
    stage="process",
    parse=lambda raw: as_choice(
        "precision", raw, ("float32", "mixed_float16", "mixed_bfloat16")
    ),
    changes_numerics=True,
)

AUTO_SCALE_LOSS = AutoScaleLoss(
    name="auto_scale_loss",
    description="Loss scaling under mixed_float16: compile(auto_scale_loss=...) wraps the optimizer in a "
    "LossScaleOptimizer (dynamic scale, skipped steps on inf); false trains without it (float16 gradients may "
    "underflow: the guard decides). Under other policies Keras scales nothing: measured only on mixed_float16.",
    values="true, false",
    default=True,
    scope="model",
    stage="compile",
    parse=lambda raw: as_bool("auto_scale_loss", raw),
    changes_numerics=True,
    only_under=("precision", "mixed_float16"),
)
