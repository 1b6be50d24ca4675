"""A fault that breaks learning, injected into a train-mode trial: for tests of the numerics guard only.

Not a knob: no user sets it, and no configuration carries it. The trial child
reads `FITSPEED_TEST_FAULT` from its environment; `lr_x<factor>` multiplies
the compiled optimizer's learning rate by `factor` before training (under
mixed_float16 Keras's LossScaleOptimizer passes it to the optimizer it wraps).
The record's notes say that a fault was injected.
"""

from __future__ import annotations

import os
from typing import Any

ENV = "FITSPEED_TEST_FAULT"


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
