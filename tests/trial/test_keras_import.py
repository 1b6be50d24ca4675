"""A built-in trial imports keras without JAX and matplotlib, which it never uses; both import as usual after.

On JAX and PyTorch it does not import TensorFlow either, and TensorFlow is seeded the moment something does.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_env, missing

CHILD = """
import json, sys
from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialSpec
from fitspeed.trial import protocol
record = protocol.run(TrialSpec(model="tiny", steps=4, repeats=1, config=TrialConfig(backend=sys.argv[1])))
loaded = {name: name in sys.modules for name in ("keras", "jax", "matplotlib", "tensorflow")}
import matplotlib.pyplot  # after the trial: as usual
print(json.dumps({"status": record.status, "reason": record.reason, "loaded": loaded,
                  "pyplot": "matplotlib.pyplot" in sys.modules}))
"""


def _run(backend: str, tmp_path: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", CHILD, backend], capture_output=True, text=True, timeout=300,
                          env=child_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "ok", result["reason"]
    return result


def test_a_tensorflow_trial_loads_neither_jax_nor_matplotlib(tmp_path: Path) -> None:
    if importlib.util.find_spec("jax") is None:
        missing("jax is not installed: pip install 'fitspeed[jax]'")  # without it there is nothing to leave out
    result = _run("tensorflow", tmp_path)
    assert result["loaded"] == {"keras": True, "jax": False, "matplotlib": False, "tensorflow": True}
    assert result["pyplot"] is True


def test_a_jax_trial_keeps_jax(tmp_path: Path) -> None:
    if importlib.util.find_spec("jax") is None:
        missing("jax is not installed: pip install 'fitspeed[jax]'")
    result = _run("jax", tmp_path)
    # nor TensorFlow, which keras.utils.set_random_seed alone would import (fitspeed.trial.seeding)
    assert result["loaded"] == {"keras": True, "jax": True, "matplotlib": False, "tensorflow": False}


SHUFFLED = """
import json, sys
from fitspeed.trial import seeding
seed, how = int(sys.argv[1]), sys.argv[2]
if how == "keras":
    import keras
    keras.utils.set_random_seed(seed)  # what Keras does: TensorFlow imported and seeded now
else:
    seeding.set_random_seed(seed, "jax")
    assert "tensorflow" not in sys.modules
import tensorflow as tf  # as a user's data function would, later
print(json.dumps([int(x) for x in tf.data.Dataset.range(20).shuffle(20)]))
"""


def test_tensorflow_imported_after_the_seeding_shuffles_as_under_keras_own_seeding(tmp_path: Path) -> None:
    if importlib.util.find_spec("jax") is None:
        missing("jax is not installed: pip install 'fitspeed[jax]'")

    def order(seed: int, how: str) -> list[int]:
        env = {**child_env(), "KERAS_BACKEND": "jax"}
        done = subprocess.run([sys.executable, "-c", SHUFFLED, str(seed), how], capture_output=True, text=True,
                              timeout=300, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        return list(json.loads(done.stdout.strip().splitlines()[-1]))

    hooked = order(7, "hook")
    assert hooked == order(7, "keras")
    assert hooked != order(8, "hook")  # the seed decides the order


def test_skipped_imports_raise_inside_the_block_and_work_after() -> None:
    from fitspeed.trial.keras_import import skipped

    name = "wave"  # a standard module nothing here imports
    sys.modules.pop(name, None)
    with skipped(name):
        with pytest.raises(ImportError):
            importlib.import_module(name)
    assert importlib.import_module(name).__name__ == name
