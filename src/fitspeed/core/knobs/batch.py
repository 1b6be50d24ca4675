"""The `batch_size` knob."""

from __future__ import annotations

from fitspeed.core.knobs.base import Knob, as_int


BATCH_SIZE = Knob(
    name="batch_size",
    description="Samples per training step; changes the recipe (re-tune the learning rate).",
    values="integer >= 1",
    default=32,
    scope="data",
    stage="data",
    parse=lambda raw: as_int("batch_size", raw, 1),
    changes_numerics=True,
)
