"""A trial that cannot win stops early, with the figure it reached (a real child, the tiny model)."""

from __future__ import annotations

from pathlib import Path

from conftest import child_env

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialSpec
from fitspeed.measure.runner import run_trial


def test_a_trial_far_below_the_incumbent_stops_after_its_warm_up(tmp_path: Path) -> None:
    # batch 4 cannot reach a billion samples/s: it stops after the warm-up, as ok, with its figure
    spec = TrialSpec(model="tiny", steps=64, repeats=5, config=TrialConfig(batch_size=4), stop_below=1e9)
    record = run_trial(spec, env=child_env(), cwd=tmp_path)
    assert record["status"] == "ok", (record["reason"], record["stderr_tail"])
    metrics = record["metrics"]
    assert metrics["stopped_early"] == {"after": "the warm-up", "stop_below": 1e9}
    assert 0 < metrics["samples_per_s"]["median"] < 1e9
    assert "window_s" not in metrics  # no timed window ran
    assert record["notes"] and record["notes"][0].startswith("stopped after the warm-up")


def test_a_trial_above_the_bar_runs_every_window(tmp_path: Path) -> None:
    spec = TrialSpec(model="tiny", steps=8, repeats=3, config=TrialConfig(batch_size=4), stop_below=1.0)
    record = run_trial(spec, env=child_env(), cwd=tmp_path)
    assert record["status"] == "ok", (record["reason"], record["stderr_tail"])
    assert "stopped_early" not in record["metrics"] and len(record["metrics"]["window_s"]) == 3


def test_the_timer_stops_training_after_a_slow_first_window() -> None:
    # in this process: the callback the protocol's timed fit uses, on a model that trains in milliseconds
    import keras
    import numpy as np

    from fitspeed.trial.timing import StepTimer

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((40, 4)), np.ones((40, 1))
    slow = StepTimer(marks=(0, 9), stop_below=1e12, samples=9 * 4)  # no window reaches 1e12 samples/s
    model.fit(x, y, batch_size=4, epochs=3, steps_per_epoch=10, verbose=0, callbacks=[slow])
    assert slow.stopped and len(slow.epoch_losses) == 1
    fast = StepTimer(marks=(0, 9), stop_below=1e-6, samples=9 * 4)
    model.fit(x, y, batch_size=4, epochs=3, steps_per_epoch=10, verbose=0, callbacks=[fast])
    assert not fast.stopped and len(fast.epoch_losses) == 3
