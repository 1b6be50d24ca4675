"""The knobs: every setting fitspeed can turn, with Keras's own names, one module per knob or family.

Each module makes its knobs from `fitspeed.core.knobs.base.Knob` (or a class of
its own that overrides the hooks there: where the knob applies, what a search
tries, the environment it needs), and `KNOBS` below is the registry: the one
line a new knob adds outside its own module. `fitspeed knobs` prints it, in
this order.

`KnobValues`, one field per knob with its default, is made from `KNOBS`, and
`fitspeed.core.config.TrialConfig` is `KnobValues` validated, so a knob is
declared once. Which backends cannot turn a knob, and why, is
`fitspeed.core.backends`'s unless the knob says otherwise (`Knob.refuses`).

This package is imported by the parent process, so it never imports keras.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fitspeed.core.backends import backend_of
from fitspeed.core.errors import KnobError
from fitspeed.core.knobs import (allocator, backend, batch, determinism, devices, execution, layout, onednn,
                                 precision, processes, pydataset, remat, tf_data, threads,
                                 xla_auto_clustering)
from fitspeed.core.knobs.base import BACKENDS, ENVIRONMENT_STEPS, Knob, Offer, Scope, Stage, Where

__all__ = ["BACKENDS", "KNOBS", "KNOBS_BY_NAME", "Knob", "KnobValues", "Offer", "Scope", "Stage", "Where",
           "check_backend_installed", "get_knob", "knob_environment", "parse_assignment"]

KNOBS: tuple[Knob, ...] = (
    backend.BACKEND,
    batch.BATCH_SIZE,
    devices.DEVICES,
    processes.PROCESSES,
    execution.STEPS_PER_EXECUTION,
    execution.JIT_COMPILE,
    precision.PRECISION,
    precision.AUTO_SCALE_LOSS,
    layout.DATA_FORMAT,
    remat.REMAT,
    determinism.DETERMINISTIC,
    onednn.ONEDNN,
    threads.INTRA_OP_THREADS,
    threads.INTER_OP_THREADS,
    tf_data.PREFETCH,
    tf_data.MAP_PARALLELISM,
    tf_data.CACHE,
    tf_data.VECTORIZE,
    tf_data.SHUFFLE_BUFFER,
    tf_data.INTERLEAVE,
    tf_data.DATA_DETERMINISTIC,
    tf_data.DATA_AUTOTUNE,
    pydataset.WORKERS,
    pydataset.USE_MULTIPROCESSING,
    pydataset.MAX_QUEUE_SIZE,
    xla_auto_clustering.XLA_AUTO_CLUSTERING,
    allocator.ALLOCATOR,
)

KNOBS_BY_NAME: Mapping[str, Knob] = {item.name: item for item in KNOBS}

if TYPE_CHECKING:
    class KnobValues:
        """The typed view of the knob table that mypy reads (the class itself is made from `KNOBS` below).

        Code that reads a knob as an attribute finds its type here; a knob read
        only by its own module, through `getattr`, needs no line.
        """

        backend: str
        batch_size: int
        devices: int
        processes: int
        steps_per_execution: int
        jit_compile: bool | str
        precision: str
        auto_scale_loss: bool
        data_format: str
        remat: str
        deterministic: bool
        onednn: bool | str
        intra_op_threads: int
        inter_op_threads: int
        prefetch: int | str
        map_parallelism: int | str
        cache: str
        vectorize: bool
        shuffle_buffer: int
        interleave: int
        data_deterministic: bool
        data_autotune: bool
        workers: int
        use_multiprocessing: bool | str
        max_queue_size: int

        def __init__(self, **values: Any) -> None: ...
else:
    KnobValues = dataclasses.make_dataclass(
        "KnobValues", [(item.name, Any, dataclasses.field(default=item.default)) for item in KNOBS],
        frozen=True,
        namespace={"__module__": __name__, "__doc__": "The knob table: one field per knob of `KNOBS`, in its order, with its default "
                              "(Keras's own)."})


def knob_environment(config: Any, environ: Mapping[str, str], at_start: bool = False, exported: bool = False,
                     trial: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` with what each knob's `environment` hook adds for `config` (a `KnobValues`), step by step
    (`ENVIRONMENT_STEPS`), each step's knobs in the registry's order; `trial`'s variables (no knob's) at its step.

    `at_start`: only the knobs whose variables the loader reads when the
    process starts (`Knob.at_start`). `exported`: only those best.json
    exports (`Knob.exported`). Each hook sees what the knobs before it set,
    so two knobs that add to one variable keep both.

    >>> knob_environment(KnobValues(xla_auto_clustering=True), {"A": "1"})
    {'A': '1', 'KERAS_BACKEND': 'tensorflow', 'TF_XLA_FLAGS': '--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit'}
    >>> knob_environment(KnobValues(xla_auto_clustering=True), {}, exported=True)
    {'TF_XLA_FLAGS': '--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit'}
    >>> knob_environment(KnobValues(xla_auto_clustering=True), {}, at_start=True)
    {}
    """
    env = dict(environ)
    for step in ENVIRONMENT_STEPS:
        if step == "trial":
            env.update(trial or {})
        for knob in KNOBS:
            if knob.environment_step == step and (knob.at_start or not at_start) and (knob.exported or not exported):
                env.update(knob.environment(getattr(config, knob.name), env, config))
    return env


def get_knob(name: str) -> Knob:
    """The knob called `name`, or a KnobError that lists the known ones."""
    try:
        return KNOBS_BY_NAME[name]
    except KeyError:
        raise KnobError(
            f"Unknown knob {name!r}. Expected one of: {', '.join(KNOBS_BY_NAME)}. "
            "Run `fitspeed knobs` to see them all."
        ) from None


def check_backend_installed(backend: str) -> None:
    """Refuse a backend whose package is not installed, without importing it."""
    if not backend_of(backend).is_installed():
        extra = backend_of(backend).extra
        raise KnobError(
            f"The {backend} backend is not installed in this environment. Received: "
            f"backend={backend}. Install it with pip install 'fitspeed{extra}', "
            "or choose another backend."
        )


def parse_assignment(text: str) -> tuple[str, Any]:
    """Split and parse one `name=value` from the command line.

    >>> parse_assignment("steps_per_execution=32")
    ('steps_per_execution', 32)
    """
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise KnobError(
            f"Expected a knob setting of the form name=value. Received: {text!r}. "
            "Use for example --set steps_per_execution=32."
        )
    return name, get_knob(name).parse(raw)
