"""benchmarks/search_simulation.py: its ground truths, its fake machine, and one study end to end."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import ModuleType

import pytest
from conftest import load_script

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialSpec
from fitspeed.machine import environment

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "search_simulation.py"
TINY_SPACE = {"steps_per_execution": (1, 64, 16, 4), "jit_compile": ("auto", True),
              "precision": ("float32", "mixed_bfloat16", "mixed_float16"), "onednn": ("keep", False),
              "data_format": ("channels_last", "channels_first"), "intra_op_threads": (0, 1),
              "inter_op_threads": (0, 1), "data_autotune": (True, False)}


@pytest.fixture(scope="module")
def sim() -> ModuleType:
    return load_script(SCRIPT)


def test_true_bests_are_the_documented_ones(sim: ModuleType) -> None:
    scenarios = {s.name: s for s in sim.SCENARIOS}
    expected = {  # name -> (true speed-up of the best, its label)
        "null": (1.0, "defaults"),
        "small-wins": (1.25, "steps_per_execution=64 jit_compile=True inter_op_threads=1 data_autotune=False"),
        "big-plus-small": (2.44, "steps_per_execution=64 precision=mixed_bfloat16 data_format=channels_first"),
        "near-alternatives": (2.31, "steps_per_execution=64 precision=mixed_float16"),
        "interaction": (1.67, "steps_per_execution=64 inter_op_threads=1"),
        "failing": (2.00, "steps_per_execution=64 precision=mixed_bfloat16 data_format=channels_first"),
        "heavy-tail": (2.44, "steps_per_execution=64 precision=mixed_bfloat16 data_format=channels_first"),
        "bf16-fast": (4.21, "steps_per_execution=64 precision=mixed_bfloat16 inter_op_threads=1"),
    }
    for name, (ratio, label) in expected.items():
        config, value = sim.true_best(scenarios[name], TINY_SPACE)
        assert (round(value / sim.BASE_SPEED, 2), config.label()) == (ratio, label), name
    assert len(sim.SCENARIOS) >= 8


def test_nothing_is_faster_than_the_defaults_in_the_null_scenario(sim: ModuleType) -> None:
    null = next(s for s in sim.SCENARIOS if s.name == "null")
    base = null.speed(TrialConfig())
    for name, values in TINY_SPACE.items():
        for value in values:
            assert null.speed(TrialConfig().replace(**{name: value})) <= base, (name, value)


def test_a_diverging_knob_runs_fast_but_is_no_answer(sim: ModuleType) -> None:
    failing = next(s for s in sim.SCENARIOS if s.name == "failing")
    fp16 = TrialConfig(precision="mixed_float16")
    assert failing.speed(fp16) > failing.speed(TrialConfig())
    assert failing.value(fp16) == 0.0
    assert failing.speed(TrialConfig(jit_compile=True)) == 0.0


def test_a_recorded_grid_gives_its_recorded_figures(sim: ModuleType, tmp_path: Path) -> None:
    recorded = sim.recorded_scenarios()
    assert len(recorded) >= 2
    for scenario in recorded:
        record = json.loads((sim.RECORDED / f"{scenario.name}.json").read_text())
        cell = record["cells"][-1]
        assert scenario.speed(TrialConfig.from_dict(cell["knobs"])) == cell["samples_per_s"] > 0
        assert scenario.model == record["model"] and list(scenario.grid) == list(record["knobs"])
    grid = {"schema": 1, "kind": "fitspeed-grid", "model": "mlp", "steps": 64, "repeats": 3,
            "knobs": {"steps_per_execution": [1, 16], "jit_compile": ["auto", True]},
            "cells": [{"knobs": {"steps_per_execution": s, "jit_compile": j}, "status": status, "samples_per_s": v}
                      for s, j, status, v in [(1, "auto", "ok", 500.0), (1, True, "failed", None),
                                              (16, "auto", "ok", 800.0), (16, True, "ok", 900.0)]],
            "host": {"cpu": "AMD EPYC"}}
    (tmp_path / "two.json").write_text(json.dumps(grid))
    two = sim.load_recorded(tmp_path / "two.json")
    assert two.speed(TrialConfig(steps_per_execution=16)) == 800.0
    assert two.speed(TrialConfig(jit_compile=True)) == 0.0
    assert sim.true_best(two, two.grid)[1] == 900.0
    assert two.settings("tiny")["knobs"] == ("steps_per_execution", "jit_compile")
    with pytest.raises(ValueError, match="within the grid"):
        two.speed(TrialConfig(precision="mixed_bfloat16"))


def test_the_second_of_two_timed_trials_gains_the_order_effect(sim: ModuleType) -> None:
    null = next(s for s in sim.SCENARIOS if s.name == "null")
    machine = sim.FakeMachine(null, 0.0, random.Random(0), first_outlier=False, outliers=0.0, order_effect=1.04)
    spec = TrialSpec(model="tiny", config=TrialConfig(), steps=64)
    figures = [machine(spec).throughput for _ in range(4)]
    assert [round(f / sim.BASE_SPEED, 3) for f in figures] == [1.0, 1.04, 1.0, 1.04]


def test_one_small_study_of_two_scenarios_end_to_end(sim: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment, "nvidia_gpus", lambda: ([], None))
    scenarios = sim.select("null,big-plus-small")
    out = sim.level(0.10, scenarios, studies=1, trials=12, seeds="dev")
    assert out["studies"] == 2 and out["null_studies"] == 1
    assert set(out["by_scenario"]) == {"null", "big-plus-small"}
    for key in ("right", "captured", "false_claims", "mean_trials", "claims"):
        assert 0 <= out[key] <= (1 if key != "mean_trials" else 100), key
    assert out["mean_trials"] >= 12  # the budget, the verification on top
    null = out["by_scenario"]["null"]
    assert null["captured"] == 1.0  # nothing beats the defaults there
    assert out["null_claims_n"] == null["false_claims_n"] == null["claims_n"]
    assert "big-plus-small" in sim.render([out], "header")
