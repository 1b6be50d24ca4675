"""`new_record` builds a `TrialRecord`; the JSON a trial child prints from it is the dict the child used to build."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import SCHEMA_VERSION, Mode, Status, TrialRecord, TrialSpec, new_record, to_json

SPEC = TrialSpec(model="tiny", config=TrialConfig(precision="mixed_bfloat16"), stop_below=900.0)
FULL = {"median": 812.5, "min": 800.0, "max": 830.0, "cv": 0.01, "n": 5}
ENV = {"backend": "tensorflow", "keras": "3.6.0", "cpu_features": ["avx2"], "devices": {"strategy": None}}


def dict_record(spec: TrialSpec, status: Status, **fields: Any) -> dict[str, Any]:
    """The record as the child built it before `new_record` returned a `TrialRecord`: a dict, `fields` last."""
    record: dict[str, Any] = {
        "schema": SCHEMA_VERSION, "kind": "trial", "id": uuid.uuid4().hex[:12],
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "status": status, "reason": None, "user_error": False,
        "spec": spec.to_dict(), "metrics": None, "notes": [], "environment": None, "stderr_tail": None,
    }
    record.update(fields)
    return record


CASES: dict[str, tuple[Status, dict[str, Any]]] = {
    "failed, bare": (Status.FAILED, {"reason": "Expected x.", "user_error": True, "environment": ENV}),
    "timed, every section": (Status.OK, {
        "environment": ENV,
        "metrics": {"samples_per_s": FULL, "ms_per_step": 39.4, "steps_per_repeat": 64, "batch_size": 32,
                    "window_s": [1.0, 1.1], "compile_s": 1.5, "peak_device_mb": None, "final_loss": 0.5,
                    "loss_curve": [2.3, 0.5], "jit_compile_resolved": False, "data_kind": "arrays",
                    "output_dtype": "float32", "steps_per_execution_resolved": 4},
        "notes": ["a note", "another"], "timed_wall": [10.5, 12.0],
        "rewrite": {"changes": [], "checks": [], "params": 12}, "script": {"path": "train.py", "argv": []},
        "profile": {"logdir": "p"}, "model_check": {"params": 12}, "determinism": {"identical": True}}),
    "stopped early": (Status.OK, {
        "environment": ENV,
        "metrics": {"samples_per_s": FULL, "ms_per_step": 40.0, "batch_size": 32, "first_execution_s": 2.0,
                    "build_s": 0.1, "loss_curve": [2.3], "final_loss": 2.3,
                    "stopped_early": {"after": "the warm-up", "stop_below": 900.0}},
        "notes": ["stopped after the warm-up"], "script": {"path": "train.py"}}),
    "nan, a null figure kept": (Status.NAN, {
        "reason": "the final loss is not finite", "environment": ENV,
        "metrics": {"loss_curve": [2.3, float("nan")], "final_loss": None, "samples_per_s": None},
        "rewrite": {"changes": ["x"]}}),
    "doctor's epochs, a median alone": (Status.OK, {
        "environment": ENV, "metrics": {"epoch_s": [1.0], "boundary_s": [], "end_s": 0.1, "lost_s": 0.1,
                                        "fit_s": 2.0, "samples_per_s": {"median": 900.0}, "data_kind": "dataset"}}),
    "script failed, with the parent's fields": (Status.FAILED, {
        "reason": "stopped", "user_error": True, "script": {"path": "t.py"}, "traceback_tail": None,
        "wall_s": 2.5, "monitor": None, "warm_start": True}),
}


@pytest.mark.parametrize("case", CASES)
def test_the_record_a_child_prints_is_the_dict_it_built_key_for_key(case: str) -> None:
    status, fields = CASES[case]
    record = new_record(SPEC, status, **fields)
    old = dict_record(SPEC, status, **fields) | {"id": record.id, "created": record.created}
    assert to_json(record.to_dict()) == to_json(old)  # the same keys, in the same order, to the byte
    assert list(record.to_dict()["metrics"] or {}) == list(old["metrics"] or {})
    assert TrialRecord.from_dict(record.to_dict()) == record  # and the parent reads it back as it was made


def test_a_record_is_typed_from_the_start() -> None:
    record = new_record(TrialSpec(model="tiny", mode=Mode.TRAIN, steps=4), Status.OK, environment=ENV,
                        metrics={"samples_per_s": FULL, "loss_curve": [2.0, 1.0], "fit_s": 3.0}, timed_wall=[1.0, 2.0])
    assert record.status is Status.OK and record.throughput == 812.5 and record.measured("fit_s") == 3.0
    assert record.metrics is not None and record.metrics.loss_curve == (2.0, 1.0)
    assert record.extra == {"timed_wall": [1.0, 2.0]} and record.spec.mode is Mode.TRAIN


@pytest.mark.parametrize("text", ["ok", "failed", None, 1])
def test_a_status_given_as_anything_but_a_status_is_refused(text: object) -> None:
    with pytest.raises(TypeError, match=f"Expected `status` to be a Status, such as Status.OK. Received: {text!r}"):
        new_record(SPEC, text)  # type: ignore[arg-type]
