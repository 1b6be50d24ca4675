"""benchmarks/null_test.py and benchmarks/guard_build_first.py run end to end on `tiny`, as their docstrings run them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_env

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def script(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *args], cwd=cwd, env=child_env(),
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_aa_test_adds_pairs_until_its_cap_and_prints_an_interval_per_statistic(tmp_path: Path) -> None:
    # a width no three pairs can reach: --until-width runs to --max-pairs and stops there
    done = script("null_test.py", "--model", "tiny", "--pairs", "2", "--steps", "8", "--repeats", "2",
                  "--until-width", "0.0001", "--max-pairs", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"A = B = tiny defaults, 3 pairs, 8 steps x 2 windows per trial", done.stdout), done.stdout
    assert len(re.findall(r"^pair +\d [ab]: ok", done.stdout, re.M)) == 6
    for statistic in ("median", "best"):
        ratios = re.search(rf"^{statistic} *: ratios B/A (.+)$", done.stdout, re.M)
        line = re.search(rf"^{statistic} *: median ratio ([0-9.]+), 95% CI ([0-9.]+)-([0-9.]+), width ([0-9.]+), "
                         r"contains 1: (yes|NO)$", done.stdout, re.M)
        assert ratios is not None and line is not None, done.stdout
        assert len(ratios.group(1).split()) == 3
        median, low, high, width = (float(line.group(i)) for i in range(1, 5))
        assert 0 < low <= median <= high and abs(width - (high - low)) < 2e-4
        assert line.group(5) == ("yes" if low <= 1 <= high else "NO")


@pytest.mark.slow
def test_the_guards_built_run_trains_as_a_plain_fit_does(tmp_path: Path) -> None:
    done = script("guard_build_first.py", "--models", "tiny", "--pairs", "1", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    [row] = json.loads(done.stdout)
    assert row["model"] == "tiny" and row["pairs"] == 1
    assert row["same_training"] is True  # the same loss curve and held-out loss, built first or not
    for name in ("fit_s", "wall_s"):
        low, high = row[f"{name}_ratio_range"]
        assert 0 < low <= row[f"{name}_ratio_median"] <= high
    assert row["plain_fit_s_median"] > 0
