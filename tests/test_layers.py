"""The layers are locked: every module's imports obey the rules in scripts/import_graph.py.

The rules are read from the code with `ast`. To show that each rule can
fail, the package is copied to a temporary folder and one forbidden import
is planted in the copy.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "import_graph.py"


graph = load_script(SCRIPT)


def test_the_package_obeys_every_rule() -> None:
    assert graph.violations() == []


def test_every_module_is_in_a_layer() -> None:
    modules, _ = graph.read_imports()
    layers = {graph.layer_of(m) for m in modules}
    assert layers == {graph.API, *graph.LAYERS}
    roots = sorted(m for m in modules if graph.layer_of(m) == graph.API)
    assert roots == ["fitspeed", "fitspeed.__main__", "fitspeed.api", "fitspeed.api.errors", "fitspeed.api.progress", "fitspeed.api.result",
                     "fitspeed.api.shipping", "fitspeed.api.tuning", "fitspeed.auto_steps"]


def test_the_script_prints_the_layers() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    headings = [line.split("/")[0] for line in result.stdout.splitlines() if line.endswith(")") and "/" in line]
    assert headings == ["api", *graph.LAYERS]
    assert "every import rule holds" in result.stdout


PLANTS = [
    # (file, line planted at its end, words the violation must contain)
    ("core/config.py", "from fitspeed.search import space", "core/ may import only itself"),
    ("machine/sampler.py", "from fitspeed.measure import runner", "machine/ may import only core"),
    ("measure/comparison.py", "from fitspeed.trial import models", "reached only as `python -m fitspeed.trial`"),
    ("search/summary.py", "from fitspeed.trial.data import sources", "reached only as `python -m fitspeed.trial`"),
    ("trial/timing.py", "from fitspeed.measure import results", "trial/ may import only core, machine"),
    ("search/space.py", "from fitspeed.report import numbers", "search/ may import only core, machine, trial, measure"),
    ("report/plot_data.py", "from fitspeed.console import tables", "report/ may import only"),
    ("report/reproduction.py", "from fitspeed.reproduce import output", "report/ may import only"),
    ("reproduce/experiment.py", "from fitspeed.console import tables", "reproduce/ may import only"),
    ("console/tables.py", "from fitspeed.cli import options", "console/ may import only"),
    ("api/result.py", "from fitspeed.cli import tune", "the public API never imports cli/"),
    ("api/progress.py", "def _planted() -> None:\n    from fitspeed.cli.tune import tune_events",
     "the public API never imports cli/"),  # inside a function too
    ("reproduce/output.py", "from fitspeed.trial import validation", "reached only as `python -m fitspeed.trial`"),
    ("measure/results.py", "import keras", "imports keras at module level"),
    ("search/guard.py", "import tensorflow as tf", "imports tensorflow at module level"),
    ("core/stats.py", "import matplotlib.pyplot as plt", "belongs in report/ only"),
    ("report/plot_data.py", "from rich.table import Table", "rich, which belongs in console/ and cli/ only"),
    ("api/result.py", "from rich.console import Console", "rich, which belongs in console/ and cli/ only"),
    ("measure/runner.py", "import optuna", "optuna, which belongs in search/ only"),
    ("search/tuner.py", "from fitspeed import auto_steps", "never import the public API"),
    ("core/errors.py", "from fitspeed.core import knobs", "import circle"),
]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("pristine") / "fitspeed"
    shutil.copytree(graph.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert graph.violations(copy) == []
    return copy


@pytest.mark.parametrize(("file", "line", "words"), PLANTS, ids=[f"{f}:{w}" for f, _, w in PLANTS])
def test_a_planted_import_is_caught(pristine: Path, tmp_path: Path, file: str, line: str, words: str) -> None:
    copy = tmp_path / "fitspeed"
    shutil.copytree(pristine, copy)
    target = copy / file
    target.write_text(target.read_text() + f"\n{line}\n")
    found = graph.violations(copy)
    assert len(found) >= 1
    assert any(words in sentence for sentence in found), found
    assert any(file.replace("/", ".").removesuffix(".py") in sentence for sentence in found), found


def test_a_lazy_framework_import_outside_trial_is_allowed(pristine: Path, tmp_path: Path) -> None:
    copy = tmp_path / "fitspeed"
    shutil.copytree(pristine, copy)
    target = copy / "machine" / "environment.py"
    target.write_text(target.read_text() + "\n\ndef _planted() -> None:\n    import keras  # noqa: F401\n")
    assert graph.violations(copy) == []
