"""Proof for the `deterministic` knob: two runs from the same state and seed, bit-identical weights or not.

Runs in the trial child, after a `deterministic=true` trial's timed windows
(article 003: `TF_DETERMINISTIC_OPS` is worth its cost only if it holds).
`check` snapshots every variable of the model and of its optimizer, then
twice: restores the snapshot, sets the seed (`keras.utils.set_random_seed`),
and trains the same `STEPS` steps on the same batches, read once from the
trial's data and kept in memory (the order of the data is the
`data_deterministic` knob's business, not this one's). After each run it
hashes every weight of the model (`weights_sha256`): equal hashes mean
bit-identical weights. Both runs share one process, so the check sees what
op determinism governs: the order of parallel reductions and the choice of
kernels, not a different machine or library version.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

STEPS = 8


def weights_sha256(variables: list[Any]) -> str:
    """sha256 over every variable's name, dtype, shape and bytes, in order.

    >>> a = weights_sha256([np.ones(3, "float32")])
    >>> a == weights_sha256([np.ones(3, "float32")]), a == weights_sha256([np.ones(3, "float64")])
    (True, False)
    """
    digest = hashlib.sha256()
    for variable in variables:
        value = np.asarray(variable.numpy() if hasattr(variable, "numpy") else variable)
        name = getattr(variable, "path", None) or getattr(variable, "name", "")
        digest.update(f"{name}|{value.dtype.str}|{value.shape}|".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()


def _state(model: Any) -> list[Any]:
    optimizer = getattr(model, "optimizer", None)
    return [*model.variables, *(optimizer.variables if optimizer is not None else [])]


def check(model: Any, data: Any, batch: int, seed: int, steps_per_execution: int = 1) -> dict[str, Any]:
    """Train twice from one snapshot and seed; compare the weights' hashes."""
    import keras

    from fitspeed.trial.doctor import in_memory

    started = time.perf_counter()
    n = steps_per_execution
    steps = n * max(1, -(-STEPS // n))
    batches = in_memory(data, batch, count=min(steps, STEPS))
    state = _state(model)
    snapshot = [np.array(variable.numpy(), copy=True) for variable in state]
    hashes, finals = [], []
    for _ in range(2):
        for variable, value in zip(state, snapshot):
            variable.assign(value)
        keras.utils.set_random_seed(seed)
        model.fit(**batches.fit_args(steps, batch), epochs=1, steps_per_epoch=steps, verbose=0)
        hashes.append(weights_sha256(model.weights))
        finals.append([np.array(w.numpy(), copy=True) for w in model.weights])
    differing = [w.path for w, a, b in zip(model.weights, *finals) if a.tobytes() != b.tobytes()]
    return {"identical": hashes[0] == hashes[1], "hashes": hashes, "runs": 2, "steps": steps,
            "weights": len(model.weights), "differing": differing[:20], "seconds": time.perf_counter() - started,
            "how": f"two runs of {steps} training steps in this process, each from the same snapshot of every "
                   "model and optimizer variable and keras.utils.set_random_seed(seed), on the same batches; "
                   "sha256 over every weight's bytes"}
