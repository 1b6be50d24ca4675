"""The devices knob: real data-parallel training over 2 logical CPU devices, on TensorFlow and JAX."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, QUICK, child_env, missing

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.knobs import KNOBS_BY_NAME
from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure.runner import run_trial

STRATEGY = {"tensorflow": "tf.distribute.MirroredStrategy", "jax": "keras.distribution.DataParallel"}


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_two_devices_train_for_real_on_a_global_batch(backend: str, tmp_path: Path) -> None:
    if importlib.util.find_spec(backend) is None:
        missing(f"{backend} is not installed")
    config = TrialConfig(backend=backend, devices=2, batch_size=16)
    record = run_trial(TrialSpec(model="tiny", steps=8, repeats=2, config=config), env=child_env(), cwd=tmp_path)
    assert record.status == Status.OK, (record.reason, record.stderr_tail)
    assert record.environment["devices"] == {"asked": 2, "used": 2, "kind": "CPU (logical devices)",
                                                "available": None, "strategy": STRATEGY[backend]}
    metrics = record.metrics
    assert metrics.batch_size == 32  # 16 per device × 2: samples/s counts the global batch
    assert metrics.ms_per_step == pytest.approx(1000 * 32 / metrics.samples_per_s.center)  # the windows' geometric mean
    assert all(math.isfinite(loss) for loss in metrics.loss_curve)
    assert record.notes == ()


def test_pytorch_is_skipped_with_the_reason() -> None:
    with pytest.raises(KnobError, match="torch backend cannot do devices=2: Keras has no data-parallel distribution"):
        TrialConfig(backend="torch", devices=2)
    assert TrialConfig(backend="torch").devices == 1
    assert KNOBS_BY_NAME["devices"].backends() == ("tensorflow", "jax")
    with pytest.raises(KnobError, match="Expected `devices` to be an integer >= 1"):
        TrialConfig.from_assignments(["devices=0"])


def _measure_script(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fitspeed", "measure", "--set", "devices=2", *QUICK, "--json",
                           "--results", str(cwd / "r.jsonl"), "--", sys.executable, str(FIXTURES / "scripts" / script)],
                          cwd=cwd, env=child_env(), capture_output=True, text=True, timeout=300, check=False)


def test_a_script_trains_under_the_strategy_and_its_batch_is_global(tmp_path: Path) -> None:
    result = _measure_script("tf_style.py", tmp_path)
    assert result.returncode == 0, result.stderr
    record = TrialRecord.from_dict(json.loads(result.stdout))
    assert record.environment["devices"]["strategy"] == "tf.distribute.MirroredStrategy"
    assert record.metrics.batch_size == 32
    assert "the script's batch of 32 is the global batch, 16 per device on 2 devices" in record.notes


def test_a_script_model_built_outside_the_scope_is_refused_with_the_reason(tmp_path: Path) -> None:
    result = _measure_script("threaded_build.py", tmp_path)
    assert result.returncode == 2, result.stdout
    text = " ".join(result.stderr.split())
    assert "Received a model that trains on 1 device(s): it was built outside that scope" in text
    assert "Traceback" not in result.stderr


def _placement(process: int, processes: int) -> Any:
    from fitspeed.trial.distribute import Placement

    return Placement(1, 1, "CPU", None, "keras.distribution.DataParallel", processes=processes, process=process)


@pytest.mark.parametrize("data", ["synthetic", "pyloader"])
def test_the_processes_of_a_trial_each_train_on_their_own_share_of_one_data_set(data: str) -> None:
    """Each of N processes draws the one data set (the spec's seed, not its own) and trains on every Nth sample
    or batch of it, from its index on; all judge the same held-out data.

    Before, each process drew its data from its own seed, the trial's plus its index: synthetic data of another
    set of class prototypes, another task, so that two processes trained one model on two tasks, and the
    guard found it 10% worse than one process at every seed (`scale tiny --processes 1,2`).
    """
    import numpy as np

    from fitspeed.core.data_ref import DataRef
    from fitspeed.trial.protocol import shared_data

    spec = TrialSpec(model="tiny", data=data, seed=3, validate=True)

    def drawn(process: int, processes: int) -> Any:
        return shared_data(spec, DataRef.parse(data), (32, 32, 3), 10, 32, _placement(process, processes))

    whole, shares = drawn(0, 1), [drawn(0, 2), drawn(1, 2)]
    for share in shares:
        np.testing.assert_array_equal(share.x_val, whole.x_val)
        np.testing.assert_array_equal(share.y_val, whole.y_val)
    if data == "synthetic":
        assert [len(share.y) for share in shares] == [len(whole.y) // 2] * 2
        for index, share in enumerate(shares):
            np.testing.assert_array_equal(share.x, whole.x[index::2])
            np.testing.assert_array_equal(share.y, whole.y[index::2])
    else:
        assert [len(share.source) for share in shares] == [len(whole.source) // 2] * 2
        for index, share in enumerate(shares):
            for batch in (0, 1):
                np.testing.assert_array_equal(share.source[batch][0], whole.source[2 * batch + index][0])
                np.testing.assert_array_equal(share.source[batch][1], whole.source[2 * batch + index][1])
