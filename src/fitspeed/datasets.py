"""Data sources for a trial, and turning them into `fit()` input.

Runs in the trial child only. Arrays arrive channels_last (as keras.datasets
gives them) and are transposed here when the process's image data format is
channels_first; this module owns that layout change. A user's tf.data.Dataset
or PyDataset must already match the model (its loader can read
`keras.config.image_data_format()`).
"""

from __future__ import annotations

import inspect
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras
import numpy as np

from fitspeed.errors import DataError
from fitspeed.models import import_callable
from fitspeed.workloads import IMAGE_PREFIXES

SYNTHETIC_SAMPLES = 2048
MAX_ARRAY_BYTES = 1 << 30  # the cycled fit() arrays stay under 1 GiB


@dataclass
class Data:
    """What a source gave: arrays, a tf.data.Dataset or a PyDataset."""

    kind: str  # "arrays", "dataset", "pydataset", or "source" (an images: folder, before pipeline.prepare)
    x: Any = None
    y: Any = None
    source: Any = None  # the dataset or PyDataset
    batch_size: int | None = None  # fixed by a dataset; None for arrays
    autotune: bool = True  # arrays: False feeds Keras's array pipeline with autotune off
    origin: str | None = None  # "images" for the pipeline fitspeed built from a folder

    @property
    def sample_bytes(self) -> int:
        if self.kind != "arrays":
            return 0
        return int(self.x[0].nbytes + np.asarray(self.y[0]).nbytes)


def synthetic(
    shape: tuple[int, ...], num_classes: int, seed: int, samples: int = SYNTHETIC_SAMPLES
) -> tuple[np.ndarray, np.ndarray]:
    """Learnable random data: each class is a fixed random pattern plus noise.

    The same seed gives the same arrays, so two trials train on identical data.
    """
    rng = np.random.default_rng(seed)
    prototypes = rng.normal(size=(num_classes, *shape)).astype("float32")
    y = rng.integers(0, num_classes, size=samples)
    noise = rng.normal(scale=1.5, size=(samples, *shape)).astype("float32")
    return prototypes[y] + noise, y.astype("int32")


def _keras_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    loader = getattr(keras.datasets, name)
    try:
        (x, y), _ = loader.load_data()
    except Exception as error:  # the loaders raise bare Exception on a failed fetch
        raise DataError(
            f"Could not load {name} through keras.datasets.{name}.load_data(): {error}. "
            "It downloads on first use, and this machine may not reach the internet. "
            "Use --data synthetic, or save the arrays with numpy.savez(path, x=x, y=y) "
            "and pass --data npz:PATH."
        ) from None
    x = x.astype("float32") / 255.0
    if x.ndim == 3:
        x = x[..., None]
    return x, y.reshape(len(y), -1)[:, 0].astype("int32")


def _npz(path: str) -> tuple[np.ndarray, np.ndarray]:
    file = Path(path)
    if not file.is_file():
        raise DataError(
            f"Expected an .npz file with arrays `x` and `y`. Received: {path!r}, which does "
            "not exist. Check the path, or save one with numpy.savez(path, x=x, y=y)."
        )
    try:
        with np.load(file, allow_pickle=False) as archive:
            missing = {"x", "y"} - set(archive.files)
            if missing:
                raise DataError(
                    f"Expected {path!r} to hold arrays `x` and `y`. It holds: "
                    f"{', '.join(archive.files) or 'nothing'}. Save it with "
                    "numpy.savez(path, x=x, y=y)."
                )
            x, y = archive["x"], archive["y"]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise DataError(
            f"Could not read {path!r} as an .npz file: {error}. The file may be corrupt or "
            "not an .npz; write it again with numpy.savez(path, x=x, y=y)."
        ) from None
    if len(x) != len(y) or len(x) == 0:
        raise DataError(
            f"Expected `x` and `y` in {path!r} to have the same, non-zero length. "
            f"Received: {len(x)} and {len(y)}. Save matching arrays."
        )
    return x, y


def _user(ref: str, batch_size: int) -> Data:
    function = import_callable(ref, "a data function")
    kwargs = {}
    if "batch_size" in inspect.signature(function).parameters:
        kwargs["batch_size"] = batch_size
    result = function(**kwargs)
    if isinstance(result, keras.utils.PyDataset):
        return Data("pydataset", source=result, batch_size=batch_size_of(result[0]))
    if type(result).__module__.startswith("tensorflow") and hasattr(result, "element_spec"):
        return Data("dataset", source=result, batch_size=dataset_batch_size(result, ref))
    if isinstance(result, dict) and {"x", "y"} <= set(result):
        result = (result["x"], result["y"])
    if isinstance(result, (tuple, list)) and len(result) == 2:
        x, y = (np.asarray(part) for part in result)
        if len(x) != len(y) or len(x) == 0:
            raise DataError(
                f"Expected {ref!r} to return x and y of the same, non-zero length. "
                f"Received: {len(x)} and {len(y)}."
            )
        return Data("arrays", x=x, y=y)
    raise DataError(
        f"Expected {ref!r} to return (x, y) arrays, a tf.data.Dataset or a "
        f"keras.utils.PyDataset. Received: {type(result).__name__}."
    )


def batch_size_of(batch: Any) -> int:
    inputs = batch[0] if isinstance(batch, (tuple, list)) else batch
    return int(np.shape(inputs)[0])


def dataset_batch_size(dataset: Any, ref: str) -> int:
    for batch in dataset.take(1):
        return batch_size_of(batch)
    raise DataError(f"Expected {ref!r} to return a dataset with data. It is empty.")


def load(ref: str, input_shape: tuple[int, ...], num_classes: int, batch_size: int, seed: int) -> Data:
    """Load the data a trial names. `input_shape` is channels_last."""
    if ref == "synthetic":
        x, y = synthetic(input_shape, num_classes, seed, max(SYNTHETIC_SAMPLES, batch_size))
        return Data("arrays", x=x, y=y)
    if ref in ("cifar10", "fashion_mnist"):
        x, y = _keras_dataset(ref)
        return Data("arrays", x=x, y=y)
    if ref.startswith("npz:"):
        x, y = _npz(ref[4:])
        return Data("arrays", x=x, y=y)
    if ref.startswith(IMAGE_PREFIXES):
        from fitspeed.pipeline import list_images

        kind, _, folder = ref.partition(":")
        if len(input_shape) != 3:
            raise DataError(
                f"Expected a model that takes images (height, width, channels) for {ref!r}. "
                f"Received a model whose input shape is {_shape_text(input_shape)}. Use an image model such as tiny or cnn-low."
            )
        size = (int(input_shape[0]), int(input_shape[1]))
        source = list_images(folder, size, kind == "images+augment", num_classes)
        return Data("source", source=source, batch_size=batch_size)
    if ref == "pyloader":
        from fitspeed.loaders import HeavyLoader

        return Data("pydataset", source=HeavyLoader(input_shape, num_classes, batch_size, seed),
                    batch_size=batch_size)
    return _user(ref, batch_size)


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
    if data.kind == "arrays":
        x = data.x
        if (
            x.ndim == 4
            and keras.config.image_data_format() == "channels_first"
            and not _fits(x.shape[1:], expected)
            and _fits((x.shape[3], x.shape[1], x.shape[2]), expected)
        ):
            x = np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2)))
        data = Data("arrays", x=x, y=data.y, autotune=data.autotune)
        received = tuple(x.shape[1:])
    elif data.kind == "dataset":
        spec = data.source.element_spec
        inputs = spec[0] if isinstance(spec, tuple) else spec
        received = tuple(inputs.shape[1:])
    else:
        batch = data.source[0]
        received = tuple(np.shape(batch[0] if isinstance(batch, (tuple, list)) else batch)[1:])
    if not _fits(received, expected):
        raise DataError(
            f"The data {ref!r} does not fit the model: the model expects inputs of shape "
            f"{_shape_text(expected)} per sample, the data gives {_shape_text(received)}. "
            "Pass --data with that shape, or a model built for this data."
        )
    return data


def _fits(received: tuple[Any, ...], expected: tuple[Any, ...]) -> bool:
    return len(received) == len(expected) and all(
        e is None or r is None or int(r) == int(e) for r, e in zip(received, expected)
    )


def _shape_text(shape: tuple[Any, ...]) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


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
    batches; datasets are repeated so they never run out mid-window.
    """
    if data.kind == "arrays":
        total = steps * batch_size
        index = np.arange(total) % len(data.x)
        if not data.autotune:
            from fitspeed.pipeline import keras_array_dataset

            return {"x": keras_array_dataset(data.x[index], data.y[index], batch_size, autotune=False)}
        return {"x": data.x[index], "y": data.y[index], "batch_size": batch_size}
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
