"""The `devices` knob."""

from __future__ import annotations

from typing import Any

from fitspeed.core.backends import backend_of
from fitspeed.core.knobs.base import Knob, Lines, Process, Recipe, as_int


class Devices(Knob):
    """The process's distribution over the devices, after the thread pools and before any model is built.

    For JAX on a CPU the host is split into devices before import, too (`core.import_environment`).
    """

    step = "devices"

    def apply(self, value: Any, process: Process) -> None:
        process.place(value)

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        """The backend's lines (`Backend.devices_lines`): process-wide ones, and those around the model's build."""
        if value == 1:
            return {}
        process, around = backend_of(recipe.config.backend).devices_lines(value)
        return {"devices": process, "strategy": around}


DEVICES = Devices(
    name="devices",
    description="Data parallel over N devices: tf.distribute.MirroredStrategy (TensorFlow) or "
    "keras.distribution.DataParallel (JAX); on a CPU, N logical devices. The global batch is "
    "batch_size × N: re-tune the learning rate.",
    values="integer >= 1",
    default=1,
    scope="process",
    stage="process",
    parse=lambda raw: as_int("devices", raw, 1),
    changes_numerics=True,
)
