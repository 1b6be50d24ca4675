"""Errors a user can cause, each one clear sentence.

Every message says what was expected, what was received and how to fix it.
The CLI prints them without a traceback and exits with status 2.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a workload, a knob, a value, a file."""

    exit_code = 2


class KnobError(UserError):
    """An unknown knob, a bad value, or a knob the backend cannot do."""


class WorkloadError(UserError):
    """An unknown workload, or a `module:function` that does not import."""


class DataError(UserError):
    """Data that is missing, corrupt, or does not fit the model."""
