"""fitspeed from Python and notebooks: `tune`, `measure` and `compare` on what a session holds in memory.

`fitspeed.api.tuning` runs the CLI's commands on a model, a builder or a
`.keras` path and on numpy arrays or a data function, which
`fitspeed.api.shipping` writes to files for the trial processes;
`fitspeed.api.result` holds the answer and applies it to a model;
`fitspeed.api.progress` shows the trials where the caller is. Importing
this package imports neither keras nor optuna.

What it shares with the command line (the resolved workload, the parsers
of sizes and durations, a tune's lines, the terminal bar and the tables)
lives below both, in `fitspeed.console`; the command line's own package is
never reached from here (scripts/import_graph.py checks it).
"""

from __future__ import annotations

import importlib
import types
from typing import Any

from fitspeed.api.errors import install_hook, said
from fitspeed.api.result import TuneResult as TuneResult
from fitspeed.api.result import load as load
from fitspeed.api.tuning import compare as compare
from fitspeed.api.tuning import measure as measure
from fitspeed.api.tuning import tune as tune

__all__ = ["TuneResult", "compare", "load", "measure", "tune"]


class _CallableModule(types.ModuleType):
    """The package `fitspeed.measure`, callable: `fitspeed.measure(model, x, y)` runs `fitspeed.api.tuning.measure`.

    The public function and the parent-side package share the name
    `fitspeed.measure`; the import system sets `fitspeed.measure` to the
    package whenever it is first imported, so the package itself answers
    the call, and `fitspeed.measure.runner` and friends stay where they are.
    """

    @said
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return measure(*args, **kwargs)


install_hook()
_package = importlib.import_module("fitspeed.measure")
_package.__class__ = _CallableModule
