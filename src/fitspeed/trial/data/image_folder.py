"""An `images:DIR` folder: its files and labels, listed without reading an image.

Runs in the trial child; `fitspeed.trial.data.pipeline` decodes the files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fitspeed.core.errors import DataError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


@dataclass(frozen=True)
class ImageSource:
    """A folder of images, one subfolder per class, and what to do with each file."""

    paths: tuple[str, ...]
    labels: tuple[int, ...]
    class_names: tuple[str, ...]
    size: tuple[int, int]  # height, width the model takes
    augment: bool = False


def list_images(folder: str, size: tuple[int, int], augment: bool, num_classes: int) -> ImageSource:
    """The images under `folder`, labelled by their subfolder's name (sorted)."""
    root = Path(folder)  # DataRef.parse checked that it is a folder
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    paths: list[str] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        for file in sorted((root / name).iterdir()):
            if file.suffix.lower() in IMAGE_SUFFIXES:
                paths.append(str(file))
                labels.append(label)
    if not paths:
        raise DataError(
            f"Expected class subfolders of JPEG or PNG files in {folder!r}. Found none. "
            f"Write such a folder with `fitspeed make-images {folder}`."
        )
    if len(classes) > num_classes:
        raise DataError(
            f"The folder {folder!r} has {len(classes)} classes (subfolders), but the model "
            f"predicts {num_classes}. Use a model with at least {len(classes)} outputs, or fewer subfolders."
        )
    return ImageSource(tuple(paths), tuple(labels), tuple(classes), size, augment)


def unreadable(folder: str, limit: int = 3) -> list[str]:
    """The first `limit` image files under `folder` that do not decode whole (Pillow reads each fully).

    Called only after a decode failure, to name the file; tf.data's error does not.
    """
    from PIL import Image

    bad: list[str] = []
    for path in sorted(Path(folder).rglob("*")):
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        try:
            with Image.open(path) as picture:
                picture.load()
        except Exception:  # Pillow raises OSError, SyntaxError, ValueError... for a broken file
            bad.append(str(path))
            if len(bad) >= limit:
                break
    return bad
