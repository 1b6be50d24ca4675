"""`steps_per_execution="auto"` for Keras 3, which dropped it (tf-keras had it).

Use it in your own code, with no CLI:

    import fitspeed.auto_steps as auto_steps
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    result = auto_steps.tune(model, x_train, y_train, batch_size=64)
    model.fit(x_train, y_train, batch_size=64, epochs=10)  # now at result.chosen

How it decides: for each candidate N (1, 2, 4, … 128 by default) it recompiles
the model with `steps_per_execution=N` (same optimizer, loss and metrics),
trains for one warm-up execution plus about `seconds` of executions, and
reads the clock at execution ends, after Keras has turned the loss into a
Python float (so the device has finished). It stops doubling once two
candidates in a row are no faster than the best so far, then picks the
*smallest* N within `tolerance` of the best throughput: larger N only delays
batch callbacks and progress updates, so it must buy speed to be chosen.
The probe's steps are real training steps: the weights move on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import keras

from fitspeed.trial.data.kinds import ArrayData, Data, pipeline_of
from fitspeed.trial.models import compile_model
from fitspeed.trial.timing import StepTimer

DEFAULT_CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass
class AutoStepsResult:
    chosen: int
    samples_per_s: dict[int, float] = field(default_factory=dict)

    def __str__(self) -> str:
        rows = ", ".join(f"{n}: {speed:,.0f}" for n, speed in self.samples_per_s.items())
        return f"steps_per_execution={self.chosen} (samples/s by N: {rows})"


def choose(samples_per_s: dict[int, float], tolerance: float = 0.05) -> int:
    """The smallest N within `tolerance` of the fastest.

    >>> choose({1: 100.0, 2: 180.0, 4: 240.0, 8: 246.0, 16: 250.0})
    4
    """
    best = max(samples_per_s.values())
    return min(n for n, speed in samples_per_s.items() if speed >= best * (1 - tolerance))


def _data(x: Any, y: Any, batch_size: int | None) -> Data:
    return pipeline_of(x, "x") or ArrayData(x=x, y=y)


def _check_arguments(batch_size: Any, candidates: Sequence[int], seconds: Any, tolerance: Any) -> None:
    """The same strictness as the CLI's: a bad argument is an error, never a silent default."""
    if batch_size is not None and not (isinstance(batch_size, int) and not isinstance(batch_size, bool)
                                       and batch_size >= 1):
        raise ValueError(f"Expected batch_size to be a positive integer or None. Received: {batch_size!r}.")
    if not candidates or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in candidates):
        raise ValueError("Expected candidates to be positive integers, such as (1, 2, 4, 8). "
                         f"Received: {tuple(candidates)!r}.")
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"Expected seconds to be a positive number. Received: {seconds!r}.")
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"Expected tolerance to be zero or more, such as 0.05. Received: {tolerance!r}.")


def tune(
    model: keras.Model,
    x: Any,
    y: Any = None,
    *,
    batch_size: int | None = None,
    candidates: Sequence[int] = DEFAULT_CANDIDATES,
    seconds: float = 0.5,
    tolerance: float = 0.05,
) -> AutoStepsResult:
    """Measure `steps_per_execution` candidates on `model` and `x`; recompile with the choice."""
    if not model.compiled:
        raise ValueError("Expected a compiled model. Call model.compile(...) before tuning it.")
    _check_arguments(batch_size, candidates, seconds, tolerance)
    data = _data(x, y, batch_size)
    batch = data.batch_size or batch_size or 32
    result = AutoStepsResult(chosen=1)
    seconds_per_step = None
    slower_in_a_row = 0
    for n in sorted(set(candidates)):
        compile_model(model, {"steps_per_execution": n})
        executions = 2 if seconds_per_step is None else max(2, math.ceil(seconds / (seconds_per_step * n)))
        steps = n * (1 + executions)
        timer = StepTimer(marks=(n - 1, steps - 1))
        model.fit(**data.fit_args(steps, batch), epochs=1, steps_per_epoch=steps,
                  verbose=0, callbacks=[timer])
        window = timer.span(0, n - 1, steps - 1)
        if not window:
            continue
        seconds_per_step = window / (steps - n)
        speed = batch / seconds_per_step
        best = max(result.samples_per_s.values(), default=0.0)
        result.samples_per_s[n] = speed
        slower_in_a_row = slower_in_a_row + 1 if speed <= best * (1 + tolerance) else 0
        if slower_in_a_row >= 2:
            break
    result.chosen = choose(result.samples_per_s, tolerance)
    compile_model(model, {"steps_per_execution": result.chosen})
    return result
