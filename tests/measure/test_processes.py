"""The processes knob: one trial as two real processes on this host, joined by keras.distribution (JAX over gloo)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from conftest import child_env, need_jax, trial_processes

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.knobs.processes import KERAS_ISSUE
from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure.processes import INDEX, environments, free_port
from fitspeed.measure.runner import run_trial


# one SGD step of a small model on 16 samples; with two processes each feeds its own 8, through fitspeed.apply()
STEP = """
import os, sys, json
import numpy as np
import fitspeed
processes = int(sys.argv[1])
fitspeed.apply({"backend": "jax", "processes": processes})
import keras
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(1)])
model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
rng = np.random.default_rng(1)
x, y = rng.normal(size=(16, 8)).astype("float32"), rng.normal(size=(16, 1)).astype("float32")
share = int(sys.argv[2])  # how many processes' shares the batch is cut into; which one this process takes
index = int(os.environ.get("KERAS_DISTRIBUTION_PROCESS_ID", "0"))
x, y = x[index * 16 // share:(index + 1) * 16 // share], y[index * 16 // share:(index + 1) * 16 // share]
model.fit(x, y, batch_size=len(x), epochs=1, verbose=0, shuffle=False)
print(json.dumps([w.tolist() for w in model.get_weights()]))
"""


def _weights(out: str) -> np.ndarray:
    return np.concatenate([np.asarray(w, dtype=np.float64).ravel() for w in json.loads(out.strip().splitlines()[-1])])


def test_two_processes_all_reduce_their_gradients(tmp_path: Path) -> None:
    need_jax()
    env = {**child_env(), "KERAS_BACKEND": "jax"}
    runs = [subprocess.Popen([sys.executable, "-c", STEP, "2", "2"], env=e, cwd=tmp_path, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for e in environments(2, f"127.0.0.1:{free_port()}", env)]
    outs = [run.communicate(timeout=240) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err[-2000:] for _, err in outs]
    first, second = (_weights(out) for out, _ in outs)
    whole = _weights(subprocess.run([sys.executable, "-c", STEP, "1", "1"], env=env, cwd=tmp_path, text=True,
                                    capture_output=True, timeout=240, check=True).stdout)
    half = _weights(subprocess.run([sys.executable, "-c", STEP, "1", "2"], env=env, cwd=tmp_path, text=True,
                                   capture_output=True, timeout=240, check=True).stdout)
    np.testing.assert_array_equal(first, second)  # one all-reduced gradient: the same step on both
    np.testing.assert_allclose(first, whole, rtol=1e-5, atol=1e-6)  # the step of the whole batch of 16
    assert np.abs(first - half).max() > 1e-3  # not the step on process 0's 8 alone


def test_a_trial_of_two_processes_counts_the_global_batch_and_each_process(tmp_path: Path) -> None:
    need_jax()
    config = TrialConfig(backend="jax", processes=2, batch_size=16)
    record = run_trial(TrialSpec(model="tiny", steps=8, repeats=2, config=config), env=child_env(), cwd=tmp_path)
    assert record.status == Status.OK, (record.reason, record.stderr_tail)
    assert record.metrics.batch_size == 32  # 16 per device × 1 device × 2 processes
    assert record.environment["devices"]["processes"] == 2
    own = record.extra["processes"]
    assert [p["process"] for p in own] == [0, 1] and all(p["status"] == "ok" and p["samples_per_s"] for p in own)
    assert record.throughput == pytest.approx(own[0]["samples_per_s"])
    assert trial_processes() == []


def test_a_process_killed_mid_trial_ends_the_trial_and_leaves_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_jax()
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "armed").touch()  # one process holds before its timed trial; its peer waits for it in a collective
    env = {**child_env(), "FITSPEED_TEST_HOLD": str(hold)}
    config = TrialConfig(backend="jax", processes=2)
    found: list[TrialRecord] = []
    runner = threading.Thread(target=lambda: found.append(
        run_trial(TrialSpec(model="tiny", steps=8, repeats=2, config=config, timeout_s=600), env=env, cwd=tmp_path)))
    runner.start()
    deadline = time.monotonic() + 240
    while not list(hold.glob("host-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    held = int(next(hold.glob("host-*")).name.split("-")[1])
    index = int(psutil.Process(held).environ()[INDEX])
    os.kill(held, signal.SIGKILL)
    killed = time.monotonic()
    runner.join(timeout=120)
    assert not runner.is_alive()
    assert time.monotonic() - killed < 60
    record = found[0]
    assert record.status == Status.CRASHED
    assert record.reason.startswith(f"process {index} of 2: ") and "SIGKILL" in record.reason, record.reason
    assert "SIGKILL" in (record.stderr_tail or "")
    assert [p["process"] for p in record.extra["processes"]] == [0, 1]
    assert trial_processes() == []


def _launched(environs: list[dict[str, str]], tmp_path: Path) -> list[TrialRecord]:
    """`fitspeed measure tiny` over 2 processes, started once per environment as a launcher starts it on each
    host (here side by side on this one), each in its own folder: each command's record."""
    command = [sys.executable, "-m", "fitspeed", "measure", "tiny", "--set", "backend=jax", "--set", "processes=2",
               "--steps", "8", "--repeats", "2", "--json", "--results", "r.jsonl"]
    runs = []
    for index, env in enumerate(environs):
        (tmp_path / f"host{index}").mkdir()
        runs.append(subprocess.Popen(command, env=env, cwd=tmp_path / f"host{index}", text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0] * len(runs), [err[-2000:] for _, err in outs]
    return [TrialRecord.from_dict(json.loads(out)) for out, _ in outs]


def test_two_launches_with_kerass_variables_form_one_run(tmp_path: Path) -> None:
    """The launch on two hosts, as typed, here as two commands on one host: each starts its own process only."""
    need_jax()
    records = _launched(environments(2, f"127.0.0.1:{free_port()}", child_env()), tmp_path)
    assert [r.status for r in records] == [Status.OK, Status.OK]
    assert [r.environment["devices"]["process"] for r in records] == [0, 1]
    assert [[p["process"] for p in r.extra["processes"]] for r in records] == [[0], [1]]  # each its own
    assert all(r.metrics.batch_size == 64 for r in records)  # 32 per device × 1 × 2 processes


def test_a_launch_whose_variables_disagree_with_the_processes_asked_is_refused(tmp_path: Path) -> None:
    env = {**child_env(), **environments(4, "127.0.0.1:1", {})[3]}
    record = run_trial(TrialSpec(model="tiny", config=TrialConfig(backend="jax", processes=2)), env=env, cwd=tmp_path)
    assert record.status == Status.FAILED and record.user_error
    assert record.reason.startswith("Expected KERAS_DISTRIBUTION_NUM_PROCESSES to be the processes asked, 2. "
                                    "Received: 4."), record.reason


def test_tensorflow_and_pytorch_refuse_processes_with_the_reason() -> None:
    with pytest.raises(KnobError, match=f"tensorflow backend cannot do processes=2: .*{KERAS_ISSUE}.*--set backend=jax"):
        TrialConfig(processes=2)
    with pytest.raises(KnobError, match="torch backend cannot do processes=2: Keras has no multi-process"):
        TrialConfig(backend="torch", processes=2)
    assert TrialConfig(processes=1).processes == 1


# Two local TensorFlow workers under MultiWorkerMirroredStrategy train a small model with Keras 3's fit()
WORKER = """
import json, os, sys
index, ports = int(sys.argv[1]), sys.argv[2].split(",")
os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                                      "task": {"type": "worker", "index": index}})
os.environ["KERAS_BACKEND"] = "tensorflow"
import numpy as np, tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()
import keras
with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
x, y = np.ones((16, 8), "float32"), np.ones((16, 1), "float32")
try:
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(8), epochs=1, verbose=0)
except Exception as error:
    print("FAILED", type(error).__name__, str(error)[-300:].replace(chr(10), " "))
else:
    print("TRAINED")
"""


def test_tensorflow_multi_worker_strategy_still_fails_inside_keras_fit(tmp_path: Path) -> None:
    """The TensorFlow refusal's reason, kept honest: this fails the day Keras fixes keras-team/keras#20585."""
    ports = f"{free_port()},{free_port()}"
    runs = [subprocess.Popen([sys.executable, "-c", WORKER, str(i), ports], env=child_env(), cwd=tmp_path,
                             text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(2)]
    outs = [run.communicate(timeout=240)[0].strip().splitlines() for run in runs]
    said = [out[-1] if out else "" for out in outs]
    assert not any(line == "TRAINED" for line in said), (
        f"MultiWorkerMirroredStrategy trained under Keras 3: {KERAS_ISSUE} is fixed. Make it TensorFlow's route for "
        "the processes knob (fitspeed.core.knobs.processes) instead of refusing it.")
    assert all(line.startswith("FAILED ValueError") and "PerReplica" in line for line in said), said


def _slurm_job_id() -> int:
    """A job id whose coordinator port (JAX's rule: the id mod 4096, above 61439) is free here now."""
    import socket

    for job in range(12345, 12345 + 4096):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", job % 4096 + 61440))
            except OSError:
                continue
        return job
    raise AssertionError("no free port in JAX's SLURM range")


def test_two_tasks_of_a_slurm_step_form_one_run(tmp_path: Path) -> None:
    """`srun -n 2 fitspeed measure ...` as SLURM starts it, here as two commands on one host with SLURM's variables
    set by hand: each starts its own process only, and JAX finds the coordinator from them (no Keras variable)."""
    need_jax()
    job = str(_slurm_job_id())
    records = _launched([{**child_env(), "SLURM_JOB_ID": job, "SLURM_STEP_NODELIST": "127.0.0.1", "SLURM_NTASKS": "2",
                          "SLURM_PROCID": str(task), "SLURM_LOCALID": str(task), "SLURM_STEP_NUM_NODES": "1"}
                         for task in range(2)], tmp_path)
    assert [r.environment["devices"]["process"] for r in records] == [0, 1]
    assert [[p["process"] for p in r.extra["processes"]] for r in records] == [[0], [1]]
    assert all(r.metrics.batch_size == 64 for r in records)  # 32 per device × 1 × 2 tasks
    # a step of another size is refused in a sentence before any process starts
    env = {**child_env(), "SLURM_JOB_ID": job, "SLURM_STEP_NODELIST": "127.0.0.1", "SLURM_NTASKS": "4",
           "SLURM_PROCID": "0", "SLURM_LOCALID": "0"}
    record = run_trial(TrialSpec(model="tiny", config=TrialConfig(backend="jax", processes=2)), env=env, cwd=tmp_path)
    assert record.status == Status.FAILED and record.reason.startswith(
        "Expected SLURM_NTASKS to be the processes asked, 2. Received: 4."), record.reason
