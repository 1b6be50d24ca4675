"""The `devices` knob: data parallel over N devices, one strategy for the whole process.

Who does what, by backend:

| backend    | before import (`import_environment`)   | after import (`place`)                                 |
|------------|----------------------------------------|--------------------------------------------------------|
| tensorflow | nothing                                | the first N GPUs, or with none the CPU split into N    |
|            |                                        | logical devices (`tf.config.set_logical_device_`       |
|            |                                        | `configuration`); a `tf.distribute.MirroredStrategy`   |
|            |                                        | over them made the process's strategy (`tf.distribute.` |
|            |                                        | `experimental_set_strategy`), so every model built and |
|            |                                        | compiled afterwards is in its scope                    |
| jax        | `XLA_FLAGS=--xla_force_host_platform_` | `keras.distribution.set_distribution(DataParallel(     |
|            | `device_count=N` (N host devices)      | devices=the first N))`                                 |
| torch      | refused by the knob (`core/knobs.py`)  |                                                        |

The global batch is the per-device batch (`batch_size`) times the devices used,
as in `Placement.global_batch`. Where the host has fewer accelerators than asked,
the devices that exist are used and `Placement.note` says so. On a host without
accelerators the CPU is split into as many logical devices as asked: they share
its cores, which is what a CPU measurement of scaling measures.

Runs in the trial child (and in a user's script through the hook), called by
the devices knob (`Knob.apply`, through `fitspeed.trial.apply`'s `Process`);
imports the framework only inside functions, after `apply.before_import` has run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fitspeed.machine.environment import Devices
from fitspeed.machine.frameworks import Framework


@dataclass(frozen=True)
class Placement:
    """Where a trial's training runs: devices asked for and used, and how.

    `available` counts the accelerators the backend sees, or is None on a host
    without any (where the CPU is split into as many logical devices as asked).
    """

    asked: int
    used: int
    kind: str  # "GPU", "TPU", "CPU (logical devices)", "CPU"
    available: int | None
    strategy: str | None  # "tf.distribute.MirroredStrategy", "keras.distribution.DataParallel", or None

    def global_batch(self, per_device: int) -> int:
        """The batch one step trains on: per-device batch × devices used.

        >>> Placement(2, 2, "CPU (logical devices)", None, "keras.distribution.DataParallel").global_batch(32)
        64
        """
        return per_device * self.used

    def note(self) -> str | None:
        """A sentence when fewer devices were used than asked, else None.

        >>> print(Placement(4, 1, "GPU", 1, None).note())
        devices=4 was asked, but this host has 1 GPU: the trial ran on 1.
        """
        if self.used >= self.asked:
            return None
        return f"devices={self.asked} was asked, but this host has {self.available} {self.kind}: the trial ran on {self.used}."

    def to_dict(self) -> Devices:
        return {"asked": self.asked, "used": self.used, "kind": self.kind, "available": self.available,
                "strategy": self.strategy}


def place(framework: Framework, asked: int) -> Placement:
    """Set the process's distribution over `asked` devices of `framework`'s backend; say where training runs.

    Must run before the backend has placed anything on a device (TensorFlow
    refuses a new logical device configuration after that).
    """
    available = len(framework.accelerators()) or None
    place = _PLACE.get(framework.data_parallel)
    if place is None:  # no data parallel in Keras for this backend: the knob refused devices > 1
        return Placement(asked, 1, "GPU" if available else "CPU", available, None)
    return place(asked, available)


def _tensorflow(asked: int, available: int | None) -> Placement:
    import tensorflow as tf

    if asked == 1:
        return Placement(1, 1, "GPU" if available else "CPU", available, None)
    if available:
        used = min(asked, available)
        names = [device.name for device in tf.config.list_logical_devices("GPU")][:used]
        kind = "GPU"
    else:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * asked)
        names = [device.name for device in tf.config.list_logical_devices("CPU")][:asked]
        used, kind = len(names), "CPU (logical devices)"
    if used < 2:
        return Placement(asked, used, kind, available, None)
    tf.distribute.experimental_set_strategy(tf.distribute.MirroredStrategy(devices=names))
    return Placement(asked, used, kind, available, "tf.distribute.MirroredStrategy")


def _jax(asked: int, available: int | None) -> Placement:
    import keras

    devices = keras.distribution.list_devices()  # the default platform's: GPUs or TPUs where there are, else CPUs
    kind = "CPU (logical devices)" if available is None else devices[0].split(":")[0].upper()
    used = min(asked, len(devices))
    if asked == 1:
        return Placement(1, 1, "CPU" if available is None else kind, available, None)
    if used < 2:
        return Placement(asked, used, kind, available, None)
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices[:used]))
    return Placement(asked, used, kind, available, "keras.distribution.DataParallel")


_PLACE: dict[str | None, Callable[[int, int | None], Placement]] = {
    "tf.distribute.MirroredStrategy": _tensorflow,  # by the backend's `data_parallel`
    "keras.distribution.DataParallel": _jax,
}


def replicas(model: Any, placement: Placement) -> int:
    """How many devices a built model trains on: `placement.used` if the strategy made its variables, else 1.

    TensorFlow mirrors only the variables made inside the strategy's scope (a
    model built in another thread, where the process's strategy is not current,
    has plain ones); JAX's distribution is process-wide, set before any model.
    """
    if placement.strategy != "tf.distribute.MirroredStrategy":
        return placement.used
    import tensorflow as tf

    strategy = tf.distribute.get_strategy()
    made_here = all(strategy.extended.variable_created_in_scope(getattr(v, "value", v)) for v in model.weights)
    return placement.used if made_here else 1
