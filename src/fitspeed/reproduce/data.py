"""The data a reproduction trains and validates on, written once into its folder.

In order of preference: the user's `--data npz:PATH`; CIFAR-10 from the Keras
cache (`~/.keras/datasets`, exported by a child process so this one never
imports keras, and never downloaded); else learnable class templates in
CIFAR-10's shape. Every choice ends as an `.npz` with `x`, `y`, `x_test`,
`y_test` (float32 in [0, 1], channels_last), resized to the models' input with
2x2 averaging where a cut-down run uses 16x16 inputs. `images_folder` writes
the same arrays as JPEG files for the tf.data experiment.

The templates (`templates`): each class is a smooth random colour pattern (4x4
cells); a sample is its class pattern at a random contrast, shifted by up to
two pixels, plus Gaussian noise. A small CNN learns it to well above chance in
a few hundred steps, but not to 100%, so accuracy can still tell configurations apart.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fitspeed.core.errors import DataError

CIFAR_CACHE = "cifar-10-batches-py"
NOISE = 0.3  # the templates' noise, in units of the [0, 1] pixel range
CONTRAST = (0.1, 0.4)  # the range of a sample's contrast: low, so the pattern hides in the noise


@dataclass(frozen=True)
class DataChoice:
    ref: str  # the --data reference the trials get
    name: str  # what the table says: "CIFAR-10 (Keras cache)", "class templates in CIFAR-10's shape", ...
    real: bool
    train: int
    test: int
    shape: tuple[int, ...]


def templates(shape: tuple[int, int, int], classes: int, train: int, test: int,
              seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Learnable data in an image data set's shape: x, y, x_test, y_test.

    >>> x, y, xt, yt = templates((8, 8, 3), 10, 40, 10)
    >>> x.shape, xt.shape, x.dtype.name, float(x.min()) >= 0.0, float(x.max()) <= 1.0
    ((40, 8, 8, 3), (10, 8, 8, 3), 'float32', True, True)
    """
    rng = np.random.default_rng(seed)
    height, width, channels = shape
    coarse = rng.uniform(0.0, 1.0, size=(classes, 4, 4, channels))
    patterns = np.repeat(np.repeat(coarse, -(-height // 4), axis=1), -(-width // 4), axis=2)[:, :height, :width]
    total = train + test
    labels = rng.integers(0, classes, size=total)
    x = np.empty((total, height, width, channels), dtype="float32")
    for index, label in enumerate(labels):
        shift = rng.integers(-2, 3, size=2)
        contrast = rng.uniform(*CONTRAST)
        image = 0.5 + contrast * (np.roll(patterns[label], shift, axis=(0, 1)) - 0.5)
        x[index] = image + rng.normal(scale=NOISE, size=image.shape)
    np.clip(x, 0.0, 1.0, out=x)
    labels = labels.astype("int32")
    return x[:train], labels[:train], x[train:], labels[train:]


def halve(x: np.ndarray) -> np.ndarray:
    """Images at half the height and width, each pixel the mean of a 2x2 block.

    >>> halve(np.arange(16, dtype="float32").reshape(1, 4, 4, 1))[0, :, :, 0].tolist()
    [[2.5, 4.5], [10.5, 12.5]]
    """
    n, h, w, c = x.shape
    return x[:, : h // 2 * 2, : w // 2 * 2].reshape(n, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4)).astype("float32")


def _fit_shape(x: np.ndarray, shape: tuple[int, ...], source: str) -> np.ndarray:
    x = np.asarray(x, dtype="float32")
    if x.max() > 1.5:
        x = x / 255.0
    while x.ndim == 4 and x.shape[1] > shape[0] and x.shape[1] // 2 >= shape[0]:
        x = halve(x)
    if tuple(x.shape[1:]) != tuple(shape):
        raise DataError(f"Expected images of shape {tuple(shape)} (or twice that size) from {source}. "
                        f"Received: {tuple(x.shape[1:])}. Pass CIFAR-10-shaped arrays (32x32x3) as x, y, "
                        "x_test, y_test in an .npz.")
    return x


def keras_cache() -> Path:
    return Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "datasets"


_EXPORT = """
import sys, numpy, keras
(x, y), (xt, yt) = keras.datasets.cifar10.load_data()
numpy.savez(sys.argv[1], x=x, y=y.ravel(), x_test=xt, y_test=yt.ravel())
"""


def _export_cifar10(path: Path) -> None:
    """CIFAR-10 from the Keras cache into `path`, by a child process (this one never imports keras)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run([sys.executable, "-P", "-c", _EXPORT, str(path)], env=env, capture_output=True,
                            text=True, timeout=600, check=False)
    if result.returncode != 0:
        raise DataError(f"Could not read CIFAR-10 from the Keras cache in {keras_cache()}: "
                        f"{result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.returncode}. "
                        "Remove the broken cache, or pass --data npz:PATH.")


def choose(data: str | None, shape: tuple[int, int, int], train: int, test: int, folder: Path,
           seed: int = 0) -> DataChoice:
    """Write the data for one reproduction into `folder`/data.npz and say what it is.

    `data` is None (the Keras cache's CIFAR-10 if there, else templates),
    "synthetic" (templates, whatever the cache holds) or "npz:PATH".
    `train` and `test` cap the sample counts.
    """
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "data.npz"
    if data is not None and data not in ("synthetic",) and not data.startswith("npz:"):
        raise DataError(f"Expected --data synthetic or npz:PATH (arrays x, y and optionally x_test, y_test). "
                        f"Received: {data!r}. CIFAR-10 is used by itself when it is in the Keras cache.")
    source: Path | None = None
    name = ""
    if data is not None and data.startswith("npz:"):
        path = Path(data[4:])
        if not path.is_file():
            raise DataError(f"Expected an .npz file with arrays x and y. Received: {str(path)!r}, which does "
                            "not exist. Save one with numpy.savez(path, x=x, y=y, x_test=x_test, y_test=y_test).")
        source, name = path, f"{path.name} (--data)"
    elif data is None and (keras_cache() / CIFAR_CACHE).is_dir():
        source, name = folder / "cifar10-export.npz", "CIFAR-10 (Keras cache)"
        _export_cifar10(source)
    if source is None:
        x, y, xt, yt = templates(shape, 10, train, test, seed)
        np.savez(target, x=x, y=y, x_test=xt, y_test=yt)
        return DataChoice(f"npz:{target}", "class templates plus noise in CIFAR-10's shape (no data set here)",
                          False, train, test, shape)
    with np.load(source, allow_pickle=False) as archive:
        if not {"x", "y"} <= set(archive.files):
            raise DataError(f"Expected arrays x and y in {str(source)!r}. It holds: {', '.join(archive.files)}.")
        x, y = archive["x"][:train], archive["y"].ravel()[:train]
        test_split = ("x_test", "y_test") if {"x_test", "y_test"} <= set(archive.files) else None
        if test_split:
            xt, yt = archive["x_test"][:test], archive["y_test"].ravel()[:test]
    if not test_split:  # the last share of x is held out
        cut = len(x) - max(1, min(test, len(x) // 10))
        x, y, xt, yt = x[:cut], y[:cut], x[cut:], y[cut:]
    x, xt = _fit_shape(x, shape, name), _fit_shape(xt, shape, name)
    np.savez(target, x=x, y=y.astype("int32"), x_test=xt, y_test=yt.astype("int32"))
    return DataChoice(f"npz:{target}", name, True, len(x), len(xt), shape)


def images_folder(choice: DataChoice, folder: Path) -> Path:
    """The chosen data's training and test images as JPEG files in class subfolders (for `images:DIR`).

    The trial holds out every tenth file for validation (`fitspeed.trial.data.sources.split_images`).
    """
    from PIL import Image

    with np.load(choice.ref[4:], allow_pickle=False) as archive:
        x = np.concatenate([archive["x"], archive["x_test"]])
        y = np.concatenate([archive["y"], archive["y_test"]])
    root = folder / "images"
    for index, (image, label) in enumerate(zip(x, y)):
        (root / f"class_{int(label):02d}").mkdir(parents=True, exist_ok=True)
        pixels = np.clip(np.round(image * 255.0), 0, 255).astype("uint8")
        # full-resolution colour (no 4:2:0 subsampling): the classes differ by colour in 4x4-pixel cells
        Image.fromarray(pixels).save(root / f"class_{int(label):02d}" / f"{index:06d}.jpg", "JPEG", quality=95,
                                     subsampling=0)
    return root
