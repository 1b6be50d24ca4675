"""The worked examples in the docstrings of the framework-free modules are tests too."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "fitspeed"
# every module with a worked example: a new one is tested without being listed
MODULES = sorted(".".join(("fitspeed", *path.relative_to(SOURCE).with_suffix("").parts))
                 for path in SOURCE.rglob("*.py") if ">>> " in path.read_text() and path.name != "__main__.py")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
