"""A failure outside fitspeed's control names its cause, and leaves nothing that poisons the next run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, QUICK, child_env

SCRIPT = FIXTURES / "scripts" / "long_train.py"


def _fitspeed(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fitspeed", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_a_python_without_fitspeed_is_named_and_its_crashed_baseline_is_measured_again(tmp_path: Path) -> None:
    # A user's venv is not active: `python` on PATH has no fitspeed (issue 25, items 4 and 5).
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    env = child_env()
    env["PATH"] = os.pathsep.join([str(bare / "bin"), env["PATH"]])
    command = ["--", "python", str(SCRIPT), "--epochs", "2", "--out", str(tmp_path / "m.keras")]

    measured = _fitspeed(env, tmp_path, "measure", *QUICK, *command)
    assert measured.returncode == 2, (measured.stdout, measured.stderr)
    assert "the script hook could not start" in measured.stderr and "No module named" in measured.stderr
    assert "Traceback" not in measured.stderr + measured.stdout

    tune = ["tune", *QUICK, "--trials", "4", "--knobs", "steps_per_execution", "--json",
            "--storage", f"sqlite:///{tmp_path}/s.db", "--best", str(tmp_path / "best.json"), *command]
    # issue 61, item 3: a budget too small for an answer is refused before the first trial, with the one that pays
    refused = _fitspeed(env, tmp_path, *tune)
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 2 and "Received: --trials 4" in said and "--screen-only" in said, said
    assert not (tmp_path / "s.db").exists() and "Traceback" not in said  # refused before the study was opened
    tune.insert(tune.index("--json"), "--screen-only")
    first = _fitspeed(env, tmp_path, *tune)
    assert first.returncode == 2 and "No module named" in first.stderr, (first.stdout, first.stderr)

    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])  # the venv, activated
    second = _fitspeed(env, tmp_path, *tune)
    assert second.returncode == 0, (second.stdout, second.stderr)
    assert "the baseline failed in an earlier run of this study (failed: the script hook could not start" \
        in " ".join(second.stderr.split()), second.stderr
    summary = json.loads(second.stdout)
    assert summary["baseline"]["samples_per_s"] > 0, summary["baseline"]
    # screening only is said before the first trial, and the answer says it was why nothing was decided
    assert "screening only (--screen-only)" in " ".join(second.stderr.split())
    assert not summary["best"]["claimed"], summary["best"]
    assert summary["best"]["why"].startswith("screened only (--screen-only)"), summary["best"]
    best = json.loads((tmp_path / "best.json").read_text())  # what `fitspeed run` checks a command against
    assert best["script"]["file"] == "long_train.py" and len(best["script"]["sha256"]) == 64


@pytest.mark.slow
def test_show_opens_the_study_used_last_and_no_tune_overwrites_anothers_best_json(tmp_path: Path) -> None:
    # issue 25, item 13: `show` took the study created last; each tune replaced best.json; a lock file was left.
    env = child_env()

    def tune(study: str) -> subprocess.CompletedProcess[str]:
        done = _fitspeed(env, tmp_path, "tune", "tiny", *QUICK, "--trials", "1", "--screen-only", "--knobs", "steps_per_execution",
                         "--study", study, "--json")
        assert done.returncode == 0, (done.stdout, done.stderr)
        return done

    tune("first")
    second = tune("second")
    assert json.loads((tmp_path / "best.json").read_text())["study"] == "second"
    assert json.loads((tmp_path / "best.first.json").read_text())["study"] == "first"
    assert "best.json held another study's answer: it is kept as best.first.json" in second.stderr
    tune("first")  # resumed: its budget is spent, so it only reads its answer again
    assert json.loads((tmp_path / "best.second.json").read_text())["study"] == "second"
    shown = _fitspeed(env, tmp_path, "show", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["study"] == "first", shown.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if "lock" in p.name) == []
