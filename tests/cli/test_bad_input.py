"""Bad input and faults through the real CLI: one clear sentence, the right exit status,
no traceback, and nothing the user already had is changed.

The table of refusals runs the CLI's entry point inside the test process (a
refusal comes before any trial, so a process start per case would only add
seconds); a few of its cases also run as `python -m fitspeed`, and must be
refused there in the same words, with the same status.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import optuna
import pytest
from conftest import QUICK, child_env, fitspeed, fitspeed_in_process

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core import best_json
from fitspeed.measure import results


def digests(folder: Path) -> dict[str, str]:
    """Every file under `folder` with the hash of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(result, *words: str, code: int = 2) -> str:  # noqa: ANN001 - a CompletedProcess
    """Exit status `code`, one sentence on stderr naming `words`, and no traceback.

    fitspeed's own errors start with `Error: `; typer's checks of an option's
    range or type print its usage and an `Error` panel.
    """
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    if code == 1:  # a trial that failed is a result: its table and one-line cause are the output
        text = result.stdout + result.stderr
        assert all(word in text for word in words), (words, text)
        return text
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines, result.stdout
    ours = lines[0].startswith("Error: ")
    assert ours or any("Error" in line for line in lines), result.stderr
    text = " ".join(line.strip("│ ") for line in lines)
    for word in words:
        assert word in text, (word, text)
    return text


def _trial_record(model: str, spe: int, speed: float) -> dict:
    knobs = TrialConfig(steps_per_execution=spe).to_dict()
    return {"schema": 1, "kind": "trial", "id": f"{model}{spe}", "status": "ok",
            "spec": {"model": model, "data": None, "knobs": knobs},
            "metrics": {"samples_per_s": {"median": speed}, "loss_curve": [1.0], "final_loss": 1.0}}


@pytest.fixture
def user_files(workdir: Path) -> Path:
    """What a user already has in the folder; no refused command may change any of it."""
    (workdir / "existing.csv").write_text("time,cpu_percent\nmine,1\n")
    (workdir / "best.json").write_text('{"mine": true}\n')
    (workdir / "adir").mkdir()
    (workdir / "afile").write_text("not a folder\n")
    (workdir / "corrupt.npz").write_bytes(b"this is not a zip archive")
    np.savez(workdir / "noxy.npz", a=np.zeros(3))
    (workdir / "foreign.jsonl").write_text('{"event": "epoch", "loss": 0.3}\n[1, 2]\n')
    records = [_trial_record("tiny", 1, 100.0), _trial_record("tiny", 4, 150.0)]
    (workdir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    _study_with_one_trial(f"sqlite:///{workdir / 'study.db'}", "older")
    return workdir


# (arguments, words the sentence must hold, exit status); none may change a file the user had
REFUSED = [
    # measure: models, data, knobs and limits
    (["measure", "nosuch"], ["Unknown workload 'nosuch'", "fitspeed workloads"], 2),
    (["measure", "[/]"], ["'[/]'", "to exist"], 2),  # a word with a slash is taken for a program's path
    (["measure", "[bold]x"], ["Unknown workload '[bold]x'"], 2),
    (["measure", "nosuchpkg.models:build", *QUICK], ["Could not import module 'nosuchpkg.models'", "PYTHONPATH"], 2),
    (["measure", "userwork:nosuch", *QUICK], ["no callable 'nosuch'"], 2),
    (["measure", "tiny", "--data", "nosuch"], ["Unknown data 'nosuch'"], 2),
    (["measure", "tiny", "--data", "[bold]x[/bold]"], ["Unknown data '[bold]x[/bold]'"], 2),
    (["measure", "tiny", "--data", "missing.npz"], ["'missing.npz'", "does not exist"], 2),
    (["measure", "tiny", "--data", "npz:missing"], ["'missing'", "does not exist"], 2),
    (["measure", "tiny", "--data", "images:nowhere"], ["'nowhere'", "not a folder", "make-images"], 2),
    (["measure", "tiny", "--data", "images:afile"], ["'afile'", "not a folder"], 2),
    (["measure", "tiny", "--augment"], ["--augment", "images:DIR"], 2),
    (["measure", "tiny", "--data", "corrupt.npz", *QUICK], ["Could not read 'corrupt.npz' as an .npz"], 2),
    (["measure", "tiny", "--data", "noxy.npz", *QUICK], ["to hold arrays `x` and `y`", "It holds: a"], 2),
    (["measure", "tiny", "--data", "userwork:wrong_shape", *QUICK], ["does not fit the model"], 2),
    (["measure", "tiny", "--set", "precision=float8"], ["float8", "mixed_bfloat16"], 2),
    (["measure", "tiny", "--set", "nosuch=1"], ["nosuch", "fitspeed knobs"], 2),
    (["measure", "tiny", "--set", "steps_per_execution=0"], ["steps_per_execution", "0"], 2),
    (["measure", "tiny", "--set", "steps_per_execution=abc"], ["steps_per_execution", "'abc'"], 2),
    (["measure", "tiny", "--set", "batch_size=-1"], ["batch_size", "-1"], 2),
    (["measure", "tiny", "--set", "jit_compile=maybe"], ["jit_compile", "'maybe'"], 2),
    (["measure", "tiny", "--set", "data_format=NCHW"], ["channels_first"], 2),
    (["measure", "tiny", "--set", "backend=nosuch"], ["backend", "'nosuch'"], 2),
    (["measure", "tiny", "--set", "steps_per_execution=1", "--set", "steps_per_execution=2"],
     ["steps_per_execution twice", "'steps_per_execution=1'", "'steps_per_execution=2'"], 2),
    (["measure", "tiny", "--set", "spe"], ["name=value", "'spe'"], 2),
    (["measure", "tiny", "--set", "workers=2", *QUICK], ["workers", "PyDataset"], 2),
    (["measure", "tiny", "--steps", "7", "--set", "steps_per_execution=4"], ["multiple", "--steps 4"], 2),
    (["measure", "tiny", "--steps", "0"], ["--steps"], 2),
    (["measure", "tiny", "--repeats", "0"], ["--repeats", "0"], 2),
    (["measure", "tiny", "--timeout", "0"], ["--timeout"], 2),
    (["measure", "tiny", "--timeout", "nan"], ["--timeout", "finite"], 2),
    (["measure", "tiny", "--timeout", "-1"], ["--timeout"], 2),
    (["measure", "tiny", "--memory-limit", "0"], ["--memory-limit", "more than zero"], 2),
    (["measure", "tiny", "--memory-limit", "lots"], ["--memory-limit", "'lots'"], 2),
    (["measure", "tiny", "--memory-limit", "4XB"], ["--memory-limit", "'4XB'"], 2),
    (["measure", "tiny", "--results", "adir"], ["--results", "'adir'", "folder"], 2),
    (["measure", "tiny", "--results", "afile/r.jsonl"], ["--results", "'afile/r.jsonl'", "is a file"], 2),
    # a trial that fails on the user's code: status 1, the cause in one line
    (["measure", "userwork:raises", *QUICK], ["failed: ValueError: the builder broke on purpose"], 1),
    # compare
    (["compare", "tiny", "--pairs", "1"], ["Invalid value for '--pairs'"], 2),
    (["compare", "tiny", "--pairs", "1000"], ["Invalid value for '--pairs'"], 2),
    (["compare", "tiny", "--b", "nosuch=1"], ["nosuch"], 2),
    (["compare", "tiny", "--b", "precision=fp8"], ["fp8"], 2),
    (["compare", "tiny", "--confidence", "2"], ["Invalid value for '--confidence'"], 2),
    (["compare", "tiny", "--results", "adir"], ["--results", "'adir'"], 2),
    (["compare", "tiny", "--until-width", "0"], ["--until-width", "0.06", "Received: 0.0"], 2),
    (["compare", "tiny", "--until-width", "nan"], ["--until-width", "Received: nan"], 2),
    (["compare", "tiny", "--statistic", "mode"], ["--statistic", "'mode'", "median"], 2),
    (["compare", "tiny", "--max-pairs", "1"], ["Invalid value for '--max-pairs'"], 2),
    # tune
    (["tune", "python", "train.py"], ["training command after `--`", "`fitspeed tune -- python train.py`"], 2),
    (["measure", "python", "train.py"], ["`fitspeed measure -- python train.py`"], 2),
    (["tune", "tiny", "--time", "0s"], ["--time", "more than zero", "'0s'"], 2),
    (["tune", "tiny", "--time", "-5m"], ["--time"], 2),
    (["tune", "tiny", "--time", "10parsecs"], ["--time", "'10parsecs'"], 2),
    (["tune", "tiny", "--trials", "0"], ["Invalid value for '--trials'"], 2),
    # issue 61: a budget that cannot pay for an answer is refused before any trial, with the smallest that can
    (["tune", "tiny", "--trials", "12", "--storage", "sqlite:///new.db"],
     ["Received: --trials 12", "Pass --trials", "or more", "--screen-only"], 2),
    (["tune", "tiny", "--guard-margin", "2"], ["Invalid value for '--guard-margin'"], 2),
    (["tune", "tiny", "--space", "nosuch=1,2", "--storage", "sqlite:///new.db"], ["nosuch"], 2),
    (["tune", "tiny", "--space", "precision=fp8", "--storage", "sqlite:///new.db"], ["fp8"], 2),
    (["tune", "tiny", "--knobs", "nosuch", "--storage", "sqlite:///new.db"], ["nosuch"], 2),
    (["tune", "tiny", "--batch-sizes", "0,32"], ["--batch-sizes", "'0,32'"], 2),
    (["tune", "tiny", "--batch-sizes", "a,b"], ["--batch-sizes", "'a,b'"], 2),
    (["tune", "tiny", "--pairs", "1"], ["Invalid value for '--pairs'"], 2),
    (["tune", "tiny", "--storage", "bogus://nowhere"], ["study storage 'bogus://nowhere'"], 2),
    (["tune", "mlp", "--study", "older", "--storage", "sqlite:///study.db"], ["Study 'older'", "made for model"], 2),
    # show and report
    (["show", "--storage", "sqlite:///missing.db"], ["No study database at 'missing.db'"], 2),
    (["show", "nosuch", "--storage", "sqlite:///study.db"], ["No study named 'nosuch'", "older"], 2),
    (["report", "missing.jsonl"], ["No results file at 'missing.jsonl'"], 2),
    (["report", "missing.db"], ["No study database at 'missing.db'"], 2),
    (["report", "foreign.jsonl"], ["'foreign.jsonl'", "holds none", "line 1: not a fitspeed record"], 2),
    (["report", "study.db", "--study", "nosuch"], ["No study named 'nosuch'"], 2),
    (["report", "results.jsonl", "--workload", "cnn10 · synthetic"], ["No records for workload", "'tiny · synthetic'"], 2),
    (["report", "results.jsonl", "--out", "afile"], ["Could not write the report into 'afile'"], 2),
    # monitor
    (["monitor", "--out", "existing.csv", "--", sys.executable, "-c", "pass"], ["existing.csv", "--force"], 2),
    (["monitor", "--interval", "0", "--out", "m.csv", "--", sys.executable, "-c", "pass"], ["--interval"], 2),
    (["monitor", "--interval", "-1", "--out", "m.csv", "--", sys.executable, "-c", "pass"], ["--interval"], 2),
    (["monitor", "--out", "m.csv", "--", "no-such-command-fitspeed"], ["Expected a command to run after `--`"], 2),
    (["monitor", "--out", "m.csv", "--pid", "999999999"], ["--pid", "999999999"], 2),
    # make-images and doctor
    (["make-images", "afile"], ["'afile'", "which is a file"], 2),
    (["make-images", "pics", "--source", "nosuch"], ["--source", "'nosuch'"], 2),
    (["make-images", "pics", "--count", "0"], ["Invalid value for '--count'"], 2),
    (["doctor", "nosuch"], ["Unknown workload 'nosuch'"], 2),
    (["doctor", "tiny", "--augment"], ["--augment", "images:DIR"], 2),
    (["doctor", "tiny", "--results", "adir"], ["--results", "'adir'"], 2),
]


def _ids(table: list) -> list[str]:
    return [" ".join(a[:5]).replace(sys.executable, "python") for a, _, _ in table]


def check_refused(folder: Path, run, args: list[str], words: list[str], code: int) -> str:  # noqa: ANN001
    """`run` (a way to run the CLI) refuses `args` in one sentence naming `words`, and changes no file."""
    before = digests(folder)
    text = refused(run(*args, cwd=folder), *words, code=code)
    after = digests(folder)
    # the user's files are untouched; a failed trial (status 1) only appends its record to the results file
    assert {k: v for k, v in after.items() if k in before} == before, text
    made = set(after) - set(before)
    assert made <= ({"fitspeed-results.jsonl"} if code == 1 else set()), made
    if code == 1:  # the failed trial is recorded
        assert [r["status"] for r in results.read(folder / "fitspeed-results.jsonl")[0]] == ["failed"]
    return text


@pytest.mark.parametrize(("args", "words", "code"), REFUSED, ids=_ids(REFUSED))
def test_refused_with_one_sentence_and_nothing_changed(user_files: Path, args: list[str], words: list[str],
                                                       code: int) -> None:
    check_refused(user_files, fitspeed_in_process, args, words, code)


# the same refusals through `python -m fitspeed`: a typer check of a range, fitspeed's own error before
# any trial, a name with markup, a file a trial child cannot read, the user's code failing in a trial
END_TO_END = [case for case in REFUSED if case[0] in (
    ["compare", "tiny", "--pairs", "1"],
    ["measure", "nosuch"],
    ["measure", "[bold]x"],
    ["report", "foreign.jsonl"],
    ["measure", "tiny", "--data", "corrupt.npz", *QUICK],
    ["measure", "userwork:raises", *QUICK],
)]


@pytest.mark.parametrize(("args", "words", "code"), END_TO_END, ids=_ids(END_TO_END))
def test_the_real_entry_point_refuses_the_same(user_files: Path, args: list[str], words: list[str],
                                               code: int) -> None:
    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return fitspeed(*args, cwd=cwd, timeout=180)

    real = check_refused(user_files, run, args, words, code)
    if code == 2:  # a refusal before any trial: word for word what the in-process run says
        assert check_refused(user_files, fitspeed_in_process, args, words, code) == real


def test_the_table_is_long_enough() -> None:
    assert len(REFUSED) >= 60
    assert len(END_TO_END) == 6  # each case above is still in the table


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
    code = "import time; time.sleep(0.8); print('$x^2$'); raise SystemExit(3)"  # the watched command: runs long enough to be sampled
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


def test_a_long_failure_keeps_its_cause(workdir: Path) -> None:
    result = fitspeed("measure", "userwork:long_error", "--json", *QUICK, cwd=workdir)
    assert result.returncode == 1
    record = json.loads(result.stdout)
    assert record["reason"].endswith("THE CAUSE") and len(record["reason"]) < 4200
    table = fitspeed("measure", "userwork:long_error", *QUICK, cwd=workdir)
    text = " ".join(table.stdout.split())  # the terminal wraps long lines
    assert "failed: ValueError: while building: context" in text and "THE CAUSE (the whole message" in text
    assert text.count("context") < 60  # one line's worth, not the 700 of the record


def test_tune_prints_a_failed_trial_in_one_line(workdir: Path) -> None:
    storage = f"sqlite:///{workdir / 's.db'}"
    result = fitspeed("tune", "userwork:long_error", "--trials", "1", "--screen-only", "--storage", storage, *QUICK, cwd=workdir)
    assert "Traceback" not in result.stderr
    text = " ".join(result.stderr.split())  # the terminal wraps long lines
    assert "baseline defaults: failed (ValueError: while building: context" in text, text
    assert "THE CAUSE)" in text and text.count("context") < 60, text


def test_a_corrupt_image_is_named(workdir: Path) -> None:
    made = fitspeed("make-images", "pics", "--count", "40", "--size", "16", cwd=workdir)
    assert made.returncode == 0, made.stderr
    broken = workdir / "pics" / "class_02" / "000007.jpg"
    broken.write_bytes(b"\xff\xd8 this is not a whole JPEG")
    result = fitspeed("measure", "tiny", "--data", "images:pics", *QUICK, cwd=workdir)
    refused(result, "'pics/class_02/000007.jpg'", "Delete or replace")


def test_report_on_mixed_workloads_says_which_it_drew(workdir: Path) -> None:
    records = [_trial_record("tiny", 1, 100.0), _trial_record("mlp", 1, 50.0), _trial_record("tiny", 4, 150.0)]
    (workdir / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n")
    result = fitspeed("report", "r.jsonl", "--out", "rep", cwd=workdir)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stderr.split())
    assert "this report is 'tiny · synthetic', the newest" in text and "--workload: 'mlp · synthetic'" in text
    assert "skipped line 4: not JSON" in text
    page = (workdir / "rep" / "index.html").read_text()
    assert "skipped line 4" in page
