"""What a user's script handed `fit()`: its data as a `Data`, its kind, the knobs that miss it, its epoch's steps.

Used by the script hook (`fitspeed.trial.script_hook`) on the arguments of the
script's chosen `fit()`, in the trial child or in `fitspeed run`.
"""

from __future__ import annotations

import math
from typing import Any

from fitspeed.core.errors import DataError
from fitspeed.core.input_kinds import INPUT_KNOBS, why_not


def data_from(x: Any, y: Any, validation_split: float, sample_weight: Any = None, shuffle: bool | str = True) -> Any:
    """What the script handed fit(), as `fitspeed.trial.data.sources.Data`.

    Arrays keep the script's `sample_weight` and `shuffle`; with a
    validation_split they are cut where Keras cuts them (its own
    `train_validation_split`: the first 1 - split of the samples train).
    """
    import keras
    import numpy as np

    from fitspeed.trial.data.sources import Data, batch_size_of, dataset_batch_size

    if isinstance(x, keras.utils.PyDataset):
        return Data("pydataset", source=x, batch_size=batch_size_of(x[0]))
    if type(x).__module__.startswith("tensorflow") and hasattr(x, "element_spec"):
        return Data("dataset", source=x, batch_size=dataset_batch_size(x, "the script's dataset"))
    if isinstance(y, list) and not any(isinstance(v, (np.ndarray, list, tuple, dict)) for v in y):
        y = np.asarray(y)  # labels as a plain list
    if _arrays(x) and y is not None and _arrays(y):
        x, y = keras.tree.map_structure(np.asarray, x), keras.tree.map_structure(np.asarray, y)
        weights = None if sample_weight is None else keras.tree.map_structure(np.asarray, sample_weight)
        if validation_split:
            from keras.src.trainers.data_adapters.array_slicing import train_validation_split

            (x, y, weights), _ = train_validation_split((x, y, weights), validation_split=validation_split)
        return Data("arrays", x=x, y=y, sample_weight=weights, shuffle=shuffle)
    raise DataError(
        "Expected the script to pass fit() numpy arrays x and y (or dicts or lists of them), a tf.data.Dataset or "
        "a keras.utils.PyDataset, "
        f"which fitspeed can time and rewrite. Received: x of type {type(x).__name__}"
        f"{'' if y is None or isinstance(x, np.ndarray) else ' with y'}. Hand fit() one of those."
    )


def epoch_steps(steps_per_epoch: Any, data: Any, batch: int) -> int | None:
    """The steps in one epoch of the script's own fit(), or None where its data does not say.

    The trial cycles the data past an epoch's end to time whole executions;
    the tuner tries no steps_per_execution beyond this, which the real run
    would never reach (Keras then shows 64/43 in its progress bar).
    """
    if steps_per_epoch:
        return int(steps_per_epoch)
    if data.kind == "arrays" and data.x is not None:
        return max(1, math.ceil(data.samples / batch))
    if data.kind == "pydataset":
        return len(data.source)
    if data.kind == "dataset":
        count = int(data.source.cardinality())
        return count if count > 0 else None  # infinite or unknown
    return None


def _arrays(tree: Any) -> bool:
    """Whether `tree` is a numpy array, or a dict, list or tuple of them (Keras's multi-input and -output form)."""
    import keras
    import numpy as np

    leaves = keras.tree.flatten(tree)
    return bool(leaves) and all(isinstance(leaf, np.ndarray) for leaf in leaves)


def fit_kind(given: dict[str, Any]) -> str | None:
    """The `fitspeed.core.input_kinds` kind of what fit() was given, or None for what no input knob fits.

    Arrays are what Keras's ArrayDataAdapter takes (arrays, dicts and lists of
    them), asked of Keras itself.
    """
    import keras
    from keras.src.trainers.data_adapters.array_data_adapter import can_convert_arrays

    x = given.get("x")
    if isinstance(x, keras.utils.PyDataset):
        return "pydataset"
    if type(x).__module__.startswith("tensorflow") and hasattr(x, "element_spec"):
        return "dataset"
    if x is not None and can_convert_arrays((x, given.get("y"), given.get("sample_weight"))):
        return "arrays"
    return None


def not_applicable(config: Any, kind: str) -> dict[str, Any]:
    """The input knobs that do not apply to `kind`, put back to their defaults."""
    defaults = type(config)()
    return {knob: getattr(defaults, knob) for knob in config.changed().keys() & set(INPUT_KNOBS)
            if why_not(knob, kind, config.backend)}
