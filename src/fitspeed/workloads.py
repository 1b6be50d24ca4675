"""Workloads: a model plus a data source, named without importing keras.

A model is a built-in name (`fitspeed workloads` lists them) or a user's
`module:function` that returns a compiled or uncompiled Keras model. Data is a
built-in source, `npz:PATH` (or a path ending in `.npz`), or `module:function`
returning arrays, a `tf.data.Dataset` or a `keras.utils.PyDataset`.

The parent only parses and checks names here; builders run in the trial child
(`fitspeed.models`, `fitspeed.datasets`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from fitspeed.errors import WorkloadError

IMAGE_PREFIXES = ("images:", "images+augment:")  # a folder of images; +augment: random crop and flip


@dataclass(frozen=True)
class ModelInfo:
    name: str
    description: str
    input_shape: tuple[int, ...]  # channels_last
    num_classes: int
    params: int  # checked against the built model by tests/test_models.py


@dataclass(frozen=True)
class DataInfo:
    name: str
    description: str
    input_shape: tuple[int, ...] | None  # None: takes the model's shape
    num_classes: int | None


MODELS: dict[str, ModelInfo] = {
    info.name: info
    for info in (
        ModelInfo("tiny", "small CNN that trains in seconds on a CPU", (16, 16, 3), 10, 5_610),
        ModelInfo("mlp", "overhead-bound MLP, Fashion-MNIST shape", (28, 28, 1), 10, 101_770),
        ModelInfo("cnn-low", "article 000's low CNN (about 2.2M parameters), CIFAR shape", (32, 32, 3), 10, 2_201_418),
        ModelInfo("cnn-high", "article 000's high CNN (about 10.2M parameters), CIFAR shape", (32, 32, 3), 10, 10_164_322),
        ModelInfo("cnn10", "article 004's 10-layer CNN, CIFAR shape", (32, 32, 3), 10, 1_927_946),
        ModelInfo("wrn-16-4", "Wide ResNet 16-4, CIFAR shape", (32, 32, 3), 10, 2_752_506),
        ModelInfo("wrn-28-10", "Wide ResNet 28-10 (about 36.5M parameters), CIFAR shape", (32, 32, 3), 10, 36_497_146),
    )
}

DATA: dict[str, DataInfo] = {
    info.name: info
    for info in (
        DataInfo("synthetic", "learnable random images in the model's shape, seeded (default)", None, None),
        DataInfo("cifar10", "CIFAR-10 through keras.datasets (downloads once)", (32, 32, 3), 10),
        DataInfo("fashion_mnist", "Fashion-MNIST through keras.datasets (downloads once)", (28, 28, 1), 10),
        DataInfo("npz:PATH", "your .npz file with arrays `x` and `y`", None, None),
        DataInfo("images:DIR", "a folder of JPEG/PNG files in class subfolders, decoded and resized by tf.data "
                 "(images+augment:DIR adds random crop and flip; write one with `fitspeed make-images`)", None, None),
        DataInfo("pyloader", "a PyDataset whose __getitem__ does CPU-heavy Python work per example (article 002)",
                 None, None),
        DataInfo("module:function", "your function returning (x, y), a tf.data.Dataset or a PyDataset", None, None),
    )
}

_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def is_callable_ref(text: str) -> bool:
    """True for `package.module:function`."""
    return bool(_CALLABLE.match(text))


def check_model(ref: str) -> str:
    """Return `ref` if it names a built-in model or a `module:function`."""
    if ref in MODELS or is_callable_ref(ref):
        return ref
    raise WorkloadError(
        f"Unknown workload {ref!r}. Expected a built-in model ({', '.join(MODELS)}) "
        "or a builder written as module:function, such as mypkg.models:build. "
        "Run `fitspeed workloads` to list the built-in ones."
    )


def check_data(ref: str | None) -> str | None:
    """Return the data reference in its canonical form, or None for the model's default.

    A path ending in `.npz` becomes `npz:PATH` (and must exist):

    >>> check_data("cifar10"), check_data("mypkg.data:load"), check_data(None)
    ('cifar10', 'mypkg.data:load', None)
    """
    if ref is None or ref in DATA and ":" not in ref:
        return ref
    if ref.endswith(".npz") and not ref.startswith("npz:"):
        ref = f"npz:{ref}"
    if ref.startswith(IMAGE_PREFIXES):
        folder = Path(ref.partition(":")[2])
        if not folder.is_dir():
            raise WorkloadError(
                f"Expected images:DIR to name a folder of class subfolders holding JPEG or PNG files. "
                f"Received: {str(folder)!r}, which is not a folder. Write one with "
                f"`fitspeed make-images {folder}`."
            )
        return ref
    if ref.startswith("npz:"):
        path = Path(ref[4:])
        if not path.is_file():
            raise WorkloadError(
                f"Expected an .npz file with arrays `x` and `y`. Received: {str(path)!r}, "
                "which does not exist. Check the path, or save one with "
                "numpy.savez(path, x=x, y=y)."
            )
        return ref
    if is_callable_ref(ref):
        return ref
    raise WorkloadError(
        f"Unknown data {ref!r}. Expected synthetic, cifar10, fashion_mnist, npz:PATH, "
        "images:DIR, pyloader or module:function. Run `fitspeed workloads` to list them."
    )
