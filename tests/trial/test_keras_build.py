"""`keras_build.before_fit`: a compiled model's training state built from one batch's shapes, before fit().

It uses Keras's private `Trainer._symbolic_build`; these tests fail when Keras
renames it or changes what it builds. That the guard's runs train the same
built first is checked on a real guard run in tests/search/test_guard_runs.py.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from fitspeed.trial import keras_build


def _compiled() -> keras.Model:
    inputs = keras.Input((6,))
    outputs = keras.layers.Dense(3, activation="softmax")(keras.layers.Dense(8, activation="relu")(inputs))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def _data(n: int = 32) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 6)).astype("float32"), rng.integers(0, 3, n)


def _unbuilt(model: keras.Model) -> list[str]:
    """What fit() would still build in its first trace: the optimizer, the compiled metrics."""
    return [name for name, built in (("optimizer", model.optimizer.built),
                                     ("metrics", model._compile_metrics.built)) if not built]


def test_arrays_build_the_optimizer_and_metrics_before_fit_and_train_as_a_plain_fit() -> None:
    x, y = _data()
    keras.utils.set_random_seed(0)
    plain = _compiled()
    keras.utils.set_random_seed(0)
    first = _compiled()
    assert _unbuilt(first) == ["optimizer", "metrics"]
    assert keras_build.before_fit(first, {"x": x, "y": y, "batch_size": 8})
    assert _unbuilt(first) == []
    assert int(first.optimizer.iterations.numpy()) == 0  # built, not stepped
    losses = [model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
              for model in (plain, first)]
    assert losses[0] == losses[1]
    assert all(np.array_equal(a, b) for a, b in zip(plain.get_weights(), first.get_weights(), strict=True))


def test_a_dataset_builds_from_its_element_spec_without_drawing_a_batch() -> None:
    x, y = _data()
    drawn = []

    def note(a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        tf.py_function(lambda: drawn.append(1), [], [])
        return a, b

    model = _compiled()
    assert keras_build.before_fit(model, {"x": tf.data.Dataset.from_tensor_slices((x, y)).map(note).batch(8)})
    assert _unbuilt(model) == [] and drawn == []


def test_data_only_a_batch_would_describe_is_left_to_fit() -> None:
    class Batches(keras.utils.PyDataset):
        def __len__(self) -> int:
            return 4

        def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
            x, y = _data(8)
            return x, y

    model = _compiled()
    assert not keras_build.before_fit(model, {"x": Batches()})
    assert _unbuilt(model) == ["optimizer", "metrics"]


def test_a_model_made_under_a_strategy_is_left_to_fit_which_builds_it_in_the_strategy_s_scope() -> None:
    x, y = _data()
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
        model = _compiled()
    assert not keras_build.before_fit(model, {"x": x, "y": y, "batch_size": 8})
    assert _unbuilt(model) == ["optimizer", "metrics"]
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert _unbuilt(model) == []
