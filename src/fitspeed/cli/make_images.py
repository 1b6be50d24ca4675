"""`fitspeed make-images`: write a folder of JPEG files in class subfolders, for `images:DIR`.

Encodes with Pillow (no TensorFlow in the CLI process; keras only for
`--source cifar10`). Synthetic images are learnable: each class is a smooth random pattern,
each image that pattern plus noise and a random shift.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fitspeed.cli.options import SeedOpt
from fitspeed.console.terminal import err, out
from fitspeed.core.errors import DataError

if TYPE_CHECKING:
    import numpy as np

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def make_images(
    folder: Annotated[Path, typer.Argument(help="Folder to write CLASS/NNNNNN.jpg files into.")],
    count: Annotated[int, typer.Option("--count", min=1, help="Images to write.")] = 2000,
    size: Annotated[int, typer.Option("--size", min=8, help="Height and width in pixels.")] = 32,
    source: Annotated[str, typer.Option("--source", help="synthetic or cifar10 (downloads once).")] = "synthetic",
    seed: SeedOpt = 0,
) -> None:
    """Write a folder of JPEG images in class subfolders, for --data images:DIR."""
    with err.status(f"writing {count} images…"):
        written = write(folder, count, size, source, seed)
    out.print(f"wrote {sum(written.values())} images of {size}x{size} in {len(written)} classes to {folder}; "
              f"use --data images:{folder}", highlight=False)


def _synthetic(count: int, size: int, classes: int, seed: int) -> Iterator[tuple[np.ndarray, int]]:
    import numpy as np  # not for `fitspeed --help`

    rng = np.random.default_rng(seed)
    coarse = rng.uniform(0, 255, size=(classes, 4, 4, 3))
    scale = -(-size // 4)
    patterns = np.repeat(np.repeat(coarse, scale, axis=1), scale, axis=2)[:, :size, :size]
    for index in range(count):
        label = index % classes
        image = np.roll(patterns[label], rng.integers(-2, 3, size=2), axis=(0, 1))
        image = image + rng.normal(scale=24.0, size=image.shape)
        yield np.clip(image, 0, 255).astype("uint8"), label


def _cifar10(count: int) -> Iterator[tuple[np.ndarray, int]]:
    import keras

    try:
        (x, y), _ = keras.datasets.cifar10.load_data()
    except Exception as error:  # the loader raises bare Exception on a failed fetch
        raise DataError(
            f"Could not load CIFAR-10 through keras.datasets.cifar10.load_data(): {error}. It downloads "
            "on first use, and this machine may not reach the internet. Use --source synthetic."
        ) from None
    for index in range(min(count, len(x))):
        yield x[index], int(y[index][0])


def write(folder: str | Path, count: int, size: int, source: str, seed: int = 0) -> dict[str, int]:
    """Write `count` JPEG images of `size`x`size` under `folder`/CLASS/; return the count per class."""
    from PIL import Image

    if source not in ("synthetic", "cifar10"):
        raise DataError(f"Expected --source synthetic or cifar10. Received: {source!r}. Use --source synthetic.")
    root = Path(folder)
    if root.exists() and not root.is_dir():
        raise DataError(f"Expected FOLDER to be a folder to write images into. Received: {str(root)!r}, "
                        "which is a file. Choose another path.")
    examples = _synthetic(count, size, 10, seed) if source == "synthetic" else _cifar10(count)
    written: dict[str, int] = {}
    for index, (image, label) in enumerate(examples):
        name = CIFAR10_CLASSES[label] if source == "cifar10" else f"class_{label:02d}"
        picture = Image.fromarray(image)
        if image.shape[0] != size:
            picture = picture.resize((size, size), Image.Resampling.BILINEAR)
        try:
            (root / name).mkdir(parents=True, exist_ok=True)
            picture.save(root / name / f"{index:06d}.jpg", "JPEG", quality=90)
        except OSError as error:
            raise DataError(f"Could not write images into {str(root)!r}: {error.strerror or error}. "
                            f"{sum(written.values())} were written. Free some space, or choose another folder.") from None
        written[name] = written.get(name, 0) + 1
    return written
