"""benchmarks/trial_noise.py: the statistics of one trial's windows and the table of CVs, on made-up records."""

from __future__ import annotations

import doctest
import math
from pathlib import Path
from types import ModuleType

import pytest
from conftest import load_script

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "trial_noise.py"


@pytest.fixture(scope="module")
def noise() -> ModuleType:
    return load_script(SCRIPT)


def record(workload: str, variant: str, windows: list[float], status: str = "ok") -> dict:
    return {"status": status, "metrics": {"window_s": windows, "steps_per_repeat": 10, "batch_size": 10},
            "bench": {"workload": workload, "variant": variant, "round": 0, "wall_s": 12.0, "load": 1.0}}


def test_worked_examples(noise: ModuleType) -> None:
    result = doctest.testmod(noise)
    assert result.attempted > 0 and result.failed == 0


def test_each_statistic_reads_the_same_windows_and_plus_one_drops_the_first(noise: ModuleType) -> None:
    r = record("tiny", "3x1", [2.0, 1.0, 0.5, 1.0])  # 100 samples a window: rates 50, 100, 200, 100
    assert noise.figure(r, "median") == 100.0
    assert noise.figure(r, "best") == 200.0
    assert noise.figure(r, "mean") == pytest.approx(400 / 4.5)
    assert noise.figure(r, "trimmed") == 100.0
    assert noise.figure(r, "median+1") == 100.0
    assert noise.figure(r, "mean+1") == pytest.approx(300 / 2.5)
    assert noise.figure(record("tiny", "1x3", [2.0]), "median+1") is None
    assert noise.figure(record("tiny", "3x1", [1.0], status="oom") | {"metrics": None}, "median") is None


def test_a_statistic_that_ignores_one_slow_window_has_the_lower_cv(noise: ModuleType) -> None:
    # every trial has one window of 1 s and two that a neighbour slowed by different amounts
    records = [record("tiny", "3x1", [1.0, 1.0 + 0.05 * k, 1.0 + 0.1 * k]) for k in range(8)]
    rows = {(r.variant, r.statistic): r for r in noise.analyse(records)}
    assert rows[("3x1", "best")].cv == pytest.approx(0.0)
    assert rows[("3x1", "mean")].cv > 0.05
    mean = rows[("3x1", "mean")]
    assert mean.low < mean.cv < mean.high and mean.n == 8 and mean.wall_s == 12.0
    assert mean.vs_median is not None and mean.vs_default is None
    assert math.isfinite(mean.vs_median[0])


def test_the_table_compares_a_variant_with_the_default_one(noise: ModuleType) -> None:
    records = [record("cnn10", variant, [1.0 + 0.01 * k * (2 if variant == "6x0.5" else 1), 1.0, 1.1])
               for k in range(6) for variant in ("3x1", "6x0.5")]
    rows = {(r.variant, r.statistic): r for r in noise.analyse(records)}
    ratio, low, high = rows[("6x0.5", "mean")].vs_default
    assert ratio == pytest.approx(2.0, rel=0.1) and low <= ratio <= high
    table = noise.render(list(rows.values()))
    assert "| cnn10 | 6x0.5 | mean | 6 |" in table and f"vs {noise.DEFAULT_VARIANT}" in table
