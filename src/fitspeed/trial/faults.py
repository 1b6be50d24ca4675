"""Faults injected into a trial child, for tests only: not knobs, no user sets them, no configuration carries them.

- `FITSPEED_TEST_FAULT=lr_x<factor>` breaks learning in a train-mode trial:
  it multiplies the compiled optimizer's learning rate by `factor` before
  training (under mixed_float16 Keras's LossScaleOptimizer passes it to the
  optimizer it wraps), for the numerics guard to catch. The record's notes
  say that a fault was injected.
- `FITSPEED_TEST_HOLD=FOLDER` holds one timed trial open, so that a test can
  kill its worker while it surely holds a trial, never by a poll that could
  miss it: when the test creates FOLDER/armed, the first trial child to start
  after it takes that file (an atomic rename to FOLDER/held-<pid>), writes its
  worker's FITSPEED_HOST into it, and waits until FOLDER/release exists.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

ENV = "FITSPEED_TEST_FAULT"
HOLD_ENV = "FITSPEED_TEST_HOLD"
HOLD_LIMIT_S = 600.0  # a held trial goes on by itself after this long, should a test never release it


def parse(text: str) -> float:
    """The learning-rate factor that `text` names.

    >>> parse("lr_x100"), parse("lr_x0.01")
    (100.0, 0.01)
    >>> parse("lr_100")
    Traceback (most recent call last):
    ...
    ValueError: Expected FITSPEED_TEST_FAULT to be lr_x<factor>, such as lr_x100. Received: 'lr_100'.
    """
    try:
        if text.startswith("lr_x"):
            return float(text[len("lr_x"):])
    except ValueError:
        pass
    raise ValueError(f"Expected {ENV} to be lr_x<factor>, such as lr_x100. Received: {text!r}.")


def inject(model: Any) -> str | None:
    """Apply the fault the environment names to the compiled `model`; what was done, or None."""
    text = os.environ.get(ENV)
    if not text:
        return None
    factor = parse(text)
    optimizer = model.optimizer
    rate = float(optimizer.learning_rate)  # a schedule has no one value: the fault is for the built-in models
    optimizer.learning_rate = rate * factor
    return f"learning rate {rate:g} x {factor:g} = {float(optimizer.learning_rate):g}"


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
