"""fitspeed.trial.faults: the test-only faults the numerics guard must catch, applied to a real Keras model and data."""

from __future__ import annotations

import numpy as np
import pytest

from fitspeed.trial import faults


def _model():  # noqa: ANN202 - a keras.Model
    import keras

    inputs = keras.Input((4,))
    outputs = keras.layers.Dense(3, activation="softmax")(keras.layers.Dense(8, activation="relu")(inputs))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    return model


def test_softmax_float16_computes_the_output_layer_in_float16(monkeypatch: pytest.MonkeyPatch) -> None:
    from fitspeed.trial.transform.rewrite import output_dtype

    model = _model()
    assert output_dtype(model) == "float32"
    monkeypatch.setenv(faults.ENV, faults.SOFTMAX_FLOAT16)
    note = faults.inject(model)
    assert note is not None and "float16" in note
    assert output_dtype(model) == "float16" and "float16" in str(model(np.ones((2, 4), "float32")).dtype)
    assert float(model.optimizer.learning_rate) == pytest.approx(1e-3)  # nothing else changed


def test_a_learning_rate_fault_multiplies_the_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model()
    monkeypatch.setenv(faults.ENV, "lr_x10")
    assert faults.inject(model) == "learning rate 0.001 x 10 = 0.01"
    assert float(model.optimizer.learning_rate) == pytest.approx(1e-2)


def test_label_shuffle_permutes_the_training_labels_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from fitspeed.trial.data.kinds import ArrayData, DatasetData

    data = ArrayData(x=np.zeros((100, 4)), y=np.arange(100) % 10, x_val=np.zeros((10, 4)), y_val=np.arange(10))
    assert faults.relabel(data, 0) is data  # no fault: the data as it is
    monkeypatch.setenv(faults.ENV, faults.LABEL_SHUFFLE)
    shuffled = faults.relabel(data, 0)
    assert sorted(shuffled.y.tolist()) == sorted(data.y.tolist()) and (shuffled.y != data.y).mean() > 0.5
    assert shuffled.y_val is data.y_val and shuffled.x is data.x
    assert (faults.relabel(data, 1).y != shuffled.y).any()  # each seed its own permutation
    assert faults.inject(_model()) is not None  # the trial's notes say a fault was injected
    with pytest.raises(ValueError, match="Expected arrays"):
        faults.relabel(DatasetData(source=object()), 0)
