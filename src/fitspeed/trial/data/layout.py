"""The layout of image data, and the check that data fits the model.

Runs in the trial child only. Arrays arrive channels_last (as keras.datasets
gives them) and are transposed here when the process's image data format is
channels_first; this module owns that layout change. A user's tf.data.Dataset
or PyDataset must already match the model (its loader can read
`keras.config.image_data_format()`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import keras
import numpy as np

from fitspeed.core.errors import DataError
from fitspeed.trial.data.kinds import Data
from fitspeed.trial.data.sources import shape_text


def model_input_shape(model: keras.Model) -> tuple[int | None, ...]:
    shape = model.input_shape
    if isinstance(shape, list):
        shape = shape[0]
    return tuple(shape[1:])


def channels_last_shape(model: keras.Model) -> tuple[int, ...] | None:
    """The model's input shape as channels_last, or None if not fully known."""
    shape = model_input_shape(model)
    if any(dim is None for dim in shape):
        return None
    if len(shape) == 3 and keras.config.image_data_format() == "channels_first":
        shape = (shape[1], shape[2], shape[0])
    return tuple(int(dim) for dim in shape)  # type: ignore[arg-type]


def fit_layout(data: Data, model: keras.Model, ref: str) -> Data:
    """Transpose image arrays for channels_first and check the data fits the model."""
    expected = model_input_shape(model)
    if data.x_val is not None:  # held-out arrays, whatever feeds training
        data = dataclasses.replace(data, x_val=_to_model(data.x_val, expected))
    data = data.laid_out(lambda x: _to_model(x, expected))
    received = data.sample_shape()
    if not _fits(received, expected):
        raise DataError(
            f"The data {ref!r} does not fit the model: the model expects inputs of shape "
            f"{shape_text(expected)} per sample, the data gives {shape_text(received)}. "
            "Pass --data with that shape, or a model built for this data."
        )
    return data


def _to_model(x: np.ndarray, expected: tuple[Any, ...]) -> np.ndarray:
    """Image arrays transposed to channels_first where the process's format and the model want it."""
    if (
        x.ndim == 4
        and keras.config.image_data_format() == "channels_first"
        and not _fits(x.shape[1:], expected)
        and _fits((x.shape[3], x.shape[1], x.shape[2]), expected)
    ):
        return np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2)))
    return x


def _fits(received: tuple[Any, ...], expected: tuple[Any, ...]) -> bool:
    return len(received) == len(expected) and all(
        e is None or r is None or int(r) == int(e) for r, e in zip(received, expected)
    )
