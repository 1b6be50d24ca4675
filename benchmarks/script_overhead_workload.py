"""One model and one data set, reachable both ways fitspeed can time them.

    module:function   script_overhead_workload:build with --data script_overhead_workload:data
    a script          python script_overhead_workload.py   (builds, compiles and fits the same)

`benchmarks/script_overhead.py` times the two against each other.
"""

import keras
import numpy as np
from keras import layers


def build():
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(16, 3, activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(32, 3, activation="relu"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(10),
    ])


def data():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, 2048).astype("int32")
    x = (rng.normal(size=(10, 28, 28, 1))[y] + rng.normal(scale=1.5, size=(2048, 28, 28, 1))).astype("float32")
    return x, y


if __name__ == "__main__":
    x, y = data()
    model = build()
    # as fitspeed compiles an uncompiled builder's model (fitspeed.trial.models.compile_model)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, batch_size=32, epochs=20, verbose=0)
