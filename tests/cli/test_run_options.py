"""`fitspeed run`'s options where users put them: before or after best.json (issue 36, item 3).

`run` is the one command with a positional argument (CONFIG) before `--`.
Its options are read either side of CONFIG; after `--` every word is the
training command's own, even one spelled like fitspeed's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import fitspeed

# prints what reached the script: its arguments, and the seed the hook exported
SHOW = "import os, sys; print('ARGV', sys.argv[1:], 'SEED', os.environ.get('PYTHONHASHSEED'))"


@pytest.fixture
def best(tmp_path: Path) -> Path:
    (tmp_path / "best.json").write_text(json.dumps({"kind": "best", "model": "tiny", "script": None,
                                                    "knobs": {"deterministic": True}}))
    return tmp_path


@pytest.mark.parametrize("words", [
    ["--force", "--seed", "5", "best.json"],
    ["best.json", "--force", "--seed", "5"],
    ["--seed", "5", "best.json", "--force"],
    ["best.json", "--seed=5", "--force"],
])
def test_run_reads_its_options_before_or_after_best_json(words: list[str], best: Path) -> None:
    done = fitspeed("run", *words, "--", sys.executable, "-c", SHOW, "--force", "--seed", "9", cwd=best)
    assert done.returncode == 0, done.stderr
    assert "ARGV ['--force', '--seed', '9'] SEED 5" in done.stdout  # the command's own words stay its own
    assert "was tuned on" not in done.stderr  # --force quieted the provenance warning


def test_run_without_force_warns_and_keeps_the_command_whole(best: Path) -> None:
    done = fitspeed("run", "best.json", "--", sys.executable, "-c", SHOW, "--force", cwd=best)
    assert done.returncode == 0, done.stderr
    assert "ARGV ['--force'] SEED 0" in done.stdout
    assert "was tuned on the built-in workload tiny" in done.stderr


@pytest.mark.parametrize(("words", "expected"), [
    (["best.json", "--frce", "--", "python", "t.py"], "Received: '--frce'. Put the training command after `--`"),
    (["best.json", "--seed", "x", "--", "python", "t.py"], "Expected --seed to be given an integer"),
    (["best.json", "--force"], "Expected a training command after `--`"),
])
def test_run_says_what_it_expected_of_its_options(words: list[str], expected: str, best: Path) -> None:
    done = fitspeed("run", *words, cwd=best)
    assert done.returncode == 2
    assert expected in " ".join(done.stderr.split()) and "Traceback" not in done.stderr
