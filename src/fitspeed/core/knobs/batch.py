"""The `batch_size` knob."""

from __future__ import annotations

from typing import Any

from fitspeed.core.knobs.base import Knob, Lines, Recipe, as_int


class BatchSize(Knob):
    """The batch of one device: fit() is given it times `devices`, the global batch, wherever there are several."""

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        devices = recipe.config.devices
        if devices > 1:
            return {"fit": ["", f"# The global batch is {value} per device × {devices} devices: re-tune the learning "
                            "rate.", f"model.fit(x_train, y_train, batch_size={value * devices})"]}
        if value == self.default:
            return {}
        return {"fit": ["", f"# batch_size={value} changes the recipe: re-tune the learning rate.",
                        f"model.fit(x_train, y_train, batch_size={value})"]}


BATCH_SIZE = BatchSize(
    name="batch_size",
    description="Samples per training step; changes the recipe (re-tune the learning rate).",
    values="integer >= 1",
    default=32,
    scope="data",
    stage="data",
    parse=lambda raw: as_int("batch_size", raw, 1),
    changes_numerics=True,
)
