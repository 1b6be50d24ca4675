"""fitspeed: make Keras training fast, and prove it with numbers.

The public surface is what this module exports; everything else may change.
Importing fitspeed never imports keras or a backend.
"""

from __future__ import annotations

from importlib import metadata

from fitspeed.api import TuneResult as TuneResult
from fitspeed.api import compare as compare
from fitspeed.api import load as load
from fitspeed.api import tune as tune
from fitspeed.core.config import TrialConfig as TrialConfig
from fitspeed.core.errors import UserError as UserError
from fitspeed.core.knobs import KNOBS as KNOBS
from fitspeed.core.record import TrialSpec as TrialSpec
from fitspeed.measure.runner import run_trial as run_trial
from fitspeed.trial.apply import apply as apply
from fitspeed.trial.apply import compile_kwargs as compile_kwargs
from fitspeed.trial.apply import rewrite_model as rewrite_model

try:
    __version__ = metadata.version("fitspeed")
except metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "KNOBS",
    "TrialConfig",
    "TrialSpec",
    "TuneResult",
    "UserError",
    "__version__",
    "apply",
    "compare",
    "compile_kwargs",
    "load",
    "measure",  # the package fitspeed.measure, made callable by fitspeed.api: fitspeed.measure(model, x, y)
    "rewrite_model",
    "run_trial",
    "tune",
]
