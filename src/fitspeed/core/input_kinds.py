"""Which input knobs apply to which kind of data, decided without importing keras.

A data source is one of four kinds, and each kind can take some input knobs:

| kind      | what it is                                        | input knobs that apply                 |
|-----------|---------------------------------------------------|----------------------------------------|
| images    | `images:DIR`: files plus a per-example transform, | every tf.data knob                     |
|           | a pipeline fitspeed builds (`fitspeed.trial.data.pipeline`)  |                                        |
| dataset   | a user's `tf.data.Dataset`, already built         | prefetch, data_deterministic,          |
|           |                                                   | data_autotune                          |
| arrays    | numpy arrays (synthetic, cifar10, npz:PATH, ...); | data_autotune (TensorFlow backend:     |
|           | Keras builds its own tf.data pipeline from them   | Keras's pipeline is autotuned)         |
| pydataset | a `keras.utils.PyDataset` (`pyloader`, a user's)  | workers, use_multiprocessing,          |
|           |                                                   | max_queue_size                         |

Each input knob's module says which kinds it applies to (`InputKnob.applies_to`,
`fitspeed.core.knobs.input`); this table is what they say today.

A user's `module:function` is of unknown kind until a trial loads it; the
trial reports the kind (`metrics.data_kind`) and the tuner adds the knobs then.
"""

from __future__ import annotations

from typing import Any

from fitspeed.core.data_ref import DataKind, DataRef
from fitspeed.core.errors import KnobError
from fitspeed.core.knobs import KNOBS
from fitspeed.core.knobs.input import InputKnob

# the input knobs, in the registry's order: each one's module says which kinds of data it applies to
_INPUT: dict[str, InputKnob] = {knob.name: knob for knob in KNOBS if isinstance(knob, InputKnob)}
TF_DATA_KNOBS = tuple(name for name, knob in _INPUT.items() if knob.family == "tf.data")
PYDATASET_KNOBS = tuple(name for name, knob in _INPUT.items() if knob.family == "PyDataset")
INPUT_KNOBS = TF_DATA_KNOBS + PYDATASET_KNOBS
KINDS = tuple(DataKind)


def data_kind(ref: str | None) -> DataKind | None:
    """The kind of a data reference, or None for a user's function (unknown until loaded).

    >>> [str(data_kind(ref)) for ref in (None, "npz:x.npz", "images+augment:photos", "pyloader")]
    ['arrays', 'arrays', 'images', 'pydataset']
    >>> data_kind("mypkg.data:load") is None
    True
    """
    return DataRef.parse(ref, check_paths=False).input_kind


def why_not(knob: str, kind: str | None, backend: str = "tensorflow") -> str | None:
    """Why `knob` does not apply to data of `kind`, or None when it does.

    >>> why_not("cache", "arrays")
    'cache applies to the pipeline fitspeed builds for an images: folder; the data here is numpy arrays, which Keras batches itself'
    >>> why_not("data_autotune", "arrays") is None, why_not("workers", "pydataset") is None
    (True, True)
    """
    if knob not in _INPUT:
        return None
    return _INPUT[knob].why_not(kind, backend)


def check(changed: dict[str, Any], kind: str | None, backend: str) -> None:
    """Refuse an input knob set on data it cannot change (a flag never read is a defect); other knobs pass."""
    for knob, value in changed.items():
        reason = why_not(knob, kind, backend)
        if reason:
            raise KnobError(
                f"Expected input knobs that apply to this data. Received: {knob}={value!r}, but "
                f"{reason}. Drop --set {knob}=..., or use data it applies to."
            )
