"""The environment stage is one loop over the registry: each knob sets its own variables (`Knob.environment`), at
its step of `ENVIRONMENT_STEPS`; `core.import_environment` adds only the trial's own (the log level, the hash seed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from fitspeed.core import best_json
from fitspeed.core.config import TrialConfig
from fitspeed.core.import_environment import import_environment, start_environment
from fitspeed.core.knobs import KNOBS, KNOBS_BY_NAME
from fitspeed.core.knobs.base import ENVIRONMENT_STEPS, Knob

# each knob that sets variables before import, a value of it that sets some, and the variables it owns
OWNED = {
    "backend": ("jax", {"KERAS_BACKEND"}),
    "devices": (4, {"XLA_FLAGS"}),
    "deterministic": (True, {"TF_DETERMINISTIC_OPS", "CUBLAS_WORKSPACE_CONFIG", "XLA_FLAGS"}),
    "onednn": (False, {"TF_ENABLE_ONEDNN_OPTS"}),
    "xla_auto_clustering": (True, {"TF_XLA_FLAGS"}),
}


def test_the_knobs_with_variables_have_hooks_of_their_own_and_steps_in_order() -> None:
    own = {knob.name for knob in KNOBS if type(knob).environment is not Knob.environment}
    assert own == {*OWNED, "allocator"}
    assert all(knob.environment_step in ENVIRONMENT_STEPS and knob.environment_step != "trial" for knob in KNOBS)
    steps = [KNOBS_BY_NAME[name].environment_step for name in ("backend", "onednn", "deterministic", "devices")]
    assert steps == ["backend", "onednn", "determinism", "devices"]


def test_the_variables_come_in_the_order_every_fork_server_was_keyed_by() -> None:
    """The backend, the trial's own, oneDNN, determinism, then JAX's host devices after its flag in XLA_FLAGS."""
    env = import_environment(TrialConfig(backend="jax", devices=4, deterministic=True), 3, {"XLA_FLAGS": "--a"})
    assert list(env.items()) == [
        ("XLA_FLAGS", "--a --xla_gpu_deterministic_ops=true --xla_force_host_platform_device_count=4"),
        ("KERAS_BACKEND", "jax"), ("TF_CPP_MIN_LOG_LEVEL", "2"), ("PYTHONHASHSEED", "3"),
        ("TF_DETERMINISTIC_OPS", "1"), ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")]
    env = import_environment(TrialConfig(onednn=False, deterministic=True, xla_auto_clustering=True), 0,
                             {"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert list(env) == ["TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND", "PYTHONHASHSEED", "TF_ENABLE_ONEDNN_OPTS",
                         "TF_DETERMINISTIC_OPS", "CUBLAS_WORKSPACE_CONFIG", "XLA_FLAGS", "TF_XLA_FLAGS"]
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "0"  # the user's log level is kept


@pytest.mark.parametrize("name", sorted(OWNED))
def test_each_knobs_variables_come_from_its_own_hook(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the knob's hook silenced, its variables are gone from the trial's environment, and nothing else is."""
    value, variables = OWNED[name]
    config = TrialConfig(**{"backend": "jax" if name == "devices" else "tensorflow", name: value})
    before = import_environment(config, 0, {})
    assert variables <= set(before)
    knob = KNOBS_BY_NAME[name]

    def silent(self: Knob, value: Any, environ: Mapping[str, str], config: Any) -> dict[str, str]:
        return {}

    monkeypatch.setattr(type(knob), "environment", silent)
    after = import_environment(config, 0, {})
    # XLA_FLAGS is shared: deterministic's and devices' are each alone in these configs
    assert set(before) - set(after) == variables
    assert {k: v for k, v in before.items() if k not in variables} == after


def test_best_json_exports_only_the_exported_knobs_and_start_only_the_loaders() -> None:
    config = TrialConfig(backend="tensorflow", onednn=True, deterministic=True, xla_auto_clustering=True, devices=2)
    assert list(best_json.exports(config)) == ["TF_ENABLE_ONEDNN_OPTS", "TF_XLA_FLAGS"]
    assert {knob.name for knob in KNOBS if not knob.exported} == {"backend", "deterministic", "devices"}
    assert start_environment(config, {"A": "1"}) == {"A": "1"}
    assert best_json.exports(TrialConfig(backend="jax", devices=4, deterministic=True)) == {}
