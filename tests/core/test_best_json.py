"""best.json's snippet runs in a plain Keras script, and fitspeed.apply() applies it."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_env, missing

from fitspeed.core.config import TrialConfig
from fitspeed.core.study_summary import Baseline, Best, StudySummary
from fitspeed.core.errors import UserError
from fitspeed.core import best_json

PLAIN_SCRIPT = """
import json, sys
import numpy as np
x_train = np.zeros((64, 16, 16, 3), "float32")
y_train = np.zeros(64, "int32")
optimizer, loss = "adam", "sparse_categorical_crossentropy"
SNIPPET
inputs = keras.Input(x_train.shape[1:])
h = keras.layers.Conv2D(4, 3)(inputs)
h = keras.layers.GlobalAveragePooling2D()(h)
model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(h))
""".strip()


def run_snippet(config: TrialConfig, rewrite: dict | None = None) -> dict:
    code = best_json.snippet(config, rewrite)
    # the snippet compiles `model`; build one first, then run the snippet's compile again on it
    script = PLAIN_SCRIPT.replace("SNIPPET", code.split("# Build and compile")[0]) + "\n"
    if "model.compile(" in code:
        script += "model.compile(" + code.split("model.compile(", 1)[1].split("\n\n")[0] + "\n"
    if "# Rewrite the built model" in code:
        script += code[code.index("# Rewrite the built model"):] + "\n"
    script += (
        "print(json.dumps({'policy': keras.config.dtype_policy().name,"
        " 'format': keras.config.image_data_format(),"
        " 'conv': model.layers[2].data_format, 'out': model.layers[-1].dtype_policy.compute_dtype,"
        " 'spe': getattr(model, 'steps_per_execution', None), 'x': list(x_train.shape),"
        " 'y': list(model.predict(x_train, verbose=0).shape)}))\n"
    )
    env = child_env()
    env["TF_ENABLE_ONEDNN_OPTS"] = "1"  # the rewrite's check runs channels_first convolutions on any CPU
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, (script, result.stderr)
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_snippet_applies_the_configuration_in_plain_keras() -> None:
    config = TrialConfig(steps_per_execution=32, precision="mixed_bfloat16", data_format="channels_first",
                         intra_op_threads=1)
    # the softmax follows the policy, as the trials found: the snippet names it and the rewrite keeps it float32
    rewrite = {"changes": [{"layer": "dense", "class": "Dense", "change": "dtype policy mixed_bfloat16 → float32"}]}
    state = run_snippet(config, rewrite)
    # data_format is a rewrite of the model (layer 2 is the Conv2D after the inserted Permute), not a global
    # setting, and the data stays as it is
    assert state == {"policy": "mixed_bfloat16", "format": "channels_last", "conv": "channels_first",
                     "out": "float32", "spe": 32, "x": [64, 16, 16, 3], "y": [64, 10]}
    assert "followed the policy" in best_json.snippet(config, rewrite)


def test_snippet_imports_each_module_once() -> None:
    """issue 36's answer: the thread setting and the tf.data options each needed tensorflow and each imported it."""
    config = TrialConfig(steps_per_execution=64, precision="mixed_bfloat16", inter_op_threads=1, data_autotune=False)
    lines = best_json.snippet(config).splitlines()
    imports = [line for line in lines if line.startswith(("import ", "from "))]
    assert imports == ["import keras", "import tensorflow as tf"]
    assert lines.index("import tensorflow as tf") < lines.index("options = tf.data.Options()")
    compile(best_json.snippet(config), "snippet", "exec")  # still Python


def test_defaults_say_keep_them() -> None:
    assert "Keep Keras's defaults" in best_json.snippet(TrialConfig())
    assert "re-tune the learning rate" in best_json.snippet(TrialConfig(batch_size=256))


def test_write_is_atomic_and_apply_reads_it(tmp_path: Path) -> None:
    config = TrialConfig(precision="mixed_bfloat16", data_format="channels_first")
    path = best_json.write(tmp_path / "best.json", StudySummary.from_dict({
        "study": "s", "best": {"config": config.to_dict(), "claimed": True}, "baseline": {"config": TrialConfig().to_dict()}}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.json"]  # no temporary file left
    assert json.loads(path.read_text())["knobs"] == {"precision": "mixed_bfloat16",
                                                     "data_format": "channels_first"}
    script = (
        "import sys, fitspeed\n"
        f"config = fitspeed.apply({str(path)!r})\n"
        "import keras\n"
        "print(keras.config.dtype_policy().name, keras.config.image_data_format(),"
        " fitspeed.compile_kwargs(config)['steps_per_execution'])\n"
    )
    result = subprocess.run([sys.executable, "-c", script], env=child_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    # data_format is no process-wide setting: fitspeed.rewrite_model(model, ...) rewrites the model itself
    assert result.stdout.split() == ["mixed_bfloat16", "channels_last", "1"]


def test_one_reader_gives_the_verdicts_knobs_to_run_and_apply(tmp_path: Path) -> None:
    """An unconfirmed best is shown in the study but never applied: `read` gives the baseline's knobs,
    and a hand-written object of knobs (bare, or under "config") reads as itself."""
    from fitspeed.trial.apply import _as_config

    fast = TrialConfig(steps_per_execution=16, precision="mixed_bfloat16")
    baseline = TrialConfig(intra_op_threads=1)
    summary = StudySummary(study="s", best=Best(fast, fast.label()), baseline=Baseline(baseline))
    path = best_json.write(tmp_path / "best.json", summary)
    config, whole = best_json.read(path)
    assert config == baseline and _as_config(path) == baseline
    assert whole is not None and whole["best"]["config"]["precision"] == "mixed_bfloat16"
    claimed = best_json.write(tmp_path / "claimed.json", dataclasses.replace(summary, best=Best(fast, fast.label(), claimed=True)))
    assert best_json.read(claimed)[0] == fast == _as_config(claimed)
    bare = tmp_path / "knobs.json"
    bare.write_text(json.dumps({"config": {"steps_per_execution": 4}}))
    assert best_json.read(bare) == (TrialConfig(steps_per_execution=4), None)
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(UserError, match="Expected a best.json written by `fitspeed tune`"):
        best_json.read(tmp_path / "broken.json")


def test_onednn_is_exported_as_an_environment_variable(tmp_path: Path) -> None:
    """best.json names the variable to export; the snippet sets it before keras, and TensorFlow obeys."""
    for value, wanted in ((False, "0"), (True, "1")):
        config = TrialConfig(onednn=value)
        path = best_json.write(tmp_path / "best.json", StudySummary(
            study="s", best=Best(config, config.label(), claimed=True), baseline=Baseline(TrialConfig())))
        saved = json.loads(path.read_text())
        assert saved["environment_variables"] == {"TF_ENABLE_ONEDNN_OPTS": wanted}
        assert saved["knobs"] == {"onednn": value}
        code = saved["snippet"]
        assert f"#   export TF_ENABLE_ONEDNN_OPTS={wanted}" in code
        assert code.index("TF_ENABLE_ONEDNN_OPTS") < code.index("import keras")
        script = (code + "\nfrom tensorflow.python.util import _pywrap_util_port\n"
                  "print(_pywrap_util_port.IsMklEnabled())\n")
        env = child_env()
        env.pop("TF_ENABLE_ONEDNN_OPTS", None)
        result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split()[-1] == str(value)
    assert best_json.exports(TrialConfig()) == {}


def test_apply_refuses_a_onednn_setting_that_comes_after_tensorflow() -> None:
    """TensorFlow reads TF_ENABLE_ONEDNN_OPTS once; fitspeed.apply() says so instead of pretending."""
    script = (
        "import fitspeed\n"
        "from fitspeed.core.errors import UserError\n"
        "fitspeed.apply({'onednn': False})\n"  # before the import: it counts
        "import tensorflow\n"
        "from tensorflow.python.util import _pywrap_util_port\n"
        "print(_pywrap_util_port.IsMklEnabled())\n"
        "try:\n"
        "    fitspeed.apply({'onednn': True})\n"
        "except UserError as error:\n"
        "    print(error)\n"
    )
    env = child_env()
    env.pop("TF_ENABLE_ONEDNN_OPTS", None)
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "False"
    assert "already imported with oneDNN off" in lines[1] and "export TF_ENABLE_ONEDNN_OPTS=1" in lines[1].replace(
        "Export", "export")


def test_devices_snippet_distributes_in_plain_keras() -> None:
    if importlib.util.find_spec("jax") is None:
        missing("jax is not installed")
    code = best_json.snippet(TrialConfig(backend="jax", devices=2))
    assert "model.fit(x_train, y_train, batch_size=64)" in code  # the global batch: 32 per device × 2
    script = code.split("\n\n# The global batch")[0] + "\nprint(keras.distribution.distribution().device_mesh.shape)\n"
    env = {**child_env(), "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, (script, result.stderr)
    assert result.stdout.strip().splitlines()[-1] == "(2,)"
    tensorflow = best_json.snippet(TrialConfig(devices=4, steps_per_execution=8))
    assert "strategy = tf.distribute.MirroredStrategy(" in tensorflow and "with strategy.scope():" in tensorflow
    assert tensorflow.index("with strategy.scope():") < tensorflow.index("steps_per_execution=8")
    assert "batch_size=128" in tensorflow
