"""benchmarks/verification_aa.py: the A/A and power figures of the tuner's and doctor's paired decisions."""

from __future__ import annotations

import json
import math
import random
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import child_env, load_script

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "verification_aa.py"


@pytest.fixture(scope="module")
def aa() -> ModuleType:
    return load_script(SCRIPT)


def _log_sd(aa: ModuleType, model: str, side: str) -> float:
    machine = aa.Machine(aa.NOISE_MODELS[model], random.Random(5))
    return statistics.stdev(math.log(machine.trial(1.0, False, side)) for _ in range(4000))


def test_each_sides_own_spread_is_the_noise_models(aa: ModuleType) -> None:
    # "B 3x noisier": B's trial-to-trial spread three times A's own part (the shared drift aside)
    a, b = _log_sd(aa, "B 3x noisier", "a"), _log_sd(aa, "B 3x noisier", "b")
    assert a == pytest.approx(0.10, rel=0.15)
    assert 2.3 < b / a < 3.2
    equal = _log_sd(aa, "gaussian cv10", "b") / _log_sd(aa, "gaussian cv10", "a")
    assert equal == pytest.approx(1.0, abs=0.1)


def test_the_second_slot_gains_by_the_models_slot_bias(aa: ModuleType) -> None:
    machine = aa.Machine(aa.NOISE_MODELS["slot bias 1.09"], random.Random(2))
    firsts = statistics.fmean(math.log(machine.pair(1.0, b_first=True)) for _ in range(3000))  # b first: a/b is late
    seconds = statistics.fmean(math.log(machine.pair(1.0, b_first=False)) for _ in range(3000))
    assert seconds - firsts == pytest.approx(2 * math.log(1.09), abs=0.02)


def test_the_script_end_to_end_says_faster_rarely_where_nothing_helps_and_nearly_always_at_1_5x(tmp_path: Path) -> None:
    args = ["--runs", "80", "--ratios", "1.0,1.5", "--designs", "verification,doctor's confirmation (no prior)",
            "--models", "gaussian cv10,B 3x noisier"]
    done = subprocess.run([sys.executable, str(SCRIPT), *args, "--json"], cwd=tmp_path, env=child_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert len(results) == 4
    for title, (null, big) in results.items():
        assert null["ratio"] == 1.0 and big["ratio"] == 1.5
        assert null["faster_n"] <= 6, title  # 2.5% of 80 is 2; 6 or more has a chance under 1%
        assert null["faster"] + null["futile"] + null["not_confirmed"] == pytest.approx(1.0)
        assert 3 <= big["mean_pairs"] <= 10
        assert big["faster"] > null["faster"] + 0.25, title
        assert big["coverage"] >= 0.9, title
    # each design sees 1.5x nearly always, even where B is 3x noisier: the verification with each side's own
    # prior, doctor's 3 to 10 pairs with no prior with a boundary for each look (one constant boundary over 3 to 5
    # pairs saw it about a third of the time there)
    assert results["verification, gaussian cv10"][1]["faster"] >= 0.9
    assert results["doctor's confirmation (no prior), gaussian cv10"][1]["faster"] >= 0.85
    assert results["verification, B 3x noisier"][1]["faster"] >= 0.85
    assert results["doctor's confirmation (no prior), B 3x noisier"][1]["faster"] >= 0.7
    table = subprocess.run([sys.executable, str(SCRIPT), *args[:4], "--designs", "verification", "--models",
                            "gaussian cv10"], cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300)
    assert table.returncode == 0, table.stderr
    assert "verification, gaussian cv10" in table.stdout and "95% CI of faster" in table.stdout
