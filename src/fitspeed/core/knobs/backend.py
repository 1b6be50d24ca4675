"""The `backend` knob."""

from __future__ import annotations

from fitspeed.core.knobs.base import BACKENDS, Knob, as_choice


BACKEND = Knob(
    name="backend",
    description="Keras backend that runs the model (KERAS_BACKEND).",
    values="tensorflow, jax, torch",
    default="tensorflow",
    scope="process",
    stage="environment",
    parse=lambda raw: as_choice("backend", raw, BACKENDS),
    changes_numerics=True,
)
