"""Trace one timed window with the backend's own profiler (`measure --profile`).

In the trial child, after the timed repeats, `capture` runs one more window
exactly like them (a lead-in execution, then the same timed steps) and traces
it: the profiler starts at the end of the lead-in and stops at the end of the
last step, where the window's clock is read. The traced window is reported
apart and never enters the speed figures, because the profiler slows it.

| backend    | profiler                                  | writes                                              |
|------------|-------------------------------------------|-----------------------------------------------------|
| tensorflow | `tf.profiler.experimental.start/stop`     | `LOGDIR/plugins/profile/RUN/HOST.xplane.pb`         |
| jax        | `jax.profiler.start_trace/stop_trace`     | `LOGDIR/plugins/profile/RUN/HOST.xplane.pb`         |
| torch      | `torch.profiler.profile` + TensorBoard handler | `LOGDIR/HOST_PID.TIME.pt.trace.json`           |

Each backend's profiler and hint are `fitspeed.machine.frameworks`'s.
`fitspeed.trial.trace_ops` then ranks the ops by self time. A profiler that fails
leaves the measurement standing: the record's `profile` carries the error.
Frameworks are imported inside the functions; `open_hint` is parent-safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fitspeed.machine.frameworks import framework_of

TOP_N = 10


def open_hint(backend: str, logdir: str) -> list[str]:
    """How to open a trace: the command first, then what it needs installed.

    >>> open_hint("tensorflow", "prof/run")[0]
    'tensorboard --logdir prof/run'
    """
    return framework_of(backend).trace_hint(logdir)


def _window_callback(first: int, last: int, start: Callable[[], None], stop: Callable[[], None]) -> Any:
    """A Keras callback that starts tracing after step `first` and stops after step `last`."""
    import keras

    class ProfileWindow(keras.callbacks.Callback):
        # Not async_safe: the profiler must start and stop on the training
        # thread, at the step it is meant for (torch's profiler is per thread).
        def __init__(self) -> None:
            super().__init__()
            self.begin: float | None = None
            self.end: float | None = None
            self.running = False

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if batch == first and not self.running:
                start()
                self.running = True
                self.begin = time.perf_counter()
            elif batch == last and self.running:
                self.end = time.perf_counter()
                stop()
                self.running = False

        def on_train_end(self, logs: Any = None) -> None:
            if self.running:  # training stopped early: still close the trace
                stop()
                self.running = False

    return ProfileWindow()


def capture(
    backend: str,
    logdir: Path,
    model: Any,
    data: Any,
    batch: int,
    steps: int,
    steps_per_execution: int,
) -> dict[str, Any]:
    """Train one traced window (lead-in + `steps`) and summarize its trace."""
    from fitspeed.trial import trace_ops

    n = steps_per_execution
    logdir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"logdir": str(logdir), "backend": backend, "steps": steps,
                              "open": open_hint(backend, str(logdir))}
    try:
        start, stop = framework_of(backend).tracer(logdir)
        window = _window_callback(n - 1, n + steps - 1, start, stop)
        model.fit(
            **data.fit_args(n + steps, batch),
            epochs=1,
            steps_per_epoch=n + steps,
            verbose=0,
            callbacks=[window],
        )
        if window.begin is not None and window.end is not None:
            result["window_s"] = window.end - window.begin
            result["samples_per_s"] = steps * batch / result["window_s"]
        result.update(trace_ops.read_profile(logdir, TOP_N))
    except Exception as error:  # the measurement stands; say why there is no trace
        result["error"] = f"{type(error).__name__}: {error}"[:1000]
    return result
