"""What the input knobs share: `InputKnob`, which knows the kinds of data it changes and is searched only there.

A data source is one of four kinds (`fitspeed.core.data_ref.DataKind`); each
input knob names the kinds it applies to (`applies_to`), and says why it does
not apply to the others (`why_not`), so a knob set on data it cannot change is
refused (`fitspeed.core.input_kinds.check`) and a search skips it with the
reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from fitspeed.core.backends import backend_of
from fitspeed.core.data_ref import DataKind
from fitspeed.core.knobs.base import Knob, Lines, Offer, Recipe, Where

_WHAT = {
    DataKind.IMAGES: "an images: folder",
    DataKind.DATASET: "your tf.data.Dataset",
    DataKind.ARRAYS: "numpy arrays",
    DataKind.PYDATASET: "a PyDataset",
}


def _none(workers: int) -> tuple[Any, ...]:
    return ()


def _no_lines(value: Any, recipe: Recipe) -> Lines:
    return {}


@dataclass(frozen=True)
class InputKnob(Knob):
    """A tf.data or PyDataset knob (`family`), applied to data of the kinds in `applies_to`.

    `tried(workers)` gives the values a search tries, `workers` being
    max(2, cores); `not_searched` says why a search never tries it (a training
    choice, not a speed knob), or is None. `lines(value, recipe)` gives a
    tf.data knob's snippet lines at a value other than its default, in its
    section of the pipeline (`Knob.snippet`); a PyDataset knob is an argument
    of the PyDataset's constructor, by its own name.
    """

    family: Literal["tf.data", "PyDataset"] = "tf.data"
    applies_to: frozenset[DataKind] = frozenset({DataKind.IMAGES})
    tried: Callable[[int], tuple[Any, ...]] = _none
    not_searched: str | None = None
    lines: Callable[[Any, Recipe], Lines] = _no_lines

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        """
        >>> from fitspeed.core.knobs.pydataset import WORKERS
        >>> WORKERS.snippet(4, Recipe(None)), WORKERS.snippet(0, Recipe(None))
        ({'loader': ['workers=4']}, {})
        """
        if value == self.default:
            return {}
        if self.family == "PyDataset":
            return {"loader": [f"{self.name}={value!r}"]}
        return self.lines(value, recipe)

    def why_not(self, kind: str | None, backend: str = "tensorflow") -> str | None:
        """Why this knob does not apply to data of `kind` on `backend`, or None when it does (or `kind` is unknown).

        >>> from fitspeed.core.knobs.tf_data import CACHE, DATA_AUTOTUNE
        >>> CACHE.why_not("arrays")
        'cache applies to the pipeline fitspeed builds for an images: folder; the data here is numpy arrays, which Keras batches itself'
        >>> DATA_AUTOTUNE.why_not("arrays") is None, DATA_AUTOTUNE.why_not("arrays", "jax")
        (True, 'data_autotune: Keras feeds numpy arrays to the jax backend without tf.data')
        """
        if kind is None:
            return None
        kind = DataKind(kind)  # a kind given as its text, as a record holds it
        if kind == DataKind.ARRAYS and kind in self.applies_to and not backend_of(backend).feeds_arrays_through_tf_data:
            return f"{self.name}: Keras feeds numpy arrays to the {backend} backend without tf.data"
        if kind in self.applies_to:
            return None
        if self.family == "PyDataset":
            return f"{self.name} applies to a keras.utils.PyDataset; the data here is {_WHAT[kind]}"
        if kind == DataKind.ARRAYS:
            return (f"{self.name} applies to the pipeline fitspeed builds for an images: folder; the data here "
                    "is numpy arrays, which Keras batches itself")
        if kind == DataKind.DATASET:
            return (f"{self.name} applies to the pipeline fitspeed builds for an images: folder; your "
                    "tf.data.Dataset is built by your code, so only its prefetch and options can change")
        return f"{self.name} applies to tf.data pipelines; the data here is {_WHAT[kind]}"

    def offer(self, where: Where) -> Offer:
        """
        >>> from fitspeed.core.config import TrialConfig
        >>> from fitspeed.core.knobs.tf_data import MAP_PARALLELISM
        >>> MAP_PARALLELISM.offer(Where(TrialConfig(), False, 4, "images", "tiny", None)).values
        ('autotune', 4)
        >>> MAP_PARALLELISM.offer(Where(TrialConfig(), False, 4, None, "tiny", None)).skipped
        'the kind of your data is known once the baseline trial loads it'
        """
        if where.data_kind is None:
            return Offer(skipped="the kind of your data is known once the baseline trial loads it")
        why = self.why_not(where.data_kind, where.backend) or self.not_searched
        return Offer(skipped=why) if why else Offer(values=self.tried(max(2, where.cores)))
