"""`fit()` arguments that cover exactly the steps a trial asks for.

Runs in the trial child only. Arrays are cycled to whole batches, datasets
repeated, and finite PyDatasets cycled, so a timed window never runs out of
data mid-epoch.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from fitspeed.trial.data.sources import Data

MAX_ARRAY_BYTES = 1 << 30  # the cycled fit() arrays stay under 1 GiB


class _Cycle(keras.utils.PyDataset):
    """A finite PyDataset, repeated forever, keeping its worker settings and its epoch-end hook."""

    def __init__(self, inner: keras.utils.PyDataset) -> None:
        super().__init__(
            workers=inner.workers,
            use_multiprocessing=inner.use_multiprocessing,
            max_queue_size=inner.max_queue_size,
        )
        self.inner = inner
        self.length = len(inner)

    @property
    def num_batches(self) -> int | None:
        return None

    def __getitem__(self, index: int) -> Any:
        return self.inner[index % self.length]

    def on_epoch_end(self) -> None:  # as fit() would for the user's own PyDataset (reshuffling, say)
        self.inner.on_epoch_end()


def fit_input(data: Data, steps: int, batch_size: int) -> dict[str, Any]:
    """Keyword arguments for `fit()` that cover exactly `steps` batches per epoch.

    Arrays are cycled to `steps * batch_size` samples so every epoch is whole
    batches, with the script's sample weights cycled beside them and its
    shuffle kept; datasets are repeated so they never run out mid-window.
    """
    if data.kind == "arrays":
        x, y, weights = data.take(np.arange(steps * batch_size) % data.samples)
        if not data.autotune:
            from fitspeed.trial.data.pipeline import (
                keras_array_dataset,  # imports tensorflow
            )

            return {"x": keras_array_dataset(x, y, batch_size, autotune=False, shuffle=data.shuffle,
                                             sample_weight=weights)}
        own = {} if weights is None else {"sample_weight": weights}
        return {"x": x, "y": y, "batch_size": batch_size, "shuffle": data.shuffle, **own}
    if data.kind == "dataset":
        import tensorflow as tf

        dataset = data.source
        if dataset.cardinality() != tf.data.INFINITE_CARDINALITY:
            dataset = dataset.repeat()
        return {"x": dataset}
    source = data.source
    if source.num_batches is not None:
        source = _Cycle(source)
    return {"x": source}


def max_steps(data: Data, batch_size: int) -> int:
    """The most steps one epoch of cycled arrays may hold within MAX_ARRAY_BYTES."""
    if data.kind != "arrays":
        return 1_000_000
    return max(1, MAX_ARRAY_BYTES // max(1, data.sample_bytes * batch_size))
