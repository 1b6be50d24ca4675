"""Faults injected into a trial child, for tests only: not knobs, no user sets them, no configuration carries them.

- `FITSPEED_TEST_FAULT` breaks learning in a train-mode trial of a built-in
  or builder model, for the numerics guard to catch; the record's notes say
  that a fault was injected. One of:

  - `lr_x<factor>`: the compiled optimizer's learning rate times `factor`,
    before training (under mixed_float16 Keras's LossScaleOptimizer passes it
    to the optimizer it wraps);
  - `softmax_float16`: the layers that make the model's outputs compute in
    float16 (policy mixed_float16: float32 weights, float16 maths), as if the
    trial's float32-output rewrite had been skipped under a mixed policy;
  - `label_shuffle`: the training labels permuted (from the trial's seed),
    so nothing learnable links inputs to labels; the held-out labels are kept.

  `fitspeed.trial.hooks.TestFaults` applies them, the trial's one seam for
  tests: `relabel` to the loaded data, `inject` to the compiled model. A
  training script's trial applies none (its data and model are the script's
  own).
- `FITSPEED_TEST_HOLD=FOLDER` holds one timed trial open, so that a test can
  kill its worker while it surely holds a trial, never by a poll that could
  miss it (`TestFaults.before_timing`): when the test creates FOLDER/armed, the first trial child to start
  after it takes that file (an atomic rename to FOLDER/held-<pid>), writes its
  worker's FITSPEED_HOST into it, and waits until FOLDER/release exists.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fitspeed.core.data_ref import DataKind

ENV = "FITSPEED_TEST_FAULT"
HOLD_ENV = "FITSPEED_TEST_HOLD"
HOLD_LIMIT_S = 600.0  # a held trial goes on by itself after this long, should a test never release it
SOFTMAX_FLOAT16 = "softmax_float16"
LABEL_SHUFFLE = "label_shuffle"


@dataclass(frozen=True)
class Fault:
    """One test fault: `kind` is "lr", SOFTMAX_FLOAT16 or LABEL_SHUFFLE; `factor` the learning rate's (lr only)."""

    kind: str
    factor: float = 1.0


def parse(text: str) -> Fault:
    """The fault that `text` names.

    >>> parse("lr_x100"), parse("lr_x0.01").factor
    (Fault(kind='lr', factor=100.0), 0.01)
    >>> parse("softmax_float16").kind, parse("label_shuffle").kind
    ('softmax_float16', 'label_shuffle')
    >>> parse("lr_100")
    Traceback (most recent call last):
    ...
    ValueError: Expected FITSPEED_TEST_FAULT to be lr_x<factor> (such as lr_x100), softmax_float16 or label_shuffle. Received: 'lr_100'.
    """
    if text in (SOFTMAX_FLOAT16, LABEL_SHUFFLE):
        return Fault(text)
    try:
        if text.startswith("lr_x"):
            return Fault("lr", float(text[len("lr_x"):]))
    except ValueError:
        pass
    raise ValueError(f"Expected {ENV} to be lr_x<factor> (such as lr_x100), {SOFTMAX_FLOAT16} or {LABEL_SHUFFLE}. "
                     f"Received: {text!r}.")


def _fault() -> Fault | None:
    text = os.environ.get(ENV)
    return parse(text) if text else None


def relabel(data: Any, seed: int) -> Any:
    """`data` with its training labels permuted from `seed` under `label_shuffle` (arrays only); else as it is.

    >>> import numpy as np; from types import SimpleNamespace as Data
    >>> os.environ[ENV] = "label_shuffle"
    >>> data = Data(kind="arrays", y=np.arange(6), y_val=np.arange(2))
    >>> shuffled = relabel(data, 0)
    >>> sorted(shuffled.y.tolist()) == list(range(6)), shuffled.y.tolist() != list(range(6)), shuffled.y_val.tolist()
    (True, True, [0, 1])
    >>> data.y.tolist()  # the loaded data is not changed
    [0, 1, 2, 3, 4, 5]
    >>> del os.environ[ENV]
    """
    fault = _fault()
    if fault is None or fault.kind != LABEL_SHUFFLE:
        return data
    if data.kind != DataKind.ARRAYS:
        raise ValueError(f"Expected arrays for the test fault {LABEL_SHUFFLE}. Received data of kind {data.kind!r}.")
    import numpy as np

    labels = np.random.default_rng(seed).permutation(np.asarray(data.y))
    changed = copy.copy(data)  # the loaded data stays as it was
    changed.y = labels
    return changed


def inject(model: Any) -> str | None:
    """Apply the model fault the environment names to the compiled `model`; what was done (any fault), or None."""
    fault = _fault()
    if fault is None:
        return None
    if fault.kind == LABEL_SHUFFLE:
        return "training labels permuted from the trial's seed (`relabel`, when the data was loaded)"
    if fault.kind == SOFTMAX_FLOAT16:
        from fitspeed.trial.transform.rewrite import output_layers

        moved = []
        for layer in output_layers(model):
            layer.dtype_policy = "mixed_float16"  # float32 weights, float16 maths: the output in float16
            moved.append(layer.name)
        return f"output layer(s) {', '.join(moved)} computed in float16 (the float32-output rewrite undone)"
    optimizer = model.optimizer
    rate = float(optimizer.learning_rate)  # a schedule has no one value: the fault is for the built-in models
    optimizer.learning_rate = rate * fault.factor
    return f"learning rate {rate:g} x {fault.factor:g} = {float(optimizer.learning_rate):g}"


def hold() -> None:
    """Hold this trial open while a test arms it (`FITSPEED_TEST_HOLD`); return at once otherwise."""
    folder = os.environ.get(HOLD_ENV)
    if not folder:
        return
    held = Path(folder) / f"held-{os.getpid()}"
    try:
        os.rename(Path(folder) / "armed", held)  # one trial takes it
    except FileNotFoundError:
        return
    partial = held.with_suffix(".tmp")
    partial.write_text(os.environ.get("FITSPEED_HOST", ""))
    os.replace(partial, Path(folder) / f"host-{os.getpid()}")  # whole when seen
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not (Path(folder) / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
