"""The `remat` knob."""

from __future__ import annotations

from fitspeed.core.knobs.base import Knob, as_choice


REMAT = Knob(
    name="remat",
    description="Rematerialization: the model built inside keras.RematScope(mode=...), its layers' activations "
    "recomputed in the backward pass (less memory, more compute). Tried by tune --batch-sizes on a size that "
    "ran out of memory, never by the screen.",
    values="off, full",
    default="off",
    scope="model",
    stage="model",
    parse=lambda raw: as_choice("remat", raw, ("off", "full")),
)
