"""Every private Keras symbol fitspeed uses resolves against the installed Keras and still does what fitspeed needs.

`fitspeed.trial.keras_private` is the one module of src/ that names `keras.src`.
Each accessor is imported for real here (no mocks), so these tests fail the day
a Keras release moves or renames one, or changes what fitspeed relies on; the
last two fail when `keras.src` is named anywhere else under src/.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from fitspeed.trial import keras_private

SRC = Path(__file__).resolve().parents[2] / "src"
SEAM = Path(keras_private.__file__).resolve()
PRIVATE = "keras.src"


def test_every_accessor_is_in_accessors() -> None:
    defined = {name for name, value in inspect.getmembers(keras_private, inspect.isfunction)
               if value.__module__ == keras_private.__name__ and not name.startswith("_")}
    assert defined == {accessor.__name__ for accessor in keras_private.ACCESSORS}


@pytest.mark.parametrize("accessor", keras_private.ACCESSORS, ids=lambda accessor: accessor.__name__)
def test_each_accessor_resolves_against_the_installed_keras(accessor: Callable[[], object]) -> None:
    found = accessor()  # the real import: an ImportError here is Keras having moved or renamed it
    where = found.__name__ if isinstance(found, ModuleType) else getattr(found, "__module__", "")
    assert where.startswith(f"{PRIVATE}."), where


def test_importing_the_seam_imports_no_keras() -> None:
    code = "import sys, fitspeed.trial.keras_private; print('keras' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


def test_array_data_adapter_class_batches_arrays_as_fit_does() -> None:
    adapter_class = keras_private.array_data_adapter_class()
    adapter = adapter_class(np.ones((8, 2)), np.ones((8, 1)), sample_weight=np.ones(8), batch_size=4, shuffle=False)
    assert adapter.num_batches == 2  # what `pipeline.keras_array_dataset` asserts as the cardinality
    assert inspect.isfunction(adapter_class.get_tf_dataset)  # what `pipeline.array_autotune` wraps
    x, y, w = next(iter(adapter.get_numpy_iterator()))
    assert (x.shape, y.shape, w.shape) == ((4, 2), (4, 1), (4,))


def test_can_convert_arrays_takes_arrays_and_their_dicts_and_lists_only() -> None:
    can_convert_arrays = keras_private.can_convert_arrays()
    assert can_convert_arrays((np.ones((4, 2)), np.ones(4), None)) is True
    assert can_convert_arrays(({"a": np.ones((4, 2)), "b": np.ones((4, 3))}, [np.ones(4)], None)) is True
    assert can_convert_arrays((object(), np.ones(4), None)) is False


def test_train_validation_split_holds_out_the_last_samples() -> None:
    train_validation_split = keras_private.train_validation_split()
    (x, y), (x_val, y_val) = train_validation_split((np.arange(10), 2 * np.arange(10)), validation_split=0.2)
    assert x.tolist() == list(range(8)) and y.tolist() == [2 * i for i in range(8)]
    assert x_val.tolist() == [8, 9] and y_val.tolist() == [16, 18]


def test_get_data_adapter_chooses_the_array_adapter_for_arrays() -> None:
    adapter = keras_private.get_data_adapter()(np.ones((8, 2)), np.ones((8, 1)), batch_size=4, steps_per_epoch=2,
                                               shuffle=True)
    assert isinstance(adapter, keras_private.array_data_adapter_class())
    adapter.on_epoch_begin()
    x, y = next(iter(adapter.get_numpy_iterator()))
    assert (x.shape, y.shape) == ((4, 2), (4, 1))
    adapter.on_epoch_end()


class _Recorder:
    """What `trial.seeding` puts in rng_utils' `tf` attribute for one call, recording the seeds it is given."""

    def __init__(self, available: bool) -> None:
        self.available = available
        self.seeds: list[int] = []
        self.random = self

    def set_seed(self, seed: int) -> None:
        self.seeds.append(seed)


def test_set_random_seed_finds_tensorflow_through_rng_utils_lazy_module(monkeypatch: pytest.MonkeyPatch) -> None:
    import keras

    rng_utils = keras_private.rng_utils_module()
    assert isinstance(rng_utils.tf, keras_private.lazy_module_class())  # else seeding imports TensorFlow to seed it
    for available, seeds in ((True, [5]), (False, [])):
        recorder = _Recorder(available)
        monkeypatch.setattr(rng_utils, "tf", recorder)
        keras.utils.set_random_seed(5)  # the public function reads the attribute `trial.seeding` swaps
        assert recorder.seeds == seeds


def test_lazy_module_class_says_whether_its_module_is_available() -> None:
    lazy_module_class = keras_private.lazy_module_class()
    assert lazy_module_class("json").available is True  # what keras.utils.set_random_seed asks before seeding
    assert lazy_module_class("no_such_module_for_fitspeed").available is False


def naming_keras_private(root: Path) -> set[Path]:
    """The files under `root` whose text names `keras.src`, as `git grep` would (caches and egg-info left out)."""
    named = set()
    for path in root.rglob("*"):
        if not path.is_file() or any(part == "__pycache__" or part.endswith(".egg-info") for part in path.parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if PRIVATE in text:
            named.add(path.resolve())
    return named


def test_only_the_seam_names_keras_private_modules() -> None:
    assert naming_keras_private(SRC) == {SEAM}


def test_the_rule_finds_a_private_name_outside_the_seam(tmp_path: Path) -> None:
    seam, kinds = tmp_path / "seam.py", tmp_path / "data" / "kinds.py"
    kinds.parent.mkdir()
    seam.write_text("from keras.src.utils import rng_utils\n")
    kinds.write_text('"""Keras\'s adapters (keras.src.trainers)."""\n')  # a docstring counts too
    (tmp_path / "data" / "pipeline.py").write_text("import keras\n")
    assert naming_keras_private(tmp_path) == {seam.resolve(), kinds.resolve()}
