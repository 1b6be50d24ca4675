"""steps_per_execution="auto" as a helper in a user's own script."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import child_env

from fitspeed import auto_steps
from fitspeed.auto_steps import choose

SCRIPT = """
import json, numpy as np, keras
from fitspeed import auto_steps
keras.utils.set_random_seed(0)
x = np.random.default_rng(0).normal(size=(256, 8)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(2, activation="softmax")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
result = auto_steps.tune(model, x, y, batch_size=16, candidates=(1, 4, 16, 64), seconds=0.3)
history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
print(json.dumps({"chosen": result.chosen, "speeds": result.samples_per_s,
                  "spe": model.steps_per_execution, "loss": history.history["loss"],
                  "metrics": sorted(history.history)}))
"""


def test_tune_picks_a_measured_value_and_recompiles() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=child_env(), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    speeds = {int(n): s for n, s in report["speeds"].items()}
    assert report["chosen"] in speeds and report["spe"] == report["chosen"]
    assert report["chosen"] == choose(speeds)
    # a tiny Dense model is overhead-bound: more steps per execution must have measured faster
    assert speeds[max(speeds)] > speeds[1]
    assert report["metrics"] == ["accuracy", "loss"]  # the user's metrics survived the recompiles
    assert all(loss == loss for loss in report["loss"])


def test_choose_prefers_the_smallest_within_tolerance() -> None:
    assert choose({1: 100.0, 2: 180.0, 4: 240.0, 8: 246.0, 16: 250.0}) == 4
    assert choose({1: 100.0, 2: 99.0}) == 1
    assert choose({1: 100.0, 2: 180.0, 4: 240.0}, tolerance=0.0) == 4


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"batch_size": 0}, "batch_size"), ({"batch_size": 2.5}, "batch_size"), ({"candidates": ()}, "candidates"),
    ({"candidates": (1, 0)}, "candidates"), ({"seconds": 0}, "seconds"), ({"tolerance": -0.1}, "tolerance"),
])
def test_bad_arguments_are_refused_like_the_clis(kwargs: dict, words: str) -> None:
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match=words):
        auto_steps.tune(model, np.ones((16, 4)), np.ones((16, 2)), **kwargs)
