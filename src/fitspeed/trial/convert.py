"""`python -P -m fitspeed.trial.convert ORDER.json`: rewrite a saved model, in `fitspeed convert`'s child.

The order names the `.keras` file, the output path and the knobs given
(data_format, precision; backend and onednn say where the check runs). The child loads the model with its weights, rewrites it with
`fitspeed.trial.transform.rewrite` (every step checked on a probe batch), saves
it, loads the saved file again and checks that it computes what the rewritten
model does, and prints one record after `record.MARKER`: status ok, refused
(with the reason, naming the layer) or failed. Where the order names a probe
file, it also saves there the saved model's outputs on the probe batch.

An order with `"check": "load"` is the other half of keeping the file
backend-neutral: the child, started on another backend, loads the saved file,
runs it on the same seeded probe batch and compares its outputs with those the
converting backend saved (`load_check`).

Unless the order says otherwise, the child turns oneDNN on (TF_ENABLE_ONEDNN_OPTS=1)
before TensorFlow loads: without it TensorFlow runs no channels_first
convolution on a CPU, and the check could not run on every machine.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

from fitspeed.core.backends import backend_of
from fitspeed.core.config import TrialConfig
from fitspeed.core.record import SCHEMA_VERSION, Status, clip_reason, write_record
from fitspeed.trial import apply


def lambda_layers(path: str) -> list[str]:
    """The names of the Lambda layers in a `.keras` file's config, read without loading any of them."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return []
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("class_name") == "Lambda":
                found.append(str((node.get("config") or {}).get("name")))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(config)
    return found


def convert(order: dict[str, Any]) -> dict[str, Any]:
    """Load, rewrite, check, save, reload and check again; the conversion record."""
    knobs = dict(order["knobs"])
    config = TrialConfig.from_dict({k: v for k, v in knobs.items() if k in ("backend", "onednn")})
    if backend_of(config.backend).reads_onednn and config.onednn == "keep":
        config = config.replace(onednn=True)  # TensorFlow runs channels_first convolutions on a CPU only so
    apply.before_import(config, order.get("seed", 0))
    import keras

    from fitspeed.machine import environment
    from fitspeed.trial.transform import Refused
    from fitspeed.trial.transform.check import compare
    from fitspeed.trial.transform.rewrite import rewrite

    record: dict[str, Any] = {
        "schema": SCHEMA_VERSION, "kind": "conversion", "status": Status.FAILED, "reason": None,
        "source": order["source"], "output": order["output"],
        "knobs": knobs,
        "environment": {"backend": keras.backend.backend(), "keras": keras.__version__},
    }
    if backend_of(keras.backend.backend()).reads_onednn:
        record["environment"]["onednn"] = environment.onednn_enabled()
    unsafe = bool(order.get("unsafe"))
    if unsafe:  # the user trusts the file: its Lambda functions load, and load again when layers are cloned
        keras.config.enable_unsafe_deserialization()
    try:
        model = keras.saving.load_model(order["source"], safe_mode=not unsafe)
    except Exception as error:
        lambdas = [] if unsafe else lambda_layers(order["source"])
        if lambdas:
            record.update(status="refused", user_error=True, reason=(
                f"{order['source']} holds Python code: its Lambda layer(s) {', '.join(map(repr, lambdas))} keep their "
                "function as bytecode, which Keras will not load in safe mode, since loading it runs that code. "
                "If you trust the file (you saved it yourself), convert it with --unsafe."))
            return record
        record["reason"] = (f"Could not load {order['source']!r} as a Keras model: {type(error).__name__}: "
                            f"{error}")
        return record
    record["model"] = {"name": model.name, "class": type(model).__name__}
    try:
        done = rewrite(model, data_format=knobs.get("data_format"), precision=knobs.get("precision"),
                       scope="all", seed=order.get("seed", 0))
    except Refused as error:
        return {**record, "status": "refused", "reason": str(error)}
    done.model.save(order["output"])
    saved = keras.saving.load_model(order["output"], safe_mode=not unsafe)
    try:
        reloaded = compare(done.model, saved, "the saved file", order.get("seed", 0))
    except Refused as error:
        return {**record, "status": Status.FAILED, "reason": f"{order['output']} does not reload as written: {error}"}
    if order.get("probe"):  # what another backend must compute from the saved file (load_check)
        import numpy as np

        from fitspeed.trial.transform.check import outputs, probe_batch

        np.savez(order["probe"], *outputs(saved, probe_batch(saved, order.get("seed", 0))))
    return {**record, "status": Status.OK, **done.to_dict(),
            "checks": [*done.to_dict()["checks"], reloaded.to_dict()]}


def load_check(order: dict[str, Any]) -> dict[str, Any]:
    """Load the saved file on this child's backend and compare its outputs with the converting backend's.

    The order names the file, the probe file (`convert` saved it), the seed of
    the probe batch and the backend. The outputs must agree within the tolerance
    of the model's least precise compute dtype (`check.TOLERANCES`), times the
    outputs' scale (max(1, max abs)): two backends sum in different orders, so
    a float32 model's outputs differ by rounding, relative to their size.
    """
    config = TrialConfig.from_dict({"backend": order["backend"]})
    if backend_of(config.backend).reads_onednn:
        config = config.replace(onednn=True)  # channels_first convolutions run on a CPU only so
    apply.before_import(config, order.get("seed", 0))
    import keras
    import numpy as np

    from fitspeed.trial.transform.check import TOLERANCES, backend_line, compute_dtype, outputs, probe_batch

    record: dict[str, Any] = {"schema": SCHEMA_VERSION, "kind": "load check", "backend": keras.backend.backend(),
                              "status": Status.FAILED, "reason": None}
    unsafe = bool(order.get("unsafe"))
    if unsafe:
        keras.config.enable_unsafe_deserialization()
    try:
        model = keras.saving.load_model(order["file"], safe_mode=not unsafe)
    except Exception as error:
        return {**record, "reason": f"it does not load: {backend_line(error)}"}
    try:
        received = outputs(model, probe_batch(model, order.get("seed", 0)))
    except Exception as error:
        return {**record, "reason": f"it loads, but does not run: {backend_line(error)}"}
    with np.load(order["probe"]) as saved:
        expected = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    if len(expected) != len(received) or any(e.shape != r.shape for e, r in zip(expected, received)):
        return {**record, "reason": f"its output shapes {[r.shape for r in received]} are not the converting "
                                    f"backend's {[e.shape for e in expected]}"}
    dtype = compute_dtype(model)
    scale = max([1.0, *(float(np.max(np.abs(e))) for e in expected if e.size)])
    tolerance = TOLERANCES[dtype] * scale
    diff = max((float(np.max(np.abs(e - r))) for e, r in zip(expected, received) if e.size), default=0.0)
    record.update(max_abs_diff=diff, tolerance=tolerance, compute_dtype=dtype)
    if not diff <= tolerance:  # NaN fails too
        return {**record, "reason": f"its outputs differ from the converting backend's by up to {diff:.3g}, over "
                                    f"the {tolerance:.3g} allowed in {dtype}"}
    return {**record, "status": Status.OK}


def main(argv: list[str]) -> int:
    order = json.loads(Path(argv[1]).read_text())
    try:
        record = load_check(order) if order.get("check") == "load" else convert(order)
    except Exception as error:  # a failure is data: the parent prints it
        traceback.print_exc()
        record = {"schema": SCHEMA_VERSION, "kind": "conversion", "status": Status.FAILED,
                  "reason": clip_reason(f"{type(error).__name__}: {error}"), "source": order.get("source"),
                  "output": order.get("output")}
    write_record(record)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
