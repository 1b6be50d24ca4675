"""The proof of a rewrite: the original and the rewritten model agree on a probe batch.

Both models run in inference mode on the same seeded batch; the largest absolute
difference of their outputs must stay within the tolerance of the least precise
compute dtype either model uses:

| compute dtype | tolerance on max abs difference                  |
|---------------|--------------------------------------------------|
| float32       | 1e-4                                             |
| float16       | 1e-2 times the output's scale (max(1, max abs))  |
| bfloat16      | 5e-2 times the output's scale                    |

16-bit formats keep 11 (float16) or 8 (bfloat16) bits of mantissa: a layer
rounds each value by up to 2^-11 or 2^-8 of itself, and a deep network adds such
roundings up; a layout mistake (channels read as rows, a kernel in the wrong
order) moves outputs by far more.

A backend that cannot run the rewritten model here (TensorFlow without oneDNN
runs no channels_first convolution on a CPU) refuses the rewrite with its own
one-line message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypedDict

import keras
import numpy as np

from fitspeed.core.record import brief_reason
from fitspeed.trial.transform import Refused
from fitspeed.trial.transform.rebuild import graph_inputs

TOLERANCES = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}
PROBE_SIZE = 4


class CheckRecord(TypedDict):
    """A `Check` as the record holds it."""

    what: str
    max_abs_diff: float
    tolerance: float
    compute_dtype: str
    probe: list[int]


@dataclass(frozen=True)
class Check:
    what: str  # the knob checked, as name=value
    max_abs_diff: float
    tolerance: float  # the bound the difference was held to, scale included
    compute_dtype: str
    probe: tuple[int, ...]  # the shape of the (first) probe input

    def to_dict(self) -> CheckRecord:
        return {"what": self.what, "max_abs_diff": self.max_abs_diff, "tolerance": self.tolerance,
                "compute_dtype": self.compute_dtype, "probe": list(self.probe)}


def compute_dtype(*models: keras.Model) -> str:
    """The least precise floating compute dtype any layer of `models` runs in."""
    used = {str(layer.dtype_policy.compute_dtype) for model in models for layer in _layers(model)}
    return next((dtype for dtype in ("bfloat16", "float16") if dtype in used), "float32")


def _layers(model: keras.Model) -> list[keras.layers.Layer]:
    return [inner for layer in model.layers
            for inner in (_layers(layer) if isinstance(layer, keras.Model) else [layer])]


def probe_batch(model: keras.Model, seed: int) -> Any:
    """A seeded batch shaped like the model's inputs: uniform [0, 1) floats, or 0/1 integers."""
    rng = np.random.default_rng(seed)

    def make(tensor: Any) -> np.ndarray:
        shape = (PROBE_SIZE, *(8 if d is None else int(d) for d in tensor.shape[1:]))
        if "int" in str(tensor.dtype):
            return rng.integers(0, 2, size=shape).astype(str(tensor.dtype))
        return rng.random(shape, dtype=np.float32)

    return keras.tree.map_structure(make, graph_inputs(model))


def outputs(model: keras.Model, batch: Any) -> list[np.ndarray]:
    result = model(batch, training=False)
    return [np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(t, "float32"))) for t in keras.tree.flatten(result)]


def backend_line(error: BaseException) -> str:
    r"""The backend's own sentence in an error Keras wrapped around a layer call.

    Keras adds the layer's name before it and the call's arguments after it, and
    TensorFlow its function node and terminal colours:

    >>> backend_line(RuntimeError("Exception encountered when calling Conv2D.call().\n\n\x1b[1m{{function_node "
    ...     "__wrapped__Conv2D}} The Conv2D op currently only supports the NHWC tensor format on the CPU. The op was "
    ...     "given the format: NCHW [Op:Conv2D]\x1b[0m\n\nArguments received by Conv2D.call():\n  • inputs=x"))
    'RuntimeError: The Conv2D op currently only supports the NHWC tensor format on the CPU. The op was given the format: NCHW'
    """
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).split("\n\nArguments received by")[0]
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text)
    text = re.sub(r"\s*\[Op:\w+\]", "", text)
    return brief_reason(f"{type(error).__name__}: {text}")


def compare(original: keras.Model, rewritten: keras.Model, what: str, seed: int = 0) -> Check:
    """Run both models on the probe batch; a Check, or Refused when they differ or the backend cannot run it."""
    batch = probe_batch(original, seed)
    expected = outputs(original, batch)
    try:
        received = outputs(rewritten, batch)
    except Exception as error:  # the backend's own refusal: one line of it
        line = backend_line(error)
        hint = (" TensorFlow runs channels_first convolutions on a CPU only with oneDNN on "
                "(TF_ENABLE_ONEDNN_OPTS=1, the onednn knob)." if "NHWC" in line else "")
        raise Refused(f"{what} cannot run on this machine's backend: {line}.{hint}") from None
    dtype = compute_dtype(original, rewritten)
    scale = 1.0 if dtype == "float32" else max([1.0, *(float(np.max(np.abs(e))) for e in expected if e.size)])
    tolerance = TOLERANCES[dtype] * scale
    if len(expected) != len(received) or any(e.shape != r.shape for e, r in zip(expected, received)):
        raise Refused(f"{what} changed the model's output shapes: {[e.shape for e in expected]} became "
                      f"{[r.shape for r in received]}")
    diff = max((float(np.max(np.abs(e - r))) for e, r in zip(expected, received) if e.size), default=0.0)
    first = keras.tree.flatten(batch)[0]
    check = Check(what, diff, tolerance, dtype, tuple(first.shape))
    if not diff <= tolerance:  # NaN fails too
        raise Refused(f"{what} changed what the model computes: on a probe batch its outputs differ by up to "
                      f"{diff:.3g}, over the {tolerance:.3g} allowed in {dtype}")
    return check
