"""Which backends a script can run on, read from real files (the repository's examples and written ones)."""

from __future__ import annotations

from pathlib import Path

from fitspeed.measure.portability import Tie, ties, why_not

EXAMPLES = Path(__file__).parents[2] / "examples"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_keras_only_example_runs_anywhere_and_a_tf_data_example_is_tied_to_tensorflow() -> None:
    assert ties(EXAMPLES / "mnist_convnet.py") == []
    assert why_not(EXAMPLES / "mnist_convnet.py", "jax") is None
    reason = why_not(EXAMPLES / "shapes_tfdata.py", "jax")
    assert reason is not None and reason.startswith("shapes_tfdata.py:") and "imports tensorflow" in reason
    assert why_not(EXAMPLES / "shapes_tfdata.py", "tensorflow") is None


def test_a_framework_imported_by_the_scripts_own_module_ties_it(tmp_path: Path) -> None:
    script = write(tmp_path, "train.py", "import keras\nfrom models.blocks import block\nimport numpy\n")
    write(tmp_path, "models/__init__.py", "")
    write(tmp_path, "models/blocks.py", "import keras\n\n\ndef block():\n    import torch.nn\n    return torch.nn\n")
    assert ties(script) == [Tie("torch", str(Path("models/blocks.py")), 5, "imports torch.nn")]
    assert why_not(script, "torch") is None
    assert why_not(script, "jax") == "models/blocks.py:5 imports torch.nn, so the script runs on the torch backend only"


def test_a_relative_import_is_followed_and_an_installed_package_is_not(tmp_path: Path) -> None:
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/data.py", "import jax.numpy as jnp\n")
    script = write(tmp_path, "pkg/train.py", "from . import data\nimport keras\nimport optuna\n")
    assert [tie.backend for tie in ties(script)] == ["jax"]


def test_a_script_that_sets_its_own_backend_keeps_it(tmp_path: Path) -> None:
    script = write(tmp_path, "train.py", 'import os\nos.environ["KERAS_BACKEND"] = "jax"\nimport keras\n')
    assert why_not(script, "torch") == "train.py:2 sets KERAS_BACKEND, so the script runs on the jax backend only"
    assert why_not(script, "jax") is None
    other = write(tmp_path, "other.py", 'import os\nos.environ.setdefault("KERAS_BACKEND", "torch")\n')
    assert [tie.backend for tie in ties(other)] == ["torch"]


def test_a_file_that_cannot_be_read_stays_on_its_backend(tmp_path: Path) -> None:
    broken = write(tmp_path, "broken.py", "def f(:\n")
    assert why_not(broken, "tensorflow") is None
    reason = why_not(broken, "jax")
    assert reason is not None and "does not parse as Python" in reason and "cannot tell" in reason
    wrapper = write(tmp_path, "run.sh", "#!/bin/sh\npython train.py\n")
    assert "is not a Python file" in (why_not(wrapper, "jax") or "")


def test_imports_that_loop_are_read_once(tmp_path: Path) -> None:
    write(tmp_path, "a.py", "import b\n")
    write(tmp_path, "b.py", "import a\nimport tensorflow as tf\n")
    assert [(tie.file, tie.line) for tie in ties(tmp_path / "a.py")] == [("b.py", 2)]
