"""The paired decision's interval holds the truth at its stated level, shown by simulation.

Each simulated decision is the verification's design (`verify_design`: a
one-sided 2.5% test, looks from 3 to 10 pairs, printed as a 95% interval)
run pair by pair until it stops, on paired log ratios with the noise of two
trials at 10% CV each, starting from a pooled noise of six independent
trials, as the tuner's verification does. Sometimes a trial is starved (a
load burst: x0.4 on one side of a pair). The interval at the stop must hold
the true ratio at least as often as it claims, within the simulation's own
error (3 standard errors of a proportion over `RUNS` decisions).
"""

from __future__ import annotations

import math
import random

import pytest

from fitspeed.core.sequential import pooled_noise, step
from fitspeed.search.decider import verify_design

RUNS = 2000
CV = 0.10
PAIR_SD = CV * math.sqrt(2)  # the log ratio of two trials
SLACK = 3 * math.sqrt(0.05 * 0.95 / RUNS)  # about 0.015


def decide(true: float, rng: random.Random, starved: float) -> tuple[str | None, float | None, float | None]:
    design = verify_design(pairs=5, min_gain=0.05, fallbacks=1)
    prior = pooled_noise([[rng.gauss(0, PAIR_SD) for _ in range(6)]])
    ratios: list[float] = []
    while True:
        ratio = true * math.exp(rng.gauss(0, PAIR_SD))
        if rng.random() < starved:  # one of the pair's two trials ran at 0.4x
            ratio *= 0.4 if rng.random() < 0.5 else 1 / 0.4
        ratios.append(ratio)
        decision = step(ratios, design, prior)
        if decision.verdict or len(ratios) >= design.max_pairs:
            return decision.verdict, decision.low, decision.high


@pytest.mark.parametrize("starved", [0.0, 0.05])
@pytest.mark.parametrize("true", [1.0, 1.15, 1.5])
def test_the_verified_interval_holds_the_truth_at_its_stated_level(true: float, starved: float) -> None:
    rng = random.Random(f"coverage-{true}-{starved}")
    decisions = [decide(true, rng, starved) for _ in range(RUNS)]
    level = verify_design(5, 0.05, 1).confidence
    held = [low <= true <= high for _, low, high in decisions if low is not None and high is not None]
    assert len(held) == RUNS
    assert sum(held) / RUNS >= level - SLACK, sum(held) / RUNS
    claims = [low <= true <= high for verdict, low, high in decisions  # type: ignore[operator]
              if verdict == "faster"]
    if true == 1.0:  # nothing helps: "faster" is the test's one-sided error
        assert len(claims) / RUNS <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / RUNS), len(claims) / RUNS
    else:  # a claim's interval holds the truth as often as any interval does
        assert len(claims) > RUNS / 4
        assert sum(claims) / len(claims) >= level - 3 * math.sqrt(0.05 * 0.95 / len(claims)), \
            sum(claims) / len(claims)
