"""Built-in model builders, and loading a user's `module:function` model.

Runs in the trial child only: it imports keras. Every builder honours the
process's image data format (`keras.config.image_data_format()`) and dtype
policy: BatchNormalization's axis follows the data format, and the softmax
output stays float32 under mixed precision.
"""

from __future__ import annotations

import importlib
import os
import sys
import zipfile
from collections.abc import Callable
from typing import Any

import keras
from keras import layers

from fitspeed.core.data_ref import is_callable_ref
from fitspeed.core.errors import WorkloadError
from fitspeed.core.workloads import MODELS, is_saved_model


def _channels_axis() -> int:
    return 1 if keras.config.image_data_format() == "channels_first" else -1


def _input(shape: tuple[int, ...]) -> Any:
    if len(shape) == 3 and keras.config.image_data_format() == "channels_first":
        shape = (shape[2], shape[0], shape[1])
    return keras.Input(shape=shape)


SHORT_RUN_MOMENTUM = 0.9  # BatchNormalization's moving statistics settle within tens of steps, not hundreds


def _conv_bn_relu(x: Any, filters: int, momentum: float = 0.99) -> Any:
    x = layers.Conv2D(filters, 3, padding="same", use_bias=True)(x)
    x = layers.BatchNormalization(axis=_channels_axis(), momentum=momentum)(x)
    return layers.Activation("relu")(x)


def _head(x: Any, num_classes: int) -> Any:
    x = layers.Dense(num_classes)(x)
    return layers.Activation("softmax", dtype="float32")(x)


def tiny(shape: tuple[int, ...], num_classes: int) -> keras.Model:
    inputs = _input(shape)
    x = _conv_bn_relu(inputs, 16)
    x = layers.MaxPooling2D(2)(x)
    x = _conv_bn_relu(x, 32)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, _head(x, num_classes), name="tiny")


def mlp(shape: tuple[int, ...], num_classes: int) -> keras.Model:
    inputs = keras.Input(shape=shape)
    x = layers.Flatten()(inputs)
    x = layers.Dense(128, activation="relu")(x)
    return keras.Model(inputs, _head(x, num_classes), name="mlp")


def attention(shape: tuple[int, ...], num_classes: int, width: int = 64, heads: int = 4) -> keras.Model:
    """One transformer encoder block over a sequence of token vectors, then a classifier.

    The tokens are projected to `width`, then a pre-norm block: multi-head
    self-attention and a feed-forward of 2 × `width`, each on a residual
    path. No position embedding: the synthetic sequences' classes differ in
    their tokens, and the pooled block still mixes them by attention.
    """
    inputs = keras.Input(shape=shape)
    x = layers.Dense(width)(inputs)
    h = layers.LayerNormalization()(x)
    h = layers.MultiHeadAttention(heads, width // heads)(h, h)
    x = layers.Add()([x, h])
    h = layers.LayerNormalization()(x)
    h = layers.Dense(2 * width, activation="gelu")(h)
    x = layers.Add()([x, layers.Dense(width)(h)])
    x = layers.LayerNormalization()(x)
    x = layers.GlobalAveragePooling1D()(x)
    return keras.Model(inputs, _head(x, num_classes), name="attention")


def _vgg_like(
    shape: tuple[int, ...], num_classes: int, widths: tuple[int, ...], dense: int, name: str,
    momentum: float = 0.99,
) -> keras.Model:
    inputs = _input(shape)
    x = inputs
    for width in widths:
        x = _conv_bn_relu(x, width, momentum)
        x = _conv_bn_relu(x, width, momentum)
        x = layers.MaxPooling2D(2)(x)
    x = layers.Flatten()(x)
    x = layers.Dense(dense)(x)
    x = layers.BatchNormalization(momentum=momentum)(x)
    x = layers.Activation("relu")(x)
    return keras.Model(inputs, _head(x, num_classes), name=name)


def cnn_low(shape: tuple[int, ...], num_classes: int) -> keras.Model:
    return _vgg_like(shape, num_classes, (64, 128, 256), 256, "cnn_low")


def cnn_high(shape: tuple[int, ...], num_classes: int) -> keras.Model:
    return _vgg_like(shape, num_classes, (128, 256, 512), 680, "cnn_high")


def cnn10(shape: tuple[int, ...], num_classes: int, widths: tuple[int, ...] = (64, 128, 256),
          momentum: float = 0.99) -> keras.Model:
    """Nine 3x3 convolutions in three stages of 64, 128 and 256 filters, then a classifier."""
    inputs = _input(shape)
    x = inputs
    for stage, width in enumerate(widths):
        for _ in range(3):
            x = _conv_bn_relu(x, width, momentum)
        if stage < 2:
            x = layers.AveragePooling2D(2)(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, _head(x, num_classes), name="cnn10")


def _wrn_block(x: Any, filters: int, stride: int, momentum: float = 0.99) -> Any:
    axis = _channels_axis()
    out = layers.BatchNormalization(axis=axis, momentum=momentum)(x)
    out = layers.Activation("relu")(out)
    shortcut = x
    if stride != 1 or x.shape[axis] != filters:
        shortcut = layers.Conv2D(filters, 1, strides=stride, use_bias=False)(out)
    out = layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(out)
    out = layers.BatchNormalization(axis=axis, momentum=momentum)(out)
    out = layers.Activation("relu")(out)
    out = layers.Conv2D(filters, 3, padding="same", use_bias=False)(out)
    return layers.Add()([shortcut, out])


def wide_resnet(
    shape: tuple[int, ...], num_classes: int, depth: int, widen: int, momentum: float = 0.99
) -> keras.Model:
    """Wide ResNet (Zagoruyko and Komodakis, 2016), pre-activation blocks."""
    blocks = (depth - 4) // 6
    inputs = _input(shape)
    x = layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
    for group, width in enumerate((16 * widen, 32 * widen, 64 * widen)):
        for block in range(blocks):
            stride = 2 if group > 0 and block == 0 else 1
            x = _wrn_block(x, width, stride, momentum)
    x = layers.BatchNormalization(axis=_channels_axis(), momentum=momentum)(x)
    x = layers.Activation("relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, _head(x, num_classes), name=f"wrn_{depth}_{widen}")


BUILDERS: dict[str, Callable[[tuple[int, ...], int], keras.Model]] = {
    "tiny": tiny,
    "mlp": mlp,
    "attention": attention,
    "cnn-low": cnn_low,
    "cnn-high": cnn_high,
    "cnn10": cnn10,
    "wrn-16-4": lambda shape, classes: wide_resnet(shape, classes, 16, 4),
    "wrn-28-10": lambda shape, classes: wide_resnet(shape, classes, 28, 10),
    # a quarter of the width, on 16x16 inputs, for runs of tens of steps: `fitspeed reproduce --quick` on a CPU
    "cnn-low-s": lambda shape, classes: _vgg_like(shape, classes, (16, 32, 64), 64, "cnn_low_s", SHORT_RUN_MOMENTUM),
    "cnn-high-s": lambda shape, classes: _vgg_like(shape, classes, (32, 64, 128), 170, "cnn_high_s",
                                                   SHORT_RUN_MOMENTUM),
    "cnn10-s": lambda shape, classes: cnn10(shape, classes, (16, 32, 64), SHORT_RUN_MOMENTUM),
    "wrn-16-4-s": lambda shape, classes: wide_resnet(shape, classes, 16, 1, SHORT_RUN_MOMENTUM),
}


def import_callable(ref: str, what: str) -> Callable[..., Any]:
    """Import `module:function`; a clear WorkloadError if it does not import."""
    if not is_callable_ref(ref):
        raise WorkloadError(
            f"Expected {what} as module:function. Received: {ref!r}. "
            "Write it as mypkg.models:build."
        )
    module_name, _, attr = ref.partition(":")
    # The trial runs with `python -P`: the working folder is not on sys.path, so a `keras.py`
    # there cannot shadow Keras. The user's own module may come from it: searched last.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise WorkloadError(
            f"Could not import module {module_name!r} for {what} {ref!r}: {error}. "
            "Run fitspeed from the folder that holds it, or add that folder to PYTHONPATH."
        ) from None
    function = getattr(module, attr, None)
    if not callable(function):
        raise WorkloadError(
            f"Expected {ref!r} to name a function in module {module_name!r}, "
            f"but {module_name!r} has no callable {attr!r}. Check the name after the colon."
        )
    return function


def build(ref: str) -> keras.Model:
    """Build a built-in model, call a user's builder, or rebuild a saved model from its config."""
    if ref in BUILDERS:
        info = MODELS[ref]
        return BUILDERS[ref](info.input_shape, info.num_classes)
    if is_saved_model(ref):
        return from_saved_config(ref)
    model = import_callable(ref, "a model builder")()
    if not isinstance(model, keras.Model):
        raise WorkloadError(
            f"Expected {ref!r} to return a keras.Model. Received: {type(model).__name__}. "
            "Return the model from your builder."
        )
    return model


def from_saved_config(path: str) -> keras.Model:
    """The model a `.keras` file describes, built fresh from its config (compiled as saved); its weights unread."""
    try:
        with zipfile.ZipFile(path) as archive:
            config = archive.read("config.json").decode("utf-8")
    except (OSError, KeyError, zipfile.BadZipFile) as error:
        raise WorkloadError(
            f"Expected a model saved by Keras 3 with model.save('model.keras'). Received: {path!r}, which cannot be "
            f"read as one ({error}). Save the model again with Keras 3."
        ) from None
    try:
        model = keras.models.model_from_json(config)
    except Exception as error:  # an unknown custom layer, a Lambda under safe mode: the user's model, not a crash
        raise WorkloadError(
            f"Could not rebuild the model saved in {path!r} from its config: {type(error).__name__}: {error}. "
            "Register its custom objects (keras.saving.register_keras_serializable) in a module fitspeed imports, "
            "or pass a module:function that builds it."
        ) from None
    if not isinstance(model, keras.Model):
        raise WorkloadError(f"Expected {path!r} to hold a keras.Model. Received: {type(model).__name__}.")
    return model


def compile_model(model: keras.Model, compile_kwargs: dict[str, Any]) -> None:
    """Compile with fitspeed's knobs; a compiled model keeps its loss, optimizer and metrics."""
    if model.compiled:
        # Keras keeps the original compile() arguments; reuse them as given, so
        # custom losses and metrics need no serialization round trip.
        saved = getattr(getattr(model, "_compile_config", None), "config", None)
        if saved is None:
            raise WorkloadError(
                "Expected the model to have been compiled with model.compile(). "
                "Return it uncompiled, or compiled with compile()."
            )
        model.compile(**{**saved, **compile_kwargs})
        return
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        **compile_kwargs,
    )
