"""The model check's findings on user-style models, built here with real Keras layers."""

from __future__ import annotations

import doctest

import keras
import numpy as np
import pytest

from fitspeed.trial import model_lints


def test_docstring_examples() -> None:
    result = doctest.testmod(model_lints)
    assert result.attempted > 0 and result.failed == 0


def _model(*layers: keras.layers.Layer, shape: tuple[int, ...] = (10, 8)) -> keras.Model:
    inputs = keras.Input(shape)
    x = inputs
    for layer in layers:
        x = layer(x)
    return keras.Model(inputs, x)


def _by_layer(findings: list[dict]) -> dict[str, dict]:
    return {f["layer"]: f for f in findings}


def test_rnn_layers_off_the_fused_kernel_name_each_argument() -> None:
    model = _model(keras.layers.LSTM(16, activation="relu", recurrent_dropout=0.1, return_sequences=True,
                                     name="relu_lstm"),
                   keras.layers.GRU(16, reset_after=False, return_sequences=True, name="old_gru"),
                   keras.layers.Bidirectional(keras.layers.LSTM(8, unroll=True, return_sequences=True, name="unrolled")),
                   keras.layers.LSTM(16, name="fused"))
    found = _by_layer(model_lints.rnn_findings(model))
    assert set(found) == {"relu_lstm", "old_gru", "bidirectional"}  # once for the wrapper's two copies
    assert "activation='relu'" in found["relu_lstm"]["what"] and "recurrent_dropout=0.1" in found["relu_lstm"]["what"]
    assert found["relu_lstm"]["fix"] == "LSTM(activation=tanh, recurrent_dropout=0 (keep dropout= on the inputs))"
    assert found["old_gru"]["fix"] == "GRU(reset_after=True)"
    assert "unroll=True" in found["bidirectional"]["what"]


def test_an_output_that_is_not_float32_under_a_mixed_policy() -> None:
    model = _model(keras.layers.Dense(16, dtype="mixed_bfloat16"), keras.layers.Dense(4, dtype="mixed_bfloat16",
                                                                                     name="head"), shape=(8,))
    outputs = model(np.ones((2, 8), "float32"))
    found = model_lints.output_dtype_findings(model, outputs)
    assert [(f["layer"], f["check"]) for f in found] == [("head", "output-dtype")]
    assert "bfloat16" in found[0]["what"]
    fixed = _model(keras.layers.Dense(16, dtype="mixed_bfloat16"), keras.layers.Dense(4, dtype="mixed_bfloat16"),
                   keras.layers.Activation("softmax", dtype="float32"), shape=(8,))
    assert model_lints.output_dtype_findings(fixed, fixed(np.ones((2, 8), "float32"))) == []


@pytest.mark.parametrize(("accelerators", "flagged"), [([], True), (["/physical_device:GPU:0"], False)])
def test_channels_first_is_flagged_on_a_cpu_only(accelerators: list[str], flagged: bool) -> None:
    model = _model(keras.layers.Conv2D(8, 3, data_format="channels_first", name="nchw"), shape=(3, 16, 16))
    found = model_lints.channels_first_findings(model, accelerators)
    assert [f["layer"] for f in found] == (["nchw"] if flagged else [])


def test_sizes_embedding_conv_and_the_batch() -> None:
    inputs = keras.Input((12,), dtype="int32")
    x = keras.layers.Embedding(1000, 100, name="embed")(inputs)
    x = keras.layers.Conv1D(20, 3, name="conv")(x)
    x = keras.layers.Dense(256, name="wide")(x)
    model = keras.Model(inputs, keras.layers.Dense(3, name="out")(x))
    found = model_lints.size_findings(model, batch_size=50)
    whats = {f["what"]: f["severity"] for f in found}
    assert whats == {
        "Embedding input_dim (vocabulary)=1000 is a multiple of 8 but not of 128": "tpu",
        "Embedding output_dim=100 is not a multiple of 8": "warning",
        "Conv1D filters=20 is not a multiple of 8": "warning",
        "batch size=50 is not a multiple of 8": "warning",
    }  # Dense(256) is a multiple of 128; the output layer's 3 units are the task's
    batch = next(f for f in found if f["layer"] is None)
    assert batch["fix"].startswith("--set batch_size=56 ")
