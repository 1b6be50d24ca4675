"""The faults of a multi-process trial's join, each a failed record with a sentence, ended at once, none left behind.

Each test starts real trial children with Keras's variables set by hand, as a launcher on a cluster sets them
(`fitspeed.trial.joining`): a coordinator's port in use, a coordinator that never comes, a process that never joins, two launches that
differ.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from conftest import child_env, need_jax, trial_processes

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure.processes import environments, free_port
from fitspeed.measure.runner import run_trial

BOUND_S = 60  # each fault ends the trial well before this; JAX alone would take 300 s, or die of a signal
WAIT = "FITSPEED_COORDINATOR_WAIT_S"


def _launch(index: int, address: str, config: TrialConfig, tmp_path: Path, **env: str) -> TrialRecord:
    """One process of a launch of two, as a launcher starts it on its host: only this one."""
    folder = tmp_path / f"host{index}"
    folder.mkdir()
    environ = {**child_env(), **environments(2, address, {})[index], **env}
    return run_trial(TrialSpec(model="tiny", steps=8, repeats=2, config=config, timeout_s=120), env=environ, cwd=folder)


@pytest.mark.slow
def test_a_coordinator_port_in_use_fails_process_0_with_the_port_and_the_fix(tmp_path: Path) -> None:
    """Before: JAX died of SIGSEGV ("Failed to add port to server") a few seconds in."""
    need_jax()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        record = _launch(0, f"127.0.0.1:{port}", TrialConfig(backend="jax", processes=2), tmp_path)
        took = time.monotonic() - started
    assert record.status == Status.FAILED and record.user_error, (record.reason, record.stderr_tail)
    assert record.reason.startswith(f"process 0 of 2: Expected port {port} to be free for process 0's coordinator"), (
        record.reason)
    assert "listens on it: pick a free port in KERAS_DISTRIBUTION_JOB_ADDRESSES" in record.reason, record.reason
    assert "python" in record.reason  # who holds it: this test's own interpreter
    assert took < BOUND_S
    assert trial_processes() == []


@pytest.mark.slow
@pytest.mark.parametrize(("index", "said"), [
    # before: JAX waited its initialization_timeout, 300 s, for a coordinator, then aborted (SIGABRT,
    # DEADLINE_EXCEEDED)
    (1, "Expected process 0's coordinator to listen on {address} (KERAS_DISTRIBUTION_JOB_ADDRESSES), but nothing "
        "answered there in 4 s (last try: connection refused): start process 0"),
    # before: process 0's coordinator was up, and its join waited JAX's 300 s for a process 1 that never came,
    # then aborted (SIGABRT, DEADLINE_EXCEEDED)
    (0, "Expected all 2 processes to join at {address} (KERAS_DISTRIBUTION_JOB_ADDRESSES) within 4 s, but not all "
        "came: start each process, 0 to 1, with the same command"),
], ids=["coordinator-unreachable", "process-never-joins"])
def test_a_launch_of_one_process_of_two_fails_after_the_wait_it_names(tmp_path: Path, index: int, said: str) -> None:
    """Process 1 alone has no coordinator to reach; process 0 alone has no process 1 to join it."""
    need_jax()
    address = f"127.0.0.1:{free_port()}"  # nothing listens there but what this launch starts
    started = time.monotonic()
    record = _launch(index, address, TrialConfig(backend="jax", processes=2), tmp_path, **{WAIT: "4"})
    took = time.monotonic() - started
    assert record.status == Status.FAILED and record.user_error, (record.reason, record.stderr_tail)
    assert record.reason.startswith(f"process {index} of 2: " + said.format(address=address)), record.reason
    assert WAIT in record.reason
    assert index == 0 or "firewall" in record.reason
    assert 4 <= took < BOUND_S
    assert trial_processes() == []


@pytest.mark.slow
@pytest.mark.parametrize(("knob", "values", "said"), [
    # before: each trained its own batch in lockstep, reported as one run of the batch it asked
    ("batch_size", (32, 64), "batch_size: 64 on process 1, 32 on process 0"),
    # before: Keras's first collective raised a bare AssertionError in both (jax/_src/pmap.py)
    ("devices", (1, 2), "devices JAX sees: 2 on process 1, 1 on process 0"),
], ids=["batch_size", "devices"])
def test_two_launches_that_differ_both_fail_naming_what_differs(tmp_path: Path, knob: str, values: tuple[int, int],
                                                                 said: str) -> None:
    need_jax()
    address = f"127.0.0.1:{free_port()}"
    found: dict[int, TrialRecord] = {}
    launches = [threading.Thread(target=lambda i=i, v=v: found.__setitem__(i, _launch(
        i, address, TrialConfig(backend="jax", processes=2, **{knob: v}), tmp_path))) for i, v in enumerate(values)]
    started = time.monotonic()
    for launch in launches:
        launch.start()
    for launch in launches:
        launch.join(timeout=240)
    took = time.monotonic() - started
    assert not any(launch.is_alive() for launch in launches)
    for index in (0, 1):
        record = found[index]
        assert record.status == Status.FAILED and record.user_error, (record.reason, record.stderr_tail)
        assert record.reason == (f"process {index} of 2: process 1's configuration differs from process 0's ({said}): "
                                 "start every process with the same command (model, data, --set values, --seed, "
                                 "--steps)"), record.reason
    assert took < BOUND_S
    assert trial_processes() == []
