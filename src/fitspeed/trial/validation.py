"""Accuracy on held-out data, and a digest of the weights, after a trial's training.

Runs in the trial child only. The held-out arrays come with the data
(`fitspeed.trial.data.sources.load` with `holdout`): a data set's own test
split, or a share kept out of training. Accuracy is the share of held-out
samples whose highest-scoring class is the label, read from `predict()`, so
it holds for any classifier whatever metrics it was compiled with.

The digest (SHA-256 over every weight's bytes, in order) tells whether two
runs of one configuration from one seed ended bit-identical (article 003).
"""

from __future__ import annotations

import hashlib
from typing import Any

import keras
import numpy as np

from fitspeed.trial.data.sources import Data

PREDICT_BATCH = 256


def weights_digest(model: keras.Model) -> str:
    """SHA-256 of the model's weights, in order, as raw bytes."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        array = np.ascontiguousarray(weight)
        digest.update(str(array.dtype).encode() + str(array.shape).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def accuracy(model: keras.Model, x: Any, y: Any) -> float:
    """The share of samples in `x` whose top class is `y`."""
    scores = np.asarray(model.predict(x, batch_size=PREDICT_BATCH, verbose=0))
    labels = np.asarray(y).reshape(len(scores), -1)[:, 0]
    return float(np.mean(np.argmax(scores.reshape(len(scores), -1), axis=-1) == labels))


def held_out_metrics(model: keras.Model, data: Data) -> tuple[dict[str, Any], list[str]]:
    """Metrics to add to the record (accuracy where there is held-out data, the digest always), and notes."""
    metrics: dict[str, Any] = {"weights_sha256": weights_digest(model)}
    if data.x_val is None:
        note = ("no held-out data: validation needs arrays, an images: folder or pyloader (a tf.data.Dataset "
                "or PyDataset of your own brings no test split)")
        return metrics, [note]
    metrics["val_accuracy"] = accuracy(model, data.x_val, data.y_val)
    metrics["val_samples"] = len(data.x_val)
    return metrics, []
