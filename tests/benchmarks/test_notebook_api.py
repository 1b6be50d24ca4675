"""benchmarks/notebook_api.py: `fitspeed tune` and the three ways of `fitspeed.tune` on one model, at a tiny budget.

Three trials a study, screening only (`--screen-only`: a budget that cannot pay for a verified answer is
refused without it), so every way keeps the defaults, and the applied model is the given one: what is checked is that each way ran a real study of
that size and that the one JSON object the script prints holds together. Nothing here reads a speed.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from conftest import child_env

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "notebook_api.py"
WAYS = {"cli: fitspeed tune nb_model:model --data nb_model:data": "cli",
        "python: fitspeed.tune(model, x, y)": "memory",
        "python: fitspeed.tune(build, x, y)": "builder",
        "python: fitspeed.tune('model.keras', x, y)": "saved"}


def script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, env=child_env(), capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_the_cli_and_each_python_way_tune_the_same_budget_and_print_one_json_object(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    done = script("--out", str(out), "--trials", "3", "--screen-only", "--pairs", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)  # the whole of stdout: nothing else printed there
    assert set(result) == {"tunes", "applied", "wall_s"} and result["wall_s"] >= 0
    tunes = result["tunes"]
    assert {label: row["study"] for label, row in tunes.items()} == WAYS
    for row in tunes.values():
        assert row == {"study": row["study"], "answer": "defaults", "claimed": False, "verdict": row["verdict"],
                       "estimate": None, "ci": [None, None]}
    verdicts = {row["verdict"] for row in tunes.values()}
    assert len(verdicts) == 1 and "" not in verdicts  # the same kind of verdict, whichever way
    applied = result["applied"]
    assert applied["answer"] == tunes["python: fitspeed.tune(model, x, y)"]["answer"]
    assert len(applied["pairs"]) == 2 and all(ratio > 0 for ratio in applied["pairs"])
    assert applied["median"] == pytest.approx(statistics.median(applied["pairs"]), abs=0.001)
    assert applied["within_the_verified_interval"] is False  # an unclaimed answer has no interval to lie in
    # each way ran its own real study in the one storage, of the budget asked for
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    studies = {s.study_name: s.n_trials for s in optuna.get_all_study_summaries(f"sqlite:///{out / 'studies.db'}")}
    assert {name: studies.get(name) for name in WAYS.values()} == dict.fromkeys(WAYS.values(), 3), studies
    assert (out / "cli-best.json").is_file() and (out / "model.keras").is_file()
    assert json.loads((out / "cli-best.json").read_text())["model"] == "nb_model:model"


@pytest.mark.parametrize("args", [["--pairs", "0"], ["--trials", "0"]], ids=["pairs", "trials"])
def test_a_budget_below_one_is_refused_before_anything_runs(tmp_path: Path, args: list[str]) -> None:
    done = script("--out", str(tmp_path / "bench"), *args, cwd=tmp_path)
    assert done.returncode == 2 and f"{args[0]} must be at least 1. Received: 0." in done.stderr, done.stderr[-3000:]
    assert done.stdout == "" and not (tmp_path / "bench").exists()
