"""benchmarks/guard_power.py: the guard's three rates through the real rule, on few simulated studies."""

from __future__ import annotations

import random
from pathlib import Path
from types import ModuleType

import pytest
from conftest import load_script

from fitspeed.search import guard

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "guard_power.py"


@pytest.fixture(scope="module")
def power() -> ModuleType:
    return load_script(SCRIPT)


def test_the_json_carries_the_three_rates_at_their_worst(power: ModuleType) -> None:
    result = power.simulate(studies=30, seed=1)
    assert {"power_at_1sd", "false_rejections", "lower_loss_rejections"} <= result.keys()
    rows = result["settings"]
    assert len(rows) == len(power.SHAPES) * len(power.RHOS)
    assert result["power_at_1sd"] == min(r["power_at_1sd"] for r in rows)
    assert result["false_rejections"] == max(r["false_rejections"] for r in rows)
    assert result["rejections_with_mean_gap_at_or_below_0"] == 0 and result["lower_loss_rejections"] == 0
    assert result["rule"]["max_seeds"] == guard.MAX_SEEDS


def test_seeds_are_spent_where_the_pairs_disagree(power: ModuleType) -> None:
    rng = random.Random(3)
    agree = [power.study(rng, 0.95, 1.0, power._normal)[2] for _ in range(40)]
    disagree = [power.study(rng, 0.0, 1.0, power._normal)[2] for _ in range(40)]
    assert sum(agree) / 40 < 8 and sum(disagree) / 40 > 18
    assert max(disagree) <= guard.MAX_SEEDS and min(agree) >= guard.FIRST_SEEDS
    # one sd worse where the pairs do not correlate: rejected most of the time at the rule's seeds
    rejected = [power.study(rng, 0.0, 1.0, power._normal)[0] for _ in range(60)]
    assert sum(rejected) >= 40


def test_a_label_shuffle_is_settled_at_the_first_stage(power: ModuleType) -> None:
    rng = random.Random(4)
    rejected, gap, seeds = power.study(rng, 0.5, 15.0, power._normal)  # 0.7 above a baseline sd of 0.05: measured
    assert rejected and gap > 0 and seeds == guard.FIRST_SEEDS
