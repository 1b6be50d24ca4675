"""Data sources for a trial: loading what a `DataRef` names, as one of `fitspeed.trial.data.kinds`' classes.

Runs in the trial child only. The kind is chosen here, once, as the data is
loaded. Sources give arrays channels_last (as keras.datasets gives them);
`fitspeed.trial.data.layout` owns the transpose for channels_first.
"""

from __future__ import annotations

import dataclasses
import inspect
import zipfile
from pathlib import Path
from typing import Any

import keras
import numpy as np

from fitspeed.core.data_ref import DataRef, SourceKind
from fitspeed.core.errors import DataError
from fitspeed.trial.data.kinds import ArrayData, Data, ImageFolder, PyDatasetData, pipeline_of
from fitspeed.trial.models import import_callable

SYNTHETIC_SAMPLES = 2048
HOLDOUT_SHARE = 0.1  # held out of data that has no test split of its own, with validation


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


def _keras_dataset(name: str) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The data set's training and test splits, scaled to [0, 1], channels_last, labels flat."""
    loader = getattr(keras.datasets, name)
    try:
        train, test = loader.load_data()
    except Exception as error:  # the loaders raise bare Exception on a failed fetch
        raise DataError(
            f"Could not load {name} through keras.datasets.{name}.load_data(): {error}. "
            "It downloads on first use, and this machine may not reach the internet. "
            "Use --data synthetic, or save the arrays with numpy.savez(path, x=x, y=y) "
            "and pass --data npz:PATH."
        ) from None
    return _scaled(*train), _scaled(*test)


def _scaled(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype("float32") / 255.0
    if x.ndim == 3:
        x = x[..., None]
    return x, y.reshape(len(y), -1)[:, 0].astype("int32")


def _npz(path: str) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """`x` and `y`, and the test split `x_test` and `y_test` where the file has one."""
    file = Path(path)  # DataRef.parse checked that it exists
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
            test = (archive["x_test"], archive["y_test"]) if {"x_test", "y_test"} <= set(archive.files) else None
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
    return x, y, test


def _split(x: np.ndarray, y: np.ndarray, given: tuple[np.ndarray, np.ndarray] | None, holdout: bool) -> ArrayData:
    """Arrays, with a held-out split when asked: the given test split, else the last HOLDOUT_SHARE.

    >>> d = _split(np.zeros((20, 2)), np.arange(20), None, True)
    >>> len(d.x), d.y_val.tolist()
    (18, [18, 19])
    """
    if not holdout:
        return ArrayData(x=x, y=y)
    if given is not None:
        return ArrayData(x=x, y=y, x_val=given[0], y_val=given[1])
    cut = len(x) - max(1, int(len(x) * HOLDOUT_SHARE))
    if cut < 1:
        raise DataError(f"Expected at least 2 samples to hold some out for validation. Received: {len(x)}.")
    return ArrayData(x=x[:cut], y=y[:cut], x_val=x[cut:], y_val=y[cut:])


def _user(ref: str, batch_size: int, holdout: bool = False) -> Data:
    function = import_callable(ref, "a data function")
    kwargs = {}
    if "batch_size" in inspect.signature(function).parameters:
        kwargs["batch_size"] = batch_size
    result = function(**kwargs)
    found = pipeline_of(result, ref)
    if found is not None:
        return found
    given = None  # a held-out split the function chose (`fitspeed.api` ships validation_data so)
    if isinstance(result, dict) and {"x", "y"} <= set(result):
        if {"x_val", "y_val"} <= set(result):
            given = (np.asarray(result["x_val"]), np.asarray(result["y_val"]))
        result = (result["x"], result["y"])
    if isinstance(result, (tuple, list)) and len(result) == 2:
        x, y = (np.asarray(part) for part in result)
        if len(x) != len(y) or len(x) == 0:
            raise DataError(
                f"Expected {ref!r} to return x and y of the same, non-zero length. "
                f"Received: {len(x)} and {len(y)}."
            )
        return _split(x, y, given, holdout)
    raise DataError(
        f"Expected {ref!r} to return (x, y) arrays, a tf.data.Dataset or a "
        f"keras.utils.PyDataset. Received: {type(result).__name__}."
    )


def shape_text(shape: tuple[Any, ...]) -> str:
    """A per-sample shape as people read it, `?` for an unknown dimension.

    >>> shape_text((32, None, 3))
    '(32, ?, 3)'
    """
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def split_images(images: Any) -> tuple[Any, Any]:
    """Every tenth file of an images: folder held out: (training files, held-out files), both ImageSources."""
    keep = [i for i in range(len(images.paths)) if i % 10 != 9]
    held = [i for i in range(len(images.paths)) if i % 10 == 9]
    if not held or not keep:
        raise DataError(f"Expected at least 10 images to hold some out for validation. Received: {len(images.paths)}.")

    def subset(indices: list[int]) -> Any:
        return dataclasses.replace(images, paths=tuple(images.paths[i] for i in indices),
                                   labels=tuple(images.labels[i] for i in indices))

    return subset(keep), dataclasses.replace(subset(held), augment=False)


def load(ref: DataRef, input_shape: tuple[int, ...], num_classes: int, batch_size: int, seed: int,
         holdout: bool = False) -> Data:
    """Load the data `ref` names. `input_shape` is channels_last.

    With `holdout`, part of the data is kept out of training for validation: the
    data set's own test split where it has one (keras.datasets, an .npz with
    `x_test` and `y_test`), else the last HOLDOUT_SHARE of it; for an images:
    folder every tenth file, for `pyloader` batches past its epoch.
    """
    if ref.kind == SourceKind.SYNTHETIC:
        samples = max(SYNTHETIC_SAMPLES, batch_size)
        x, y = synthetic(input_shape, num_classes, seed, int(samples / (1 - HOLDOUT_SHARE)) if holdout else samples)
        return _split(x, y, None, holdout)
    if ref.kind == SourceKind.KERAS:
        (x, y), split = _keras_dataset(ref.name)
        return _split(x, y, split, holdout)
    if ref.kind == SourceKind.NPZ:
        x, y, test = _npz(ref.name)
        return _split(x, y, test, holdout)
    if ref.kind == SourceKind.IMAGES:
        from fitspeed.trial.data.image_folder import list_images

        if len(input_shape) != 3:
            raise DataError(
                f"Expected a model that takes images (height, width, channels) for {str(ref)!r}. "
                f"Received a model whose input shape is {shape_text(input_shape)}. Use an image model such as tiny or cnn-low."
            )
        size = (int(input_shape[0]), int(input_shape[1]))
        images = list_images(ref.name, size, ref.augment, num_classes)
        if holdout:
            images, held = split_images(images)
            return ImageFolder(source=images, batch_size=batch_size, holdout=held)
        return ImageFolder(source=images, batch_size=batch_size)
    if ref.kind == SourceKind.PYLOADER:
        from fitspeed.trial.data.loaders import HeavyLoader

        loader = HeavyLoader(input_shape, num_classes, batch_size, seed)
        if holdout:
            x_val, y_val = loader.held_out()
            return PyDatasetData(source=loader, batch_size=batch_size, x_val=x_val, y_val=y_val)
        return PyDatasetData(source=loader, batch_size=batch_size)
    return _user(ref.name, batch_size, holdout)
