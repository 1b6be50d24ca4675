"""The remat knob in real Keras: a trial's model is built inside keras.RematScope, and trains to the same losses."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, QUICK, child_env, json_line, missing, run_on_backend

from fitspeed.core.backends import backend_of
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.record import Mode, Status, TrialRecord, TrialSpec
from fitspeed.measure.runner import run_trial


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_trial_under_remat_builds_its_layers_in_the_scope_and_trains_to_the_same_losses(
        backend: str, tmp_path: Path) -> None:
    if importlib.util.find_spec(backend) is None:
        missing(f"{backend} is not installed (pip install 'fitspeed[{backend}]')")
    curves = {}
    for remat in ("off", "full"):
        spec = TrialSpec(model="mlp", steps=6, repeats=2, seed=3, mode=Mode.TRAIN,
                         config=TrialConfig(backend=backend, remat=remat))
        record = run_trial(spec, env=child_env(), cwd=tmp_path)
        assert record.status == Status.OK, (record.reason, record.stderr_tail)
        curves[remat] = record.metrics.loss_curve
        notes = [note for note in record.notes if note.startswith("remat=")]
        if remat == "full":  # every layer of the model, the model itself too, was built inside the scope
            assert notes and notes[0].startswith("remat=full: 6 of 6 layers"), record.notes
        else:
            assert not notes
    assert len(curves["off"]) == 2
    assert curves["full"] == pytest.approx(curves["off"], rel=1e-5, abs=1e-6)  # recomputed, not changed


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_scope_sets_each_layers_remat_mode_and_the_backward_pass_recomputes(backend: str) -> None:
    if importlib.util.find_spec(backend) is None:
        missing(f"{backend} is not installed (pip install 'fitspeed[{backend}]')")
    code = """
    import json, numpy as np
    from fitspeed.core.config import TrialConfig
    from fitspeed.trial.apply import model_scope
    import keras
    calls = {"n": 0}
    class Counted(keras.layers.Layer):  # counts its forward calls: recomputed in the backward pass under remat
        def call(self, x):
            calls["n"] += 1
            return keras.ops.tanh(x)
    out = {}
    for mode in ("off", "full"):
        keras.utils.set_random_seed(0)
        with model_scope(TrialConfig(backend=keras.backend.backend(), remat=mode)):
            inputs = keras.Input((8,))
            model = keras.Model(inputs, keras.layers.Dense(3)(Counted()(keras.layers.Dense(16)(inputs))))
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True), run_eagerly=True)
        calls["n"] = 0
        x, y = np.random.RandomState(0).rand(32, 8).astype("float32"), np.random.RandomState(1).randint(0, 3, 32)
        loss = model.fit(x, y, batch_size=32, epochs=1, verbose=0).history["loss"][-1]
        out[mode] = {"modes": [str(layer._remat_mode.mode) if layer._remat_mode else None for layer in model.layers],
                     "calls": calls["n"], "loss": float(loss)}
        if keras.backend.backend() == "jax":  # JAX traces once: the recomputation is a checkpoint in the gradient
            import jax
            trainable = [v.value for v in model.trainable_variables]
            def total(weights, x):
                return model.stateless_call(weights, [], x)[0].sum()
            text = str(jax.make_jaxpr(jax.grad(total))(trainable, x))
            out[mode]["checkpoint"] = "checkpoint" in text or "remat" in text
    print(json.dumps(out))
    """
    done = run_on_backend(code, backend)
    out = json_line(done)
    assert out["off"]["modes"] == [None] * 4 and out["full"]["modes"][1:] == ["full"] * 3
    if backend == "torch":  # torch.utils.checkpoint runs the forward again for the gradient
        assert out["full"]["calls"] > out["off"]["calls"], out
    else:
        assert out["full"]["checkpoint"] and not out["off"]["checkpoint"], out
    assert out["full"]["loss"] == pytest.approx(out["off"]["loss"], rel=1e-6)


def test_tensorflow_cannot_do_remat_and_the_reason_still_holds() -> None:
    reason = backend_of("tensorflow").cannot("remat")
    assert reason and "tf.recompute_grad" in reason
    with pytest.raises(KnobError, match="tensorflow backend cannot do remat='full'"):
        TrialConfig(remat="full")
    code = """
    import numpy as np, keras
    with keras.RematScope(mode="full"):
        inputs = keras.Input((8,))
        model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Dense(16)(inputs)))
    model.compile("sgd", "sparse_categorical_crossentropy")
    try:
        model.fit(np.zeros((8, 8), "float32"), np.zeros(8, "int32"), verbose=0)
        print("trained")
    except Exception as error:
        print("refused:", error)
    """
    done = run_on_backend(code, "tensorflow")
    # once Keras trains this, TensorFlow can do remat: drop its reason from fitspeed.core.backends
    assert "keywords arguments only when eager execution" in done.stdout, done.stdout[-2000:]


def test_a_training_script_refuses_remat_with_the_reason(tmp_path: Path) -> None:
    if importlib.util.find_spec("jax") is None:
        missing("jax is not installed (pip install 'fitspeed[jax]')")
    results = tmp_path / "r.jsonl"
    done = subprocess.run([sys.executable, "-m", "fitspeed", "measure", *QUICK, "--set", "backend=jax", "--set",
                           "remat=full", "--results", str(results), "--", sys.executable,
                           str(FIXTURES / "scripts" / "portable_train.py")],
                          cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    record = TrialRecord.from_dict(json.loads(results.read_text().splitlines()[-1]))
    assert record.status == Status.FAILED and not record.user_error
    assert record.reason.startswith("remat is not applied to a training command: keras.RematScope acts on"), record


def test_best_json_builds_the_model_inside_the_scope() -> None:
    from fitspeed.core.best_json import snippet

    text = snippet(TrialConfig(backend="jax", remat="full"))
    assert "with keras.RematScope(mode='full'):\n    model = build_model()" in text
    assert "RematScope" not in snippet(TrialConfig(backend="jax"))
