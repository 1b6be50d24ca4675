"""The measurement protocol inside a real trial child, on tiny models."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import child_env

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure.runner import run_trial


def ok(spec: TrialSpec, cwd: Path) -> TrialRecord:
    record = run_trial(spec, env=child_env(), cwd=cwd)
    assert record.status == Status.OK, (record.reason, record.stderr_tail)
    return record


def test_windows_stay_whole_when_callbacks_fire_every_n_batches(tmp_path: Path) -> None:
    n = 4
    spec = TrialSpec(model="tiny", steps=12, repeats=3, config=TrialConfig(steps_per_execution=n))
    metrics = ok(spec, tmp_path).metrics
    assert metrics.other["steps_per_repeat"] == 12
    assert len(metrics.other["window_s"]) == 3
    # one lead-in execution plus 12 timed steps: (4 + 12) / 4 batch callbacks per epoch
    assert metrics.other["batch_callbacks_per_epoch"] == [(n + 12) // n]
    speeds = [12 * 32 / w for w in metrics.other["window_s"]]
    assert metrics.samples_per_s.median == pytest.approx(sorted(speeds)[1])
    assert metrics.samples_per_s.center == pytest.approx((speeds[0] * speeds[1] * speeds[2]) ** (1 / 3))
    assert metrics.ms_per_step == pytest.approx(1000 * 32 / metrics.samples_per_s.center)  # the windows' geometric mean
    assert metrics.other["compile_s"] >= 0 and metrics.other["first_execution_s"] > 0
    # warm-up epoch plus three timed epochs, and the loss falls on learnable data
    assert len(metrics.loss_curve) == 4
    assert metrics.loss_curve[-1] < metrics.loss_curve[0]


def test_auto_steps_fill_the_target_window(tmp_path: Path) -> None:
    spec = TrialSpec(model="mlp", repeats=2, target_seconds=0.3, config=TrialConfig(steps_per_execution=8))
    metrics = ok(spec, tmp_path).metrics
    assert metrics.other["steps_per_repeat"] % 8 == 0 and metrics.other["steps_per_repeat"] > 8


def test_mixed_bfloat16_runs_on_any_cpu(tmp_path: Path) -> None:
    # bf16 arithmetic runs everywhere (emulated where the CPU has no bf16 units); only its speed varies
    config = TrialConfig(precision="mixed_bfloat16", batch_size=16)
    metrics = ok(TrialSpec(model="tiny", steps=8, repeats=2, config=config), tmp_path).metrics
    assert metrics.batch_size == 16 and math.isfinite(metrics.final_loss)


# What TensorFlow answers where its CPU kernels take NHWC only (oneDNN off, as on an AVX2-only Zen 3).
NHWC_ONLY = ("only supports NHWC", "only supports the NHWC tensor format")


def test_channels_first_trains_or_fails_with_the_backends_message(tmp_path: Path) -> None:
    """channels_first runs on some CPUs and not others: either way the record says what happened."""
    config = TrialConfig(data_format="channels_first", precision="mixed_bfloat16", batch_size=16)
    record = run_trial(TrialSpec(model="tiny", steps=8, repeats=2, config=config), env=child_env(), cwd=tmp_path)
    if record.status == Status.OK:
        metrics = record.metrics
        assert metrics.batch_size == 16 and math.isfinite(metrics.final_loss)
    else:
        assert record.status == Status.FAILED, (record.reason, record.stderr_tail)
        assert any(words in record.reason for words in NHWC_ONLY), record.reason


@pytest.mark.slow
def test_onednn_knob_sets_what_tensorflow_runs_and_the_record_says_so(tmp_path: Path) -> None:
    """onednn=false and =true reach TensorFlow before its import; the environment records its own answer."""
    for value in (False, True):
        config = TrialConfig(onednn=value)
        record = ok(TrialSpec(model="tiny", steps=8, repeats=2, config=config), tmp_path)
        assert record.environment["onednn"] is value
        assert record.spec.config.onednn is value
    # keep sets nothing: the record says what TensorFlow chose by its own rule for this CPU
    env = child_env()
    env.pop("TF_ENABLE_ONEDNN_OPTS", None)
    record = run_trial(TrialSpec(model="tiny", steps=8, repeats=2), env=env, cwd=tmp_path)
    from fitspeed.machine.environment import onednn_default

    if onednn_default() is not None:
        assert record.environment["onednn"] is onednn_default()
    assert "avx2" in record.environment["cpu_features"] or not record.environment["cpu_features"]


def test_onednn_off_reproduces_the_nhwc_only_failure_on_any_cpu(tmp_path: Path) -> None:
    """With oneDNN off (an AVX2-only Zen 3's default), TensorFlow's CPU convolutions take NHWC only."""
    config = TrialConfig(onednn=False, data_format="channels_first", batch_size=16)
    record = run_trial(TrialSpec(model="tiny", steps=8, repeats=2, config=config), env=child_env(), cwd=tmp_path)
    assert record.status == Status.FAILED, (record.status, record.stderr_tail)
    assert any(words in record.reason for words in NHWC_ONLY), record.reason
    assert record.environment["onednn"] is False


def test_threads_and_jit_run(tmp_path: Path) -> None:
    config = TrialConfig(intra_op_threads=1, inter_op_threads=1, jit_compile=True)
    record = ok(TrialSpec(model="tiny", steps=8, repeats=2, config=config), tmp_path)
    assert record.metrics.other["jit_compile_resolved"] is True
    assert record.notes == ()


def test_determinism_turns_xla_off_and_says_so(tmp_path: Path) -> None:
    config = TrialConfig(jit_compile=True, deterministic=True)
    record = ok(TrialSpec(model="tiny", steps=8, repeats=2, config=config), tmp_path)
    assert record.metrics.other["jit_compile_resolved"] is False
    assert "op determinism is on" in record.notes[0]


def test_user_model_compiled_with_its_own_loss(tmp_path: Path) -> None:
    spec = TrialSpec(model="userwork:compiled_model", data="userwork:arrays", steps=8, repeats=2,
                     config=TrialConfig(steps_per_execution=2))
    assert ok(spec, tmp_path).metrics.other["params"] == 8 * 16 + 16 + 16 * 3 + 3


@pytest.mark.parametrize("data", ["userwork:dataset", "userwork:pydataset"])
def test_user_dataset_and_pydataset_are_cycled(data: str, tmp_path: Path) -> None:
    # 512 samples are 16 batches of 32: 40 steps per epoch need the data to repeat
    spec = TrialSpec(model="userwork:small_model", data=data, steps=40, repeats=2,
                     config=TrialConfig(batch_size=32))
    metrics = ok(spec, tmp_path).metrics
    assert metrics.batch_size == 32 and metrics.other["steps_per_repeat"] == 40


def test_npz_data(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", x=rng.normal(size=(100, 8)).astype("float32"),
             y=rng.integers(0, 3, size=100))
    spec = TrialSpec(model="userwork:small_model", data="npz:d.npz", steps=8, repeats=2)
    ok(spec, tmp_path)


@pytest.mark.parametrize(
    ("model", "data", "fragment"),
    [
        ("userwork:small_model", "userwork:wrong_shape", "expects inputs of shape (8) per sample, the data gives (5)"),
        ("tiny", "npz:bad.npz", "Could not read 'bad.npz' as an .npz file"),
        ("tiny", "npz:nokeys.npz", "It holds: a"),
        ("tiny", "cifar10", "Could not load cifar10 through keras.datasets.cifar10.load_data()"),
        ("userwork:no_such_function", None, "has no callable 'no_such_function'"),
    ],
)
def test_bad_data_is_a_user_error(model: str, data: str | None, fragment: str, tmp_path: Path) -> None:
    (tmp_path / "bad.npz").write_bytes(b"this is not a zip file")
    np.savez(tmp_path / "nokeys.npz", a=np.zeros(3))
    record = run_trial(TrialSpec(model=model, data=data, steps=8, repeats=1), env=child_env(), cwd=tmp_path)
    assert record.status == Status.FAILED and record.user_error, record
    assert fragment in record.reason
