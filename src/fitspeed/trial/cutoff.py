"""Cutting a hopeless warm-up short, from a timer thread.

The tuner's `stop_below` is checked once the warm-up is over, but a warm-up of
2 × steps_per_execution steps in a precision this CPU runs ten times slower can
take minutes, and one execution of many steps cannot be interrupted from a
Keras callback. So a timer is set for the time the warm-up would take at
`stop_below`, plus a grace for tracing and compiling. If it fires, the trial is
slower than it may be whatever is left: it writes the figure it reached (an
upper bound while its first execution is still running) and ends its process.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from fitspeed.core.record import TrialRecord, write_record

GRACE_S = 30.0  # tracing and compiling, on top of the warm-up's time at stop_below


def deadline_s(samples: float, stop_below: float) -> float:
    """Seconds after which a warm-up of `samples` samples ran below `stop_below` whatever the compile took.

    >>> round(deadline_s(4096, 200.0), 2)
    50.48
    """
    return GRACE_S + samples / stop_below


def _print_and_exit(record: TrialRecord) -> None:
    write_record(record.to_dict())
    os._exit(0)  # the execution under way cannot be stopped from here


def watch(samples: float, stop_below: float | None, step_samples: float, done: Callable[[], int],
          began: Callable[[], float | None], finish: Callable[[float, float], TrialRecord],
          end: Callable[[TrialRecord], None] = _print_and_exit) -> threading.Timer | None:
    """Start the timer for a warm-up of `samples` samples; cancel it when the warm-up ends.

    `done()` is the executions finished so far, `began()` when training began,
    `step_samples` the samples of one execution; `finish(reached, elapsed)`
    makes the record, and `end(record)` writes it and ends the process (a
    built-in model's child prints it; a user's script writes its record file).
    """
    if not stop_below:
        return None
    armed = time.perf_counter()

    def fire() -> None:
        start = began() or armed
        elapsed = time.perf_counter() - start
        # No execution finished yet: the first one's samples over the time so far is the most it can reach.
        reached = max(done(), 1) * step_samples / elapsed
        end(finish(reached, elapsed))

    timer = threading.Timer(deadline_s(samples, stop_below), fire)
    timer.daemon = True
    timer.start()
    return timer
