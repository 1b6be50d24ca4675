"""A trial that cannot win stops early, with the figure it reached (a real child, the tiny model)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import child_env

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure.runner import run_trial
from fitspeed.trial.measurement import Timed


def test_a_trial_far_below_the_incumbent_stops_early(tmp_path: Path) -> None:
    # batch 4 cannot reach a billion samples/s: it stops after the warm-up (if its steady execution took
    # MIN_CHECK_S or more on this CPU) or after its first timed window, as ok, with its figure
    spec = TrialSpec(model="tiny", steps=64, repeats=5, config=TrialConfig(batch_size=4), stop_below=1e9)
    record = run_trial(spec, env=child_env(), cwd=tmp_path)
    assert record.status == Status.OK, (record.reason, record.stderr_tail)
    metrics = record.metrics
    after = metrics.stopped_early["after"]
    assert after in ("the warm-up", "its first timed window") and metrics.stopped_early["stop_below"] == 1e9
    assert 0 < metrics.samples_per_s.median < 1e9 and metrics.samples_per_s.n == 1
    assert "window_s" not in metrics.other  # no whole set of timed windows ran
    assert record.notes and record.notes[0].startswith(f"stopped after {after}")


class _Model:
    stop_training = False


def _fake_fit(step_s: Callable[[int, int], float],
              late: frozenset[tuple[int, int]] = frozenset()) -> Callable[..., None]:
    """A `measurement.Fit` that drives the real StepTimer through steps that sleep `step_s(fit, step)`
    (fit 0 is the warm-up, fit 1 the timed windows, steps counted across epochs), with steps_per_execution 1.
    The callback of each (fit, step) in `late` runs at its epoch's end, after the later steps' callbacks, as a
    callback thread that waited for the interpreter's lock does under Keras's asynchronous dispatch."""
    import time

    fits = []

    def fit(steps: int, epochs: int, timer: Any) -> None:
        model = _Model()
        timer.set_model(model)
        number, count = len(fits), 0
        fits.append(number)
        timer.on_train_begin()
        for epoch in range(epochs):
            timer.on_epoch_begin(epoch)
            held = []
            for step in range(steps):
                time.sleep(step_s(number, count))  # the fake fit's step: its duration is what is measured
                count += 1
                if (number, count - 1) in late:
                    held.append(step)
                else:
                    timer.on_train_batch_end(step, {"loss": 1.0})
            for step in held:
                timer.on_train_batch_end(step, {"loss": 1.0})
            timer.on_epoch_end(epoch, {"loss": 1.0})
            if model.stop_training:
                return

    return fit


def _timed(step_s: Callable[[int, int], float], stop_below: float) -> Any:
    from fitspeed.trial import measurement

    spec = TrialSpec(model="tiny", steps=20, repeats=3, stop_below=stop_below)
    return measurement.timed_windows(spec, _fake_fit(step_s), 1, 10, 10_000, 0.0, {})


def test_one_late_warm_up_step_does_not_cut_a_trial_that_runs_at_full_speed() -> None:
    # 2 ms steps (5,000 samples/s at batch 10) and a bar at 2,500: the warm-up's steady step comes late
    # (a 30 ms hiccup, 333 samples/s), but one step is no measurement, and the timed windows run whole
    timed = _timed(lambda fit, step: 0.03 if (fit, step) == (0, 1) else 0.002, stop_below=2500.0)
    assert isinstance(timed, Timed), timed
    assert len(timed.windows) == 3 and 10 * 20 / max(timed.windows) > 2500.0


def test_a_long_warm_up_below_the_bar_still_ends_the_trial() -> None:
    # steps of 120 ms (83 samples/s): the steady execution lasts MIN_CHECK_S or more, and decides
    record = _timed(lambda fit, step: 0.12, stop_below=2500.0)
    assert isinstance(record, TrialRecord) and record.metrics is not None
    assert record.metrics.stopped_early is not None and record.metrics.stopped_early["after"] == "the warm-up"
    assert record.throughput is not None and record.throughput < 100


def test_only_the_first_timed_window_may_cut_a_trial() -> None:
    # a load burst in the second window (steps 5x slower) is a slow window: the trial runs its 3 windows
    burst = _timed(lambda fit, step: 0.01 if fit == 1 and 21 <= step < 42 else 0.002, stop_below=2500.0)
    assert isinstance(burst, Timed) and len(burst.windows) == 3
    # a first window below the bar ends the trial there, with that window's figure
    slow = _timed(lambda fit, step: 0.01 if fit == 1 else 0.002, stop_below=2500.0)
    assert isinstance(slow, TrialRecord) and slow.metrics is not None and slow.metrics.stopped_early is not None
    assert slow.metrics.stopped_early["after"] == "its first timed window"
    assert slow.throughput is not None and slow.throughput < 2500.0


def test_a_window_whose_clock_was_read_out_of_order_is_a_failure_not_a_figure() -> None:
    # the first timed window's start mark (step 0 of fit 1) is read after its end mark: the window measures
    # less than no time, and the trial says so instead of writing a negative samples/s (a 2-core CI run did)
    from fitspeed.trial import measurement

    spec = TrialSpec(model="tiny", steps=20, repeats=3)
    record = measurement.timed_windows(spec, _fake_fit(lambda fit, step: 0.001, late=frozenset({(1, 0)})),
                                       1, 10, 10_000, 0.0, {})
    assert isinstance(record, TrialRecord) and record.status == Status.FAILED
    assert record.reason is not None and record.reason.startswith("a timed window of 20 steps measured -")
    assert "--steps" in record.reason and record.throughput is None
    # the same steps with the marks read in order are three windows of about 20 ms
    timed = measurement.timed_windows(spec, _fake_fit(lambda fit, step: 0.001), 1, 10, 10_000, 0.0, {})
    assert isinstance(timed, Timed) and len(timed.windows) == 3 and min(timed.windows) > 0


def test_a_trial_above_the_bar_runs_every_window(tmp_path: Path) -> None:
    spec = TrialSpec(model="tiny", steps=8, repeats=3, config=TrialConfig(batch_size=4), stop_below=1.0)
    record = run_trial(spec, env=child_env(), cwd=tmp_path)
    assert record.status == Status.OK, (record.reason, record.stderr_tail)
    assert "stopped_early" not in record.metrics.to_dict() and len(record.metrics.other["window_s"]) == 3


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
        "from fitspeed.core.record import Status, TrialSpec, new_record\n"
        "cutoff.GRACE_S = 0.5\n"
        "spec = TrialSpec(model='tiny', stop_below=100.0)\n"
        "began = time.perf_counter()\n"
        "cutoff.watch(64.0, 100.0, 32.0, done=lambda: 0, began=lambda: began,\n"
        "             finish=lambda reached, elapsed: new_record(spec, Status.OK, metrics={\n"
        "                 'samples_per_s': {'median': reached}, 'elapsed': elapsed}))\n"
        "time.sleep(60)\n"  # an execution that runs long: the cutoff's timer must end it first
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
