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

from fitspeed.core.knobs.base import Knob, Process, as_int

KERAS_ISSUE = "keras-team/keras#20585"
TENSORFLOW_REASON = (
    "TensorFlow's multi-process route, tf.distribute.MultiWorkerMirroredStrategy, fails inside Keras 3's fit() "
    f"(\"Attempt to convert a value (PerReplica...) to a Tensor\", {KERAS_ISSUE}, open); "
    "keras.distribution's route runs on JAX: --set backend=jax"
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
