"""The data reference, parsed once: what `--data` names, as a frozen value.

The parent parses the user's text (checking that files and folders exist);
the trial child parses the canonical text it was sent, and loads what it
names (`fitspeed.trial.data.sources`). Every message about a malformed data
reference is written here, once.

| text                          | kind      | what it names                                   |
|-------------------------------|-----------|-------------------------------------------------|
| (none) or `synthetic`         | synthetic | learnable random images in the model's shape    |
| `cifar10`, `fashion_mnist`    | keras     | `keras.datasets.NAME.load_data()`               |
| `npz:PATH` or `PATH.npz`      | npz       | a `.npz` file with arrays `x` and `y`           |
| `images:DIR`                  | images    | a folder of class subfolders of JPEG/PNG files  |
| `images+augment:DIR`          | images    | the same, with random crop and flip             |
| `pyloader`                    | pyloader  | article 002's CPU-heavy PyDataset               |
| `module:function`             | function  | the user's function returning the data          |
| `script`                      | script    | a training command's own data (`-- python train.py`) |
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from fitspeed.core.errors import WorkloadError

KERAS_DATASETS = ("cifar10", "fashion_mnist")
IMAGES, IMAGES_AUGMENT = "images:", "images+augment:"
_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")



class SourceKind(StrEnum):
    """What a data reference names (the table above)."""

    SYNTHETIC = "synthetic"
    KERAS = "keras"
    NPZ = "npz"
    IMAGES = "images"
    PYLOADER = "pyloader"
    FUNCTION = "function"
    SCRIPT = "script"


class DataKind(StrEnum):
    """What `fit()` is given, which decides the input knobs that apply (`fitspeed.core.input_kinds`)."""

    IMAGES = "images"  # the tf.data pipeline fitspeed builds for an images: folder
    DATASET = "dataset"  # a user's tf.data.Dataset
    ARRAYS = "arrays"  # numpy arrays, which Keras batches itself
    PYDATASET = "pydataset"  # a keras.utils.PyDataset


# Which data kind each reference gives; None: known only once loaded.
_INPUT_KIND: dict[SourceKind, DataKind | None] = {
    SourceKind.SYNTHETIC: DataKind.ARRAYS, SourceKind.KERAS: DataKind.ARRAYS, SourceKind.NPZ: DataKind.ARRAYS,
    SourceKind.IMAGES: DataKind.IMAGES, SourceKind.PYLOADER: DataKind.PYDATASET,
    SourceKind.FUNCTION: None, SourceKind.SCRIPT: None,
}


def is_callable_ref(text: str) -> bool:
    """True for `package.module:function`.

    >>> is_callable_ref("mypkg.models:build"), is_callable_ref("npz:data.npz")
    (True, False)
    """
    return bool(_CALLABLE.match(text))


@dataclass(frozen=True)
class DataRef:
    """A parsed data reference. `str(ref)` is its canonical text, as records store it."""

    kind: SourceKind
    name: str = "synthetic"  # the keras dataset's name, the file or folder path, or module:function
    augment: bool = False  # images only: random crop and flip per example

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", SourceKind(self.kind))  # a kind given as its text, as records hold it

    def __str__(self) -> str:
        if self.kind == SourceKind.NPZ:
            return f"npz:{self.name}"
        if self.kind == SourceKind.IMAGES:
            return (IMAGES_AUGMENT if self.augment else IMAGES) + self.name
        return self.name

    @property
    def input_kind(self) -> DataKind | None:
        """The input kind (`fitspeed.core.input_kinds`), or None for a user's function or script (known once loaded)."""
        return _INPUT_KIND[self.kind]

    @classmethod
    def parse(cls, text: str | None, *, augment: bool = False, check_paths: bool = True) -> DataRef:
        """Parse `--data`; `augment` is `--augment`. A missing file or folder is a user error.

        >>> str(DataRef.parse("data.npz", check_paths=False)), DataRef.parse(None).kind
        ('npz:data.npz', <SourceKind.SYNTHETIC: 'synthetic'>)
        >>> DataRef.parse("images:photos", augment=True, check_paths=False)
        DataRef(kind=<SourceKind.IMAGES: 'images'>, name='photos', augment=True)
        """
        ref = cls._parse(text or "synthetic")
        if augment and ref.kind != SourceKind.IMAGES:
            raise WorkloadError(
                f"Expected --augment with --data images:DIR. Received: --data {text}. "
                "Pass a folder of images, or drop --augment."
            )
        if augment:
            ref = cls(SourceKind.IMAGES, ref.name, augment=True)
        if check_paths:
            ref.check_paths()
        return ref

    @classmethod
    def _parse(cls, text: str) -> DataRef:
        if text in (SourceKind.SYNTHETIC, SourceKind.PYLOADER, SourceKind.SCRIPT):
            return cls(SourceKind(text), text)
        if text in KERAS_DATASETS:
            return cls(SourceKind.KERAS, text)
        if text.startswith(IMAGES_AUGMENT):
            return cls(SourceKind.IMAGES, text[len(IMAGES_AUGMENT):], augment=True)
        if text.startswith(IMAGES):
            return cls(SourceKind.IMAGES, text[len(IMAGES):])
        if text.startswith("npz:"):
            return cls(SourceKind.NPZ, text[4:])
        if text.endswith(".npz"):
            return cls(SourceKind.NPZ, text)
        if is_callable_ref(text):
            return cls(SourceKind.FUNCTION, text)
        raise WorkloadError(
            f"Unknown data {text!r}. Expected synthetic, cifar10, fashion_mnist, npz:PATH, "
            "images:DIR, pyloader or module:function. Run `fitspeed workloads` to list them."
        )

    def check_paths(self) -> None:
        """Refuse a reference whose file or folder does not exist."""
        if self.kind == SourceKind.IMAGES and not Path(self.name).is_dir():
            raise WorkloadError(
                f"Expected images:DIR to name a folder of class subfolders holding JPEG or PNG files. "
                f"Received: {self.name!r}, which is not a folder. Write one with "
                f"`fitspeed make-images {self.name}`."
            )
        if self.kind == SourceKind.NPZ and not Path(self.name).is_file():
            raise WorkloadError(
                f"Expected an .npz file with arrays `x` and `y`. Received: {self.name!r}, "
                "which does not exist. Check the path, or save one with "
                "numpy.savez(path, x=x, y=y)."
            )
