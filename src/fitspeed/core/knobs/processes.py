"""The `processes` knob: data parallel over N processes, each over its own `devices`: Keras's multi-process runtime.

Each process calls `keras.distribution.initialize()` first thing after import
(the process stage, before the devices are placed), which reads Keras's
variables: `KERAS_DISTRIBUTION_JOB_ADDRESSES` (the coordinator, process 0),
`KERAS_DISTRIBUTION_NUM_PROCESSES` and `KERAS_DISTRIBUTION_PROCESS_ID`. On one
host fitspeed starts the N processes itself, with those set
(`fitspeed.measure.processes`); on a cluster the launcher sets them, or JAX
finds SLURM's. The devices of every process then form one
`keras.distribution.DataParallel`; each process feeds its own share of the
global batch, `batch_size` × its devices, so the global batch is
`batch_size` × devices × processes.

JAX is the one route: on CPUs its collectives run over gloo. TensorFlow's,
`tf.distribute.MultiWorkerMirroredStrategy`, fails inside Keras 3's `fit()`
(`TENSORFLOW_REASON`; tests/knobs/test_processes.py runs it on two local
workers and fails the day it trains). Keras has no multi-process route for
PyTorch.
"""

from __future__ import annotations

from typing import Any

from fitspeed.core.knobs.base import Knob, Lines, Process, Recipe, as_int

# Keras's variables, read by `keras.distribution.initialize()`: the coordinator (process 0's HOST:PORT), the number
# of processes and this one's id; `fitspeed.measure.processes` sets them, `fitspeed.trial.joining` checks them
ADDRESSES = "KERAS_DISTRIBUTION_JOB_ADDRESSES"
COUNT = "KERAS_DISTRIBUTION_NUM_PROCESSES"
INDEX = "KERAS_DISTRIBUTION_PROCESS_ID"
KERAS_ISSUE = "keras-team/keras#20585"
TENSORFLOW_REASON = (
    "TensorFlow's multi-process route, tf.distribute.MultiWorkerMirroredStrategy, fails inside Keras 3's fit() "
    f"(\"Attempt to convert a value (PerReplica...) to a Tensor\", {KERAS_ISSUE}, open); "
    "keras.distribution's route runs on JAX: --set backend=jax"
)
SEARCH_REASON = (
    "left out of a search over {n} processes, whose every trial starts {n}: it tries what each knob marks "
    "across_processes (steps_per_execution) and --batch-sizes; name this knob in --knobs to try it too"
)
TORCH_REASON = "Keras has no multi-process data parallel for PyTorch; keras.distribution's route runs on JAX: --set backend=jax"


class Processes(Knob):
    """The process joins the others (`Process.join`) before anything is placed on a device."""

    step = "processes"

    def refuses(self, backend: str) -> str | None:
        """
        >>> PROCESSES.refuses("jax") is None, KERAS_ISSUE in PROCESSES.refuses("tensorflow")
        (True, True)
        """
        return {"tensorflow": TENSORFLOW_REASON, "torch": TORCH_REASON}.get(backend)

    def apply(self, value: Any, process: Process) -> None:
        process.join(value)

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        """The join, first of the process-wide lines, and one DataParallel over every process's devices (the
        devices knob then writes none of its own).

        >>> from fitspeed.core.config import TrialConfig
        >>> lines = PROCESSES.snippet(2, Recipe(TrialConfig(backend="jax", processes=2, devices=4)))
        >>> print("\\n".join(lines["process"] + lines["devices"]))
        # Data parallel over 2 processes, each over its own 4 devices (keras.distribution on JAX): start this program
        # once per process, each with KERAS_DISTRIBUTION_JOB_ADDRESSES=HOST:PORT (process 0's host, a free port),
        # KERAS_DISTRIBUTION_NUM_PROCESSES=2 and its own KERAS_DISTRIBUTION_PROCESS_ID, 0 to 1.
        # On one host, `fitspeed run best.json -- python train.py` starts them.
        keras.distribution.initialize()
        # (A host without accelerators: export XLA_FLAGS=--xla_force_host_platform_device_count=4 first.)
        keras.distribution.set_distribution(keras.distribution.DataParallel(auto_shard_dataset=False))
        >>> PROCESSES.snippet(1, Recipe(TrialConfig()))
        {}
        """
        if value == 1:
            return {}
        devices = recipe.config.devices
        each = f"its own {devices} devices" if devices > 1 else "its own device"
        split = ([f"# (A host without accelerators: export XLA_FLAGS=--xla_force_host_platform_device_count={devices} "
                  "first.)"] if devices > 1 else [])
        return {
            "process": [f"# Data parallel over {value} processes, each over {each} (keras.distribution on JAX): start "
                        "this program",
                        "# once per process, each with KERAS_DISTRIBUTION_JOB_ADDRESSES=HOST:PORT (process 0's host, "
                        "a free port),",
                        f"# KERAS_DISTRIBUTION_NUM_PROCESSES={value} and its own KERAS_DISTRIBUTION_PROCESS_ID, 0 to "
                        f"{value - 1}.",
                        "# On one host, `fitspeed run best.json -- python train.py` starts them.",
                        "keras.distribution.initialize()"],
            # every device of every process; each process feeds its own share, as the trials did (the batch's lines)
            "devices": [*split, "keras.distribution.set_distribution(keras.distribution.DataParallel("
                        "auto_shard_dataset=False))"],
        }


PROCESSES = Processes(
    name="processes",
    description="Data parallel over N processes, each over its own devices: keras.distribution.initialize() "
    "(JAX); fitspeed starts the N on this host, or a launcher on each host sets KERAS_DISTRIBUTION_*. "
    "The global batch is batch_size × devices × N: re-tune the learning rate.",
    values="integer >= 1",
    default=1,
    scope="process",
    stage="process",
    parse=lambda raw: as_int("processes", raw, 1),
    changes_numerics=True,
)
