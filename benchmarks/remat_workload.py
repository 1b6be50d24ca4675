"""A deep MLP whose activations, not its weights, fill memory at a large batch: `benchmarks/remat.py`'s model.

    module:function   remat_workload:deep_mlp   (24 Dense layers of 128 units)
"""

import keras
from keras import layers


def deep_mlp():
    inputs = keras.Input((64,))
    x = inputs
    for _ in range(24):
        x = layers.Dense(128, activation="relu")(x)
    outputs = layers.Dense(10, activation="softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs, name="deep_mlp")
