"""Keras 3 options that speak to speed, as knobs: each does in real Keras what the knob table says."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import child_env, json_line, missing, run_on_backend

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialSpec
from fitspeed.measure.runner import run_trial


def test_auto_scale_loss_false_trains_mixed_float16_without_the_loss_scale_optimizer(tmp_path: Path) -> None:
    code = """
    import json, numpy as np
    from fitspeed.trial.apply import apply, compile_kwargs
    out = {}
    for scale in (True, False):
        config = apply({"precision": "mixed_float16", "auto_scale_loss": scale})
        import keras
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(3, dtype="float32")])
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), **compile_kwargs(config))
        model.fit(np.random.rand(64, 8).astype("float32"), np.random.randint(0, 3, 64), epochs=1, verbose=0)
        out[str(scale)] = type(model.optimizer).__name__
    print(json.dumps(out))
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=child_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"True": "LossScaleOptimizer", "False": "Adam"}
    # and a trial runs with it
    spec = TrialSpec(model="tiny", steps=4, repeats=1,
                     config=TrialConfig(precision="mixed_float16", auto_scale_loss=False))
    record = run_trial(spec, env=child_env(), cwd=tmp_path)
    assert record.status == Status.OK, (record.reason, record.stderr_tail)


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_flash_attention_is_no_knob_enabling_it_is_the_default_and_no_backend_has_it_on_a_cpu(backend: str) -> None:
    from fitspeed.core.keras_options import NOT_KNOBS

    if importlib.util.find_spec(backend) is None:
        missing(f"{backend} is not installed (pip install 'fitspeed[{backend}]')")
    code = """
    import json, numpy as np, keras
    out = {"default": keras.config.is_flash_attention_enabled()}
    keras.config.enable_flash_attention()
    out["enabled"] = keras.config.is_flash_attention_enabled()
    layer = keras.layers.MultiHeadAttention(2, 8, flash_attention=True)
    x = np.random.rand(2, 16, 16).astype("float16")
    try:
        layer(x, x)
        out["forced"] = "ran"
    except Exception as error:
        out["forced"] = type(error).__name__
    print(json.dumps(out))
    """
    done = run_on_backend(code, backend)
    out = json_line(done)
    assert out["default"] is None and out["enabled"] is None  # enable_flash_attention() is the default
    if not __import__("fitspeed.machine.environment", fromlist=["x"]).nvidia_gpus()[0]:
        assert out["forced"] in ("ValueError", "RuntimeError"), out  # no flash kernel on a CPU
    assert "already Keras 3.15's default" in NOT_KNOBS["keras.config.enable_flash_attention()"]
