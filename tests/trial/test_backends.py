"""The optional backends, where installed: a real trial on each."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
from conftest import child_env, missing

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.knobs import check_backend_installed
from fitspeed.core.record import Status, TrialSpec
from fitspeed.measure.runner import run_trial


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_trial_on_backend(backend: str, tmp_path: Path) -> None:
    if importlib.util.find_spec(backend) is None:
        missing(f"{backend} is not installed (pip install 'fitspeed[{backend}]')")
    n = 2 if backend == "jax" else 1
    spec = TrialSpec(model="tiny", steps=8, repeats=2,
                     config=TrialConfig(backend=backend, steps_per_execution=n, data_format="channels_first"))
    record = run_trial(spec, env=child_env(), cwd=tmp_path)
    assert record.status == Status.OK, (record.reason, record.stderr_tail)
    assert record.environment["backend"] == backend
    assert record.environment["versions"][backend]
    assert math.isfinite(record.metrics.final_loss)
    assert record.metrics.other["batch_callbacks_per_epoch"] == [(n + 8) // n]


def test_missing_backend_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # jax may well be installed here; pretend the import system cannot find it
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jax" else real(name, *a))
    with pytest.raises(KnobError, match=r"pip install 'fitspeed\[jax\]'"):
        check_backend_installed("jax")
    check_backend_installed("tensorflow")
