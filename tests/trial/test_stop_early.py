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


def test_a_warm_up_still_running_at_its_deadline_is_cut_short_from_the_timer(tmp_path: Path) -> None:
    # A real child process whose "execution" never ends (it sleeps): the timer writes the record it reached
    # and ends the process, within seconds of the deadline, instead of waiting for the execution.
    import json
    import subprocess
    import sys
    import time

    script = tmp_path / "child.py"
    script.write_text(
        "import time\n"
        "from fitspeed.trial import cutoff\n"
        "from fitspeed.core.record import TrialSpec, new_record\n"
        "cutoff.GRACE_S = 0.5\n"
        "spec = TrialSpec(model='tiny', stop_below=100.0)\n"
        "began = time.perf_counter()\n"
        "cutoff.watch(64.0, 100.0, 32.0, done=lambda: 0, began=lambda: began,\n"
        "             finish=lambda reached, elapsed: new_record(spec, 'ok', metrics={\n"
        "                 'samples_per_s': {'median': reached}, 'elapsed': elapsed}))\n"
        "time.sleep(60)\n"
        "print('the execution ended on its own')\n"
    )
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=50, check=False,
                          env=child_env())
    took = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    assert "ended on its own" not in done.stdout and took < 40
    record = json.loads(done.stdout.strip().splitlines()[-1])
    metrics = record["metrics"]
    assert metrics["elapsed"] >= 0.5 + 64.0 / 100.0  # not before the deadline: grace + the warm-up at stop_below
    assert 0 < metrics["samples_per_s"]["median"] <= 32.0 / metrics["elapsed"] < 100.0  # an upper bound, below the bar
