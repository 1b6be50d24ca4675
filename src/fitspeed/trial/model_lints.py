"""What a look at the model's layers finds (`fitspeed doctor --model`), each with its cost and its fix.

Runs in the trial child (it reads Keras layers). The checks, and where each
cost comes from:

| check            | what it flags                                             | cost, documented in                          |
|------------------|-----------------------------------------------------------|----------------------------------------------|
| `size`           | Dense/RNN units, Conv filters, Embedding vocabulary and    | article 001 (Cloud TPU performance guide):   |
|                  | width, the batch size: not a multiple of 8 (fp16/bf16     | padded dimensions are wasted work; NVIDIA's  |
|                  | tensor cores, AMX tiles), or of 8 but not of 128 (TPU)    | tensor-core guide (multiples of 8)           |
| `rnn-fused`      | LSTM/GRU arguments that keep Keras off the fused cuDNN    | the LSTM and GRU docstrings' conditions      |
|                  | kernel (activation, recurrent_activation,                 |                                              |
|                  | recurrent_dropout, unroll, use_bias, reset_after)         |                                              |
| `output-dtype`   | a model output that is not float32 under a mixed policy   | Keras's mixed precision guide                |
| `channels-first` | layers in channels_first on a machine with no GPU         | TensorFlow's CPU convolutions are NHWC       |

A layer whose output is the model's output is left out of `size`: its width
is the number of classes or targets, which the task fixes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypedDict

import keras

TILE = 8  # fp16/bf16 tensor cores (NVIDIA), AMX tiles (Intel): operand dimensions in multiples of 8
TPU_TILE = 128  # the TPU's 128x128 matrix unit
SIZE_SOURCE = ("article 001 (Cloud TPU performance guide: padded dimensions are wasted work); "
               "NVIDIA's tensor-core guide (dimensions in multiples of 8 at fp16/bf16)")


class Finding(TypedDict):
    """One thing the model check found: what, what it costs, how to fix it, and where the claim comes from."""

    check: str  # which check found it ("size", "xla", …)
    layer: str | None
    what: str
    cost: str
    fix: str
    source: str  # where the claim comes from: a guide, an article, what was inspected or tried
    severity: str  # "warning", or "tpu" for what costs on a TPU alone


def finding(check: str, layer: str | None, what: str, cost: str, fix: str, source: str,
            severity: str = "warning") -> Finding:
    return {"check": check, "layer": layer, "what": what, "cost": cost, "fix": fix, "source": source,
            "severity": severity}


def padded(value: int, tile: int) -> int:
    """`value` rounded up to a multiple of `tile`.

    >>> padded(100, 8), padded(100, 128), padded(64, 8)
    (104, 128, 64)
    """
    return math.ceil(value / tile) * tile


def size_finding(what: str, layer: str | None, value: int, fix: Callable[[int], str]) -> Finding | None:
    """A finding for a size that is not a multiple of 8, or of 128; None for one that is both.

    `fix(size)` says how to set the size to `size`.

    >>> units = lambda size: f"units={size}"
    >>> item = size_finding("Dense units", "dense", 100, units)
    >>> item["what"], item["fix"]
    ('Dense units=100 is not a multiple of 8', 'units=104 (or 128 for a TPU)')
    >>> size_finding("Dense units", "dense", 64, units)["fix"], size_finding("Dense units", "d", 256, units)
    ('on a TPU: units=128', None)
    """
    if value % TPU_TILE == 0:
        return None
    to8, to128 = padded(value, TILE), padded(value, TPU_TILE)
    tpu_waste = f"on a TPU it is padded to {to128} ({to128 / value - 1:.0%} more work in this dimension)"
    if value % TILE:
        return finding("size", layer, f"{what}={value} is not a multiple of 8",
                       f"documented: fp16/bf16 tensor cores and AMX tiles work in multiples of 8, so it is "
                       f"padded to {to8} ({to8 / value - 1:.0%} more work) or left to slower kernels; {tpu_waste}",
                       f"{fix(to8)} (or {to128} for a TPU)", SIZE_SOURCE)
    return finding("size", layer, f"{what}={value} is a multiple of 8 but not of 128",
                   f"documented: {tpu_waste}; no cost on a GPU or CPU", f"on a TPU: {fix(to128)}", SIZE_SOURCE,
                   severity="tpu")


def _output_layers(model: keras.Model) -> set[str]:
    names = set()
    for tensor in getattr(model, "outputs", None) or []:
        history = getattr(tensor, "_keras_history", None)
        if history is not None:
            names.add(history[0].name)
    return names


def _sizes(layer: Any) -> list[tuple[str, int, str]]:
    """(what, value, the argument to change) for each size of `layer` that the checks look at."""
    kind = type(layer).__name__
    if isinstance(layer, keras.layers.Embedding):
        return [("Embedding input_dim (vocabulary)", layer.input_dim, "input_dim"),
                ("Embedding output_dim", layer.output_dim, "output_dim")]
    if isinstance(layer, keras.layers.Dense):
        return [(f"{kind} units", layer.units, "units")]
    if isinstance(layer, (keras.layers.LSTM, keras.layers.GRU, keras.layers.SimpleRNN)):
        return [(f"{kind} units", layer.units, "units")]
    if hasattr(layer, "filters") and hasattr(layer, "kernel_size") and layer.filters:
        return [(f"{kind} filters", layer.filters, "filters")]
    return []


def _setter(kind: str, argument: str) -> Callable[[int], str]:
    return lambda size: f"{kind}({argument}={size}), retrained"


def size_findings(model: keras.Model, batch_size: int) -> list[Finding]:
    outputs = _output_layers(model)
    found: list[Finding] = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if layer.name in outputs:
            continue
        for what, value, argument in _sizes(layer):
            item = size_finding(what, layer.name, int(value), _setter(type(layer).__name__, argument))
            if item:
                found.append(item)
    item = size_finding("batch size", None, batch_size,
                        lambda size: f"--set batch_size={size} (re-tune the learning rate: it changes the recipe)")
    if item:
        found.append(item)
    return found


def _named(function: Any, name: str) -> bool:
    return getattr(function, "__name__", None) == name


def rnn_findings(model: keras.Model) -> list[Finding]:
    """LSTM and GRU layers whose arguments keep Keras's TensorFlow backend off the fused cuDNN kernel."""
    found: list[Finding] = []
    wrapped: dict[int, str] = {}  # a Bidirectional's two copies of its layer are reported once, by its name
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.Bidirectional):
            wrapped[id(layer.forward_layer)] = layer.name
            wrapped[id(layer.backward_layer)] = ""
        if not isinstance(layer, (keras.layers.LSTM, keras.layers.GRU)) or wrapped.get(id(layer)) == "":
            continue
        name = wrapped.get(id(layer)) or layer.name
        cell, kind = layer.cell, type(layer).__name__
        off = []
        if not _named(cell.activation, "tanh"):
            off.append(("activation", getattr(cell.activation, "__name__", str(cell.activation)), "tanh"))
        if not _named(cell.recurrent_activation, "sigmoid"):
            off.append(("recurrent_activation",
                        getattr(cell.recurrent_activation, "__name__", str(cell.recurrent_activation)), "sigmoid"))
        if cell.recurrent_dropout:
            off.append(("recurrent_dropout", cell.recurrent_dropout, "0 (keep dropout= on the inputs)"))
        if layer.unroll:
            off.append(("unroll", True, "False"))
        if not cell.use_bias:
            off.append(("use_bias", False, "True"))
        if isinstance(layer, keras.layers.GRU) and not cell.reset_after:
            off.append(("reset_after", False, "True"))
        if getattr(layer, "use_cudnn", "auto") is False:
            off.append(("use_cudnn", False, '"auto"'))
        if not off:
            continue
        given = ", ".join(f"{name}={value!r}" for name, value, _ in off)
        fix = ", ".join(f"{name}={wanted}" for name, _, wanted in off)
        found.append(finding(
            "rnn-fused", name, f"{kind} with {given} cannot use the fused cuDNN kernel",
            "documented: on an NVIDIA GPU Keras then runs the generic step-by-step loop instead of cuDNN's "
            "fused kernel, several times slower for long sequences; no cost on a CPU",
            f"{kind}({fix})", f"the keras.layers.{kind} docstring (requirements of the cuDNN implementation)"))
    return found


def output_dtype_findings(model: keras.Model, outputs: Any) -> list[Finding]:
    """Outputs that are not float32 while some layer computes in float16 or bfloat16."""
    mixed = any(keras.backend.standardize_dtype(layer.dtype_policy.compute_dtype) in ("float16", "bfloat16")
                for layer in model._flatten_layers(include_self=False, recursive=True))
    if not mixed:
        return []
    names = sorted(_output_layers(model)) or [model.layers[-1].name if model.layers else model.name]
    found: list[Finding] = []
    flat = keras.tree.flatten(outputs)
    for index, tensor in enumerate(flat):
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        if dtype == "float32":
            continue
        layer = names[index] if index < len(names) and len(names) == len(flat) else names[-1]
        found.append(finding(
            "output-dtype", layer, f"the model's output is {dtype} under a mixed precision policy",
            "documented: a softmax or loss computed in float16/bfloat16 loses precision and can overflow "
            "(Keras mixed precision guide); no speed gain, the last layer is small",
            'give the last layer dtype="float32", or end with keras.layers.Activation("linear", dtype="float32")',
            "Keras mixed precision guide (outputs in float32)"))
    return found


def channels_first_findings(model: keras.Model, accelerators: list[str]) -> list[Finding]:
    """Layers in channels_first on a machine with no GPU."""
    if any("GPU" in name.upper() or "CUDA" in name.upper() for name in accelerators):
        return []
    layers = [layer.name for layer in model._flatten_layers(include_self=False, recursive=True)
              if getattr(layer, "data_format", None) == "channels_first"]
    if not layers:
        return []
    shown = ", ".join(layers[:5]) + (f" and {len(layers) - 5} more" if len(layers) > 5 else "")
    return [finding(
        "channels-first", layers[0], f"{len(layers)} layer(s) in channels_first on a CPU: {shown}",
        "documented: TensorFlow's CPU convolutions are channels_last (NHWC); without oneDNN a channels_first "
        "Conv2D does not run at all (\"The Conv2D op currently only supports the NHWC tensor format on the CPU\"), "
        "with oneDNN the layout is converted at every layer",
        "channels_last on a CPU: --set data_format=channels_last, or build the model with "
        "keras.config.set_image_data_format(\"channels_last\")",
        "TensorFlow's Conv2D CPU kernel; article 004 (channels_first pays on a GPU only)")]


def examine(model: keras.Model, batch_size: int, outputs: Any, accelerators: list[str]) -> list[Finding]:
    """Every finding of the static checks, in the order of the table above."""
    return [*size_findings(model, batch_size), *rnn_findings(model), *output_dtype_findings(model, outputs),
            *channels_first_findings(model, accelerators)]
