"""The model rewrite on user-style models: equal outputs, the same parameters and weights, or a refusal naming the layer.

The rewrites run in one child process with oneDNN on (TF_ENABLE_ONEDNN_OPTS=1), the
setting under which TensorFlow can run a channels_first convolution on any CPU.
Where even then the backend cannot, the only outcome allowed is the clean
refusal that says so; the Lambda model is refused before anything runs.
"""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import built_once, child_env

CHILD = r"""
import json, sys
import numpy as np
import keras
from fitspeed.trial.transform import Refused
from fitspeed.trial.transform.rewrite import rewrite, for_trial
from fitspeed.core.config import TrialConfig
import imagework
from keras import layers

def flatten_out():  # a Flatten read by no Dense: Keras's own Flatten(data_format=...) keeps the order
    inputs = keras.Input((10, 10, 3))
    x = layers.Conv2D(4, 3)(inputs)
    return keras.Model(inputs, layers.Flatten()(x), name="flatten_out")

def reshape_after_conv():
    inputs = keras.Input((10, 10, 3))
    x = layers.Conv2D(4, 3)(inputs)
    x = layers.Reshape((8 * 8 * 4,))(x)
    return keras.Model(inputs, layers.Dense(3)(x), name="reshape_after_conv")

def image_output():  # a segmentation-style output stays channels_last
    inputs = keras.Input((10, 10, 3))
    x = layers.Conv2D(4, 3, padding="same")(inputs)
    x = layers.LayerNormalization(axis=[1, 2, 3])(x)
    return keras.Model(inputs, layers.Conv2D(2, 1)(x), name="image_output")

def perturbed(model):
    # normalization statistics and scales away from 0 and 1, so that a wrong axis shows in the outputs
    rng = np.random.default_rng(3)
    for layer in model.layers:
        if isinstance(layer, (layers.BatchNormalization, layers.LayerNormalization)):
            layer.set_weights([rng.uniform(0.5, 1.5, w.shape).astype("float32") for w in layer.get_weights()])
    return model

def same_weights(original, rewritten):
    # by layer name: equal, or the same values in another order (a Dense kernel after a Flatten,
    # a LayerNormalization over all axes), which the layer's changes must then name
    new = {layer.name: layer for layer in rewritten.layers}
    moved = []
    for layer in original.layers:
        for a, b in zip(layer.get_weights(), new[layer.name].get_weights(), strict=True):
            if a.shape == b.shape and np.array_equal(a, b):
                continue
            if a.size == b.size and np.array_equal(np.sort(a, axis=None), np.sort(b, axis=None)):
                moved.append(layer.name)
            else:
                return False, moved
    return True, sorted(set(moved))

def run(name, build, **knobs):
    model = perturbed(build())
    try:
        done = rewrite(model, **knobs)
    except Refused as error:
        return {"status": "refused", "reason": str(error)}
    same, permuted = same_weights(model, done.model)
    return {"status": "ok", **done.to_dict(), "same_weights": same, "permuted": permuted,
            "class": type(done.model).__name__, "input_shape": list(done.model.input_shape[1:])}

out = {}
for name in ("convnet", "resnet_block", "flatten_dense", "with_lambda"):
    out[name] = run(name, getattr(imagework, name), data_format="channels_first")
for build in (flatten_out, reshape_after_conv, image_output):
    out[build.__name__] = run(build.__name__, build, data_format="channels_first")
cf = rewrite(perturbed(imagework.flatten_dense()), data_format="channels_first").model
back = rewrite(cf, data_format="channels_last")
out["back"] = {**back.to_dict(), "layers": [type(l).__name__ for l in back.model.layers]}
keras.config.set_dtype_policy("mixed_bfloat16")  # a trial's model is built under the global policy
done = for_trial(imagework.follows_policy(), TrialConfig(precision="mixed_bfloat16"))
out["follows_policy"] = done.to_dict()
print(json.dumps(out))
"""

BACKEND_REFUSAL = "cannot run on this machine's backend"


def _rewrite_all(folder: Path) -> None:
    env = child_env()
    env["TF_ENABLE_ONEDNN_OPTS"] = "1"
    result = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    (folder / "rewritten.json").write_text(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def rewritten(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The child's rewrites, run once for the run."""
    return json.loads((built_once(tmp_path_factory, "rewritten", _rewrite_all) / "rewritten.json").read_text())


def equal_or_cannot_run(result: dict[str, Any]) -> bool:
    """True if the rewrite ran and was checked; False if the backend cannot run channels_first here (cleanly)."""
    if result["status"] == "refused":
        assert BACKEND_REFUSAL in result["reason"] and "NHWC" in result["reason"], result["reason"]
        return False
    (check,) = result["checks"]
    assert check["what"] == "data_format=channels_first" and check["compute_dtype"] == "float32"
    assert check["max_abs_diff"] <= 1e-4 and check["tolerance"] == 1e-4
    assert result["params"]["before"] == result["params"]["after"] > 0
    assert result["same_weights"], result
    return True


def changed(result: dict[str, Any], kind: str) -> list[str]:
    """The changes to the layers of class `kind` (names depend on what the child built before)."""
    return [c["change"] for c in result["changes"] if c["class"] == kind]


def test_sequential_convnet_keeps_its_input_and_weights(rewritten: dict[str, Any]) -> None:
    result = rewritten["convnet"]
    if equal_or_cannot_run(result):
        assert result["class"] == "Sequential" and result["input_shape"] == [28, 28, 1]  # the data stays as it is
        assert changed(result, "Conv2D") == ["data_format 'channels_last' → 'channels_first'"] * 2
        assert changed(result, "GlobalAveragePooling2D") == ["data_format 'channels_last' → 'channels_first'"]
        assert [c["class"] for c in result["changes"]].count("Permute") == 1  # permuted once, inside the model


def test_resnet_block_batchnorm_axis_follows_the_channels(rewritten: dict[str, Any]) -> None:
    result = rewritten["resnet_block"]
    if equal_or_cannot_run(result):
        bn = [c for c in result["changes"] if c["class"] == "BatchNormalization"]
        assert len(bn) == 2 and all(c["change"] == "axis -1 → 1" for c in bn)
        assert result["permuted"] == []


def test_flatten_into_dense_permutes_the_kernel_rows(rewritten: dict[str, Any]) -> None:
    result = rewritten["flatten_dense"]
    if equal_or_cannot_run(result):
        dense = [c["layer"] for c in result["changes"] if "kernel rows permuted" in c["change"]]
        assert dense == result["permuted"] and len(dense) == 1


def test_lambda_on_images_is_refused_by_name(rewritten: dict[str, Any]) -> None:
    result = rewritten["with_lambda"]
    assert result["status"] == "refused"
    assert "Lambda 'first_two_channels'" in result["reason"] and BACKEND_REFUSAL not in result["reason"]


def test_reshape_after_a_convolution_is_refused_by_name(rewritten: dict[str, Any]) -> None:
    result = rewritten["reshape_after_conv"]
    assert result["status"] == "refused"
    assert "Reshape 'reshape'" in result["reason"] and "element order" in result["reason"]


def test_flatten_read_by_no_dense_keeps_its_order_with_keras_flatten(rewritten: dict[str, Any]) -> None:
    result = rewritten["flatten_out"]
    if equal_or_cannot_run(result):
        assert changed(result, "Flatten") == ["data_format 'channels_last' → 'channels_first'",
                                              "keeps the original element order"]


def test_an_image_output_is_permuted_back_and_layer_norm_weights_follow(rewritten: dict[str, Any]) -> None:
    result = rewritten["image_output"]
    if equal_or_cannot_run(result):
        # all three axes before and after, but its (10, 10, 4) scale and offset become (4, 10, 10)
        assert changed(result, "LayerNormalization") == ["weights transposed to the new axes ((2, 0, 1))"]
        assert "Conv2D" in [c["class"] for c in result["changes"]]
        assert any(c["change"].startswith("inserted: the output moved back") for c in result["changes"])


def test_back_to_channels_last_removes_the_input_permute(rewritten: dict[str, Any]) -> None:
    result = rewritten["back"]
    if result["checks"]:
        assert result["checks"][0]["max_abs_diff"] <= 1e-4
    assert "Permute" not in result["layers"]
    assert any(c["change"].startswith("removed") for c in result["changes"])


def test_output_layer_that_follows_a_mixed_policy_is_kept_float32(rewritten: dict[str, Any]) -> None:
    result = rewritten["follows_policy"]
    assert result["output_dtype"] == "float32"
    assert changed(result, "Dense") == ["dtype policy mixed_bfloat16 → float32"]
    (check,) = result["checks"]
    assert check["compute_dtype"] == "bfloat16" and check["max_abs_diff"] <= check["tolerance"]


def test_worked_examples() -> None:
    from fitspeed.trial.transform import check, layout

    for module in (layout, check):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
