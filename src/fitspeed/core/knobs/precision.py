"""The `precision`, `auto_scale_loss` knobs."""

from __future__ import annotations

from fitspeed.core.knobs.base import Knob, as_bool, as_choice


PRECISION = Knob(
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

AUTO_SCALE_LOSS = Knob(
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
