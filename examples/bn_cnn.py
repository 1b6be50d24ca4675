"""A small CNN with BatchNormalization, CIFAR-shaped: the model of the bf16 check in docs/benchmarks.

    PYTHONPATH=examples fitspeed tune bn_cnn:model --set batch_size=256

Three Conv-BatchNorm-ReLU blocks and a softmax head, 95,210 parameters, the
size of the 94k-parameter CNN on which mixed_bfloat16 ran 2.09x faster than
float32 on an AMD Zen 5 CPU with AVX512-BF16.
"""

from __future__ import annotations

import keras


def model() -> keras.Model:
    inputs = keras.Input((32, 32, 3))
    x = inputs
    for width in (32, 64, 128):
        x = keras.layers.Conv2D(width, 3, padding="same", use_bias=False)(x)
        x = keras.layers.BatchNormalization()(x)
        x = keras.layers.ReLU()(x)
        x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="bn_cnn")
