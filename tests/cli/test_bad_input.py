"""Bad input and faults through the real CLI: one clear sentence, the right exit status,
no traceback, and nothing the user already had is changed."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from conftest import QUICK, child_env, fitspeed

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.search import best_json


def digests(folder: Path) -> dict[str, str]:
    """Every file under `folder` with the hash of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(result, *words: str) -> str:  # noqa: ANN001 - a CompletedProcess
    """Exit status 2, one `Error:` sentence naming `words`, and no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[0].startswith("Error: "), result.stderr
    text = " ".join(lines)
    for word in words:
        assert word in text, (word, text)
    return text


# (arguments, words the sentence must hold); each must leave the folder as it was
REFUSED = [
    (["tune", "tiny", "--time", "0s"], ["--time", "more than zero", "'0s'"]),
    (["tune", "tiny", "--time", "-5m"], ["--time"]),
    (["measure", "tiny", "--memory-limit", "0"], ["--memory-limit", "more than zero"]),
    (["measure", "[/]"], ["Unknown workload '[/]'"]),
    (["measure", "tiny", "--data", "[bold]x[/bold]"], ["Unknown data '[bold]x[/bold]'"]),
    (["measure", "tiny", "--data", "missing.npz"], ["'missing.npz'", "does not exist"]),
    (["measure", "tiny", "--data", "images:nowhere"], ["'nowhere'", "not a folder", "make-images"]),
    (["measure", "tiny", "--augment"], ["--augment", "images:DIR"]),
    (["measure", "tiny", "--set", "precision=float8"], ["float8"]),
    (["monitor", "--out", "existing.csv", "--", sys.executable, "-c", "pass"], ["existing.csv", "--force"]),
]


@pytest.mark.parametrize(("args", "words"), REFUSED, ids=[" ".join(a[:4]) for a, _ in REFUSED])
def test_refused_with_one_sentence_and_nothing_changed(workdir: Path, args: list[str], words: list[str]) -> None:
    (workdir / "existing.csv").write_text("time,cpu_percent\nmine,1\n")
    (workdir / "best.json").write_text('{"mine": true}\n')
    before = digests(workdir)
    refused(fitspeed(*args, cwd=workdir, timeout=120), *words)
    assert digests(workdir) == before  # no best.json overwritten, no study or results file created


def test_a_builders_error_with_markup_prints_as_it_is(workdir: Path) -> None:
    result = fitspeed("measure", "userwork:bracket_error", *QUICK, cwd=workdir)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stdout
    assert "[/] is not a layer [bold]name[/bold]" in result.stdout + result.stderr


HIDE_JAX = """
import importlib.util, sys
real = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name == "jax" else real(name, *a)
sys.argv = ["fitspeed", "measure", "tiny", "--set", "backend=jax"]
from fitspeed.cli import main
main()
"""


def test_install_hints_keep_their_brackets(workdir: Path) -> None:
    # as if jax were not installed: the hint names the extra, brackets and all
    result = subprocess.run([sys.executable, "-c", HIDE_JAX], cwd=workdir, env=child_env(),
                            capture_output=True, text=True, timeout=60)
    refused(result, "pip install 'fitspeed[jax]'")


def _study_with_one_trial(storage: str, name: str) -> None:
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize")
    for key, value in {"fitspeed": True, "model": "tiny", "data": None, "base": TrialConfig().to_dict()}.items():
        study.set_user_attr(key, value)
    study.add_trial(optuna.trial.create_trial(value=1.0, params={}, distributions={}))


def test_an_empty_study_breaks_nothing(workdir: Path) -> None:
    storage = f"sqlite:///{workdir / 'f.db'}"
    _study_with_one_trial(storage, "older")
    optuna.create_study(study_name="empty", storage=storage).set_user_attr("fitspeed", True)  # no start time
    _study_with_one_trial(storage, "newest")
    shown = fitspeed("show", "--storage", storage, cwd=workdir)
    assert shown.returncode == 0, shown.stderr
    assert "newest" in shown.stdout
    report = fitspeed("report", "--storage", storage, "--out", "rep", cwd=workdir)
    assert report.returncode == 0, report.stderr
    assert (workdir / "rep" / "index.html").is_file()
    named = fitspeed("show", "[/]", "--storage", storage, cwd=workdir)
    refused(named, "No study named '[/]'", "newest")


def test_a_keras_py_in_the_working_folder_does_not_shadow_keras(workdir: Path) -> None:
    (workdir / "keras.py").write_text("raise SystemExit('this is not Keras')\n")
    result = fitspeed("measure", "tiny", "--json", *QUICK, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "ok"


def test_monitor_keeps_the_commands_status_and_a_dollar_in_the_title(workdir: Path) -> None:
    code = "import time; time.sleep(0.8); print('$x^2$'); raise SystemExit(3)"
    result = fitspeed("monitor", "--interval", "0.2", "--out", "m.csv", "--", sys.executable, "-c", code, cwd=workdir)
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    assert (workdir / "m.png").stat().st_size > 1000
    assert not [p.name for p in workdir.iterdir() if p.name.endswith(".tmp")]


SUMMARY = {"baseline": {"config": TrialConfig().to_dict()},
           "best": {"config": TrialConfig(steps_per_execution=64).to_dict(), "claimed": False,
                    "verdict": "keep the defaults"}}


def test_best_json_snippet_follows_the_verdict(tmp_path: Path) -> None:
    written = json.loads(best_json.write(tmp_path / "best.json", SUMMARY).read_text())
    assert written["knobs"] == {}
    assert "steps_per_execution" not in written["snippet"]
    assert "Keep Keras's defaults" in written["snippet"]
    claimed = {**SUMMARY, "best": {**SUMMARY["best"], "claimed": True}}
    written = json.loads(best_json.write(tmp_path / "best.json", claimed).read_text())
    assert written["knobs"] == {"steps_per_execution": 64}


def test_best_json_leaves_no_debris_and_follows_no_planted_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    os.symlink(outside, tmp_path / "best.json.tmp")  # the fixed name the old writer used
    best_json.write(tmp_path / "best.json", SUMMARY)
    assert outside.read_text() == "keep me\n"
    (tmp_path / "adir").mkdir()
    with pytest.raises(UserError, match="adir"):
        best_json.write(tmp_path / "adir", SUMMARY)  # a folder where the file should go
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "best.json", "best.json.tmp", "outside.txt"]
