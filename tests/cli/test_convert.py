"""`fitspeed convert`: a saved model rewritten and saved, round trip included, in real processes."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import built_once, child_env, fitspeed, missing
from rich.console import Console

from fitspeed.cli.convert import print_conversion
from fitspeed.core.backends import NAMES, backend_of
from fitspeed.measure.convert import check_backends

# two models, saved in one process: a small convnet, and the same with a Reshape where it flattens
BUILD = """
import sys, keras
from keras import layers
for path, flatten in ((sys.argv[1], layers.Flatten), (sys.argv[2], lambda: layers.Reshape((-1,)))):
    inputs = keras.Input((12, 12, 3))
    x = layers.Conv2D(6, 3, activation="relu")(inputs)
    x = layers.BatchNormalization(axis=-1)(x)
    x = layers.MaxPooling2D()(x)
    x = flatten()(x)
    x = layers.Dense(16, activation="relu")(x)
    model = keras.Model(inputs, layers.Dense(10, activation="softmax")(x))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    bn = model.layers[2]
    bn.set_weights([w + 0.5 for w in bn.get_weights()])  # statistics that show a wrong axis
    model.save(path)
"""

COMPARE = """
import json, sys
import numpy as np, keras
x = np.random.default_rng(0).random((8, 12, 12, 3), dtype=np.float32)
models = [keras.saving.load_model(path) for path in sys.argv[1:]]
outs = [np.asarray(m.predict(x, verbose=0)) for m in models]
print(json.dumps({"diff": [float(np.max(np.abs(o - outs[0]))) for o in outs],
                  "formats": [sorted({l.get_config().get("data_format") for l in m.layers} - {None}) for m in models],
                  "params": [m.count_params() for m in models], "compiled": [m.compiled for m in models]}))
"""


def python(code: str, *args: str, cwd: Path) -> str:
    env = child_env()
    env["TF_ENABLE_ONEDNN_OPTS"] = "1"  # the comparison runs channels_first convolutions on any CPU
    result = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="session")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """model.keras and reshaped.keras (BUILD), saved once for the run."""
    return built_once(tmp_path_factory, "convert-models",
                      lambda folder: python(BUILD, "model.keras", "reshaped.keras", cwd=folder))


@pytest.mark.slow
def test_round_trip_channels_last_first_last_keeps_the_outputs(workdir: Path, saved: Path) -> None:
    shutil.copy(saved / "model.keras", workdir)
    there = fitspeed("convert", "model.keras", "--set", "data_format=channels_first", "-o", "first.keras",
                     "--json", cwd=workdir)
    assert there.returncode == 0, there.stderr
    record = json.loads(there.stdout)
    if record["status"] == "refused":  # a backend that runs no channels_first even with oneDNN: said so, cleanly
        assert "cannot run on this machine's backend" in record["reason"]
        return
    assert [c["what"] for c in record["checks"]] == ["data_format=channels_first", "the saved file"]
    assert all(c["max_abs_diff"] <= 1e-4 for c in record["checks"])
    assert_backend_neutral(record, there.stdout)
    back = fitspeed("convert", "first.keras", "--set", "data_format=channels_last", "-o", "last.keras", "--json",
                    "--no-check-backends", cwd=workdir)
    assert back.returncode == 0, back.stderr
    assert "removed: it moved the input to channels_first" in [c["change"] for c in json.loads(back.stdout)["changes"]]
    assert "backends" not in json.loads(back.stdout)  # --no-check-backends: not loaded elsewhere
    compared = json.loads(python(COMPARE, "model.keras", "first.keras", "last.keras", cwd=workdir))
    assert max(compared["diff"]) <= 1e-4
    assert compared["formats"] == [["channels_last"], ["channels_first", "channels_last"], ["channels_last"]]
    assert len(set(compared["params"])) == 1 and all(compared["compiled"])


@pytest.mark.slow
def test_mixed_precision_keeps_the_output_float32_within_the_stated_tolerance(workdir: Path, saved: Path) -> None:
    shutil.copy(saved / "model.keras", workdir)
    result = fitspeed("convert", "model.keras", "--set", "precision=mixed_bfloat16", "-o", "bf16.keras", "--json",
                      "--no-check-backends", cwd=workdir)
    record = json.loads(result.stdout)
    assert record["status"] == "ok", record["reason"]
    assert record["output_dtype"] == "float32"
    check, _saved = record["checks"]
    assert check["compute_dtype"] == "bfloat16" and 0 < check["max_abs_diff"] <= check["tolerance"]
    assert {c["change"] for c in record["changes"] if c["class"] == "Conv2D"} == {
        "dtype policy float32 → mixed_bfloat16"}
    last = [c["change"] for c in record["changes"] if c["class"] == "Dense"][-1]
    assert last.startswith("computes in float32: it makes the model's output")


def test_a_layer_it_cannot_rewrite_is_refused_by_name(workdir: Path, saved: Path) -> None:
    shutil.copy(saved / "reshaped.keras", workdir / "model.keras")
    result = fitspeed("convert", "model.keras", "--set", "data_format=channels_first", "-o", "fast.keras",
                      cwd=workdir)
    assert result.returncode == 1
    said = " ".join(result.stderr.split())
    assert "Refused: data_format=channels_first cannot be applied: Reshape 'reshape'" in said
    assert not (workdir / "fast.keras").exists()


def assert_backend_neutral(record: dict, printed: str) -> None:
    """Every backend has its entry: the converting one, each other installed one loaded and agreeing."""
    entries = {e["backend"]: e for e in record["backends"]}
    assert sorted(entries) == sorted(NAMES) and entries[record["environment"]["backend"]].get("converted")
    for name, entry in entries.items():
        if entry.get("converted"):
            continue
        if not backend_of(name).is_installed():
            assert entry["status"] == "not installed" and f"fitspeed[{backend_of(name).extra}]" in entry["reason"]
            missing(f"the {name} backend, to load the converted file on")
        assert entry["status"] == "ok", entry
        assert entry["backend"] == name and 0 <= entry["max_abs_diff"] <= entry["tolerance"] <= 1e-4


def test_a_file_another_backend_cannot_load_is_named_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "broken.keras").write_bytes(b"not a zip")  # what a backend-specific layer's loading failure looks like
    record = {"environment": {"backend": "tensorflow"}, "checks": [{"what": "the saved file", "max_abs_diff": 0.0}]}
    entries = check_backends(record, {"output": str(tmp_path / "broken.keras")}, str(tmp_path / "probe.npz"),
                             backends=("tensorflow", "jax"))
    assert entries[0] == {"backend": "tensorflow", "status": "ok", "converted": True, "max_abs_diff": 0.0}
    if not backend_of("jax").is_installed():
        assert entries[1]["status"] == "not installed"
        missing("the jax backend")
    assert entries[1]["backend"] == "jax" and entries[1]["status"] == "failed", entries
    assert entries[1]["reason"].startswith("it does not load: ") and "broken.keras" in entries[1]["reason"]


def test_bad_requests_say_what_was_expected(workdir: Path) -> None:
    (workdir / "model.keras").write_bytes(b"not a zip")
    (workdir / "taken.keras").write_bytes(b"")
    cases = [
        (["model.keras", "-o", "out.keras"], "Expected at least one of --set data_format"),
        (["model.keras", "--set", "steps_per_execution=4", "-o", "out.keras"], "a conversion does not rewrite"),
        (["missing.keras", "--set", "precision=mixed_float16", "-o", "out.keras"], "which does not exist"),
        (["model.keras", "--set", "precision=mixed_float16", "-o", "out.h5"], "Expected -o to end in .keras"),
        (["model.keras", "--set", "precision=mixed_float16", "-o", "taken.keras"], "pass --force"),
    ]
    for args, words in cases:
        result = fitspeed("convert", *args, cwd=workdir)
        assert result.returncode == 2 and words in " ".join(result.stderr.split()), (args, result.stderr)
    broken = fitspeed("convert", "model.keras", "--set", "precision=mixed_float16", "-o", "out.keras", cwd=workdir)
    assert broken.returncode == 1 and "Could not load 'model.keras'" in " ".join(broken.stderr.split())


def test_the_changes_print_layer_by_layer() -> None:
    record = {"status": "ok", "source": "m.keras", "output": "f.keras", "knobs": {"data_format": "channels_first"},
              "changes": [{"layer": "conv2d", "class": "Conv2D", "change": "data_format 'channels_last' → 'channels_first'"}],
              "checks": [{"what": "data_format=channels_first", "max_abs_diff": 3e-08, "tolerance": 1e-4,
                          "compute_dtype": "float32", "probe": [4, 12, 12, 3]}],
              "params": {"before": 1234, "after": 1234}, "output_dtype": "float32",
              "environment": {"backend": "tensorflow", "onednn": True},
              "backends": [{"backend": "tensorflow", "status": "ok", "converted": True},
                           {"backend": "jax", "status": "failed", "reason": "it does not load: ValueError: no"}]}
    console = Console(file=io.StringIO(), width=100, color_system=None)
    print_conversion(console, record)
    text = " ".join(console.file.getvalue().split())
    assert "1 change(s), layer by layer" in text and "conv2d" in text and "Conv2D" in text
    assert "outputs differ by at most 3e-08 (allowed 0.0001 in float32, probe batch 4×12×12×3)" in text
    assert "parameters 1,234 → 1,234; output dtype float32; checked on tensorflow, oneDNN on" in text
    assert "loads and computes the same on tensorflow (converted there) NOT on jax: it does not load" in text
    assert "backend-neutral" not in text


@pytest.mark.slow
def test_a_lambda_layer_is_named_with_the_way_to_convert_a_trusted_file(tmp_path: Path) -> None:
    # issue 25, item 6: Keras's safe-mode error (exit 1) ended in "Save it with Keras 3's model.save", which was done
    make = (
        "import keras\n"
        "inputs = keras.Input((4,))\n"
        "x = keras.layers.Dense(8, name='dense_in')(inputs)\n"
        "x = keras.layers.Lambda(lambda t: t * 2.0, name='doubler')(x)\n"
        "keras.Model(inputs, keras.layers.Dense(2, name='head')(x)).save('lambda.keras')\n"
    )
    subprocess.run([sys.executable, "-c", make], cwd=tmp_path, env=child_env(), check=True, capture_output=True)
    refused = fitspeed("convert", "lambda.keras", "-o", "fast.keras", "--set", "precision=mixed_bfloat16",
                       cwd=tmp_path)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    text = " ".join(refused.stderr.split())
    assert "Lambda layer(s) 'doubler'" in text and "convert it with --unsafe" in text and "Traceback" not in text
    assert "model.save('model.keras')" not in text and not (tmp_path / "fast.keras").exists()

    trusted = fitspeed("convert", "lambda.keras", "-o", "fast.keras", "--set", "precision=mixed_bfloat16",
                       "--unsafe", "--json", "--no-check-backends", cwd=tmp_path)
    record = json.loads(trusted.stdout)
    # converted: the Lambda follows the policy like any layer, the output layer computes in float32
    assert record["status"] == "ok" and trusted.returncode == 0 and (tmp_path / "fast.keras").exists(), record
    changed = {c["layer"]: c["change"] for c in record["changes"]}
    assert "mixed_bfloat16" in changed["doubler"] and "float32" in changed["head"], changed
