"""`fitspeed doctor --model` for real: a user's convnet measured, traced and checked in a trial child."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import fitspeed, json_out

QUICK = ["--steps", "8", "--repeats", "2"]
# The convnet's matmul and convolution FLOPs per sample, forward: 2 * multiply-adds of each layer.
CONVNET_FORWARD = 2 * (26 * 26 * 9 * 32 + 11 * 11 * 9 * 32 * 32 + 800 * 100 + 100 * 40 + 40 * 10)


def test_doctor_model_prints_the_roofline_the_slowest_layers_and_the_dense_100_finding(workdir: Path) -> None:
    result = fitspeed("doctor", "--model", "userwork:convnet", *QUICK, cwd=workdir)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())  # rich wraps long lines
    assert "convnet · 94,118 parameters · batch 32 · float32 · tensorflow" in text
    assert "FLOPs per sample: 9." in text and "MFLOP forward + backward" in text
    assert "measured dense matmul rate (float32" in text
    assert "achieved: " in text and "% of the measured matmul rate" in text
    assert "dense: Dense units=100 is not a multiple of 8" in text
    assert "fix: Dense(units=104), retrained (or 128 for a TPU)" in text
    assert "slowest layers" in text and "conv2d_1" in text

    record = json.loads((workdir / "fitspeed-results.jsonl").read_text().splitlines()[-1])
    check = record["model_check"]
    assert record["spec"]["mode"] == "model" and check["params"] == 94_118
    # TensorFlow's count agrees with the layers' shapes (it adds bias, activation and pooling ops)
    assert CONVNET_FORWARD <= check["flops"]["forward_per_sample"] <= 1.05 * CONVNET_FORWARD
    assert 2.5 * CONVNET_FORWARD <= check["flops"]["per_sample"] <= 4 * CONVNET_FORWARD
    roof = check["roofline"]
    assert roof["achieved_flop_per_s"] == check["flops"]["per_sample"] * record["metrics"]["samples_per_s"]["median"]
    assert roof["share_of_matmul"] == roof["achieved_flop_per_s"] / check["matmul"]["flop_per_s"] > 0
    # every op of the traced window belongs to a layer of the model, or is named as outside them
    names = {"conv2d", "max_pooling2d", "conv2d_1", "max_pooling2d_1", "flatten", "dense", "dense_1", "dense_2"}
    layers = check["slowest_layers"]["layers"]
    assert {row["layer"] for row in layers} <= names | {r["layer"] for r in layers if r["layer"].startswith("(")}
    assert "conv2d_1" in {row["layer"] for row in layers}
    assert abs(sum(check["flops"]["by_layer"].values()) - check["flops"]["per_sample"]) < 1
    found = {(f["layer"], f["check"], f["severity"]) for f in check["findings"]}
    assert ("dense", "size", "warning") in found
    assert not any(layer == "dense_2" for layer, _, _ in found)  # the output's 10 classes are the task's
    assert check["xla"]["compiles"] is True


def test_a_python_op_blocks_xla_and_determinism_fails_to_hold(workdir: Path) -> None:
    result = fitspeed("doctor", "--model", "userwork:python_noise", "--data", "userwork:arrays",
                      "--set", "deterministic=true", *QUICK, "--json", cwd=workdir)
    assert result.returncode == 0, result.stderr
    record = json_out(result)
    check = record["model_check"]
    assert check["xla"]["compiles"] is False and check["xla"]["layers"] == ["python_noise"]
    xla = [f for f in check["findings"] if f["check"] == "xla"]
    assert [f["layer"] for f in xla] == ["python_noise"] and "XLA cannot compile" in xla[0]["what"]
    # noise no seed controls: the two runs from one seed end apart, and the record says so
    determinism = record["determinism"]
    assert determinism["identical"] is False and determinism["hashes"][0] != determinism["hashes"][1]
    assert "dense/kernel" in determinism["differing"]


def test_doctor_model_counts_the_flops_of_a_batchnorm_dropout_and_custom_layer_model(workdir: Path) -> None:
    # issue 25, item 7: freezing the step failed on BatchNormalization's moving-statistics updates
    result = fitspeed("doctor", "--model", "userwork:bn_convnet", *QUICK, cwd=workdir)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "not counted" not in text and "FLOPs per sample: " in text, text
    assert "% of the measured matmul rate" in text
    record = json.loads((workdir / "fitspeed-results.jsonl").read_text().splitlines()[-1])
    flops = record["model_check"]["flops"]
    conv, dense = 2 * 26 * 26 * 9 * 16, 2 * 13 * 13 * 16 * 10  # multiply-adds of the two layers with weights
    # and the element-wise work of BatchNormalization, the scale, pooling and dropout on top
    assert conv + dense <= flops["forward_per_sample"] <= 2 * (conv + dense), flops
    assert flops["per_sample"] > 2 * flops["forward_per_sample"]  # gradients of the kernels too
    assert {"batch_normalization", "scale"} <= set(flops["by_layer"]), flops["by_layer"]


def test_the_flop_count_leaves_out_the_gradient_nothing_reads() -> None:
    # the first convolution's gradient with respect to the input images is traced but never run
    import keras
    import numpy as np
    import tensorflow as tf

    from fitspeed.trial import train_graph

    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3), keras.layers.BatchNormalization(),
                              keras.layers.Flatten(), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = np.zeros((2, 8, 8, 1), "float32"), np.zeros((2,), "int32")
    concrete = tf.function(train_graph._step(model)).get_concrete_function(x, y)
    traced = {op.name for op in concrete.graph.get_operations()}
    live = train_graph._live_ops(concrete)
    assert {n for n in traced if n.endswith("Conv2DBackpropInput")}, "TensorFlow traced no input gradient"
    assert not {n for n in live if n.endswith("Conv2DBackpropInput")}
    assert {n for n in live if n.endswith("Conv2DBackpropFilter")}  # the kernel's gradient is run and counted
    assert {n for n in live if "AssignVariableOp" in n or "AssignSubVariableOp" in n}  # BatchNorm's updates
