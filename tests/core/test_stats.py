from __future__ import annotations

import math
import random

import pytest

from fitspeed.core.stats import describe, ratio_estimate


def test_summary_is_median_with_spread() -> None:
    summary = describe([10.0, 12.0, 11.0, 30.0])
    assert summary.median == 11.5
    assert (summary.min, summary.max, summary.n) == (10.0, 30.0, 4)
    assert summary.cv == pytest.approx(9.535 / 15.75, abs=1e-3)
    assert describe([5.0]).cv == 0.0


def test_clear_speedup_is_claimed() -> None:
    estimate = ratio_estimate([1.40, 1.45, 1.42, 1.38, 1.44])
    assert estimate.median == pytest.approx(1.42)
    assert 1.0 < estimate.low < 1.42 < estimate.high
    assert estimate.verdict.startswith(f"B is at least {estimate.low:.2f}× faster (")  # the lower bound first
    assert estimate.verdict.endswith("median 1.42×)")


def test_clear_slowdown_is_reported_as_slower() -> None:
    estimate = ratio_estimate([0.50, 0.52, 0.49, 0.51])
    assert estimate.high < 1
    assert estimate.verdict.startswith(f"B is at least {1 / estimate.high:.2f}× slower")
    assert estimate.verdict.endswith("median 1.98×)")


def test_noise_around_one_is_no_measurable_difference() -> None:
    estimate = ratio_estimate([0.98, 1.03, 1.01, 0.99, 1.02])
    assert estimate.low < 1 < estimate.high
    assert estimate.verdict == "no measurable difference"


def test_interval_covers_the_truth_about_95_percent_of_the_time() -> None:
    rng = random.Random(7)
    covered = 0
    for _ in range(2000):
        ratios = [math.exp(rng.gauss(0.0, 0.05)) for _ in range(5)]
        estimate = ratio_estimate(ratios)
        covered += estimate.low <= 1.0 <= estimate.high
    assert 0.93 < covered / 2000 < 0.97


def test_bad_ratios_are_refused() -> None:
    with pytest.raises(ValueError):
        ratio_estimate([])
    with pytest.raises(ValueError):
        ratio_estimate([1.0, float("nan")])
    assert ratio_estimate([1.3]).verdict == "too few pairs for an interval"
