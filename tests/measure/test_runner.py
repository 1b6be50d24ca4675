"""Every status a trial can end in, each reached through a real child process."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import child_env

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import STATUSES, Status, TrialRecord, TrialSpec
from fitspeed.measure import runner
from fitspeed.measure.runner import run_trial


def run(model: str, tmp_path: Path, **kwargs: object) -> TrialRecord:
    spec = TrialSpec(model=model, steps=8, repeats=2, **kwargs)  # type: ignore[arg-type]
    env = {k: v for k, v in child_env().items() if k != "FITSPEED_FORK_SERVERS"}  # each run its own servers, as by default
    record = run_trial(spec, env=env, cwd=tmp_path)
    assert record.status in STATUSES
    assert record.schema == 1
    return record


def test_ok(tmp_path: Path) -> None:
    record = run("tiny", tmp_path)
    assert record.status == Status.OK, record.stderr_tail
    metrics = record.metrics
    assert metrics.samples_per_s.median > 0
    assert math.isfinite(metrics.final_loss)
    env = record.environment
    assert env["versions"]["keras"].startswith("3.")
    assert env["backend"] == "tensorflow" and env["cpu"] and env["fitspeed"]
    assert record.spec.config.to_dict() == TrialConfig().to_dict()


def test_oom_when_over_the_memory_limit(tmp_path: Path) -> None:
    record = run("userwork:memory_hog", tmp_path, memory_limit_mb=1500, timeout_s=120)
    assert record.status == Status.OOM
    assert "memory limit of 1500 MiB" in record.reason


def test_nan_when_the_loss_is_not_finite(tmp_path: Path) -> None:
    record = run("userwork:nan_model", tmp_path, data="userwork:arrays")
    assert record.status == Status.NAN
    assert "the loss became nan" in record.reason


def test_crashed_when_the_child_dies(tmp_path: Path) -> None:
    record = run("userwork:dies", tmp_path)
    assert record.status == Status.CRASHED
    assert record.warm_start is True  # forked from a server (fitspeed.measure.warm_start): its signal still counts
    assert "SIGKILL" in record.reason


@pytest.mark.parametrize("warm", ["1", "0"], ids=["forked", "cold"])
def test_crashed_names_its_cause(tmp_path: Path, warm: str) -> None:
    """A native abort: the record keeps the library's message, the fault handler's Python stack and the signal."""
    env = {k: v for k, v in child_env().items() if k != "FITSPEED_FORK_SERVERS"}
    env["FITSPEED_WARM_START"] = warm  # forked from a fork server, or a fresh interpreter
    record = run_trial(TrialSpec(model="userwork:aborts", steps=8, repeats=2), env=env, cwd=tmp_path)
    assert record.status == Status.CRASHED
    assert record.warm_start is (warm == "1")
    # the reason ends with the native library's last word
    assert record.reason == ("the trial process was killed by SIGABRT before it sent a record: "
                             "F0000 native_library.cc:42] Check failed: devices == 2 (1 vs. 2)")
    tail = record.stderr_tail
    # the native message and the fault handler's first line lead, though the dump of 13 threads is longer than 40 lines
    lines = tail.splitlines()
    assert lines[:2] == ["F0000 native_library.cc:42] Check failed: devices == 2 (1 vs. 2)", "Fatal Python error: Aborted"]
    assert lines[2].startswith("… [") and lines[2].endswith(" lines cut] …")
    assert "in aborts" in tail  # faulthandler's dump, down to the builder
    assert tail.rstrip().endswith("[fitspeed: the trial process was killed by SIGABRT]")
    assert len(lines) <= 2 + 1 + 40 + 1 and len(tail) <= 4100


def test_timeout_when_it_runs_too_long(tmp_path: Path) -> None:
    record = run("userwork:sleeps", tmp_path, timeout_s=8)
    assert record.status == Status.TIMEOUT
    assert record.warm_start is True  # the kill reaches a forked child's whole process group
    assert record.wall_s < 30
    # killed records still say what ran: versions come from package metadata
    assert record.environment["versions"]["keras"].startswith("3.")
    assert record.environment["backend"] == "tensorflow"


def test_a_child_stopped_before_it_made_its_own_group_is_killed_all_the_same() -> None:
    # a warm child calls setsid() first thing after the fork; a timeout that the fork server's start used up
    # stops it before that, when no group has its pid: a child still in this process's group is that state
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        codes: list[int] = []
        killer = threading.Thread(target=lambda: codes.append(runner._kill_group(child)), daemon=True)
        killer.start()
        killer.join(timeout=30)  # before the fix the wait lasted as long as the child: 120 s
        assert codes == [-9]
    finally:
        child.kill()
        child.wait()


def test_failed_keeps_the_error_message(tmp_path: Path) -> None:
    record = run("userwork:raises", tmp_path)
    assert record.status == Status.FAILED
    assert record.reason == "ValueError: the builder broke on purpose"
    assert "the builder broke on purpose" in record.stderr_tail
    assert record.user_error is False


def test_user_error_is_marked(tmp_path: Path) -> None:
    record = run("no_such_module:build", tmp_path)
    assert record.status == Status.FAILED and record.user_error is True
    assert "Could not import module 'no_such_module'" in record.reason


@pytest.mark.parametrize("steps", [0, 6])
def test_steps_must_be_whole_executions(steps: int) -> None:
    from fitspeed.core.errors import UserError

    with pytest.raises(UserError, match="multiple of steps_per_execution"):
        TrialSpec(model="tiny", steps=steps, config=TrialConfig(steps_per_execution=4))
