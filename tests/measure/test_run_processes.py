"""`fitspeed run best.json --processes N -- python train.py`: a user's script trained as N real processes on this
host, joined by keras.distribution (JAX over gloo), through the real CLI (issue 63)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import child_env, fitspeed, missing

from fitspeed.core.best_json import SCHEMA_VERSION
from fitspeed.measure.processes import ADDRESSES, COUNT, INDEX, free_port
from fitspeed.trial.script_hook import shard_batches

# A user's script, unchanged by fitspeed: a small Dense model trained a few steps on 70 rows in batches of 16 (the
# last one partial, 6 rows), as NumPy arrays (with a validation_split and sample weights: "split") or a
# tf.data.Dataset (argv[1]). At the end each process writes its place, its final weights' sum, and the rows its
# global batches held over the epoch (`Rows`, counted inside the compiled step, where the batch is the global one).
TRAIN = """
import json, os, sys
import numpy as np
import keras, jax

class Rows(keras.metrics.Metric):
    def __init__(self):
        super().__init__(name="rows")
        self.n = self.add_variable((), initializer="zeros", name="n")

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.n.assign_add(keras.ops.cast(keras.ops.shape(y_true)[0], "float32"))

    def result(self):
        return keras.ops.convert_to_tensor(self.n)

rng = np.random.default_rng(0)
x = rng.normal(size=(70, 8)).astype("float32")
y = x.sum(axis=1, keepdims=True)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.05), "mse", metrics=[Rows()])
if sys.argv[1] == "tf.data":
    import tensorflow as tf
    history = model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=2, verbose=2)
elif sys.argv[1] == "split":
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=2, validation_split=0.2, sample_weight=np.ones(70))
else:
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=2)
weights = sum(float(np.sum(w)) for w in model.get_weights())
with open(f"result-{os.getpid()}.json", "w") as out:
    json.dump({"process": jax.process_index(), "count": jax.process_count(), "weights": weights,
               "rows": history.history["rows"][-1], "val_loss": history.history.get("val_loss", [None])[-1]}, out)
print(f"trained: process {jax.process_index()} of {jax.process_count()}")
"""

# Process 1 fails soon after joining while process 0 trains on: process 0 would wait in the step's collective,
# and process 1 in JAX's shutdown barrier, each for minutes.
FAILS = """
import os, sys, time
import numpy as np
import keras, jax

open(f"pid-{os.getpid()}", "w").write(str(jax.process_index()))
if jax.process_index() == 1:
    open("failed-at", "w").write(repr(time.time()))
    sys.exit(3)
x = np.ones((64, 4), "float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(x, x[:, :1], batch_size=8, epochs=100000, verbose=0)
"""


@pytest.fixture(autouse=True)
def _need_jax() -> None:
    if importlib.util.find_spec("jax") is None:
        missing("jax is not installed")


def best_json(folder: Path, script: str, knobs: dict[str, Any]) -> None:
    """The script, and a best.json as `fitspeed tune -- python train.py` writes one for it (the parts `run` reads)."""
    (folder / "train.py").write_text(script)
    (folder / "best.json").write_text(json.dumps({
        "schema": SCHEMA_VERSION, "kind": "best", "model": "script:train.py",
        "script": {"command": ["python", "train.py"], "file": "train.py",
                   "sha256": hashlib.sha256(script.encode()).hexdigest(), "fit": 1},
        "knobs": knobs}))


def results(folder: Path) -> list[dict[str, Any]]:
    return sorted((json.loads(path.read_text()) for path in folder.glob("result-*.json")), key=lambda r: r["process"])


def assert_trained_together(folder: Path, done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert done.returncode == 0, done.stderr[-3000:]
    found = results(folder)
    assert [(r["process"], r["count"]) for r in found] == [(0, 2), (1, 2)], found
    assert found[0]["weights"] == pytest.approx(found[1]["weights"], rel=1e-6)  # one model: the steps all-reduced
    # process 0's output as it is, the other's lines marked with its process
    assert "trained: process 0 of 2" in done.stdout.splitlines()
    assert "[process 1] trained: process 1 of 2" in done.stdout.splitlines()
    return found


@pytest.mark.slow
def test_run_trains_a_script_over_the_processes_best_json_asks(tmp_path: Path) -> None:
    best_json(tmp_path, TRAIN, {"backend": "jax", "processes": 2})
    done = fitspeed("run", "best.json", "--", sys.executable, "train.py", "numpy", cwd=tmp_path, timeout=120)
    found = assert_trained_together(tmp_path, done)
    said = " ".join(done.stderr.split())
    assert "2 processes on this host (keras.distribution on JAX" in said
    # NumPy arrays are sharded as a dataset is: each process fed its 35 of the 70 rows, 8 a step, so the epoch's
    # global batches held the 70 once (before, each process fed all 70, and the global batches held 140)
    assert "a batched tf.data.Dataset or NumPy arrays, is sharded by process" in said
    assert [r["rows"] for r in found] == [70, 70]


@pytest.mark.slow
def test_arrays_with_a_validation_split_are_cut_as_keras_cuts_them_then_sharded(tmp_path: Path) -> None:
    best_json(tmp_path, TRAIN, {"backend": "jax", "processes": 2})
    done = fitspeed("run", "best.json", "--", sys.executable, "train.py", "split", cwd=tmp_path, timeout=120)
    found = assert_trained_together(tmp_path, done)
    # the first 56 of the 70 rows train (Keras's cut), 28 on each process; the last 14 are every process's
    # held-out rows, so both judge the same loss
    assert [r["rows"] for r in found] == [56, 56]
    assert found[0]["val_loss"] is not None and found[0]["val_loss"] == pytest.approx(found[1]["val_loss"], rel=1e-6)


@pytest.mark.slow
def test_the_processes_option_overrides_best_json_and_shards_a_dataset(tmp_path: Path) -> None:
    best_json(tmp_path, TRAIN, {"backend": "jax"})  # processes=1, best.json's own
    done = fitspeed("run", "best.json", "--processes", "2", "--", sys.executable, "train.py", "tf.data",
                    cwd=tmp_path, timeout=120)
    found = assert_trained_together(tmp_path, done)
    assert "with backend=jax processes=2" in done.stderr
    # a tf.data.Dataset is sharded by process: the global batches held the dataset's 70 rows once, half from each
    # (the last batch's 6 too: Keras's own sharding gives one process 3 of 5 batches, and the other waits forever)
    assert [r["rows"] for r in found] == [70, 70]
    assert "ran out of data" not in done.stderr  # each process's share keeps the dataset's length


@pytest.mark.slow
def test_a_failing_process_stops_the_others_and_its_status_is_the_run_s(tmp_path: Path) -> None:
    best_json(tmp_path, FAILS, {"backend": "jax", "processes": 2})
    done = fitspeed("run", "best.json", "--", sys.executable, "train.py", cwd=tmp_path, timeout=180)
    ended = time.time()
    assert done.returncode == 3, done.stderr[-3000:]
    assert ended - float((tmp_path / "failed-at").read_text()) < 30  # not JAX's 5 minutes
    assert done.stderr.splitlines()[-1] == "fitspeed: process 1 of 2 exited with status 3, and the others were stopped."
    pids = [int(path.name.removeprefix("pid-")) for path in tmp_path.glob("pid-*")]
    assert len(pids) == 2
    for pid in pids:  # none left behind (a zombie is ended, waiting for its reaper)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid


@pytest.mark.slow
def test_a_launcher_s_variables_start_one_process_per_command(tmp_path: Path) -> None:
    """Two `fitspeed run` commands, as a launcher starts one on each host, each with Keras's variables set."""
    best_json(tmp_path, TRAIN, {"backend": "jax", "processes": 2})
    address = f"127.0.0.1:{free_port()}"
    commands = [subprocess.Popen([sys.executable, "-m", "fitspeed", "run", "best.json", "--", sys.executable,
                                  "train.py", "numpy"], cwd=tmp_path, text=True, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE,
                                 env={**child_env(), ADDRESSES: address, COUNT: "2", INDEX: str(index)})
                for index in (0, 1)]
    try:
        outputs = [command.communicate(timeout=120) for command in commands]
    finally:
        for command in commands:  # each kills its own process as it ends
            command.kill()
    assert [command.returncode for command in commands] == [0, 0], [err[-3000:] for _, err in outputs]
    found = results(tmp_path)
    assert [(r["process"], r["count"]) for r in found] == [(0, 2), (1, 2)]
    assert found[0]["weights"] == pytest.approx(found[1]["weights"], rel=1e-6)
    assert f"this is process 1 of 2 (KERAS_DISTRIBUTION_* set, the coordinator at {address})" in outputs[1][1]
    assert "trained: process 1 of 2" in outputs[1][0].splitlines()  # its own output, as it is


def test_each_process_gets_its_share_of_every_batch_the_last_partial_one_too() -> None:
    tf = pytest.importorskip("tensorflow")
    rows = tf.data.Dataset.from_tensor_slices((tf.range(70), tf.range(70) * 10)).batch(32)  # 32, 32, 6
    shares = [[(x.numpy().tolist(), y.numpy().tolist()) for x, y in shard_batches(rows, 2, i)] for i in (0, 1)]
    assert [len(share) for share in shares] == [3, 3]  # as many steps as batches, in every process
    assert shares[0][0][0] == list(range(0, 32, 2)) and shares[1][0][0] == list(range(1, 32, 2))
    assert shares[0][2] == ([64, 66, 68], [640, 660, 680]) and shares[1][2] == ([65, 67, 69], [650, 670, 690])
    # a last batch of 2 rows over 4 processes: 1 each, its first rows again, never an empty batch
    named = tf.data.Dataset.from_tensor_slices({"a": tf.range(6)}).batch(4)
    assert [[b["a"].numpy().tolist() for b in shard_batches(named, 4, i)] for i in range(4)] == [
        [[0], [4]], [[1], [5]], [[2], [4]], [[3], [5]]]
    with pytest.raises(ValueError, match="batch of 3 is not divisible by the 2 processes"):
        shard_batches(tf.data.Dataset.range(6).batch(3), 2, 0)
    batches = tf.data.Dataset.from_generator(lambda: iter([tf.zeros((4, 2))]), output_signature=tf.TensorSpec((None, 2)))
    with pytest.raises(ValueError, match="batch size is unknown"):  # batched by the generator, out of tf.data's sight
        shard_batches(batches, 2, 0)


def test_a_backend_without_a_multi_process_route_is_refused(tmp_path: Path) -> None:
    best_json(tmp_path, TRAIN, {"backend": "tensorflow"})
    done = fitspeed("run", "best.json", "--processes", "2", "--", sys.executable, "train.py", cwd=tmp_path)
    assert done.returncode == 2
    said = " ".join(done.stderr.split())
    assert "Expected the jax backend to run over 2 processes. Received: backend=tensorflow in best.json" in said
    assert "MultiWorkerMirroredStrategy" in said and "Traceback" not in said
    assert not list(tmp_path.glob("result-*"))


def test_a_launcher_s_variables_that_disagree_are_refused(tmp_path: Path) -> None:
    best_json(tmp_path, TRAIN, {"backend": "jax", "processes": 2})
    done = subprocess.run([sys.executable, "-m", "fitspeed", "run", "best.json", "--", sys.executable, "train.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**child_env(), ADDRESSES: "127.0.0.1:1", COUNT: "4", INDEX: "0"})
    assert done.returncode == 2
    assert ("Expected KERAS_DISTRIBUTION_NUM_PROCESSES to be the processes asked, 2. Received: 4. Set it to 2 on "
            "every host, or ask --processes 4.") in " ".join(done.stderr.split())
