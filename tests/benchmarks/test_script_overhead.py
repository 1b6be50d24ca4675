"""benchmarks/script_overhead.py and its workload: the module:function trial against the script trial.

Two pairs run for real (`interleave` orders them AB then BA, or BA then AB, so one of them has the script trial
first); nothing here reads a speed, only that every pair is shown once both its trials ran, and that the rows,
the interval and the 2% line agree with each other. Each row is checked on made-up records too.
"""

from __future__ import annotations

import doctest
import re
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from conftest import child_env, load_script

from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "script_overhead.py"
ROW = re.compile(r"^ +(\d+) +([\d,]+) +([\d,]+) +(\S.*)$", re.M)


@pytest.fixture(scope="module")
def overhead() -> ModuleType:
    return load_script(SCRIPT)


def script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, env=child_env(), capture_output=True,
                          text=True, timeout=600)


def timed(median: float, best: float) -> TrialRecord:
    return new_record(TrialSpec(model="m"), Status.OK, metrics={"samples_per_s": {"median": median, "max": best}})


def test_worked_examples(overhead: ModuleType) -> None:
    result = doctest.testmod(overhead)
    assert result.attempted > 0 and result.failed == 0


def test_a_row_reads_each_arm_by_the_statistic_and_names_the_arm_without_a_figure(overhead: ModuleType) -> None:
    a, b = timed(1000.0, 1200.0), timed(900.0, 1260.0)
    assert overhead.pair_line(0, a, b, "median").split() == ["1", "1,000", "900", "0.900"]
    assert overhead.pair_line(0, a, b, "best").split() == ["1", "1,200", "1,260", "1.050"]
    lost = new_record(TrialSpec(model="m"), Status.TIMEOUT, reason="past --timeout 900 s")
    assert overhead.pair_line(4, lost, b, "median").split() == ["5", "0", "900", "a:", "past", "--timeout", "900",
                                                                "s"]
    crashed = new_record(TrialSpec(model="m"), Status.CRASHED)
    assert overhead.pair_line(1, lost, crashed, "best").endswith("a: past --timeout 900 s; b: crashed")


@pytest.mark.slow
def test_both_orders_of_a_pair_are_shown_and_the_summary_agrees_with_the_rows(tmp_path: Path) -> None:
    done = script("--pairs", "2", "--steps", "8", "--repeats", "2", "--statistic", "best", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.splitlines()[0].split() == ["pair", "module:function", "script", "script/module"]
    rows = ROW.findall(out)
    assert [int(row[0]) for row in rows] == [1, 2], out
    ratios = []
    for _, a, b, ratio in rows:  # each row's ratio is its own figures', by the same statistic
        a_speed, b_speed = float(a.replace(",", "")), float(b.replace(",", ""))
        assert a_speed > 0 and b_speed > 0, out
        assert float(ratio) == pytest.approx(b_speed / a_speed, abs=0.002)
        ratios.append(float(ratio))
    assert "2 interleaved pairs, 8 steps x 2 repeats per trial, defaults, by each trial's best window" in out
    said = re.search(r"^script / module:function: median ([\d.]+), 95% CI ([\d.]+)-([\d.]+)$", out, re.M)
    assert said is not None, out
    median, low, high = (float(said[i]) for i in (1, 2, 3))
    assert median == pytest.approx(statistics.median(ratios), abs=0.001) and low <= median <= high
    cost = re.search(r"^hook cost (-?[\d.]+)% at the median; a cost over 2% is ruled out: (yes|NO) "
                     r"\(the interval's low end is ([\d.]+)\)$", out, re.M)
    assert cost is not None, out
    assert float(cost[1]) == pytest.approx(100 * (1 - median), abs=0.06)
    assert cost[2] == ("yes" if low >= 0.98 else "NO") and float(cost[3]) == low


def test_one_pair_is_refused_before_any_trial(tmp_path: Path) -> None:
    done = script("--pairs", "1", cwd=tmp_path)
    assert done.returncode == 2 and "--pairs must be at least 2" in done.stderr, done.stderr[-3000:]
    assert done.stdout == ""


def test_the_workload_gives_both_arms_the_same_data_for_its_model() -> None:
    workload = load_script(BENCHMARKS / "script_overhead_workload.py")
    (x, y), (x_again, y_again) = workload.data(), workload.data()
    assert np.array_equal(x, x_again) and np.array_equal(y, y_again)  # a trial's data is the script's data
    model = workload.build()
    assert not model.compiled  # fitspeed compiles it, as the script does
    assert x.shape[1:] == model.input_shape[1:] and x.dtype == np.float32
    assert set(np.unique(y)) <= set(range(model.output_shape[-1])) and len(x) == len(y)
