"""data_format: what happens to each layer when a model moves to the other image layout.

Every tensor of the rewritten graph has a layout relative to the original:

- `None`: the same values as in the original (inputs, Dense outputs, pooled vectors);
- `Image(rank)`: an image tensor that the original held in the source format and
  the rewrite holds in the target format (its axes transposed by `to_target`);
- `Flat(order)`: a rank-2 tensor whose features are reordered, `new[:, i] == old[:, order[i]]`
  (a Flatten of an Image that feeds only Dense layers; their kernels' rows follow `order`).

The rules, per layer, given the layouts of its inputs:

| layer                                    | rewrite                                                  |
|------------------------------------------|----------------------------------------------------------|
| a layer with `data_format` (Conv*,       | rebuilt in the target format; an unchanged input is      |
| pooling, global pooling, UpSampling,     | permuted once, right before it (so the user's data stays |
| ZeroPadding, Cropping, image preprocess) | as it is); a global pooling without keepdims gives None  |
| BatchNormalization, LayerNormalization,  | `axis` mapped to the target format (multi-axis weights   |
| GroupNormalization, UnitNormalization,   | transposed to match)                                     |
| RMSNormalization, Softmax, Concatenate   |                                                          |
| elementwise (Activation, ReLU, Dropout,  | unchanged; merges get all their image inputs in one      |
| Add, Multiply, scalar Rescaling, ...)    | layout                                                   |
| Flatten of an Image                      | flattens the target layout as it is when only Dense      |
|                                          | layers read it (their kernel rows permuted: no runtime   |
|                                          | cost); otherwise Keras's own `Flatten(data_format=...)`  |
|                                          | keeps the original element order                         |
| a model output that is an Image          | permuted back, so outputs and labels keep their layout   |
| anything else reading an Image or Flat   | refused, with the layer's name: Lambda, Reshape, Permute,|
| (Lambda, Reshape, Permute, Dense on an   | custom layers, nested models, ConvLSTM, ...              |
| image, custom layers, nested models)     |                                                          |
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import keras
import numpy as np

from fitspeed.trial.transform import Refused

FORMATS = ("channels_last", "channels_first")

# Layers Keras builds for either layout through their `data_format` argument. Flatten is
# handled on its own; ConvLSTM has a time axis the other layouts do not, STFTSpectrogram reads audio.
_NOT_IMAGE = ("ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D", "Flatten", "STFTSpectrogram")
FORMAT_LAYERS: tuple[Any, ...] = tuple(
    {
        cls
        for name in dir(keras.layers)
        if isinstance(cls := getattr(keras.layers, name), type)
        and issubclass(cls, keras.layers.Layer)
        and "data_format" in inspect.signature(cls).parameters
        and cls.__name__ not in _NOT_IMAGE
    }
)
AXIS_LAYERS = (
    keras.layers.BatchNormalization,
    keras.layers.LayerNormalization,
    keras.layers.GroupNormalization,
    keras.layers.UnitNormalization,
    keras.layers.RMSNormalization,
    keras.layers.Softmax,
    keras.layers.Concatenate,
)
# Between a Flatten and the Dense layers that read it, these keep each feature where it is.
FEATURE_WISE = (
    keras.layers.Activation,
    keras.layers.ReLU,
    keras.layers.LeakyReLU,
    keras.layers.ELU,
    keras.layers.Dropout,
    keras.layers.GaussianNoise,
    keras.layers.GaussianDropout,
    keras.layers.AlphaDropout,
    keras.layers.ActivityRegularization,
    keras.layers.Identity,
)
ELEMENTWISE = (
    *FEATURE_WISE,
    keras.layers.Rescaling,
    keras.layers.Add,
    keras.layers.Subtract,
    keras.layers.Multiply,
    keras.layers.Average,
    keras.layers.Maximum,
    keras.layers.Minimum,
)


@dataclass(frozen=True)
class Image:
    rank: int


@dataclass(frozen=True, eq=False)
class Flat:
    order: np.ndarray


Layout = Image | Flat | None


def to_target(rank: int, target: str) -> tuple[int, ...]:
    """The transpose that takes a rank-`rank` tensor from the other format into `target`.

    >>> to_target(4, "channels_first"), to_target(4, "channels_last"), to_target(3, "channels_first")
    ((0, 3, 1, 2), (0, 2, 3, 1), (0, 2, 1))
    """
    if target == "channels_first":
        return (0, rank - 1, *range(1, rank - 1))
    return (0, *range(2, rank), 1)


def from_target(rank: int, target: str) -> tuple[int, ...]:
    """The transpose back: `from_target(r, t)` undoes `to_target(r, t)`.

    >>> from_target(4, "channels_first")
    (0, 2, 3, 1)
    """
    return to_target(rank, "channels_last" if target == "channels_first" else "channels_first")


def map_axis(axis: int, rank: int, target: str) -> int:
    """Where the source layout's `axis` sits in the target layout.

    >>> map_axis(-1, 4, "channels_first"), map_axis(1, 4, "channels_last"), map_axis(2, 4, "channels_first")
    (1, 3, 3)
    """
    return to_target(rank, target).index(axis % rank)


@dataclass
class Plan:
    """What one layer call becomes: its config edits, which inputs to permute first, its output layout."""

    config: dict[str, Any] = field(default_factory=dict)
    permute_inputs: tuple[int, ...] = ()  # positions (in the flattened inputs) of unchanged image inputs
    output: Layout = None
    weights: Callable[[list[np.ndarray]], list[np.ndarray]] | None = None
    notes: tuple[str, ...] = ()
    remove: bool = False  # a Permute the rewrite makes needless: its input passes straight on


def describe(layer: keras.layers.Layer) -> str:
    return f"{type(layer).__name__} {layer.name!r}"


def _is_keras(layer: keras.layers.Layer) -> bool:
    return type(layer).__module__.startswith("keras.")


class Rules:
    """The data_format rules for one rewrite into `target` (see the module's table)."""

    def __init__(self, target: str, dense_only: Callable[[keras.layers.Layer], bool]) -> None:
        if target not in FORMATS:
            raise ValueError(f"unknown data_format {target!r}")
        self.target = target
        self.source = FORMATS[1 - FORMATS.index(target)]
        self.dense_only = dense_only  # whether only Dense layers (through feature-wise ones) read a layer's output

    def refuse(self, layer: keras.layers.Layer, why: str) -> Refused:
        return Refused(f"data_format={self.target} cannot be applied: {describe(layer)} {why}. Remove or replace "
                       f"that layer, or keep data_format={self.source}.")

    def plan(self, layer: keras.layers.Layer, layouts: Sequence[Layout], shapes: Sequence[tuple[Any, ...]]) -> Plan:
        """One call of `layer` on tensors of these layouts and (rewritten) shapes."""
        ranks = [len(shape) for shape in shapes]
        touched = [i for i, layout in enumerate(layouts) if layout is not None]
        if isinstance(layer, FORMAT_LAYERS) and _is_keras(layer):
            return self._format_layer(layer, layouts, ranks)
        if isinstance(layer, keras.layers.Permute) and _is_keras(layer) and len(ranks) == 1:
            dims = tuple(layer.get_config()["dims"])
            if layouts[0] is None and dims == to_target(ranks[0], self.source)[1:]:
                note = f"removed: it moved the input to {self.source}"
                return Plan(remove=True, output=Image(ranks[0]), notes=(note,))
            if isinstance(layouts[0], Image) and dims == to_target(ranks[0], self.target)[1:]:
                return Plan(remove=True, notes=(f"removed: the tensor is already {self.target}",))
        if not touched:
            return Plan()
        if not _is_keras(layer) or isinstance(layer, keras.Model):
            kind = "is a nested model" if isinstance(layer, keras.Model) else "is a custom layer"
            raise self.refuse(layer, f"{kind} that reads an image tensor, and fitspeed cannot tell what it does "
                                     "with the channels axis")
        if any(isinstance(layouts[i], Flat) for i in touched):
            if isinstance(layer, keras.layers.Dense) and len(layouts) == 1:
                order = layouts[0].order  # type: ignore[union-attr]
                return Plan(weights=lambda w: [w[0][order], *w[1:]],
                            notes=("kernel rows permuted to the Flatten's new element order",))
            if isinstance(layer, FEATURE_WISE):
                return Plan(output=layouts[0])
            raise self.refuse(layer, "reads a flattened image whose element order changed")
        if isinstance(layer, keras.layers.Flatten):
            return self._flatten(layer, shapes[0])
        if isinstance(layer, AXIS_LAYERS):
            return self._axis_layer(layer, layouts, ranks)
        if isinstance(layer, ELEMENTWISE):
            return self._elementwise(layer, layouts, ranks)
        if isinstance(layer, keras.layers.Lambda):
            raise self.refuse(layer, "runs Python code on an image tensor, which fitspeed cannot rewrite")
        if isinstance(layer, (keras.layers.Reshape, keras.layers.Permute)):
            raise self.refuse(layer, f"reads the {self.source} element order of an image tensor")
        raise self.refuse(layer, "reads an image tensor, and fitspeed does not know how it uses the channels "
                                 "axis")

    def _format_layer(self, layer: keras.layers.Layer, layouts: Sequence[Layout], ranks: Sequence[int]) -> Plan:
        fmt = layer.get_config().get("data_format")
        if len(layouts) != 1:
            raise self.refuse(layer, "takes several inputs")
        if fmt == self.target:
            if layouts[0] is not None:
                raise self.refuse(layer, f"is already {self.target} while the layers before it are {self.source}")
            return Plan()
        if isinstance(layouts[0], Flat):
            raise self.refuse(layer, "reads a flattened image")
        keepdims = layer.get_config().get("keepdims", True)
        output: Layout = Image(ranks[0]) if keepdims else None
        return Plan(config={"data_format": self.target}, permute_inputs=(0,) if layouts[0] is None else (),
                    output=output)

    def _flatten(self, layer: keras.layers.Layer, held_shape: tuple[Any, ...]) -> Plan:
        """Flatten of an image tensor: keep the element order, by the Dense kernels or by Keras's Flatten."""
        source_first = layer.get_config().get("data_format") == "channels_first"
        rank = len(held_shape)
        if any(d is None for d in held_shape[1:]):  # Keras's own Flatten keeps the order
            if source_first != (self.source == "channels_first"):
                raise self.refuse(layer, "flattens an image of unknown shape in the other format's order")
            return Plan(config={"data_format": self.target}, notes=("keeps the original element order",))
        held_axes = to_target(rank, self.target)  # the rewrite's axis i is the original's axis held_axes[i]
        shape = [0] * (rank - 1)
        for i in range(1, rank):
            shape[held_axes[i] - 1] = int(held_shape[i])
        labels = np.arange(int(np.prod(shape))).reshape(shape)  # each element of the original tensor, by name
        old = _flatten_labels(labels, source_first)
        held = labels.transpose([a - 1 for a in held_axes[1:]])  # as the rewrite holds it
        position = np.argsort(old)
        if self.dense_only(layer):  # no transpose at run time: the Dense kernels take the new order
            order = position[_flatten_labels(held, False)]
            identity = bool(np.array_equal(order, np.arange(order.size)))
            return Plan(config={"data_format": "channels_last"}, output=None if identity else Flat(order))
        for fmt in FORMATS:
            if np.array_equal(position[_flatten_labels(held, fmt == "channels_first")], np.arange(labels.size)):
                return Plan(config={"data_format": fmt}, notes=("keeps the original element order",))
        raise self.refuse(layer, "flattens an image in an order that no Flatten of the rewritten model "
                                 "reproduces")

    def _axis_layer(self, layer: keras.layers.Layer, layouts: Sequence[Layout], ranks: Sequence[int]) -> Plan:
        config = layer.get_config()
        rank = ranks[0]
        if any(r != rank for r in ranks):
            raise self.refuse(layer, "joins tensors of different ranks")
        permute = tuple(i for i, layout in enumerate(layouts) if layout is None)
        axis = config["axis"]
        if isinstance(axis, int):
            return Plan(config={"axis": map_axis(axis, rank, self.target)}, permute_inputs=permute,
                        output=Image(rank))
        old = sorted(a % rank for a in axis)
        new = sorted(map_axis(a, rank, self.target) for a in old)
        held = to_target(rank, self.target)  # target axis a holds source axis held[a]
        # a weight holds one dimension per axis, in sorted order: reorder it for the new axes
        dims = [old.index(held[a]) for a in new]
        if dims == sorted(dims):
            return Plan(config={"axis": new}, permute_inputs=permute, output=Image(rank))
        return Plan(config={"axis": new}, permute_inputs=permute, output=Image(rank),
                    weights=lambda w: [np.transpose(v, dims) if v.ndim == len(dims) else v for v in w],
                    notes=(f"weights transposed to the new axes ({tuple(dims)})",))

    def _elementwise(self, layer: keras.layers.Layer, layouts: Sequence[Layout], ranks: Sequence[int]) -> Plan:
        rank = ranks[0]
        if any(r != rank for r in ranks):
            raise self.refuse(layer, "broadcasts tensors of different ranks against an image")
        config = layer.get_config()
        if config.get("noise_shape") is not None:
            raise self.refuse(layer, "has a noise_shape laid out for the source format")
        if isinstance(layer, keras.layers.Rescaling) and not all(
            np.ndim(config.get(key, 0)) == 0 for key in ("scale", "offset")
        ):
            raise self.refuse(layer, "scales each channel, laid out for the source format")
        permute = tuple(i for i, layout in enumerate(layouts) if layout is None)
        return Plan(permute_inputs=permute, output=Image(rank))


def _flatten_labels(labels: np.ndarray, channels_first: bool) -> np.ndarray:
    """What Keras's Flatten gives for a tensor whose elements are `labels` (no batch axis)."""
    if channels_first and labels.ndim > 1:  # Keras moves channels last before flattening
        labels = labels.transpose([*range(1, labels.ndim), 0])
    return labels.reshape(-1)
