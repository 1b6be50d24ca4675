"""The trial child's input measurements for `fitspeed doctor`: modes input, compute, epochs.

Runs in the trial child only, after `fitspeed.trial.protocol` has applied the knobs,
built the model and prepared the data (`fitspeed.trial.data.kinds.Data.prepare`):

- "input": the pipeline alone. The same iterator `fit()` would read (Keras's
  own data adapter), pulled with no model: a warm-up of two batches, then
  `repeats` windows of `steps` batches. For a PyDataset it also profiles
  `__getitem__` with cProfile in this process (article 002's method).
- "compute": training alone. `in_memory` copies batches from the pipeline into
  memory once; the trial then runs the usual timing protocol on them.
- "epochs": the time between epochs and at the end of fit(). One fit() of
  `repeats` epochs, with a callback that reads the clock at every batch and
  epoch edge: an epoch boundary runs from the last batch's end to the next
  epoch's first batch's begin (no training step inside it), and the end runs
  from the last batch's end to fit() returning.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import keras
import numpy as np

from fitspeed.core.backends import backend_of
from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record
from fitspeed.machine.environment import Environment
from fitspeed.trial import keras_private
from fitspeed.trial.data.kinds import Data, DatasetData

IN_MEMORY_BATCHES = 16


def _iterate(data: Data, batch: int, steps: int) -> tuple[Iterator[Any], Any]:
    """The batches fit() would read for `steps` steps, through Keras's own data adapter."""
    args = data.fit_args(steps, batch)
    adapter = keras_private.get_data_adapter()(
        args["x"], args.get("y"), batch_size=args.get("batch_size"), steps_per_epoch=steps, shuffle=True,
    )
    adapter.on_epoch_begin()
    if backend_of(keras.backend.backend()).feeds_arrays_through_tf_data:
        return iter(adapter.get_tf_dataset()), adapter
    return iter(adapter.get_numpy_iterator()), adapter


def _pull(iterator: Iterator[Any], count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        next(iterator)
    return time.perf_counter() - started


def input_rate(spec: TrialSpec, data: Data, batch: int, env: Environment, **fields: Any) -> TrialRecord:
    """Mode "input": batches per second of the pipeline alone; `fields` go into the record (a script's `script`)."""
    from fitspeed.core.stats import describe

    started = time.perf_counter()
    warm_iter, warm_adapter = _iterate(data, batch, 2)
    first_s = _pull(warm_iter, 1)
    steady_s = _pull(warm_iter, 1)
    warm_adapter.on_epoch_end()
    del warm_iter
    steps = spec.steps or max(8, math.ceil(spec.target_seconds / max(steady_s, 1e-4)))
    steps = min(steps, data.max_steps(batch) // max(1, spec.repeats))
    iterator, adapter = _iterate(data, batch, steps * spec.repeats)
    windows = [_pull(iterator, steps) for _ in range(spec.repeats)]
    adapter.on_epoch_end()
    speed = describe([steps * batch / w for w in windows])
    metrics: dict[str, Any] = {
        "samples_per_s": speed.to_dict(),
        "batches_per_s": speed.median / batch,
        "ms_per_batch": 1000 * batch / speed.median,
        "ms_per_step": 1000 * batch / speed.median,
        "steps_per_repeat": steps,
        "batch_size": batch,
        "window_s": windows,
        "first_batch_s": first_s,
        "total_s": time.perf_counter() - started,
        "data_kind": data.label,
        **data.input_details(),
    }
    return new_record(spec, Status.OK, environment=env, metrics=metrics, **fields)


def in_memory(data: Data, batch: int, count: int = IN_MEMORY_BATCHES) -> DatasetData:
    """Mode "compute": `count` batches read from the pipeline once, then served from memory."""
    import tensorflow as tf

    iterator, adapter = _iterate(data, batch, count)
    batches = [next(iterator) for _ in range(count)]
    adapter.on_epoch_end()
    xs = np.stack([np.asarray(b[0]) for b in batches])
    ys = np.stack([np.asarray(b[1]) for b in batches])
    ds = tf.data.Dataset.from_tensor_slices((xs, ys)).cache().repeat().prefetch(1)
    return DatasetData(source=ds, batch_size=batch, origin="memory")


class EpochClock(keras.callbacks.Callback):
    """Reads the clock at every batch and epoch edge (synchronously: not async_safe)."""

    def __init__(self) -> None:
        super().__init__()
        self.batch_begin: dict[int, list[float]] = {}
        self.batch_end: dict[int, list[float]] = {}
        self.epoch = 0
        self.losses: list[float] = []

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.epoch = epoch

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self.batch_begin.setdefault(self.epoch, []).append(time.perf_counter())

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.batch_end.setdefault(self.epoch, []).append(time.perf_counter())

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None:
            self.losses.append(float(loss))


def stall_times(clock: EpochClock, returned: float) -> dict[str, Any]:
    """Epoch windows, boundary gaps and the end-of-fit wait from the clock's readings."""
    epochs = sorted(clock.batch_begin)
    epoch_s = [clock.batch_end[e][-1] - clock.batch_begin[e][0] for e in epochs]
    boundaries = [clock.batch_begin[b][0] - clock.batch_end[a][-1] for a, b in zip(epochs, epochs[1:])]
    end_s = returned - clock.batch_end[epochs[-1]][-1]
    steps = [len(clock.batch_end[e]) for e in epochs]
    step_s = float(np.median([w / max(1, n - 1) for w, n in zip(epoch_s, steps)]))
    return {"epoch_s": epoch_s, "boundary_s": boundaries, "end_s": end_s, "step_s": step_s,
            "lost_s": sum(boundaries) + end_s}


def epochs(spec: TrialSpec, model: Any, data: Data, batch: int, env: Environment, **fields: Any) -> TrialRecord:
    """Mode "epochs": one multi-epoch fit(), timed at its edges; `fields` go into the record."""
    n = model.steps_per_execution if hasattr(model, "steps_per_execution") else 1
    warm = EpochClock()
    t0 = time.perf_counter()
    model.fit(**data.fit_args(2 * n, batch), epochs=1, steps_per_epoch=2 * n,
              verbose=0, callbacks=[warm])
    ends = warm.batch_end[0]
    steady_s = (ends[-1] - ends[0]) / max(1, n) if len(ends) > 1 else time.perf_counter() - t0
    steps = spec.steps or n * max(1, math.ceil(spec.target_seconds / max(steady_s, 1e-6)))
    steps = min(steps, max(n, data.max_steps(batch) // n * n))
    clock = EpochClock()
    started = time.perf_counter()
    model.fit(**data.fit_args(steps, batch), epochs=spec.repeats, steps_per_epoch=steps,
              verbose=0, callbacks=[clock])
    returned = time.perf_counter()
    metrics = stall_times(clock, returned)
    fit_s = returned - started
    metrics.update({
        "fit_s": fit_s,
        "lost_share": metrics["lost_s"] / fit_s if fit_s else 0.0,
        "steps_per_repeat": steps,
        "batch_size": batch,
        "loss_curve": clock.losses,
        "samples_per_s": {"median": steps * spec.repeats * batch / fit_s},
        "data_kind": data.label,
    })
    return new_record(spec, Status.OK, environment=env, metrics=metrics, **fields)

