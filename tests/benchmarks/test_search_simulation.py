"""benchmarks/search_simulation.py: its ground truths, its fake machine, and one study end to end."""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
from dataclasses import replace
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
    out = sim.level(0.10, scenarios, studies=1, trials=25, seeds="dev")
    assert out["studies"] == 2 and out["null_studies"] == 1
    assert set(out["by_scenario"]) == {"null", "big-plus-small"}
    for key in ("right", "captured", "false_claims", "mean_trials", "claims"):
        assert 0 <= out[key] <= (1 if key != "mean_trials" else 100), key
    assert out["mean_trials"] >= 25  # the budget, the verification on top
    null = out["by_scenario"]["null"]
    assert null["captured"] == 1.0  # nothing beats the defaults there
    assert out["null_claims_n"] == null["false_claims_n"] == null["claims_n"]
    assert "big-plus-small" in sim.render([out], "header")


# --- worlds drawn at random, and the null world's noise models ----------------------------------------------------

DEV_WORLDS = range(3_000_000, 3_000_300)


@pytest.fixture(scope="module")
def drawn(sim: ModuleType) -> list:
    return [sim.draw_world(seed) for seed in DEV_WORLDS]


def test_a_world_is_a_pure_function_of_its_seed(sim: ModuleType, drawn: list) -> None:
    assert [sim.draw_world(seed) for seed in DEV_WORLDS[:20]] == drawn[:20]
    assert len({repr(sorted(w.scenario.effects.items(), key=repr)) for w in drawn}) == len(drawn)


def test_drawn_effects_stay_within_the_issue_ranges(drawn: list) -> None:
    ranges = {  # (knob, value) -> (lowest, highest) factor, issue 35 item 7 and the brief
        ("steps_per_execution", 4): (1.0, 1.6), ("steps_per_execution", 16): (1.0, 1.6),
        ("steps_per_execution", 64): (1.0, 1.6), ("intra_op_threads", 1): (0.4, 1.3),
        ("inter_op_threads", 1): (0.95, 1.3), ("data_format", "channels_first"): (0.4, 1.3),
        ("jit_compile", True): (0.7, 1.5), ("onednn", False): (0.8, 1.3), ("data_autotune", False): (0.95, 1.05),
        ("deterministic", True): (0.7, 1.0), ("precision", "mixed_bfloat16"): (0.05, 3.0),
        ("precision", "mixed_float16"): (0.05, 3.0),
    }
    for world in drawn:
        effects, noise = world.scenario.effects, world.scenario.noise
        for item, (low, high) in ranges.items():
            assert low - 1e-9 <= effects[item] <= high + 1e-9, (world.seed, item, effects[item])
        spe = [effects[("steps_per_execution", n)] for n in (4, 16, 64)]
        assert spe == sorted(spe), world.seed  # rising with the steps
        bf16, fp16 = effects[("precision", "mixed_bfloat16")], effects[("precision", "mixed_float16")]
        if world.machine == "gpu-like" and not world.null:
            assert 1.5 <= min(bf16, fp16) and max(bf16, fp16) <= 3.0 and abs(math.log(bf16 / fp16)) <= math.log(1.1)
        elif world.machine == "cpu-bf16" and not world.null:
            assert 1.2 <= bf16 <= 2.5 and fp16 <= 0.6
        elif world.machine == "cpu":
            assert bf16 <= 0.6 and fp16 <= 0.6
        for members, factor in world.scenario.interactions:
            assert 0.3 - 1e-9 <= factor <= 1.3 + 1e-9 and len(members) == 2
        if world.null:
            assert max(effects.values()) <= 1.0 and all(f <= 1.0 for _, f in world.scenario.interactions)
        assert 0.03 <= noise.cv <= 0.20 and 0 <= noise.drift_share <= 0.4 and 0 <= noise.starved <= 0.05
        assert noise.tail_df is None or 3 <= noise.tail_df <= 30
        assert 1.0 <= noise.slot_bias <= 1.09
        assert len(noise.spread) <= 2 and all(2 <= m <= 4 for _, m in noise.spread)
    share = {kind: sum(w.machine == kind for w in drawn) / len(drawn) for kind in ("cpu", "cpu-bf16", "gpu-like")}
    assert all(0.1 < s < 0.6 for s in share.values()), share
    assert 0.08 <= sum(w.null for w in drawn) / len(drawn) <= 0.22
    assert 0.2 <= sum(bool(w.scenario.noise.spread) for w in drawn) / len(drawn) <= 0.4
    assert any(w.scenario.fails for w in drawn) and any(w.scenario.diverges for w in drawn)


def test_the_true_best_of_a_drawn_world_beats_every_single_change(sim: ModuleType, drawn: list) -> None:
    assert math.prod(len(v) for v in TINY_SPACE.values()) <= sim.MAX_SPACE
    for world in drawn[:6] + [w for w in drawn if w.null][:2]:
        scenario = world.scenario
        best, value = sim.true_best(scenario, TINY_SPACE)
        base = scenario.speed(TrialConfig())
        singles = [scenario.value(TrialConfig().replace(**{k: v})) for k, values in TINY_SPACE.items() for v in values]
        assert value >= max(singles) and value == scenario.value(best) >= base
        if world.null:
            assert (best.label(), value) == ("defaults", base)


def test_dev_and_report_seed_ranges_never_meet(sim: ModuleType) -> None:
    ranges = [range(base, base + sim.MAX_STUDIES) for base in sim.SEED_BASES.values()]
    ranges += [*sim.WORLD_SEEDS.values(), *sim.NULL_SEEDS.values()]
    for a, b in itertools.combinations(ranges, 2):
        assert a[-1] < b[0] or b[-1] < a[0], (a, b)
    assert sim.WORLD_SEEDS["report"] == range(5_000_000, 5_000_500)  # fixed before any report was run
    assert sim.NULL_SEEDS["report"][0] == 7_000_000
    assert sim.WORLD_SEEDS["report2"] == range(8_000_000, 8_000_500)  # fixed on 2026-11-27 before any run on it
    assert sim.NULL_SEEDS["report2"][0] == 9_000_000
    assert sim.WORLD_SEEDS["report3"] == range(11_000_000, 11_000_500)  # fixed on 2026-11-27 before any run on it
    assert sim.NULL_SEEDS["report3"][0] == 12_000_000
    assert sim.WORLD_SEEDS["report4"] == range(14_000_000, 14_000_500)  # fixed on 2026-11-27 before any run on it
    assert sim.NULL_SEEDS["report4"][0] == 15_000_000
    assert sim.WORLD_SEEDS["report5"] == range(17_000_000, 17_000_500)  # fixed on 2026-11-27 before any run on it
    assert sim.NULL_SEEDS["report5"][0] == 18_000_000
    assert sim.WORLD_SEEDS["report6"] == range(20_000_000, 20_000_500)  # fixed on 2026-11-28 before any run on it
    assert sim.NULL_SEEDS["report6"][0] == 21_000_000
    assert sim.WORLD_SEEDS["report7"] == range(23_000_000, 23_000_500)  # fixed on 2026-11-28 before any run on it
    assert sim.NULL_SEEDS["report7"][0] == 24_000_000
    assert sim.WORLD_SEEDS["report8"] == range(25_000_000, 25_000_500)  # fixed on 2026-11-28 before any run on it
    assert sim.NULL_SEEDS["report8"][0] == 26_000_000
    assert sim.WORLD_SEEDS["report9"] == range(27_000_000, 27_000_500)  # fixed on 2026-11-28 before any run on it
    assert sim.NULL_SEEDS["report9"][0] == 28_000_000
    assert sim.WORLD_SEEDS["report10"] == range(29_000_000, 29_000_500)  # fixed on 2026-11-28 before any run on it
    assert sim.NULL_SEEDS["report10"][0] == 30_000_000
    assert sim.WORLD_SEEDS["report11"] == range(31_000_000, 31_000_500)  # fixed on 2026-11-29 before any run on it
    assert sim.NULL_SEEDS["report11"][0] == 32_000_000
    assert sim.WORLD_SEEDS["report12"] == range(33_000_000, 33_000_500)  # fixed on 2026-11-29 before any run on it
    assert sim.NULL_SEEDS["report12"][0] == 34_000_000
    assert sim.WORLD_SEEDS["report13"] == range(35_000_000, 35_000_500)  # fixed on 2026-11-29 before any run on it
    assert sim.NULL_SEEDS["report13"][0] == 36_000_000


def _log_sds(sim: ModuleType, noise, calls: int = 1500) -> tuple[float, float]:
    """The sd of log samples/s of the defaults and of inter_op_threads=1, timed alternately on one FakeMachine."""
    null = next(s for s in sim.SCENARIOS if s.name == "null")
    machine = sim.FakeMachine(replace(null, noise=noise), noise.cv, random.Random(1), first_outlier=False,
                              outliers=0.0, order_effect=1.0)
    specs = [TrialSpec(model="tiny", config=c, steps=64) for c in (TrialConfig(), TrialConfig(inter_op_threads=1))]
    logs: list[list[float]] = [[], []]
    for index in range(2 * calls):
        logs[index % 2].append(math.log(machine(specs[index % 2]).throughput))
    return statistics.stdev(logs[0]), statistics.stdev(logs[1])


def test_a_configuration_with_its_own_spread_is_that_much_noisier(sim: ModuleType) -> None:
    base, noisy = _log_sds(sim, sim.Noise(cv=0.10, spread=((("inter_op_threads", 1), 3.0),)))
    assert 0.085 < base < 0.115 and 2.6 < noisy / base < 3.4
    base, same = _log_sds(sim, sim.Noise(cv=0.10))
    assert 0.85 < same / base < 1.15
    assert sim.Noise(spread=((("jit_compile", True), 3.0), (("inter_op_threads", 1), 2.0))).multiplier(
        {("jit_compile", True), ("inter_op_threads", 1), ("onednn", False)}) == 3.0


def test_no_noise_model_of_the_null_world_has_an_effect_above_one(sim: ModuleType) -> None:
    assert {"gaussian", "t3", "drift", "bursts", "slot-bias", "noisier-4x"} <= set(sim.NOISE_MODELS)
    for name, noise in sim.NOISE_MODELS.items():
        world = sim.null_world(name)
        assert sim.true_best(world, TINY_SPACE) == (TrialConfig(), world.speed(TrialConfig())), name
        assert noise.cv == 0.10
        for item, multiplier in noise.spread:  # the noisier knob value is neutral: only its spread differs
            assert world.effects.get(item, 1.0) == 1.0 and multiplier >= 3
    assert sim.NOISE_MODELS["noisier-4x"].spread and sim.NOISE_MODELS["gaussian"] == sim.Noise(
        cv=0.10, drift_share=0.0, slot_bias=1.0, outliers=0.0, first_outlier=0.0)


def test_one_drawn_world_and_one_noise_model_end_to_end(sim: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment, "nvidia_gpus", lambda: ([], None))
    out = sim.worlds(1, trials=25, seeds="dev")
    assert out["studies"] == 1 and out["noise_cv"] == "drawn" and len(out["worlds"]) == 1
    assert out["worlds"][0]["seed"] == 3_000_000 and out["worlds"][0]["trials"] > 0
    assert "coverage_big" in out and sim.render_worlds(out).count("\n") >= 2
    null = sim.noise_models(["noisier-4x"], studies=1, trials=25, seeds="dev")
    figures = null["models"]["noisier-4x"]
    assert figures["studies"] == 1 and figures["claims_n"] in (0, 1)
    assert figures["claims_ci95"][0] <= figures["claims"] <= figures["claims_ci95"][1]
    assert "noisier-4x" in sim.render_noise_models(null)
    with pytest.raises(SystemExit, match="--worlds between 1 and 500"):
        sim.worlds(501, trials=25, seeds="report")


def test_a_world_row_names_the_cv_its_study_ran_at(sim: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    # --cv replaces every world's drawn CV: the row says the one the study used, not the drawn one
    monkeypatch.setattr(environment, "nvidia_gpus", lambda: ([], None))
    drawn = sim.draw_world(3_000_000).scenario.noise.cv
    out = sim.worlds(1, trials=25, seeds="dev", cv=0.1)
    assert drawn != 0.1 and out["noise_cv"] == 0.1 and out["worlds"][0]["cv"] == 0.1
