"""Trials forked from a fork server: the same records as cold ones, one server per import environment,
every failure a cold trial can meet still ends in a record, and servers shared between processes
(FITSPEED_FORK_SERVERS) serve any of them and die with none of them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import child_env
from waiting import wait_for

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure import warm_start
from fitspeed.measure.runner import run_trial


@pytest.fixture(autouse=True)
def no_servers() -> Iterator[None]:
    warm_start.close_all()
    yield
    warm_start.close_all()


def private_env() -> dict[str, str]:
    """The suite's child environment without its shared servers (conftest.SHARED_SERVERS): each process its own."""
    return {k: v for k, v in child_env().items() if k != warm_start.SHARED}


def run(tmp_path: Path, env: dict[str, str] | None = None, **kwargs: object) -> TrialRecord:
    spec = TrialSpec(model=str(kwargs.pop("model", "tiny")), steps=4, repeats=2, **kwargs)  # type: ignore[arg-type]
    return run_trial(spec, env=env or private_env(), cwd=tmp_path)


def servers() -> list[int]:
    return [server.proc.pid for server in warm_start._servers.values()]


def test_trials_of_one_environment_share_a_server_and_match_a_cold_trial(tmp_path: Path) -> None:
    first = run(tmp_path)
    [server] = servers()
    second = run(tmp_path, config=TrialConfig(steps_per_execution=2))
    cold = run(tmp_path, env={**private_env(), warm_start.SWITCH: "0"})
    assert first.status == second.status == cold.status == Status.OK, first.stderr_tail
    assert (first.warm_start, second.warm_start, cold.warm_start) == (True, True, False)
    assert servers() == [server]  # the second trial forked from the first one's server; the cold one started none
    assert set(first.metrics.to_dict()) == set(cold.metrics.to_dict())
    assert first.environment["backend"] == cold.environment["backend"] == "tensorflow"
    assert second.spec.config.steps_per_execution == 2 and second.metrics.other["steps_per_repeat"] == 4
    # counted as a cold trial counts it: the imported libraries the child shares with the server are in
    assert first.metrics.other["peak_host_mb"] > 0.6 * cold.metrics.other["peak_host_mb"]


def test_the_child_runs_with_the_trial_s_own_seed_and_environment(tmp_path: Path) -> None:
    record = run(tmp_path, model="userwork:reports_environment", seed=7)
    assert record.status == Status.OK, record.stderr_tail
    assert record.warm_start is True
    seen = (tmp_path / "environment.txt").read_text().splitlines()
    assert "PYTHONHASHSEED=7" in seen and f"cwd={tmp_path.resolve()}" in seen
    assert f"pid={[*warm_start._servers.values()][0].proc.pid}" not in seen  # a child of the server, not the server


def test_another_import_environment_gets_another_server_and_the_oldest_closes(tmp_path: Path) -> None:
    run(tmp_path)
    run(tmp_path, env={**private_env(), "FITSPEED_TEST_MARK": "b", "PYTEST_XDIST_WORKER": "gw7"})
    assert len(servers()) == 1  # fitspeed's and pytest's own variables: read by nothing the server imports
    run(tmp_path, env={**private_env(), "MALLOC_ARENA_MAX": "2"})  # the user's: any library may read it at import
    assert len(servers()) == 2
    oldest = warm_start._servers[next(iter(warm_start._servers))].proc
    third = run(tmp_path, config=TrialConfig(onednn=True))
    assert third.status == Status.OK and third.warm_start is True, third.stderr_tail
    assert len(servers()) == warm_start.MAX_SERVERS
    assert oldest.poll() is not None  # closed, not left running
    assert third.environment["onednn"] is True


def test_a_warm_trial_past_its_timeout_is_killed_and_the_server_serves_the_next(tmp_path: Path) -> None:
    record = run(tmp_path, model="userwork:sleeps", timeout_s=5)
    assert record.status == Status.TIMEOUT and record.warm_start is True
    [server] = servers()
    after = run(tmp_path)
    assert after.status == Status.OK and after.warm_start is True
    assert servers() == [server]


def hold_env(folder: Path) -> dict[str, str]:
    folder.mkdir()
    (folder / "armed").write_text("")
    return {**private_env(), "FITSPEED_TEST_HOLD": str(folder)}


def test_a_server_that_dies_under_a_trial_leaves_a_crashed_record_and_a_new_server_follows(tmp_path: Path) -> None:
    env = hold_env(tmp_path / "hold")
    records: list[TrialRecord] = []
    runner = threading.Thread(target=lambda: records.append(run(tmp_path, env=env)))
    runner.start()
    wait_for(lambda: list((tmp_path / "hold").glob("host-*")), "trial holding", 120)
    [server] = servers()
    os.kill(server, signal.SIGKILL)
    runner.join(120)
    [record] = records
    assert record.status == Status.CRASHED and record.warm_start is True
    assert "SIGKILL" in record.reason
    after = run(tmp_path, env=env)  # nothing armed now: it runs through
    assert after.status == Status.OK and after.warm_start is True
    assert servers() != [server]


def test_a_server_forks_a_second_trial_while_its_first_still_runs(tmp_path: Path) -> None:
    # the trials of a lockstep round come from one server: a second trial of the same environment, asked for
    # while the first is held open, is forked from the same server, and each gets its own exit code
    env = hold_env(tmp_path / "hold")
    records: list[TrialRecord] = []
    runner = threading.Thread(target=lambda: records.append(run(tmp_path, env=env)))
    runner.start()
    try:
        wait_for(lambda: list((tmp_path / "hold").glob("host-*")), "trial holding", 120)
        beside = run(tmp_path, env=env)
    finally:
        (tmp_path / "hold" / "release").write_text("")
        runner.join(120)
    assert beside.status == Status.OK and beside.warm_start is True
    assert records[0].status == Status.OK and records[0].warm_start is True
    assert len(servers()) == 1


def test_a_server_that_cannot_start_sends_trials_cold_with_the_real_error(tmp_path: Path) -> None:
    env = {**private_env(), "KERAS_BACKEND": "tensorflow", "PYTHONPATH": str(tmp_path)}
    (tmp_path / "keras.py").write_text("raise ImportError('a keras that cannot import')\n")
    record = run(tmp_path, env=env)
    assert record.warm_start is False and servers() == []
    assert record.status != Status.OK
    assert "a keras that cannot import" in (record.stderr_tail or "") + (record.reason or "")


@pytest.fixture
def shared() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="fs-"))  # short: a Unix socket's path has at most 107 bytes
    yield folder
    for pid_file in folder.glob("*.pid"):
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(folder)


def measure(folder: Path, tmp_path: Path, model: str) -> subprocess.Popen[str]:
    env = {**private_env(), warm_start.SHARED: str(folder)}
    return subprocess.Popen([sys.executable, "-m", "fitspeed", "measure", model, "--steps", "4", "--repeats", "2",
                             "--json", "--results", str(tmp_path / "r.jsonl")],
                            cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def measured(command: subprocess.Popen[str]) -> dict:
    out, err = command.communicate(timeout=300)
    assert command.returncode == 0, err[-3000:]
    return json.loads(out)


def test_commands_naming_one_folder_share_its_servers(shared: Path, tmp_path: Path) -> None:
    first = measured(measure(shared, tmp_path, "tiny"))
    [pid_file] = shared.glob("*.pid")
    server = int(pid_file.read_text())
    second = measured(measure(shared, tmp_path, "tiny"))
    assert first["status"] == second["status"] == "ok"
    assert first["warm_start"] is second["warm_start"] is True
    assert list(shared.glob("*.pid")) == [pid_file] and psutil.pid_exists(server)  # the first command's server
    assert not psutil.Process(server).children()  # each trial's child is gone with its trial


def test_a_command_killed_mid_trial_takes_its_trial_with_it_and_the_server_serves_on(
        shared: Path, tmp_path: Path) -> None:
    command = measure(shared, tmp_path, "userwork:sleeps")
    wait_for(lambda: list(shared.glob("*.pid")), "shared server started", 120)
    server = psutil.Process(int(next(shared.glob("*.pid")).read_text()))
    wait_for(lambda: server.children(), "trial forked by the server", 120)
    [trial] = server.children()
    command.kill()
    command.communicate()
    gone, _ = psutil.wait_procs([trial], timeout=30)
    assert gone, "the trial outlived the command that started it"
    after = measured(measure(shared, tmp_path, "tiny"))
    assert after["status"] == "ok" and after["warm_start"] is True
    assert server.is_running() and [int(p.read_text()) for p in shared.glob("*.pid")] == [server.pid]
