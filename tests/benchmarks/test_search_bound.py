"""benchmarks/search_bound.py: the idealised procedures run end to end, as the docs' commands run them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import child_env

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "search_bound.py"


def bound(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, env=child_env(), capture_output=True,
                          text=True, timeout=300)


def test_every_procedure_runs_on_a_few_worlds_and_is_scored_against_the_tuners_rows(tmp_path: Path) -> None:
    # the tuner's rows as search_simulation.py --worlds --json writes them: every world at half the best speed
    rows = [{"seed": seed, "best_gain": 2.0, "gain": 1.0} for seed in range(3_000_000, 3_000_004)]
    (tmp_path / "tuner.json").write_text(json.dumps({"worlds": {"worlds": rows}}))
    done = bound("--worlds", "4", "--budgets", "12", "--tuner", "tuner.json", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    worlds, procedures = out["worlds_where_something_helps"], out["procedures"]
    assert 1 <= worlds <= 4
    assert set(procedures) == {"lean-oracle", "lean-best", "design-12", "design-12+lean", "ideal-12", "tuner"}
    assert procedures["tuner"]["captured"] == 0.5
    for name, score in procedures.items():
        assert score["worlds"] == worlds and 0.0 < score["captured"] <= 1.0, (name, score)
        assert score["within_3pct_n"] <= score["within_5pct_n"] <= score["within_10pct_n"] <= worlds
        if name != "tuner":
            assert abs(score["captured_minus_tuner"] - (score["captured"] - 0.5)) < 1e-3  # paired, world by world
    assert procedures["lean-best"]["captured"] >= 0.97  # every effect known


def test_the_table_names_each_procedure(tmp_path: Path) -> None:
    done = bound("--worlds", "3", "--budgets", "12", "--ideal-only", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "worlds where something helps" in lines[0]
    assert [line.split()[0] for line in lines[2:]] == ["lean-oracle", "lean-best", "ideal-12"]
