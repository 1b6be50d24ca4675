"""The `fitspeed` command as a user runs it: real processes, real training."""

from __future__ import annotations

import math
import select
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import QUICK, child_env, compared, fitspeed, fitspeed_in_process, json_out
from waiting import trial_processes, wait_for

from fitspeed.measure import results


def test_measure_json_record(workdir: Path) -> None:
    result = fitspeed("measure", "tiny", "--json", *QUICK, cwd=workdir)
    assert result.returncode == 0, result.stderr
    record = json_out(result)
    assert record["status"] == "ok"
    assert record["metrics"]["samples_per_s"]["median"] > 0
    assert math.isfinite(record["metrics"]["final_loss"])
    stored, _ = results.read(workdir / "fitspeed-results.jsonl")
    assert [r["id"] for r in stored] == [record["id"]]


def test_measure_table_and_results_file(workdir: Path) -> None:
    result = fitspeed("measure", "tiny", "--set", "steps_per_execution=4", "--steps", "8",
                      "--repeats", "2", "--results", "out/r.jsonl", cwd=workdir)
    assert result.returncode == 0, result.stderr
    for label in ("samples/s median (min–max)", "ms/step", "compile s", "peak host memory",
                  "loss at the last timed step*", "steps_per_execution=4"):
        assert label in result.stdout
    # issue 25, item 16: the trial's loss is no result of the training, and the table says so
    assert "final loss" not in result.stdout
    assert "this loss is not what your training reaches" in " ".join(result.stdout.split())
    assert (workdir / "out" / "r.jsonl").exists()


def test_user_mistakes_exit_2_with_one_clear_sentence(workdir: Path) -> None:
    np.savez(workdir / "small.npz", x=np.zeros((10, 4), "float32"), y=np.zeros(10))
    cases = [
        (["measure", "no-such-model"], "Unknown workload 'no-such-model'"),
        (["measure", "tiny", "--set", "warp_speed=9"], "Unknown knob 'warp_speed'"),
        (["measure", "tiny", "--set", "batch_size=-3"], "Expected `batch_size` to be an integer >= 1"),
        (["measure", "tiny", "--set", "backend=torch", "--set", "steps_per_execution=8"],
         "torch backend cannot do steps_per_execution=8"),
        (["measure", "tiny", "--data", "small.npz"], "does not fit the model"),
        (["measure", "tiny", "--data", "npz:absent.npz"], "which does not exist"),
        (["measure", "tiny", "--memory-limit", "lots"], "Expected --memory-limit"),
        (["compare", "tiny", "--b", "jit_compile=sometimes"], "Expected `jit_compile` to be auto"),
    ]
    # a module that does not import and a corrupt .npz: tests/cli/test_bad_input.py's table, a failed trial's
    # exit 1 and its record: its `measure userwork:raises`, in this process and through `python -m fitspeed`
    for args, message in cases:  # refused in the CLI or its trial child: the entry point runs in this process
        result = fitspeed_in_process(*args, *QUICK, cwd=workdir)
        assert result.returncode == 2, (args, result.stderr)
        assert message in " ".join(result.stderr.split()), (args, result.stderr)
        assert "Traceback" not in result.stderr, args
    assert not (workdir / "fitspeed-results.jsonl").exists()


@pytest.mark.slow
def test_compare_a_against_itself_finds_no_difference(workdir: Path) -> None:
    result = fitspeed("compare", "mlp", "--a", "steps_per_execution=1", "--b", "steps_per_execution=1",
                      "--pairs", "2", "--confidence", "0.999", *QUICK, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "no measurable difference" in result.stdout
    stored, _ = results.read(workdir / "fitspeed-results.jsonl")
    assert [r["kind"] for r in stored] == ["trial"] * 4 + ["comparison"]
    arms = [r["arm"] for r in stored[:4]]
    assert all(sorted(arms[i:i + 2]) == ["a", "b"] for i in range(0, 4, 2))  # interleaved, each pair in its own order
    assert [r["pair"] for r in stored[:4]] == [0, 0, 1, 1]
    assert all(r["first"] == (i % 2 == 0) for i, r in enumerate(stored[:4]))


@pytest.mark.slow
def test_compare_until_width_adds_pairs_up_to_its_cap(tmp_path_factory: pytest.TempPathFactory) -> None:
    # a width no shared machine reaches in 3 pairs: the comparison runs past --pairs 2 to --max-pairs 3 and says so
    folder, result = compared(tmp_path_factory)  # --until-width 0.0001 --statistic best, run once for the suite
    assert result.returncode == 0, result.stderr
    assert "still wider than --until-width 0.0001" in " ".join(result.stdout.split())
    assert "fastest window" in result.stdout
    stored, _ = results.read(folder / "fitspeed-results.jsonl")
    summary = stored[-1]
    assert summary["kind"] == "comparison" and len(summary["trial_ids"]) == 3
    assert summary["until_width"] == 0.0001 and summary["statistic"] == "best"
    assert summary["width"] == summary["estimate"]["ci_high"] - summary["estimate"]["ci_low"] > 0.0001


def test_compare_finds_a_real_difference(tmp_path_factory: pytest.TempPathFactory) -> None:
    # batch 256 moves far more samples per second than batch 4 on mlp, an overhead-bound model
    folder, result = compared(tmp_path_factory)  # the comparison made once for the run, 3 pairs
    assert result.returncode == 0, result.stderr
    stored, _ = results.read(folder / "fitspeed-results.jsonl")
    summary = stored[-1]
    assert summary["verdict"].startswith("B is ") and "faster" in summary["verdict"]
    assert summary["verdict"] in " ".join(result.stdout.split())
    assert summary["estimate"]["ci_low"] > 1.5  # 3 pairs: with 2 (a t of 12.7) a loaded machine's spread hides it
    assert len(summary["estimate"]["ratios"]) == 3


def test_knobs_and_workloads_list_everything(workdir: Path) -> None:
    knobs = fitspeed("knobs", cwd=workdir)
    for name in ("steps_per_execution", "jit_compile", "precision", "data_format", "deterministic",
                 "intra_op_threads", "inter_op_threads", "batch_size", "backend"):
        assert name in knobs.stdout
    assert len(knobs.stdout.splitlines()) <= 40  # one screen (issue 61); --all for the rest
    full = fitspeed("knobs", "--all", cwd=workdir)
    for words in ("description", "each backend's own knobs", "Keras options that are not knobs"):
        assert words in full.stdout and words not in knobs.stdout
    workloads = fitspeed("workloads", cwd=workdir)
    for name in ("tiny", "mlp", "cnn-low", "cnn-high", "cnn10", "wrn-16-4", "wrn-28-10", "36,497,146",
                 "cifar10", "fashion_mnist", "npz:PATH"):
        assert name in workloads.stdout


def test_measure_without_a_terminal_says_it_is_running_and_a_kill_says_it_stopped(workdir: Path) -> None:
    """`measure --set precision=mixed_float16` on a CPU can take minutes, and once printed nothing at all:
    without a terminal there was no spinner, and `timeout`'s SIGTERM ended it without a word."""
    proc = subprocess.Popen([sys.executable, "-m", "fitspeed", "measure", "cnn10", "--set", "precision=mixed_float16"],
                            cwd=workdir, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], 30)  # the old silence: nothing comes, fail, do not hang
    if not ready:
        proc.kill()
        proc.communicate()
    assert ready, "measure printed nothing in 30 s"
    first = proc.stderr.readline()
    assert "measuring cnn10 (precision=mixed_float16)" in first
    wait_for(lambda: trial_processes(workdir), "trial child started", 60, alive=[proc])
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Interrupted" in " ".join((first + stderr).split()) and "Traceback" not in stderr
