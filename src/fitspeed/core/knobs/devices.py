"""The `devices` knob."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fitspeed.core.backends import backend_of
from fitspeed.core.knobs.base import Knob, Lines, Process, Recipe, as_int

XLA_HOST_DEVICES = "--xla_force_host_platform_device_count"


class Devices(Knob):
    """The process's distribution over the devices, after the thread pools and before any model is built.

    For JAX on a CPU the host is split into devices before import, too (`environment`).
    """

    step = "devices"
    environment_step = "devices"
    exported = False  # the snippet's devices lines say what to export, on a host without accelerators

    def environment(self, value: Any, environ: Mapping[str, str], config: Any) -> dict[str, str]:
        """JAX's N host devices, asked before import (`Backend.splits_cpu_before_import`): one count in XLA_FLAGS.

        >>> from fitspeed.core.config import TrialConfig
        >>> DEVICES.environment(4, {"XLA_FLAGS": "--xla_force_host_platform_device_count=8 --b"},
        ...                     TrialConfig(backend="jax"))
        {'XLA_FLAGS': '--b --xla_force_host_platform_device_count=4'}
        >>> DEVICES.environment(4, {}, TrialConfig()), DEVICES.environment(1, {}, TrialConfig(backend="jax"))
        ({}, {})
        """
        if value == 1 or not backend_of(config.backend).splits_cpu_before_import:
            return {}
        flags = re.sub(rf"{XLA_HOST_DEVICES}=\d+", "", environ.get("XLA_FLAGS", "")).strip()
        return {"XLA_FLAGS": f"{flags} {XLA_HOST_DEVICES}={value}".strip()}

    def apply(self, value: Any, process: Process) -> None:
        process.place(value)

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        """The backend's lines (`Backend.devices_lines`): process-wide ones, and those around the model's build; over
        several processes, the processes knob's one distribution spans every process's devices."""
        if value == 1 or recipe.config.processes > 1:
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
