"""benchmarks/tuner_vs_grid.py: a small grid, the tuner on it and the two answers interleaved, end to end."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_env, load_script

from fitspeed.core.config import TrialConfig

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.mark.slow
def test_a_grid_whose_steps_are_not_a_multiple_of_every_value_runs_to_its_fraction(tmp_path: Path) -> None:
    # --steps 8 with steps_per_execution=16 in the grid: every trial, the final pairs too, rounds to whole executions
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "tuner_vs_grid.py"), "--model", "tiny", "--steps", "8", "--repeats", "2",
         "--pairs", "1", "--grid", "steps_per_execution=1,16", "--grid", "precision=float32,mixed_bfloat16",
         "--save", "grid.json"],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    grid_lines = [line for line in done.stdout.splitlines() if line.startswith("grid  ")]
    assert len(grid_lines) == 4 and all(" ok " in line for line in grid_lines), done.stdout
    fraction = re.search(r"fraction of the grid's best: ([0-9.]+) \((.+)\)", done.stdout)
    assert fraction is not None, done.stdout
    assert 0.0 < float(fraction.group(1)) < 10.0
    assert fraction.group(2) == "same configuration" or "interleaved in 1 pairs" in fraction.group(2)

    saved = json.loads((tmp_path / "grid.json").read_text())
    assert saved["kind"] == "fitspeed-grid" and len(saved["cells"]) == 4
    scenario = load_script(BENCHMARKS / "search_simulation.py").load_recorded(tmp_path / "grid.json")
    assert set(scenario.grid) == {"steps_per_execution", "precision"}
    defaults = scenario.cells[(TrialConfig().steps_per_execution, TrialConfig().precision)]
    assert defaults == next(c["samples_per_s"] for c in saved["cells"]
                            if c["knobs"] == {"steps_per_execution": 1, "precision": "float32"})
