"""The clock inside a trial: a Keras callback that reads it at window edges.

Runs in the trial child only. With `steps_per_execution=N`, Keras calls batch
callbacks once per execution, with `batch` set to the *last* step of that
execution; the timer keys its marks on that step index, never on a count of
calls, so it stays right for any N.

Device synchronization: Keras converts the logs to Python floats before a
batch callback sees them (in a worker thread when callbacks run
asynchronously), which waits until the step that produced the loss has
finished on the device. The timer reads the clock only after that.
"""

from __future__ import annotations

import math
import time
from typing import Any

import keras

from fitspeed.trial.lockstep import NO_GATE, Gate


class StepTimer(keras.callbacks.Callback):
    """Record the clock at chosen step indices of every epoch.

    Args:
        marks: step indices (0-based, within an epoch) at whose end to read the
            clock; each must be the last step of an execution.
    """

    async_safe = True  # let Keras keep dispatching batch callbacks off the main thread

    def __init__(self, marks: tuple[int, ...], stop_below: float | None = None, samples: float = 0.0,
                 gate: Gate = NO_GATE) -> None:
        """With `stop_below`, training stops after the first epoch if its window (the first and
        last mark, `samples` samples) ran below that many samples/s; `stopped` says so. Only the
        first window decides: a load burst in a later one is a slow window, not a reason to stop.
        With a `gate` (a lockstep round, `fitspeed.trial.lockstep`), each epoch waits for its turn
        at its beginning and hands it back at its end."""
        super().__init__()
        self.gate = gate
        self.marks = frozenset(marks)
        self.stop_below = stop_below
        self.samples = samples
        self.stopped = False
        self.train_begin: float | None = None
        self.times: dict[tuple[int, int], float] = {}
        self.epoch_losses: list[float] = []
        self.calls_per_epoch: dict[int, int] = {}
        self.nonfinite: str | None = None
        self.epoch_s: list[float] = []  # each epoch's wall time, begin to end (its logs read)
        self._epoch = 0
        self._epoch_began = 0.0

    def on_train_begin(self, logs: Any = None) -> None:
        self.train_begin = time.perf_counter()

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.gate.acquire()
        self._epoch = epoch
        self._epoch_began = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        now = time.perf_counter()
        epoch = self._epoch
        self.calls_per_epoch[epoch] = self.calls_per_epoch.get(epoch, 0) + 1
        if batch in self.marks:
            self.times[(epoch, batch)] = now
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)) and self.nonfinite is None:
            self.nonfinite = f"the loss became {float(loss)} at step {batch} of epoch {epoch}"
            self.model.stop_training = True

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None:
            self.epoch_losses.append(float(loss))
        self.epoch_s.append(time.perf_counter() - self._epoch_began)
        self.gate.release()
        if self.stop_below and self.marks and len(self.epoch_s) == 1:
            window = self.span(epoch, min(self.marks), max(self.marks))
            if window is not None and window > 0 and self.samples / window < self.stop_below:
                self.stopped = True
                self.model.stop_training = True

    def span(self, epoch: int, start: int, end: int) -> float | None:
        """Seconds from the end of step `start` to the end of step `end` in `epoch`."""
        if (epoch, start) not in self.times or (epoch, end) not in self.times:
            return None
        return self.times[(epoch, end)] - self.times[(epoch, start)]
