"""The process stage is one loop over the registry: each knob of stage "process" applies itself (`Knob.apply`)."""

from __future__ import annotations

from typing import Any

import pytest

from fitspeed.core.config import TrialConfig
from fitspeed.core.knobs import KNOBS
from fitspeed.core.knobs.base import STEPS, Knob
from fitspeed.trial.apply import process_stage


class Recorder:
    """A `SeededProcess` that writes down each call, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def join(self, processes: int) -> None:
        self.calls.append(("join", processes))

    def set_threads(self, intra: int, inter: int) -> None:
        self.calls.append(("set_threads", intra, inter))

    def place(self, devices: int) -> None:
        self.calls.append(("place", devices))

    def set_dtype_policy(self, policy: str) -> None:
        self.calls.append(("set_dtype_policy", policy))

    def enable_determinism(self) -> None:
        self.calls.append(("enable_determinism",))

    def seed(self) -> None:
        self.calls.append(("seed",))


def _calls(config: TrialConfig) -> list[tuple[Any, ...]]:
    process = Recorder()
    process_stage(config, process)
    return process.calls


def test_every_process_knob_has_a_step_and_an_applier_of_its_own() -> None:
    process = [knob for knob in KNOBS if knob.stage == "process"]
    assert {knob.name for knob in process} == {"processes", "devices", "precision", "deterministic", "intra_op_threads",
                                               "inter_op_threads"}
    for knob in process:
        assert knob.step in STEPS and knob.step != "seed", knob.name
        assert type(knob).apply is not Knob.apply, knob.name
    assert all(knob.step is None for knob in KNOBS if knob.stage != "process")


def test_the_effects_come_in_the_order_a_backend_needs() -> None:
    """The processes joined before the backend runs anything, threads before anything starts TensorFlow's runtime,
    devices before the policy, the seeds before determinism."""
    config = TrialConfig(intra_op_threads=2, inter_op_threads=1, devices=2, precision="mixed_bfloat16",
                         deterministic=True)
    assert _calls(config) == [("join", 1), ("set_threads", 2, 0), ("set_threads", 0, 1), ("place", 2),
                              ("set_dtype_policy", "mixed_bfloat16"), ("seed",), ("enable_determinism",)]
    assert _calls(TrialConfig(backend="jax", processes=2, devices=2))[:4] == [
        ("join", 2), ("set_threads", 0, 0), ("set_threads", 0, 0), ("place", 2)]


def test_the_defaults_still_place_set_the_policy_and_seed() -> None:
    assert _calls(TrialConfig()) == [("join", 1), ("set_threads", 0, 0), ("set_threads", 0, 0), ("place", 1),
                                     ("set_dtype_policy", "float32"), ("seed",)]


@pytest.mark.parametrize("knob", [knob for knob in KNOBS if knob.stage == "process"], ids=lambda knob: knob.name)
def test_each_process_knob_value_reaches_the_process(knob: Knob) -> None:
    """A value other than the default shows in the calls: no process knob is left out of the loop."""
    other = {"devices": 3, "processes": 2, "precision": "mixed_float16", "deterministic": True, "intra_op_threads": 3,
             "inter_op_threads": 3}[knob.name]
    backend = "jax" if knob.name == "processes" else "tensorflow"  # TensorFlow refuses processes (its knob says why)
    assert _calls(TrialConfig(backend=backend, **{knob.name: other})) != _calls(TrialConfig(backend=backend))
