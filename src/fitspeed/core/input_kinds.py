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

A user's `module:function` is of unknown kind until a trial loads it; the
trial reports the kind (`metrics.data_kind`) and the tuner adds the knobs then.
"""

from __future__ import annotations

from typing import Any

from fitspeed.core.backends import backend_of
from fitspeed.core.data_ref import DataRef
from fitspeed.core.errors import KnobError

TF_DATA_KNOBS = (
    "prefetch", "map_parallelism", "cache", "vectorize", "shuffle_buffer", "interleave",
    "data_deterministic", "data_autotune",
)
PYDATASET_KNOBS = ("workers", "use_multiprocessing", "max_queue_size")
INPUT_KNOBS = TF_DATA_KNOBS + PYDATASET_KNOBS
KINDS = ("images", "dataset", "arrays", "pydataset")

_APPLIES = {
    "images": set(TF_DATA_KNOBS),
    "dataset": {"prefetch", "data_deterministic", "data_autotune"},
    "arrays": {"data_autotune"},
    "pydataset": set(PYDATASET_KNOBS),
}

_WHAT = {
    "images": "an images: folder",
    "dataset": "your tf.data.Dataset",
    "arrays": "numpy arrays",
    "pydataset": "a PyDataset",
}


def data_kind(ref: str | None) -> str | None:
    """The kind of a data reference, or None for a user's function (unknown until loaded).

    >>> data_kind(None), data_kind("npz:x.npz"), data_kind("images+augment:photos")
    ('arrays', 'arrays', 'images')
    >>> data_kind("pyloader"), data_kind("mypkg.data:load") is None
    ('pydataset', True)
    """
    return DataRef.parse(ref, check_paths=False).input_kind


def why_not(knob: str, kind: str | None, backend: str = "tensorflow") -> str | None:
    """Why `knob` does not apply to data of `kind`, or None when it does.

    >>> why_not("cache", "arrays")
    'cache applies to the pipeline fitspeed builds for an images: folder; the data here is numpy arrays, which Keras batches itself'
    >>> why_not("data_autotune", "arrays") is None, why_not("workers", "pydataset") is None
    (True, True)
    """
    if knob not in INPUT_KNOBS or kind is None:
        return None
    if kind == "arrays" and knob == "data_autotune" and not backend_of(backend).feeds_arrays_through_tf_data:
        return f"data_autotune: Keras feeds numpy arrays to the {backend} backend without tf.data"
    if knob in _APPLIES[kind]:
        return None
    if knob in PYDATASET_KNOBS:
        return f"{knob} applies to a keras.utils.PyDataset; the data here is {_WHAT[kind]}"
    if kind == "arrays":
        return (f"{knob} applies to the pipeline fitspeed builds for an images: folder; the data here "
                "is numpy arrays, which Keras batches itself")
    if kind == "dataset":
        return (f"{knob} applies to the pipeline fitspeed builds for an images: folder; your "
                "tf.data.Dataset is built by your code, so only its prefetch and options can change")
    return f"{knob} applies to tf.data pipelines; the data here is {_WHAT[kind]}"


def check(changed: dict[str, Any], kind: str, backend: str) -> None:
    """Refuse an input knob set on data it cannot change (a flag never read is a defect)."""
    for knob, value in changed.items():
        reason = why_not(knob, kind, backend)
        if reason:
            raise KnobError(
                f"Expected input knobs that apply to this data. Received: {knob}={value!r}, but "
                f"{reason}. Drop --set {knob}=..., or use data it applies to."
            )
