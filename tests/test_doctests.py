"""The worked examples in the docstrings of the framework-free modules are tests too."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["fitspeed.stats", "fitspeed.knobs", "fitspeed.workloads", "fitspeed.guard", "fitspeed.best",
           "fitspeed.cli", "fitspeed.tuner", "fitspeed.summary"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
