"""The one measuring loop: the warm-up, the timed windows, `stop_below` and the cut-off timer.

A built-in model (`fitspeed.trial.protocol`) and a user's script
(`fitspeed.trial.script_hook`) are timed by the same `timed_windows`, through
the one driver (`fitspeed.trial.driver.timed`); each subject says how to run
`fit()` on its model: `model.fit` on the data fitspeed built, or the script's
real `fit` with the callbacks it keeps.
So a user's script is cut short exactly as a built-in model is:

1. The warm-up: 2 executions of steps_per_execution steps (tracing, compiling,
   the first execution). With `spec.stop_below` (the tuner sets it on a
   candidate), a timer (`fitspeed.trial.cutoff`) cuts a warm-up short that is
   still running when it would have ended at `stop_below`, plus a grace for
   compiling; a warm-up that finished below it ends the trial there, if its
   steady execution lasted MIN_CHECK_S or more. A shorter one is no
   measurement: one step of a small model takes milliseconds, and on a loaded
   CPU one late step would put it below any bar (a tune of `tiny` beside other
   work cut data_autotune=False at 0.21x and inter_op_threads=1 at 0.17x of
   the baseline, on one step each). Then the first timed window decides.
2. The timed windows: `spec.repeats` epochs of warm-up + `steps` steps, the
   clock read at execution edges (`fitspeed.trial.timing.StepTimer`); a first
   window below `stop_below` ends the trial, with that window's figure. Later
   windows never cut it: a trial that reached its second window is worth
   its median.

A trial cut short is an "ok" record with the figure it reached and
`metrics.stopped_early` saying where it stopped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record
from fitspeed.trial import cutoff, distribute, lockstep, peak_memory

if TYPE_CHECKING:  # imports keras: the knobs must be set first
    from fitspeed.machine.environment import Environment
    from fitspeed.trial.timing import StepTimer

MIN_CHECK_S = 0.1  # a warm-up's steady execution shorter than this does not decide `stop_below`

Fit = Callable[[int, int, "StepTimer"], None]  # fit(steps per epoch, epochs, timer): one call of the real fit()
End = Callable[[TrialRecord], None]  # write a record and end the process (the cut-off timer's last act)


@dataclass(frozen=True)
class Timed:
    """What the timed windows measured: the caller turns it into a record (`window_metrics`)."""

    steps: int  # timed steps per window, a multiple of steps_per_execution
    first_s: float  # the first execution, compile included
    windows: list[float]  # seconds of each timed window
    losses: list[float]  # every epoch's loss, the warm-up's first
    calls: dict[int, int]  # batch callbacks per epoch
    wall: list[float]  # wall-clock start and end of the timed windows (the monitor keeps samples inside)


def timed_steps(spec: TrialSpec, n: int, steady_s: float, cap: int) -> int:
    """Steps per timed window: `spec.steps` rounded up to whole executions, else about `target_seconds` of them.

    >>> timed_steps(TrialSpec(model="tiny", steps=100), 16, 0.01, 10_000)
    112
    >>> timed_steps(TrialSpec(model="tiny", target_seconds=1.0), 4, 0.1, 10_000)
    40
    """
    if spec.steps:
        return -(-spec.steps // n) * n
    steps = n * max(1, math.ceil(spec.target_seconds / max(steady_s, 1e-6)))
    return max(n, min(steps, cap))


def timed_windows(spec: TrialSpec, fit: Fit, n: int, batch: int, cap: int, build_s: float, env: Environment,
                  end: End | None = None, **fields: Any) -> Timed | TrialRecord:
    """Warm up, then time `spec.repeats` windows: a `Timed`, or the record that ended the trial early.

    `n` is steps_per_execution, `batch` the global batch, `cap` the most timed
    steps the data can hold. `fields` go into any record made here (a script's
    `script` and `rewrite`).
    """
    from fitspeed.trial.timing import StepTimer

    gate = lockstep.from_environment()  # in a lockstep round, each window waits for its turn
    warm = StepTimer(marks=(n - 1, 2 * n - 1))
    gate.acquire()  # before the cut-off's clock starts: a turn's wait is no time of the warm-up's
    watchdog = cutoff.watch(
        2 * n * batch, spec.stop_below, n * batch, done=lambda: sum(warm.calls_per_epoch.values()),
        began=lambda: warm.train_begin,
        finish=lambda reached, elapsed: stopped_early(spec, f"{elapsed:.0f} s of the warm-up", [reached], batch,
                                                      elapsed, build_s, warm.epoch_losses, env, **fields),
        **({"end": end} if end else {}))
    try:
        fit(2 * n, 1, warm)
    finally:
        if watchdog:
            watchdog.cancel()
        gate.release()
    first_s = warm.times[(0, n - 1)] - (warm.train_begin or 0.0)
    steady_s = distribute.agree(warm.span(0, n - 1, 2 * n - 1) or first_s)  # one decision for every process
    if warm.nonfinite:
        gate.finish()
        return new_record(spec, Status.NAN, reason=warm.nonfinite, environment=env, **fields)
    if spec.stop_below and steady_s >= MIN_CHECK_S and n * batch / steady_s < spec.stop_below:
        gate.finish()
        return stopped_early(spec, "the warm-up", [n * batch / steady_s], batch, first_s, build_s,
                             warm.epoch_losses, env, **fields)
    steps = timed_steps(spec, n, steady_s, cap)
    timer = StepTimer(marks=(n - 1, n + steps - 1), stop_below=spec.stop_below, samples=steps * batch, gate=gate)
    began = time.time()
    try:
        fit(n + steps, spec.repeats, timer)
    finally:
        gate.finish()  # what follows the windows (held-out figures, checks) never falls in another trial's turn
    wall = [began, time.time()]
    losses = [*warm.epoch_losses, *timer.epoch_losses]
    if timer.nonfinite:
        return new_record(spec, Status.NAN, reason=timer.nonfinite, environment=env, metrics={"loss_curve": losses},
                          **fields)
    if timer.stopped:
        window = timer.span(0, n - 1, n + steps - 1) or 0.0
        return stopped_early(spec, "its first timed window", [steps * batch / window], batch, first_s, build_s,
                             losses, env, **fields)
    windows = [timer.span(e, n - 1, n + steps - 1) for e in range(spec.repeats)]
    if any(w is None for w in windows):
        raise RuntimeError(f"timed windows incomplete: {windows}")
    timed = [w for w in windows if w is not None]
    shortest = distribute.agree(min(timed))  # process 0's windows decide for every process, as its figure does
    if shortest <= 0:
        return new_record(spec, Status.FAILED, reason=too_short(steps, shortest), environment=env,
                          metrics={"loss_curve": losses, "window_s": timed}, **fields)
    return Timed(steps, first_s, timed, losses, dict(timer.calls_per_epoch), wall)


def too_short(steps: int, window_s: float) -> str:
    """Why a window that measured no time is no figure.

    With callbacks dispatched off the main thread (JAX, PyTorch), Keras reads a
    step's end in a worker thread, which may wait for the interpreter's lock
    for some milliseconds: a window shorter than that wait can come out
    negative, and no figure can be drawn from it.

    >>> too_short(8, -0.0004)
    'a timed window of 8 steps measured -0.4 ms: too short for the clock, which Keras reads in its callback threads up to some milliseconds late; time more steps (--steps) or seconds (--target-seconds)'
    """
    return (f"a timed window of {steps} steps measured {1000 * window_s:.1f} ms: too short for the clock, which "
            "Keras reads in its callback threads up to some milliseconds late; time more steps (--steps) or "
            "seconds (--target-seconds)")


def stopped_early(spec: TrialSpec, after: str, speeds: list[float], batch: int, first_s: float, build_s: float,
                  losses: list[float], env: Environment, **fields: Any) -> TrialRecord:
    """An ok record for a trial cut short: the figure it reached, and where it stopped."""
    from fitspeed.core.stats import describe

    figure = describe(speeds)
    metrics = {"samples_per_s": figure.to_dict(), "ms_per_step": 1000 * batch / figure.center,
               "batch_size": batch, "first_execution_s": first_s, "build_s": build_s,
               "loss_curve": losses, "final_loss": losses[-1] if losses else None,
               "stopped_early": {"after": after, "stop_below": spec.stop_below}}
    note = (f"stopped after {after}: {figure.center:,.0f} samples/s, below the {spec.stop_below:,.0f} "
            "where it could not win")
    return new_record(spec, Status.OK, environment=env, metrics=metrics, notes=[note], **fields)


def window_metrics(
    *,
    timed: Timed,
    steps_per_execution: int,
    batch: int,
    build_s: float,
    jit_compile: bool,
    device_mb: float | None,
    params: int,
    data_kind: str | None = None,
    output_dtype: str | None = None,
) -> dict[str, Any]:
    """The record's metrics for the timed windows."""
    from fitspeed.core.stats import describe

    throughput = describe([timed.steps * batch / w for w in timed.windows])
    seconds_per_step = batch / throughput.center
    return {
        "samples_per_s": throughput.to_dict(),
        "ms_per_step": 1000 * seconds_per_step,
        "steps_per_repeat": timed.steps,
        "batch_size": batch,
        "window_s": timed.windows,
        "compile_s": max(0.0, timed.first_s - seconds_per_step * steps_per_execution),
        "first_execution_s": timed.first_s,
        "build_s": build_s,
        "peak_host_mb": peak_memory.peak_resident_mb(),
        "peak_device_mb": device_mb,
        "final_loss": timed.losses[-1] if timed.losses else None,
        "loss_curve": timed.losses,
        "batch_callbacks_per_epoch": sorted(set(timed.calls.values())),
        "jit_compile_resolved": jit_compile,
        "params": params,
        "data_kind": data_kind,
        "output_dtype": output_dtype,  # the loss reads it: float32 under a mixed policy (the guard checks)
    }
