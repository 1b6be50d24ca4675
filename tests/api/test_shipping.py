"""What a Python session hands fitspeed travels to the trial processes as files, or is refused in one sentence.

Each refusal is a `fitspeed.UserError` raised before any trial starts, with
what was expected, what was received and what to pass instead.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import keras
import numpy as np
import pytest

import fitspeed
from fitspeed.api.shipping import ship


def compiled_model(name: str = "small") -> keras.Model:
    inputs = keras.Input((6,))
    outputs = keras.layers.Dense(3, activation="softmax")(keras.layers.Dense(8, activation="relu")(inputs))
    model = keras.Model(inputs, outputs, name=name)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


class Subclassed(keras.Model):  # a model whose class lives in the caller: no trial process can import it
    def __init__(self) -> None:
        super().__init__()
        self.dense = keras.layers.Dense(2)

    def call(self, x):  # type: ignore[no-untyped-def]
        return self.dense(x)


X, Y = np.zeros((40, 6), "float32"), np.zeros(40, "int64")


def refused(call, *words: str) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(fitspeed.UserError) as caught:
        call()
    text = str(caught.value)
    for word in words:
        assert word in text, text
    return text


def test_a_subclassed_model_is_refused_with_the_builder_to_pass_instead(tmp_path: Path) -> None:
    model = Subclassed()
    model.compile(optimizer="adam", loss="mse")
    refused(lambda: ship(model, X, Y, folder=tmp_path), "subclassed model (Subclassed", "Pass the function that builds it")


def test_a_model_that_is_not_compiled_is_refused(tmp_path: Path) -> None:
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(2)])
    refused(lambda: ship(model, X, Y, folder=tmp_path), "Expected a compiled model", "model.compile(")


def test_a_builder_cloudpickle_cannot_ship_is_refused(tmp_path: Path) -> None:
    lock = threading.Lock()

    def build() -> keras.Model:
        with lock:
            return compiled_model()

    refused(lambda: ship(build, X, Y, folder=tmp_path), "cloudpickle cannot pickle it", "lock")


def test_a_generator_and_a_dataset_are_refused_with_what_to_pass_instead(tmp_path: Path) -> None:
    import tensorflow as tf

    model = compiled_model()
    generator = ((X[i:i + 8], Y[i:i + 8]) for i in range(0, 40, 8))
    refused(lambda: ship(model, generator, None, folder=tmp_path), "a generator", "data=a function that builds it")
    dataset = tf.data.Dataset.from_tensor_slices((X, Y)).batch(8)
    refused(lambda: ship(model, dataset, None, folder=tmp_path), "a tf.data.Dataset", "cannot be sent")

    class Batches(keras.utils.PyDataset):
        def __len__(self) -> int:
            return 1

        def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
            return X, Y

    refused(lambda: ship(model, Batches(), None, folder=tmp_path), "a keras.utils.PyDataset")


def test_x_and_y_of_different_lengths_are_refused(tmp_path: Path) -> None:
    refused(lambda: ship(compiled_model(), X, Y[:30], folder=tmp_path), "same, non-zero number of samples",
            "(40, 6)", "(30,)")
    refused(lambda: ship(compiled_model(), X, Y, validation_data=(X, Y, Y), folder=tmp_path),
            "validation_data as (x_val, y_val)")


def test_the_same_model_and_arrays_give_the_same_study_and_the_trial_reads_them_memory_mapped(tmp_path: Path) -> None:
    model = compiled_model()
    first = ship(model, X, Y, validation_data=(X[:8], Y[:8]), folder=tmp_path)
    again = ship(model, X.copy(), Y.copy(), validation_data=(X[:8], Y[:8]), folder=tmp_path)
    assert first == again  # the content names the files and the study: a rerun of the cell resumes it
    rebuilt = ship(compiled_model(), X, Y, validation_data=(X[:8], Y[:8]), folder=tmp_path)
    assert rebuilt == first  # the cell run again: Keras names its layers anew, and it is the same model
    other = ship(model, X + 1, Y, folder=tmp_path)
    assert other.name != first.name and other.data != first.data
    assert first.model.endswith(".keras") and Path(first.model).is_file()
    module, _, function = (first.data or "").partition(":")
    code = (f"import {module}, numpy; d = {module}.{function}(); "
            "print(sorted(d), type(d['x']).__name__, d['x'].shape, d['x_val'].shape)")
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(first.folder), "PATH": "/usr/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['x', 'x_val', 'y', 'y_val'] memmap (40, 6) (8, 6)"


def test_a_builder_from_a_cell_travels_by_value(tmp_path: Path) -> None:
    width = 5  # a closure over a plain value, as a notebook cell's function has

    def build() -> keras.Model:
        inputs = keras.Input((6,))
        model = keras.Model(inputs, keras.layers.Dense(width)(inputs), name="from_a_cell")
        model.compile(optimizer="sgd", loss="mse")
        return model

    shipped = ship(build, folder=tmp_path)
    module, _, function = shipped.model.partition(":")
    code = f"import {module}; m = {module}.{function}(); print(m.name, m.output_shape)"
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(shipped.folder), "PATH": "/usr/bin", "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("from_a_cell (None, 5)")
    assert shipped.data is None  # no data: the model's synthetic data


def test_a_mistake_from_python_raises_one_sentence_and_no_frame_of_fitspeed_s_insides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import traceback

    from fitspeed.api.result import TuneResult

    monkeypatch.chdir(tmp_path)
    calls = [lambda: fitspeed.tune(compiled_model(), X, Y[:30]),
             lambda: fitspeed.measure(compiled_model(), X, Y, config={"precision": "float8"}),
             lambda: fitspeed.compare(Subclassed(), X, Y, b={"steps_per_execution": 4}),
             lambda: TuneResult({"best": {"config": {}}, "baseline": {"config": {}}}).apply("not a model"),
             lambda: fitspeed.load(tmp_path / "missing.json")]
    for call in calls:
        with pytest.raises(fitspeed.UserError) as caught:
            call()
        inside = [Path(frame.filename).name for frame in traceback.extract_tb(caught.value.__traceback__)
                  if "/fitspeed/" in frame.filename]
        assert inside == ["errors.py"], (str(caught.value), inside)  # the one frame IPython hides
        assert caught.value.__cause__ is None and caught.value.__suppress_context__
