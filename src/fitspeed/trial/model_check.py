"""`fitspeed doctor --model`: the model's findings, its FLOPs against this machine's roof, its slowest layers.

Runs in the trial child (trial mode "model"), after the usual timed windows
and one traced window (`fitspeed.trial.profiling`), on the model the trial
measured. `examine` returns the record's `model_check`:

- `findings`: `fitspeed.trial.model_lints` (sizes, RNN kernels, output
  dtype, channels_first on a CPU) and, with TensorFlow, the layers that keep
  XLA from compiling (`fitspeed.trial.train_graph`: inspected and tried);
- `flops`: FLOPs per sample of a training step, forward and backward
  (TensorFlow's profiler over the traced step, by layer);
- `matmul`: this machine's dense matmul rate at the trial's compute dtype
  (`fitspeed.trial.matmul_rate`);
- `roofline`: achieved FLOP/s = FLOPs per sample × the trial's median
  samples/s, and that as a share of the matmul rate;
- `slowest_layers`: the traced window's ops (`fitspeed.trial.trace_ops`), by
  self time, summed per layer through the layers' name scopes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import keras

from fitspeed.core.backends import backend_of
from fitspeed.machine.environment import Environment
from fitspeed.trial import matmul_rate, model_lints, train_graph

TOP_LAYERS = 8


def slowest_layers(profile: dict[str, Any] | None, scopes: train_graph.Scopes | None, steps: int,
                   flops: dict[str, Any]) -> dict[str, Any]:
    """The traced window's self time per layer (ms per step and share), with each layer's share of FLOPs."""
    if not profile or profile.get("error"):
        return {"error": (profile or {}).get("error") or "no profile was taken"}
    from fitspeed.trial import trace_ops

    ops = trace_ops.read_profile(Path(profile["logdir"]), n=1_000_000)["top_ops"]
    if scopes is None:
        return {"error": "op names are mapped to layers on the TensorFlow backend only", "top_ops": ops[:TOP_LAYERS]}
    groups: dict[str, dict[str, Any]] = {}
    whole = sum(op["self_ms"] for op in ops) or 1.0
    for op in ops:
        name = scopes.group_of(op["op"])
        group = groups.setdefault(name, {"layer": name, "ms": 0.0, "ops": 0, "top_op": op["op"],
                                         "top_op_type": op.get("op_type")})
        group["ms"] += op["self_ms"]
        group["ops"] += 1
    by_flops = flops.get("by_layer") or {}
    all_flops = sum(by_flops.values()) or None
    kinds = {name: kind for _, name, kind in scopes.by_scope}
    rows = []
    for group in sorted(groups.values(), key=lambda g: -g["ms"]):
        rows.append({**group, "class": kinds.get(group["layer"]), "ms_per_step": group["ms"] / max(1, steps),
                     "share": group["ms"] / whole,
                     "flops_share": by_flops.get(group["layer"], 0.0) / all_flops if all_flops else None})
    where = "the device" if profile.get("where") == "device" else "the host"
    return {"layers": rows[:TOP_LAYERS], "steps": steps, "ops": len(ops),
            "how": f"self time of every op on {where} in one traced window of {steps} steps, summed by layer: "
                   "an op belongs to the layer whose name scope holds it, a gradient op to its forward layer"}


def _xla_findings(traced: train_graph.TracedStep, xla: dict[str, Any]) -> list[model_lints.Finding]:
    found: list[model_lints.Finding] = []
    python_layers = sorted({op["layer"] for op in traced.python_ops})
    for layer in python_layers:
        found.append(model_lints.finding(
            "xla", layer, "runs Python inside the step (tf.py_function or tf.numpy_function): XLA cannot compile it",
            "documented: jit_compile=true fails or is turned off for the whole model; the Python call also holds "
            "the GIL and copies the tensor to the host at every step",
            "write the layer with keras.ops (or tf ops) instead of Python/numpy",
            "inspected: EagerPyFunc/PyFunc ops in the traced training step"))
    if not xla.get("compiles") and xla.get("error"):
        layers = [layer for layer in xla.get("layers") or [] if layer not in python_layers]
        if layers or not python_layers:
            found.append(model_lints.finding(
                "xla", layers[0] if layers else None,
                f"XLA cannot compile the training step{' (layers: ' + ', '.join(layers) + ')' if layers else ''}: "
                f"{xla['error']}",
                "tried: jit_compile=true would fail, so the XLA knob cannot help this model",
                "replace the layer's ops with ones XLA supports", "tried: one training step under jit_compile=True"))
    return found


def examine(model: keras.Model, config: Any, data: Any, batch: int, metrics: dict[str, Any],
            profile: dict[str, Any] | None, env: Environment) -> dict[str, Any]:
    """The model check of a measured model: findings, FLOPs, matmul rate, roofline, slowest layers."""
    x, y = train_graph.probe_batch(data, batch)
    result: dict[str, Any] = {"model": model.name, "params": int(model.count_params()), "batch_size": batch,
                              "precision": config.precision, "backend": config.backend}
    findings = model_lints.examine(model, batch, model(x, training=False), env.get("accelerators") or [])
    scopes = None
    flops: dict[str, Any] = {"error": f"FLOPs are counted with TensorFlow's profiler; the {config.backend} "
                                      "backend is not supported yet"}
    if backend_of(config.backend).counts_flops:
        traced = train_graph.trace(model, x, y)
        scopes, flops = traced.scopes, traced.flops
        if metrics.get("jit_compile_resolved"):
            xla = {"compiles": True, "layers": [], "how": "the trial itself trained with XLA (jit_compile)"}
        else:
            xla = train_graph.try_xla(model, x, y, scopes)
        result["xla"] = xla
        findings += _xla_findings(traced, xla)
    result["findings"] = findings
    result["flops"] = flops
    dtype = keras.config.dtype_policy().compute_dtype
    result["matmul"] = matmul_rate.measure(dtype)
    speed = (metrics.get("samples_per_s") or {}).get("median")
    if flops.get("per_sample") and speed:
        achieved = flops["per_sample"] * speed
        result["roofline"] = {"samples_per_s": speed, "achieved_flop_per_s": achieved,
                              "share_of_matmul": achieved / result["matmul"]["flop_per_s"],
                              "dtype": dtype}
    result["slowest_layers"] = slowest_layers(profile, scopes, int((profile or {}).get("steps") or 1), flops)
    return result
