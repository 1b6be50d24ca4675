"""fitspeed: make Keras training fast, and prove it with numbers.

The public surface is what this module exports; everything else may change.
Importing fitspeed never imports keras or a backend.
"""

from __future__ import annotations

from importlib import metadata

from fitspeed.apply_knobs import apply as apply
from fitspeed.apply_knobs import compile_kwargs as compile_kwargs
from fitspeed.config import TrialConfig as TrialConfig
from fitspeed.errors import UserError as UserError
from fitspeed.knobs import KNOBS as KNOBS
from fitspeed.record import TrialSpec as TrialSpec
from fitspeed.runner import run_trial as run_trial

try:
    __version__ = metadata.version("fitspeed")
except metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "KNOBS",
    "TrialConfig",
    "TrialSpec",
    "UserError",
    "__version__",
    "apply",
    "compile_kwargs",
    "run_trial",
]
