"""fitspeed.trial.hooks: the one seam through which tests reach into a trial."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from fitspeed.trial import faults, hooks
from fitspeed.trial.data.kinds import ArrayData

SRC = Path(hooks.__file__).parents[1]  # src/fitspeed


def test_a_users_trial_gets_hooks_that_do_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(faults.ENV, raising=False)
    monkeypatch.delenv(faults.HOLD_ENV, raising=False)
    chosen = hooks.from_environment()
    data = ArrayData(x=np.ones((4, 2)), y=np.arange(4))
    assert chosen is hooks.NO_HOOKS
    assert chosen.loaded(data, 0) is data and chosen.compiled_for_training(object()) == []
    assert chosen.before_timing() is None


@pytest.mark.parametrize("variable", [faults.ENV, faults.HOLD_ENV])
def test_a_tests_variable_chooses_the_test_faults(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.delenv(faults.ENV, raising=False)
    monkeypatch.delenv(faults.HOLD_ENV, raising=False)
    monkeypatch.setenv(variable, faults.LABEL_SHUFFLE if variable == faults.ENV else "/nonexistent")
    assert isinstance(hooks.from_environment(), hooks.TestFaults)


def test_the_test_faults_relabel_and_note_what_they_did(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(faults.ENV, faults.LABEL_SHUFFLE)
    monkeypatch.setenv(faults.HOLD_ENV, str(tmp_path))  # not armed: the hold returns at once
    data = ArrayData(x=np.ones((6, 2)), y=np.arange(6))
    test = hooks.TestFaults()
    assert test.loaded(data, 0).y.tolist() != data.y.tolist()
    assert test.before_timing() is None
    assert test.compiled_for_training(object()) == [
        f"test fault injected ({faults.ENV}): training labels permuted from the trial's seed (`relabel`, when the "
        "data was loaded)"]


def test_only_the_seam_calls_faults() -> None:
    callers = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "faults":
                callers.append(path.relative_to(SRC).as_posix())
    assert sorted(set(callers)) == ["trial/hooks.py"]
