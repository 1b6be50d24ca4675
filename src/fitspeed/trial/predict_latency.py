"""Mode "predict": one sample at a time against batches (article 002's closing observation).

Runs in the trial child only, after `fitspeed.trial.protocol` has built the
model and loaded the data. Article 002 called `predict()` with one sample tens
of thousands of times and found it ran faster on a CPU than on a GPU. This
times, after one warm-up call of each:

- `predict(x[:1])`: Keras's batch loop for one sample, per call;
- `model(x[:1], training=False)`: the direct call Keras recommends for small inputs, per call;
- `predict(x)` over batches of `batch_size`: samples/s.

Each is timed in `repeats` windows of about `target_seconds / 3`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record
from fitspeed.core.stats import describe
from fitspeed.machine.environment import Environment
from fitspeed.trial.data.kinds import Data


def _windows(call: Callable[[], Any], repeats: int, seconds: float) -> tuple[list[float], int]:
    """Seconds per call in each of `repeats` windows, and the calls per window (sized from one timed call)."""
    started = time.perf_counter()
    call()
    once = max(time.perf_counter() - started, 1e-6)
    calls = max(1, int(seconds / once))
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            call()
        out.append((time.perf_counter() - started) / calls)
    return out, calls


def measure(spec: TrialSpec, model: Any, data: Data, batch: int, env: Environment, **fields: Any) -> TrialRecord:
    """The three timings above as a record; `fields` go into it (a script's `script`)."""
    x = np.asarray(data.first_inputs()[: max(batch, 1) * 4])
    one = x[:1]
    share = spec.target_seconds / 3
    model.predict(one, verbose=0)  # warm-up: traces predict's function
    model(one, training=False)
    predict_one, calls_predict = _windows(lambda: model.predict(one, verbose=0), spec.repeats, share)
    call_one, calls_direct = _windows(lambda: np.asarray(model(one, training=False)), spec.repeats, share)
    model.predict(x, batch_size=batch, verbose=0)
    batched, _ = _windows(lambda: model.predict(x, batch_size=batch, verbose=0), spec.repeats, share)
    batched_speed = describe([len(x) / w for w in batched])
    metrics = {
        "predict_one_ms": describe([1000 * w for w in predict_one]).to_dict(),
        "call_one_ms": describe([1000 * w for w in call_one]).to_dict(),
        "samples_per_s": batched_speed.to_dict(),
        "batched_ms_per_sample": 1000 / batched_speed.median,
        "batch_size": batch,
        "calls_per_window": {"predict_one": calls_predict, "call_one": calls_direct},
        "params": int(model.count_params()),
    }
    return new_record(spec, Status.OK, environment=env, metrics=metrics, **fields)
