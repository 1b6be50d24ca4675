"""The worked examples in the docstrings of the framework-free modules are tests too."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["fitspeed.core.stats", "fitspeed.core.knobs", "fitspeed.core.workloads", "fitspeed.core.data_ref", "fitspeed.core.record", "fitspeed.report.numbers",
           "fitspeed.search.guard", "fitspeed.search.best_json",
           "fitspeed.cli.commands", "fitspeed.cli.convert", "fitspeed.search.tuner", "fitspeed.search.summary",
           "fitspeed.cli.model_check", "fitspeed.trial.train_graph", "fitspeed.trial.determinism",
           "fitspeed.search.scaling", "fitspeed.trial.distribute", "fitspeed.cli.tables", "fitspeed.trial.faults",
           "fitspeed.trial.validation", "fitspeed.trial.measurement", "fitspeed.reproduce.experiment", "fitspeed.core.sequential",
           "fitspeed.search.decider", "fitspeed.search.factorial"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
