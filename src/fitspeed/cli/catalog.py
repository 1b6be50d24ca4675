"""`fitspeed workloads` and `fitspeed knobs`: what fitspeed can measure, and what it can change."""

from __future__ import annotations

from fitspeed.cli import tables
from fitspeed.cli.console import out


def workloads() -> None:
    """List the built-in models (with parameter counts) and data sources."""
    tables.print_workloads(out)


def knobs() -> None:
    """List every knob, its values, and which backends support it."""
    tables.print_knobs(out)
