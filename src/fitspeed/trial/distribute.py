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

import sys
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
    processes: int = 1  # the processes training together (the `processes` knob), each over `used` devices
    process: int = 0  # this one's index among them

    def feed(self, per_device: int) -> int:
        """The batch this process feeds fit() each step: per-device batch × its devices used.

        >>> Placement(2, 2, "CPU", None, "keras.distribution.DataParallel", processes=2).feed(32)
        64
        """
        return per_device * self.used

    def global_batch(self, per_device: int) -> int:
        """The batch one step trains on: per-device batch × devices used × processes.

        >>> Placement(2, 2, "CPU (logical devices)", None, "keras.distribution.DataParallel").global_batch(32)
        64
        >>> Placement(1, 1, "CPU", None, "keras.distribution.DataParallel", processes=2).global_batch(32)
        64
        """
        return self.feed(per_device) * self.processes

    def note(self) -> str | None:
        """A sentence when fewer devices were used than asked, else None.

        >>> print(Placement(4, 1, "GPU", 1, None).note())
        devices=4 was asked, but this host has 1 GPU: the trial ran on 1.
        """
        if self.used >= self.asked:
            return None
        return f"devices={self.asked} was asked, but this host has {self.available} {self.kind}: the trial ran on {self.used}."

    def to_dict(self) -> Devices:
        """As the record holds it; `processes` and `process` only where several processes trained."""
        out: Devices = {"asked": self.asked, "used": self.used, "kind": self.kind, "available": self.available,
                        "strategy": self.strategy}
        if self.processes > 1:
            out["processes"], out["process"] = self.processes, self.process
        return out


def join(processes: int) -> None:
    """Join this process to the others of a multi-process run (the `processes` knob), before anything is placed.

    `keras.distribution.initialize()` reads Keras's variables (the coordinator's
    address, the number of processes, this one's id: `fitspeed.measure.processes`
    sets them on one host, a launcher on a cluster), or JAX finds its cluster
    itself (SLURM's variables). One process joins nothing.
    """
    if processes == 1:
        return
    import keras

    keras.distribution.initialize()


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


def process_count() -> int:
    """How many processes train together: JAX's count once they joined (`join`), else 1."""
    if "jax" not in sys.modules:
        return 1
    import jax

    return int(jax.process_count())


def agree(value: float) -> float:
    """Process 0's `value`, in every process of a multi-process run (a collective: each must call it, in the same
    order); `value` itself in a run of one process.

    What a trial decides from its own clock (how many steps a window takes) must be one decision: a process that
    stepped once more than its peers would wait for them in a collective until XLA's rendezvous timeout.
    """
    if process_count() == 1:
        return value
    import numpy as np
    from jax.experimental import multihost_utils

    return float(multihost_utils.broadcast_one_to_all(np.float64(value)))


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
    import jax
    import keras

    if jax.process_count() > 1:
        return _jax_processes(asked, available)
    devices = keras.distribution.list_devices()  # the default platform's: GPUs or TPUs where there are, else CPUs
    kind = "CPU (logical devices)" if available is None else devices[0].split(":")[0].upper()
    used = min(asked, len(devices))
    if asked == 1:
        return Placement(1, 1, "CPU" if available is None else kind, available, None)
    if used < 2:
        return Placement(asked, used, kind, available, None)
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices[:used]))
    return Placement(asked, used, kind, available, "keras.distribution.DataParallel")


def _jax_processes(asked: int, available: int | None) -> Placement:
    """Every device of every joined process in one DataParallel; each process feeds its own share of the batch,
    so Keras does not shard the data again (`auto_shard_dataset=False`). A script run over processes (`fitspeed
    run --processes N`) feeds every process the whole of its data: the hook shards a tf.data.Dataset given to its
    fit(), each process a share of every batch (`script_hook.shard_batches`: Keras's own `auto_shard_dataset=True`
    leaves the processes waiting for each other on a partial last batch), and leaves NumPy arrays whole, which
    Keras refuses to shard."""
    import jax
    import keras

    local = jax.local_devices()
    used = min(asked, len(local))
    if available is None:
        kind = "CPU (logical devices)" if used > 1 else "CPU"
    else:
        kind = local[0].platform.upper()
    # the first `used` devices of every process (each process asked the same), as Keras names them
    devices = [f"{d.platform}:{d.id}" for p in range(jax.process_count())
               for d in sorted((d for d in jax.devices() if d.process_index == p), key=lambda d: d.id)[:used]]
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False))
    return Placement(asked, used, kind, available, "keras.distribution.DataParallel", processes=jax.process_count(),
                     process=jax.process_index())


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
