"""A user's own training script under fitspeed, run unchanged through the real CLI.

Every test starts `python -m fitspeed ... -- python SCRIPT` in a subprocess;
the scripts in fixtures/scripts are written the way users write them.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, QUICK, built_once, child_env

from fitspeed.search.guard import GuardVerdict

SCRIPTS = FIXTURES / "scripts"
PY = sys.executable


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "fitspeed", *args], cwd=cwd, env={**child_env(), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def measured(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def error_text(result: subprocess.CompletedProcess[str]) -> str:
    """stderr as one line, from the error on (without a terminal, `measure` first says what it runs)."""
    text = " ".join(result.stderr.split())
    return text[text.index("Error: "):] if "Error: " in text else text


# -- bad input: one sentence, exit status 2, no traceback -------------------------


@pytest.mark.parametrize(
    ("command", "expected", "env"),
    [
        (["missing_train.py"], "Expected the Python script 'missing_train.py' to exist", None),
        (["fails_early.py"], "It failed before that: KeyError: 'label'", None),
        (["no_fit.py"], "It ended without calling it. fitspeed watches keras.Model.fit", None),
        (["legacy_keras.py"], "uses the standalone tf_keras package (Keras 2", None),
        (["keras2_fit.py"], "uses the standalone tf_keras package (Keras 2", {"PYTHONPATH": "{keras2}"}),
        (["exits_early.py"], "It called sys.exit(3) before that", None),
        (["os_exits_early.py"], "It called os._exit(0) before that", None),
        (["downloads_mnist.py"], "to load its data. It could not download it", {"KERAS_HOME": "{tmp}/keras-home"}),
    ],
    ids=["missing", "fails-early", "no-fit", "tf_keras", "tf_keras-fit", "sys.exit", "os._exit", "no-internet"],
)
def test_bad_scripts_say_one_sentence_and_exit_2(
    tmp_path: Path, command: list[str], expected: str, env: dict[str, str] | None
) -> None:
    env = {k: v.format(tmp=tmp_path, keras2=os.pathsep.join([str(SCRIPTS / "keras2_site"), child_env()["PYTHONPATH"]]))
           for k, v in (env or {}).items()}
    result = cli("measure", *QUICK, "--results", str(tmp_path / "r.jsonl"), "--", PY, *command,
                 cwd=SCRIPTS, env=env)
    text = error_text(result)
    assert result.returncode == 2, result.stderr
    assert expected in text
    assert text.startswith("Error: Expected")
    assert "Traceback" not in result.stderr
    if command == ["fails_early.py"]:  # a failing script keeps its traceback's tail in the record
        record = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[-1])
        assert record["user_error"] and record["status"] == "failed"
        assert "Traceback" in record["traceback_tail"] and "KeyError: 'label'" in record["traceback_tail"]
        assert record["script"]["path"].endswith("fails_early.py")
    if command == ["downloads_mnist.py"]:  # the data error says how to point at a local copy
        assert "Point the script at a local copy" in text


# -- the protocol on a script ---------------------------------------------------------


def test_a_15_epoch_trial_stops_after_its_timed_windows_without_saving(tmp_path: Path) -> None:
    saved = tmp_path / "model.keras"
    script = str(SCRIPTS / "long_train.py")
    result = cli("measure", *QUICK, "--json", "--", PY, script, "--epochs", "15", "--out", str(saved), cwd=tmp_path)
    record = measured(result)
    assert record["status"] == "ok"
    metrics = record["metrics"]
    assert metrics["steps_per_repeat"] == 8 and len(metrics["window_s"]) == 2
    assert metrics["batch_size"] == 16  # the script's own --batch-size default
    # warm-up (2 steps) + 2 timed epochs of 1 + 8 steps: three fit() epochs, not fifteen
    assert len(metrics["loss_curve"]) == 3
    assert not saved.exists()
    assert "saved" not in record["log_tail"]
    assert record["script"]["argv"] == ["--epochs", "15", "--out", str(saved)]
    assert len(record["script"]["sha256"]) == 64

    # the same command without fitspeed trains all 15 epochs and saves: the check above can fail
    report = tmp_path / "report.json"
    subprocess.run([PY, script, "--epochs", "15", "--out", str(saved), "--report", str(report)],
                   cwd=tmp_path, env=child_env(), check=True, capture_output=True, timeout=300)
    assert saved.exists() and json.loads(report.read_text())["epochs_run"] == 15


KNOBS = {"steps_per_execution": 4, "precision": "mixed_bfloat16", "intra_op_threads": 1, "inter_op_threads": 2}


def _measure_then_run(folder: Path) -> None:
    """A trial of long_train.py with KNOBS, then `fitspeed run` of a best.json with them, on one command."""
    from fitspeed.core import best_json

    command = ["--", PY, str(SCRIPTS / "long_train.py"), "--epochs", "3", "--out", str(folder / "model.keras")]
    measure = cli("measure", *QUICK, "--json", *[a for k, v in KNOBS.items() for a in ("--set", f"{k}={v}")],
                  "--results", str(folder / "r.jsonl"), *command, cwd=folder)
    saved_by_measure = (folder / "model.keras").exists()
    best_json.write(folder / "best.json", {"baseline": {"config": {}}, "best": {"claimed": True, "config": KNOBS}})
    ran = cli("run", "best.json", *command, "--report", str(folder / "report.json"), cwd=folder)
    (folder / "results.json").write_text(json.dumps({
        "measure": [measure.returncode, measure.stdout, measure.stderr], "saved_by_measure": saved_by_measure,
        "run": [ran.returncode, ran.stdout, ran.stderr]}))


@pytest.fixture(scope="session")
def measured_then_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The trial and the run of one command, made once for the suite; two tests read them."""
    folder = built_once(tmp_path_factory, "measured-then-run", _measure_then_run)
    return folder, json.loads((folder / "results.json").read_text())


def test_run_applies_best_json_inside_the_script_and_trains_to_the_end(
        measured_then_run: tuple[Path, dict[str, Any]]) -> None:
    folder, done = measured_then_run
    code, stdout, stderr = done["run"]
    assert code == 0, stderr
    seen = json.loads((folder / "report.json").read_text())
    assert seen == {"epochs_run": 3, "policy": "mixed_bfloat16", "output_dtype": "float32", "steps_per_execution": 4,
                    "intra_op_threads": 1, "inter_op_threads": 2}
    assert not done["saved_by_measure"] and (folder / "model.keras").exists() and "saved" in stdout


def test_run_trains_the_model_its_trial_timed(measured_then_run: tuple[Path, dict[str, Any]]) -> None:
    # issue 25, item 1: the trial timed a model with float32 outputs; `run` trained the unchanged one (bf16 outputs)
    folder, done = measured_then_run
    code, stdout, stderr = done["measure"]
    record = json.loads(stdout[stdout.index("{"):])
    assert record["status"] == "ok", record.get("reason")
    assert done["run"][0] == 0, done["run"][2]
    seen = json.loads((folder / "report.json").read_text())
    metrics = record["metrics"]
    assert (seen["output_dtype"], seen["policy"], seen["steps_per_execution"]) == \
        (metrics["output_dtype"], metrics["dtype_policy"], metrics["steps_per_execution_resolved"]) == \
        ("float32", "mixed_bfloat16", 4)
    assert seen["intra_op_threads"] == record["spec"]["knobs"]["intra_op_threads"] == 1
    assert seen["inter_op_threads"] == record["spec"]["knobs"]["inter_op_threads"] == 2


def test_run_exits_with_the_scripts_status(tmp_path: Path) -> None:
    from fitspeed.core import best_json

    best_json.write(tmp_path / "best.json", {"baseline": {"config": {}}, "best": {"config": {}}})
    result = cli("run", "best.json", "--", PY, str(SCRIPTS / "exits_early.py"), cwd=tmp_path)
    assert result.returncode == 3
    assert "nothing to do" in result.stdout


def _wrapper(tmp_path: Path) -> list[str]:
    wrapper = tmp_path / "train.sh"
    wrapper.write_text(f'#!/bin/sh\necho "wrapper starting"\n"{PY}" "{SCRIPTS / "long_train.py"}" "$@" && '
                       f'"{PY}" -c "open(\'after-train.txt\', \'w\')"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return ["./train.sh", "--epochs", "15"]


@pytest.mark.parametrize("how", ["module-level", "tensorflow.keras+main", "python -m", "shell wrapper"])
def test_every_way_of_starting_a_script_is_hooked(tmp_path: Path, how: str) -> None:
    cwd = tmp_path
    if how == "module-level":
        command = [PY, str(SCRIPTS / "long_train.py"), "--out", str(tmp_path / "m.keras")]
    elif how == "tensorflow.keras+main":
        command = [PY, str(SCRIPTS / "tf_style.py")]
    elif how == "python -m":
        command, cwd = [PY, "-m", "trainpkg.train"], SCRIPTS
    else:
        command = _wrapper(tmp_path)
    result = cli("measure", *QUICK, "--json", "--results", str(tmp_path / "r.jsonl"),
                 "--set", "steps_per_execution=2", "--set", "precision=mixed_bfloat16", "--", *command, cwd=cwd)
    record = measured(result)
    assert record["status"] == "ok", record.get("reason")
    assert record["metrics"]["steps_per_execution_resolved"] == 2
    assert record["metrics"]["dtype_policy"] == "mixed_bfloat16"
    assert record["metrics"]["batch_callbacks_per_epoch"] == [5]  # (2 lead-in + 8 timed steps) / 2
    if how == "python -m":  # without --fit, its first fit() call is timed (test_fit_picks_which_fit_call_is_timed)
        assert (record["metrics"]["batch_size"], record["metrics"]["fit_call"]) == (16, 1)
    if how == "tensorflow.keras+main":
        assert record["metrics"]["data_kind"] == "dataset" and record["metrics"]["batch_size"] == 32
        assert not (tmp_path / "tf_style.keras").exists()
    if how == "shell wrapper":
        assert "wrapper starting" in record["log_tail"]
        assert not (tmp_path / "after-train.txt").exists()  # the python after the trial did not run


def test_a_script_that_aborts_in_fit_leaves_its_cause_in_the_record(tmp_path: Path) -> None:
    """A native abort mid-fit: the record has the library's message, the fault handler's stack and the signal."""
    result = cli("measure", *QUICK, "--json", "--", PY, str(SCRIPTS / "aborts_in_fit.py"), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    record = json.loads(result.stdout)
    assert record["status"] == "crashed" and "killed by SIGABRT" in record["reason"]
    tail = record["stderr_tail"]
    assert "Check failed: the first batch" in tail
    assert "Fatal Python error: Aborted" in tail and "in on_train_batch_begin" in tail  # faulthandler, in the script
    assert tail.rstrip().endswith("[fitspeed: the trial process was killed by SIGABRT]")


def test_fit_picks_which_fit_call_is_timed(tmp_path: Path) -> None:
    # the first call, timed without --fit: test_every_way_of_starting_a_script_is_hooked[python -m]
    second = measured(cli("measure", *QUICK, "--json", "--results", str(tmp_path / "r.jsonl"), "--fit", "2",
                          "--", PY, "-m", "trainpkg.train", cwd=SCRIPTS))
    assert (second["metrics"]["batch_size"], second["metrics"]["fit_call"]) == (32, 2)
    third = cli("measure", *QUICK, "--results", str(tmp_path / "r.jsonl"), "--fit", "3",
                "--", PY, "-m", "trainpkg.train", cwd=SCRIPTS)
    assert third.returncode == 2 and "It called it 2 time(s)" in error_text(third)


def test_a_library_that_only_probes_for_tf_keras_is_no_mistake(tmp_path: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(SCRIPTS / "keras2_site"), child_env()["PYTHONPATH"]])}
    record = measured(cli("measure", *QUICK, "--json", "--results", str(tmp_path / "r.jsonl"),
                          "--", PY, str(SCRIPTS / "probes_tf_keras.py"), cwd=tmp_path, env=env))
    assert record["status"] == "ok"


def test_a_script_file_that_is_not_a_command_is_refused(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import keras\n")
    result = cli("measure", *QUICK, "--", "train.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "Run it as `python train.py`" in error_text(result)
    assert "Traceback" not in result.stderr


def test_a_knob_that_cannot_apply_to_the_scripts_data_is_refused(tmp_path: Path) -> None:
    result = cli("measure", *QUICK, "--set", "workers=2", "--results", str(tmp_path / "r.jsonl"),
                 "--", PY, str(SCRIPTS / "long_train.py"), "--out", str(tmp_path / "m.keras"), cwd=tmp_path)
    assert result.returncode == 2
    assert "workers applies to a keras.utils.PyDataset; the data here is numpy arrays" in error_text(result)
    assert "Traceback" not in result.stderr


def test_the_hook_leaves_processes_without_the_order_alone(tmp_path: Path) -> None:
    """The script_site sitecustomize on the path does nothing without FITSPEED_SCRIPT."""
    from fitspeed.measure import training_command

    env = {**child_env(), "PYTHONPATH": os.pathsep.join([str(training_command.SITE), child_env()["PYTHONPATH"]])}
    code = "import sys; import keras; print(type(keras.Model.fit).__name__, 'fitspeed.trial.script_hook' in sys.modules)"
    out = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["function", "False"]


# -- compare, tune and doctor on a script ---------------------------------------------


def test_compare_runs_a_script_in_interleaved_pairs(tmp_path: Path) -> None:
    result = cli("compare", *QUICK, "--pairs", "2", "--b", "steps_per_execution=2", "--json",
                 "--results", str(tmp_path / "r.jsonl"),
                 "--", PY, str(SCRIPTS / "long_train.py"), "--out", str(tmp_path / "m.keras"), cwd=tmp_path)
    summary = measured(result)
    assert summary["model"] == "script:long_train.py"
    assert len(summary["estimate"]["ratios"]) == 2
    resolved = [t["metrics"]["steps_per_execution_resolved"] for t in summary["trials"]]
    assert resolved == [1, 2, 1, 2]
    assert not (tmp_path / "m.keras").exists()


def test_doctor_diagnoses_a_scripts_own_pipeline(tmp_path: Path) -> None:
    result = cli("doctor", *QUICK, "--epochs", "2", "--no-fixes", "--json", "--results", str(tmp_path / "r.jsonl"),
                 "--", PY, str(SCRIPTS / "tf_style.py"), cwd=tmp_path)
    summary = measured(result)
    assert summary["kind"] == "dataset"
    assert summary["failed"] == {}
    assert all(summary["ms_per_step"][name] > 0 for name in ("input", "compute", "together"))
    assert summary["verdict"] in ("highly input-bound", "moderately input-bound", "not input-bound")


def _tune_long_train(folder: Path) -> None:
    result = cli("tune", *QUICK, "--trials", "3", "--screen-only", "--pairs", "2", "--json", "--storage", f"sqlite:///{folder}/s.db",
                 "--best", str(folder / "best.json"),
                 "--", PY, str(SCRIPTS / "long_train.py"), "--out", str(folder / "m.keras"), cwd=folder)
    (folder / "result.json").write_text(json.dumps([result.returncode, result.stdout, result.stderr]))


@pytest.fixture(scope="session")
def tuned_long_train(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """`fitspeed tune` on long_train.py (which imports tensorflow) with every knob, once for the run; its summary."""
    folder = built_once(tmp_path_factory, "tuned-long-train", _tune_long_train)
    code, stdout, stderr = json.loads((folder / "result.json").read_text())
    return folder, measured(subprocess.CompletedProcess(["fitspeed"], code, stdout, stderr))


@pytest.mark.slow
def test_tune_on_a_script_writes_best_json_and_may_search_data_format(
        tuned_long_train: tuple[Path, dict[str, Any]]) -> None:
    folder, summary = tuned_long_train
    best = json.loads((folder / "best.json").read_text())
    assert "snippet" in best and best["kind"] == "best"
    assert "data_format" not in summary["skipped"]  # a script's model gets the same checked rewrite
    assert summary["skipped"].get("workers", "").startswith("workers applies to a keras.utils.PyDataset")
    assert not (folder / "m.keras").exists()


def test_tune_cuts_a_scripts_far_slower_trial_short_as_it_does_a_built_in_models(tmp_path: Path) -> None:
    # The script's own callback sleeps 50 ms a step under a mixed precision: far below half the baseline's
    # figure, so the screen's trial of each precision stops after its warm-up or its first timed window.
    import optuna

    storage = f"sqlite:///{tmp_path}/s.db"
    result = cli("tune", "--steps", "16", "--repeats", "3", "--trials", "5", "--screen-only", "--knobs", "precision", "--json",
                 "--storage", storage, "--best", str(tmp_path / "best.json"),
                 "--", PY, str(SCRIPTS / "slow_when_mixed.py"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    records = {}
    for name in optuna.get_all_study_names(storage):
        for trial in optuna.load_study(study_name=name, storage=storage).trials:
            if "record" in trial.user_attrs:
                record = trial.user_attrs["record"]
                records.setdefault(trial.user_attrs["config"].get("precision", "float32"), []).append(record)
    mixed = records.get("mixed_float16", []) + records.get("mixed_bfloat16", [])
    assert mixed, sorted(records)
    for record in mixed:
        stopped = record["metrics"].get("stopped_early")
        assert record["status"] == "ok" and stopped, record["metrics"]
        assert stopped["stop_below"] > 0 and "stopped after" in " ".join(record["notes"])
    assert not any(r["metrics"].get("stopped_early") for r in records["float32"])


def _guard_verdict(tmp_path: Path, script_name: str) -> GuardVerdict:
    """The tuner's numerics guard on mixed_bfloat16, with real trial processes of a script."""
    from fitspeed.core.config import TrialConfig
    from fitspeed.measure import training_command
    from fitspeed.search.tuner import Tuner, TuneSettings

    described = training_command.describe([PY, str(SCRIPTS / script_name)], cwd=tmp_path)
    settings = TuneSettings(model=training_command.label(described), data=training_command.DATA, script=described,
                            storage=f"sqlite:///{tmp_path}/s.db", knobs=("precision",))
    tuner = Tuner(settings)
    verdict = tuner.guarded(TrialConfig(precision="mixed_bfloat16"))
    assert verdict is not None
    return verdict


@pytest.mark.slow
def test_the_guard_compares_a_scripts_own_loss_curves(tmp_path: Path) -> None:
    verdict = _guard_verdict(tmp_path, "long_train.py")
    assert verdict.ok, verdict.reason
    assert len(verdict.baseline_curve) == 4 and verdict.baseline_curve != verdict.curve
    assert verdict.reason.startswith("no held-out data")
    runs = {"baseline": verdict.runs[0], "candidate": verdict.runs[1]}
    from fitspeed.search.guard_stats import FIRST_SEEDS, MAX_SEEDS

    assert runs["baseline"] == runs["candidate"] and FIRST_SEEDS <= runs["candidate"] <= MAX_SEEDS  # the seed rule's


@pytest.mark.slow
def test_the_guard_judges_a_script_on_the_samples_its_validation_split_holds_out(tmp_path: Path) -> None:
    # issue 61, item 2: a script with validation_split=0.2 was "judged on the final training loss"
    verdict = _guard_verdict(tmp_path, "validated_train.py")
    assert verdict.checks and verdict.checks[0].measure == "held-out loss", verdict.reason
    assert "no held-out data" not in verdict.reason and verdict.reason.startswith("held-out loss"), verdict.reason


@pytest.mark.slow
def test_the_guard_says_when_a_script_cannot_be_made_reproducible(tmp_path: Path) -> None:
    verdict = _guard_verdict(tmp_path, "unseeded.py")
    assert not verdict.ok
    assert "varies too much over seeds" in verdict.reason
    assert verdict.runs == (5, 1)  # the baseline's spread settles it: no more runs


def test_run_says_in_one_line_when_best_json_was_tuned_on_another_workload(tmp_path: Path) -> None:
    # issue 25, item 3: a best.json from `tune tiny` ran against a script with no word
    from fitspeed.core import best_json

    best_json.write(tmp_path / "best.json", {"study": "tiny-synthetic", "model": "tiny", "script": None,
                                              "baseline": {"config": {}},
                                              "best": {"claimed": True, "config": {"steps_per_execution": 2}}})
    command = ["--", PY, str(SCRIPTS / "long_train.py"), "--epochs", "1", "--out", str(tmp_path / "m.keras")]
    warned = cli("run", "best.json", *command, cwd=tmp_path)
    assert warned.returncode == 0, warned.stderr
    lines = [line for line in warned.stderr.splitlines() if "was tuned on" in line]
    assert lines == ["fitspeed: best.json was tuned on the built-in workload tiny, not on long_train.py: its "
                     "steps_per_execution and input knobs were measured on another model and data. Tune this script "
                     f"for an answer of its own: fitspeed tune -- {' '.join(command[1:])} (--force quiets this "
                     "warning)."]
    quiet = cli("run", "--force", "best.json", *command, cwd=tmp_path)
    assert quiet.returncode == 0 and "was tuned on" not in quiet.stderr, quiet.stderr


def test_run_says_only_what_it_applies_and_where_a_notebook_answer_came_from(tmp_path: Path) -> None:
    # issue 61, item 4: a notebook model's answer run on a script printed "running … with batch_size=64
    # steps_per_execution=64" while the script kept its batch of 16, and called the model "the built-in workload"
    from fitspeed.core import best_json

    shipped = str(tmp_path / "fitspeed-shipped" / "functional-1a2b3c.keras")
    best_json.write(tmp_path / "best.json", {"study": "functional-1a2b3c-arrays-9f", "model": shipped, "script": None,
                                              "baseline": {"config": {}}, "best": {"claimed": True, "config": {
                                                  "batch_size": 64, "steps_per_execution": 8}}})
    report = tmp_path / "report.json"
    command = ["--", PY, str(SCRIPTS / "long_train.py"), "--epochs", "1", "--out", str(tmp_path / "m.keras"),
               "--report", str(report)]
    ran = cli("run", "best.json", *command, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    said = ran.stderr.splitlines()
    assert f"fitspeed: running `{' '.join(command[1:])}` with steps_per_execution=8" in said, said
    assert not [line for line in said if "running" in line and "batch_size" in line], said
    assert any(line.startswith("fitspeed: batch_size=64 is not applied: a script's batch size is its own")
               for line in said), said
    warning = next(line for line in said if "was tuned on" in line)
    assert "tuned on a model passed to fitspeed.tune from Python (functional)" in warning, warning
    assert "Tune this script for an answer of its own: fitspeed tune --" in warning, warning
    assert json.loads(report.read_text())["steps_per_execution"] == 8  # what the line says is what ran


def test_tune_tries_no_steps_per_execution_beyond_the_scripts_epoch(tmp_path: Path) -> None:
    # an answer of steps_per_execution=64 for a 43-step epoch: the trial timed what the run never does (64/43)
    import optuna

    storage = f"sqlite:///{tmp_path}/s.db"
    result = cli("tune", "--steps", "8", "--repeats", "2", "--trials", "4", "--screen-only", "--knobs", "steps_per_execution",
                 "--storage", storage, "--best", str(tmp_path / "best.json"),
                 "--", PY, str(SCRIPTS / "short_epoch.py"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "the script's epoch has 5 steps: steps_per_execution=" in " ".join(result.stderr.split())
    tried = {t.user_attrs["config"]["steps_per_execution"] for name in optuna.get_all_study_names(storage)
             for t in optuna.load_study(study_name=name, storage=storage).trials if "config" in t.user_attrs}
    assert tried and max(tried) <= 5, tried


# -- the backend as a knob (a script that uses Keras's API alone) ------------------


def _needs(*backends: str) -> None:
    import importlib.util

    missing = [name for name in backends if importlib.util.find_spec(name) is None]
    if missing and os.environ.get("CI") != "true":  # CI installs the extras: there it must run
        pytest.skip(f"needs the {', '.join(missing)} backend installed")


def test_tune_screens_the_other_backends_of_a_portable_script_and_run_trains_on_the_one_in_best_json(
        tmp_path: Path) -> None:
    _needs("jax", "torch")
    from fitspeed.core import best_json

    script = ["--", PY, str(SCRIPTS / "portable_train.py"), "--epochs", "2"]
    result = cli("tune", *QUICK, "--knobs", "backend", "--trials", "3", "--screen-only", "--pairs", "2", "--json",
                 "--storage", f"sqlite:///{tmp_path}/s.db", *script, cwd=tmp_path, timeout=600)
    summary = measured(result)
    screened = {row["config"]: row for row in summary["trials"] if row["phase"] == "sweep"}
    assert {"backend=jax", "backend=torch"} <= set(screened), list(screened)
    assert all(row["status"] == "ok" for row in screened.values()), screened
    # `run` trains the script, unchanged, on the backend best.json names, to its end
    best_json.write(tmp_path / "best.json", {"baseline": {"config": {}}, "best": {"claimed": True, "config": {
        "backend": "jax"}}})
    snippet = json.loads((tmp_path / "best.json").read_text())["snippet"]
    assert 'os.environ["KERAS_BACKEND"] = "jax"' in snippet
    report = tmp_path / "report.json"
    ran = cli("run", "best.json", "--", PY, str(SCRIPTS / "portable_train.py"), "--epochs", "3",
              "--report", str(report), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(report.read_text()) == {"backend": "jax", "epochs_run": 3}


def test_a_script_that_imports_tensorflow_is_offered_no_other_backend_and_the_screen_says_why(
        tuned_long_train: tuple[Path, dict[str, Any]]) -> None:
    _, summary = tuned_long_train  # a tune with every knob, backend among them
    assert summary["trials"] and not [row for row in summary["trials"] if "backend=" in row["config"]]
    reasons = {reason for knobs, reason in summary["skipped_groups"] if "backend" in knobs}
    assert reasons == {"long_train.py:25 imports tensorflow, so the script runs on the tensorflow backend only"}


def _tried_steps(storage: str) -> set[int]:
    import optuna

    return {t.user_attrs["config"]["steps_per_execution"] for name in optuna.get_all_study_names(storage)
            for t in optuna.load_study(study_name=name, storage=storage).trials if "config" in t.user_attrs}


def test_tune_caps_steps_per_execution_for_batch_callbacks_and_run_keeps_their_rhythm(tmp_path: Path) -> None:
    # issue 36, item 2: a per-batch callback ran 64x less often under an answer of steps_per_execution=64
    storage = f"sqlite:///{tmp_path}/s.db"
    script = ["--", PY, str(SCRIPTS / "batch_callback.py")]
    result = cli("tune", "--steps", "8", "--repeats", "2", "--trials", "4", "--screen-only", "--knobs", "steps_per_execution",
                 "--storage", storage, "--best", str(tmp_path / "best.json"), *script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "the script's Counter (on_train_batch_end) act per batch" in said and "--allow-batch-callbacks" in said
    assert "EarlyStopping" not in said  # a per-epoch callback is no reason
    assert _tried_steps(storage) == {1}
    best = json.loads((tmp_path / "best.json").read_text())
    assert "act per batch" in json.dumps(best)  # the refusal travels with the answer
    ran = cli("run", "best.json", *script, str(tmp_path / "calls.txt"), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "calls.txt").read_text() == "64"

    allowed = f"sqlite:///{tmp_path}/allowed.db"
    lifted = cli("tune", "--steps", "8", "--repeats", "2", "--trials", "4", "--screen-only", "--knobs", "steps_per_execution",
                 "--allow-batch-callbacks", "--storage", allowed, "--best", str(tmp_path / "b2.json"), *script,
                 cwd=tmp_path)
    assert lifted.returncode == 0, lifted.stderr
    assert "calls their batch hooks once per execution" in " ".join(lifted.stderr.split())
    assert max(_tried_steps(allowed)) > 1


def test_a_script_tune_says_its_cost_before_and_its_saving_per_run_after(tmp_path: Path) -> None:
    # issue 61, item 1: 12 minutes of tune for a script whose whole run is start-up and compile, and no word on it.
    # long_train.py's run is 5 epochs of 32 steps of a 16-sample batch: a fraction of a second of training, so no
    # answer can pay back a tune within a few runs, and the line must say so.
    result = cli("tune", "--steps", "16", "--repeats", "2", "--trials", "14", "--pairs", "2",
                 "--knobs", "steps_per_execution", "--json", "--storage", f"sqlite:///{tmp_path}/s.db",
                 "--", PY, str(SCRIPTS / "long_train.py"), "--epochs", "5", "--out", str(tmp_path / "m.keras"),
                 cwd=tmp_path, timeout=600)
    summary = measured(result)
    said = " ".join(result.stderr.split())
    assert "budget: 14 trial processes for the search and the verification's first look, at about" in said, said
    cost = summary["cost"]
    assert cost["tune_s"] > 0 and cost["line"].startswith("the tune took"), cost
    if summary["best"]["claimed"]:  # steps_per_execution on a 16-sample dense model: the usual outcome
        assert cost["per"] == "run of the script" and cost["steps"] == 5 * 32, cost
        assert cost["runs_to_pay_back"] is None or cost["runs_to_pay_back"] > 10, cost
        assert "not within the next 10" in cost["line"] or "does not pay back" in cost["line"], cost
    else:
        assert "it saves nothing per run" in cost["line"], cost
