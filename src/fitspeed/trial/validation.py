"""Loss and accuracy on held-out data, and a digest of the weights, after a trial's training.

Runs in the trial child only. The held-out arrays come with the data
(`fitspeed.trial.data.sources.load` with `holdout`): a data set's own test
split, or a share kept out of training. The loss is the compiled loss on them
(`evaluate()`). Accuracy is the share of held-out samples whose
highest-scoring class is the label, read from `predict()`, so it holds for any
classifier whatever metrics it was compiled with; labels that are not class
labels (floats, sequences) get no accuracy.

The digest (SHA-256 over every weight's bytes, in order) tells whether two
runs of one configuration from one seed ended bit-identical (article 003).
"""

from __future__ import annotations

import hashlib
from typing import Any

import keras
import numpy as np

from fitspeed.trial import distribute
from fitspeed.trial.data.kinds import Data

REPLICA_MULTIPLE = 8  # held-out samples are evaluated in a multiple of this
PREDICT_BATCH = 256


def weights_digest(model: keras.Model) -> str:
    """SHA-256 of the model's weights, in order, as raw bytes."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        array = np.ascontiguousarray(weight)
        digest.update(str(array.dtype).encode() + str(array.shape).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def class_labels(y: Any, classes: int) -> np.ndarray | None:
    """`y` as one class index per sample, or None where its labels are not class labels.

    >>> class_labels(np.array([[2], [0]]), 3).tolist(), class_labels(np.eye(3)[[1, 2]], 3).tolist()
    ([2, 0], [1, 2])
    >>> class_labels(np.array([0.3, 1.7]), 3) is None
    True
    """
    labels = np.asarray(y)
    if labels.ndim == 2 and labels.shape[1] == classes > 1 and np.all((labels == 0) | (labels == 1)):
        return np.argmax(labels, axis=-1)  # one-hot
    if labels.ndim > 2 or (labels.ndim == 2 and labels.shape[1] != 1):
        return None
    flat = labels.reshape(len(labels))
    if not np.issubdtype(flat.dtype, np.integer):
        if not (np.issubdtype(flat.dtype, np.floating) and np.all(flat == np.round(flat))):
            return None
    return flat.astype("int64")


def accuracy(model: keras.Model, x: Any, y: Any) -> float | None:
    """The share of samples in `x` whose top class is `y`; None where `y` holds no class labels."""
    scores = np.asarray(model.predict(x, batch_size=PREDICT_BATCH, verbose=0)).reshape(len(y), -1)
    labels = class_labels(y, scores.shape[-1])
    if labels is None:
        return None
    if scores.shape[-1] == 1:  # one sigmoid unit: class 1 above one half
        return float(np.mean((scores[:, 0] > 0.5) == labels))
    return float(np.mean(np.argmax(scores, axis=-1) == labels))


def held_out_loss(model: keras.Model, x: Any, y: Any) -> float:
    """The compiled loss on held-out arrays, from `evaluate()`."""
    result = model.evaluate(x, y, batch_size=PREDICT_BATCH, verbose=0, return_dict=True)
    return float(result["loss"])


def held_out_metrics(model: keras.Model, data: Data) -> tuple[dict[str, Any], list[str]]:
    """Metrics to add to the record (loss and accuracy where there is held-out data, the digest always), and notes."""
    metrics: dict[str, Any] = {"weights_sha256": weights_digest(model)}
    if data.x_val is None:
        note = ("no held-out data: validation needs arrays, an images: folder or pyloader (a tf.data.Dataset "
                "or PyDataset of your own brings no test split)")
        return metrics, [note]
    # a multiple of 8 samples: every batch then splits evenly over 1, 2, 4 or 8 data-parallel replicas
    # (an odd last batch over 2 replicas fails in TensorFlow's AddN: [114,...] != [113,...])
    count = len(data.x_val) // REPLICA_MULTIPLE * REPLICA_MULTIPLE or len(data.x_val)
    x, y = data.x_val[:count], data.y_val[:count]
    metrics["val_loss"] = held_out_loss(model, x, y)
    metrics["val_samples"] = count
    if distribute.process_count() > 1:  # predict()'s outputs span the processes' devices, in an order of steps
        return metrics, ["no held-out accuracy in a trial of several processes: predict()'s outputs span them; "
                         "the held-out loss is every process's share, from evaluate()"]
    metrics["val_accuracy"] = accuracy(model, x, y)
    return metrics, []
