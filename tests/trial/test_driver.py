"""The one trial driver and the input kinds: every mode has one function, every kind answers for itself."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import fitspeed.trial
from fitspeed.core.config import TrialConfig
from fitspeed.core.data_ref import DataKind, SourceKind
from fitspeed.core.errors import DataError, UserError
from fitspeed.core.record import Mode, Status, TrialSpec
from fitspeed.trial import driver
from fitspeed.trial.script_hook import Action
from fitspeed.trial.transform import Refused

TRIAL = Path(fitspeed.trial.__file__).parent
ENUMS = (Status, Mode, DataKind, SourceKind, Action)
NAMES = {"kind", "status", "mode", "action"}  # what holds one of those enums


def test_every_mode_has_one_function_for_built_in_and_script_trials_alike() -> None:
    assert set(driver.MODES) == set(Mode)
    assert driver.MODES[Mode.TIME] is driver.MODES[Mode.MODEL] is driver.timed


@pytest.mark.parametrize(("error", "status", "user_error"), [
    (UserError("Expected --data."), Status.FAILED, True),
    (DataError("Expected x and y."), Status.FAILED, True),
    (Refused("remat cannot apply here."), Status.FAILED, False),
    (MemoryError(), Status.OOM, False),
    (RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"), Status.OOM, False),
    (RuntimeError("shapes do not match"), Status.FAILED, False),
    (KeyboardInterrupt(), Status.FAILED, False),
])
def test_one_mapping_from_an_exception_to_a_status(error: BaseException, status: Status, user_error: bool) -> None:
    found, reason, mine = driver.failure(TrialSpec(model="tiny"), error)
    assert (found, mine) == (status, user_error)
    assert type(error).__name__ in reason or str(error) == reason


def test_a_subject_that_fails_to_build_is_a_record_with_the_fields_its_variant_carries() -> None:
    def broken() -> driver.Subject:
        raise UserError("Expected a model. Received nothing.")

    record = driver.run(TrialSpec(model="tiny"), broken, script={"path": "train.py"})
    assert (record.status, record.reason, record.user_error) == (
        Status.FAILED, "Expected a model. Received nothing.", True)
    assert record.extra == {"script": {"path": "train.py"}}
    assert list(record.to_dict())[-1] == "script"  # after the fields every record has, as the child prints it


def _compared_to_a_bare_value(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of each string constant compared with a kind, status, mode or action."""
    values = {member.value for enum in ENUMS for member in enum}

    def holds_one(node: ast.expr) -> bool:
        if isinstance(node, ast.Subscript):
            return isinstance(node.slice, ast.Constant) and node.slice.value in NAMES
        return (node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")) in NAMES

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or not any(holds_one(side) for side in (node.left, *node.comparators)):
            continue
        for side in (node.left, *node.comparators):
            items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            found += [(item.lineno, item.value) for item in items
                      if isinstance(item, ast.Constant) and item.value in values]
    return found


def test_no_module_in_trial_compares_a_kind_status_mode_or_action_with_its_text() -> None:
    offenders = [f"{path.relative_to(TRIAL)}:{line}: {text!r}" for path in sorted(TRIAL.rglob("*.py"))
                 for line, text in _compared_to_a_bare_value(ast.parse(path.read_text()))]
    assert not offenders, offenders
    assert _compared_to_a_bare_value(ast.parse('if data.kind != "arrays" or record["status"] in ("ok",): pass')) \
        == [(1, "arrays"), (1, "ok")]  # the check sees what it looks for


def test_each_kind_of_input_answers_what_a_trial_asks() -> None:
    tf = pytest.importorskip("tensorflow")
    import keras

    from fitspeed.trial.data.kinds import ArrayData, DatasetData, PyDatasetData, as_given, entering

    class Batches(keras.utils.PyDataset):
        def __len__(self) -> int:
            return 3

        def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
            return np.full((4, 2), index, "float32"), np.zeros(4, "int32")

    x, y = np.ones((10, 2), "float32"), np.arange(10)
    arrays = entering(x, list(range(10)), validation_split=0.2)
    assert isinstance(arrays, ArrayData) and arrays.in_memory and arrays.samples == 8
    assert arrays.epoch_steps(3) == 3 and arrays.sample_shape() == (2,)
    args = arrays.fit_args(steps=5, batch_size=3)
    assert len(args["x"]) == 15 and args["batch_size"] == 3  # cycled to whole batches
    plain = ArrayData(x=x, y=y)
    assert plain.with_knobs(TrialConfig(), 2, 0) is plain  # arrays no input knob changes need no pipeline
    assert plain.with_knobs(TrialConfig(data_autotune=False), 2, 0).autotune is False
    dataset = entering(tf.data.Dataset.from_tensor_slices((x, y)).batch(5), None)
    assert isinstance(dataset, DatasetData) and not dataset.in_memory
    assert (dataset.batch_size, dataset.epoch_steps(5), dataset.sample_shape(), dataset.label) == (5, 2, (2,), "dataset")
    assert dataset.fit_args(4, 5)["x"].cardinality() == tf.data.INFINITE_CARDINALITY  # repeated
    batches = entering(Batches(), None)
    assert isinstance(batches, PyDatasetData)
    assert (batches.batch_size, batches.epoch_steps(4), batches.sample_shape()) == (4, 3, (2,))
    assert batches.fit_args(4, 4)["x"][4][0][0, 0] == 1.0  # cycled past its end
    assert batches.why_not("workers", "tensorflow") is None
    assert "applies to a keras.utils.PyDataset" in (dataset.why_not("workers", "tensorflow") or "")
    assert getattr(as_given({"x": {"a": x}, "y": y}), "kind", None) == DataKind.ARRAYS
    assert as_given({"x": "a file name"}) is None
    with pytest.raises(DataError, match="Received: x of type str"):
        entering("a file name", None)
