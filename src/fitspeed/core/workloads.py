"""Workloads: a model plus a data source, named without importing keras.

A model is a built-in name (`fitspeed workloads` lists them), a user's
`module:function` that returns a compiled or uncompiled Keras model, or a saved
`.keras` file (rebuilt from its config, with fresh weights, for every trial). Data is a
built-in source, `npz:PATH` (or a path ending in `.npz`), or `module:function`
returning arrays, a `tf.data.Dataset` or a `keras.utils.PyDataset`.

The parent only checks names here (data references: `fitspeed.core.data_ref`);
builders run in the trial child (`fitspeed.trial.models`,
`fitspeed.trial.data.sources`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath

from fitspeed.core.data_ref import is_callable_ref
from fitspeed.core.errors import WorkloadError


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
        ModelInfo("attention", "one transformer encoder block (4 heads, width 64) on 64 tokens of 16 features",
                  (64, 16), 10, 35_338),
        ModelInfo("cnn-low", "article 000's low CNN (about 2.2M parameters), CIFAR shape", (32, 32, 3), 10, 2_201_418),
        ModelInfo("cnn-high", "article 000's high CNN (about 10.2M parameters), CIFAR shape", (32, 32, 3), 10, 10_164_322),
        ModelInfo("cnn10", "article 004's 10-layer CNN, CIFAR shape", (32, 32, 3), 10, 1_927_946),
        ModelInfo("wrn-16-4", "Wide ResNet 16-4, CIFAR shape", (32, 32, 3), 10, 2_752_506),
        ModelInfo("wrn-28-10", "Wide ResNet 28-10 (about 36.5M parameters), CIFAR shape", (32, 32, 3), 10, 36_497_146),
        ModelInfo("cnn-low-s", "cnn-low at a quarter of its width on 16x16 inputs, BatchNorm momentum 0.9 (reproduce --quick)", (16, 16, 3), 10, 90_330),
        ModelInfo("cnn-high-s", "cnn-high at a quarter of its width on 16x16 inputs, BatchNorm momentum 0.9 (reproduce --quick)", (16, 16, 3), 10, 378_400),
        ModelInfo("cnn10-s", "cnn10 at a quarter of its width on 16x16 inputs, BatchNorm momentum 0.9 (reproduce --quick)", (16, 16, 3), 10, 122_570),
        ModelInfo("wrn-16-4-s", "WRN-16-4 at a quarter of its width (WRN-16-1) on 16x16 inputs, BatchNorm momentum 0.9 (reproduce --quick)", (16, 16, 3), 10, 175_994),
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


def is_saved_model(ref: str) -> bool:
    """True for a path to a saved `.keras` file (whether or not it exists).

    >>> is_saved_model("runs/model.keras"), is_saved_model("mypkg.models:build")
    (True, False)
    """
    return ref.endswith(".keras")


def check_model(ref: str) -> str:
    """Return `ref` if it names a built-in model, a `module:function` or a saved `.keras` file that exists."""
    if is_saved_model(ref):
        if not Path(ref).is_file():
            raise WorkloadError(
                f"Expected a saved Keras model file. Received: {ref!r}, which does not exist. Check the path, "
                "or save one with model.save('model.keras')."
            )
        return ref
    if ref in MODELS or is_callable_ref(ref):
        return ref
    raise WorkloadError(
        f"Unknown workload {ref!r}. Expected a built-in model ({', '.join(MODELS)}), "
        "a builder written as module:function, such as mypkg.models:build, or a saved model.keras file. "
        "Run `fitspeed workloads` to list the built-in ones."
    )


def origin(ref: str) -> str:
    """Where a study's model came from, as a person names it (`fitspeed run`'s warning on a foreign best.json).

    A model handed to `fitspeed.tune` from Python is shipped to a file under
    `fitspeed-shipped/` (a compiled model) or to a generated `fitspeed_*`
    module (a function that builds one): both read as what the user passed.

    >>> origin("tiny"), origin("mymodels:build")
    ('the built-in workload tiny', 'the model builder mymodels:build')
    >>> origin("/w/fitspeed-shipped/functional-1a2b.keras"), origin("fitspeed_build_1a2b:build")
    ('a model passed to fitspeed.tune from Python (functional)', 'a model-building function passed to fitspeed.tune from Python')
    >>> origin("/w/models/net.keras")
    'the saved model /w/models/net.keras'
    """
    if ref in MODELS:
        return f"the built-in workload {ref}"
    if ref.startswith("fitspeed_") and ":" in ref:
        return "a model-building function passed to fitspeed.tune from Python"
    if is_saved_model(ref):
        path = PurePath(ref)
        if path.parent.name == "fitspeed-shipped":
            return f"a model passed to fitspeed.tune from Python ({path.stem.rsplit('-', 1)[0]})"
        return f"the saved model {ref}"
    return f"the model builder {ref}"
