"""Input pipelines in real trial children: PyDataset workers, hangs, errors, doctor, make-images.

The Keras 3 PyDataset issues this covers, each reproduced where it can be here:
- keras-team/keras#20032: steps_per_epoch with use_multiprocessing=True ran out
  of data on the second epoch (fixed in Keras 3.5 by #20123);
- keras-team/keras#20425: training hung at the end of the first epoch with
  workers > 1 (Keras 3.6, torch backend on Windows);
- keras-team/keras#17118: worker "processes" that use one core: here, threads
  stay in the trial's process and processes do not.
A loader that hangs must end as `timeout`, never a hung tuner.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, child_env, fitspeed, json_out

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure.runner import run_trial
from fitspeed.search.space import default_space


def trial(data: str, timeout_s: float = 120, repeats: int = 2, **knobs: object) -> TrialRecord:
    spec = TrialSpec(model="userwork:small_model", data=data, config=TrialConfig(**knobs), steps=8,
                     repeats=repeats, timeout_s=timeout_s)
    return run_trial(spec, env=child_env())


def test_threads_stay_in_the_process_and_processes_do_not(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(FIXTURES)!r})
        from inputwork import PidBatches
        from fitspeed.trial import doctor
        from fitspeed.core.config import TrialConfig
        from fitspeed.trial.data.kinds import PyDatasetData
        for name, processes in (("threads", False), ("processes", True)):
            folder = os.path.join({str(tmp_path)!r}, name)
            os.makedirs(folder)
            data = PyDatasetData(source=PidBatches(folder, batch_size=8)).prepare(
                TrialConfig(workers=2, use_multiprocessing=processes), 8, 0)
            iterator, adapter = doctor._iterate(data, 8, 6)
            for _ in range(6):
                next(iterator)
            adapter.on_epoch_end()
        print("main", os.getpid())
    """)
    result = subprocess.run([sys.executable, "-c", script], env=child_env(), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    main = result.stdout.split("main", 1)[1].split()[0]
    threads = {p.name for p in (tmp_path / "threads").iterdir()}
    processes = {p.name for p in (tmp_path / "processes").iterdir()}
    assert threads == {main}
    assert processes - {main}  # Keras reads the first batches itself, for the signature; workers the rest


def test_short_pydataset_in_processes_does_not_run_out_across_epochs() -> None:
    record = trial("inputwork:short_in_processes", repeats=3)  # 4 batches an epoch; 3 windows of 9 steps
    assert record.status == Status.OK, record.reason
    assert len(record.metrics.other["window_s"]) == 3
    assert record.metrics.other["data_kind"] == "pydataset"


def test_short_pydataset_in_threads_does_not_hang_at_epoch_end() -> None:
    record = trial("inputwork:short_in_threads", repeats=3, timeout_s=90)
    assert record.status == Status.OK, record.reason


def test_epochs_mode_sees_time_lost_at_epoch_edges() -> None:
    spec = TrialSpec(model="userwork:small_model", data="inputwork:slow_epoch_end", config=TrialConfig(),
                     steps=8, repeats=3, timeout_s=120, mode="epochs")
    record = run_trial(spec, env=child_env())
    assert record.status == Status.OK, record.reason
    metrics = record.metrics
    assert len(metrics.other["boundary_s"]) == 2 and min(metrics.other["boundary_s"]) >= 0.25, metrics  # 0.3 s each
    assert metrics.other["end_s"] >= 0.25 and metrics.other["lost_s"] >= 0.75, metrics
    assert metrics.other["lost_share"] == pytest.approx(metrics.other["lost_s"] / metrics.other["fit_s"])


def test_a_loader_that_hangs_is_a_timeout() -> None:
    started = time.perf_counter()
    record = trial("inputwork:hangs", timeout_s=6)
    assert record.status == Status.TIMEOUT
    assert "timeout of 6 s" in record.reason
    assert time.perf_counter() - started < 35


def test_a_loader_that_raises_fails_with_its_own_message() -> None:
    for data in ("inputwork:raises_in_thread", "inputwork:raises_in_process"):
        record = trial(data)
        assert record.status == Status.FAILED, data
        assert "the loader broke on purpose at batch 3" in record.reason, record.reason


def test_input_knobs_join_the_space_where_they_apply() -> None:
    def searched(data: str | None, model: str = "tiny") -> dict[str, tuple]:
        return {d.knob: d.values for d in default_space(model, TrialConfig(), has_gpu=False, cores=2, data=data)
                if d.searched}

    arrays = searched(None)
    assert arrays["data_autotune"] == (False,)
    assert not {"prefetch", "cache", "workers"} & set(arrays)
    images = searched("images:photos")
    assert images["prefetch"] == ("autotune", 2) and images["cache"] == ("memory",)
    assert "shuffle_buffer" not in images and "workers" not in images
    loader = searched("pyloader")
    assert loader["workers"] == (2,) and loader["use_multiprocessing"] == (True, False)
    assert "data_autotune" not in loader
    user = {d.knob: d.skipped for d in default_space("tiny", TrialConfig(), False, 2, data="my.data:load")}
    assert "known once the baseline trial" in user["workers"]
    jax = {d.knob: d for d in default_space("tiny", TrialConfig(backend="jax"), False, 2)}
    assert "without tf.data" in (jax["data_autotune"].skipped or "")


@pytest.mark.slow
def test_make_images_then_doctor(workdir: Path) -> None:
    made = fitspeed("make-images", "photos", "--count", "120", "--size", "24", cwd=workdir)
    assert made.returncode == 0, made.stderr
    assert len(list((workdir / "photos").glob("class_*/*.jpg"))) == 120
    result = fitspeed("doctor", "tiny", "--data", "images:photos", "--augment", "--no-fixes", "--steps", "8",
                      "--repeats", "1", "--epochs", "2", "--json", cwd=workdir)
    assert result.returncode == 0, result.stderr
    summary = json_out(result)
    assert summary["kind"] == "images" and summary["data"].startswith("images+augment:")
    assert set(summary["ms_per_step"]) == {"input", "compute", "together"}
    assert all(value > 0 for value in summary["ms_per_step"].values())
    assert 0.0 <= summary["wait_share"] < 1.0
    assert summary["verdict"] in ("highly input-bound", "moderately input-bound", "not input-bound")
    assert len(summary["epochs"]["boundary_s"]) == 1 and summary["epochs"]["end_s"] >= 0
    assert summary["pipeline"][0] == "TensorSliceDataset"
    lines = (workdir / "fitspeed-results.jsonl").read_text().splitlines()
    assert len(lines) == 4  # input, compute, together, epochs


@pytest.mark.slow
def test_a_trial_leaves_nothing_in_the_temporary_folder(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a trial forked from a server ends with os._exit: TensorFlow's atexit removals of autograph's converted
    # tf.data functions never run there, so they must be written where the trial's own folder goes with it
    made = fitspeed("make-images", "photos", "--count", "40", "--size", "16", cwd=workdir)
    assert made.returncode == 0, made.stderr
    tmp = workdir / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    result = fitspeed("measure", "tiny", "--data", "images:photos", "--augment", "--steps", "4", "--repeats", "1",
                      "--json", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert json_out(result)["status"] == "ok"
    left = sorted(path.name for path in tmp.iterdir())
    assert not [name for name in left if name.startswith(("__autograph", "fitspeed-trial-", "fitspeed-cache-"))], left


@pytest.mark.slow
def test_doctor_profiles_a_python_loader(workdir: Path) -> None:
    result = fitspeed("doctor", "tiny", "--data", "pyloader", "--no-fixes", "--steps", "4", "--repeats", "1",
                      "--epochs", "2", "--json", cwd=workdir)
    assert result.returncode == 0, result.stderr
    summary = json_out(result)
    top = [row["function"] for row in summary["profile"]["top"][:3]]
    assert any("feature_key" in name or "genexpr" in name for name in top), top


def test_doctor_refuses_augment_without_images(workdir: Path) -> None:
    result = fitspeed("doctor", "tiny", "--augment", cwd=workdir)
    assert result.returncode == 2
    assert "Expected --augment with --data images:DIR" in result.stderr


@pytest.mark.slow
def test_tune_learns_a_user_pydataset_and_searches_its_worker_knobs(workdir: Path) -> None:
    storage = f"sqlite:///{workdir / 'study.db'}"
    result = fitspeed("tune", "userwork:small_model", "--data", "userwork:pydataset", "--knobs",
                      "workers,use_multiprocessing", "--trials", "3", "--screen-only", "--steps", "8", "--repeats", "2",
                      "--pairs", "2", "--storage", storage, "--json", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "the data is pydataset: its input knobs join the search" in result.stderr
    summary = json_out(result)
    searched = {knob for row in summary["trials"] for knob in row["changes"]}
    assert searched and searched <= {"workers", "use_multiprocessing"}, summary["trials"]
    assert "workers" not in summary["skipped"]  # learned, so no longer "unknown until loaded"


def test_augment_needs_an_images_folder(workdir: Path) -> None:
    result = fitspeed("measure", "tiny", "--data", "synthetic", "--augment", cwd=workdir)
    assert result.returncode == 2
    assert "Expected --augment with --data images:DIR" in result.stderr and "Traceback" not in result.stderr
