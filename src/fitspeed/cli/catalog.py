"""`fitspeed workloads` and `fitspeed knobs`: what fitspeed can measure, and what it can change."""

from __future__ import annotations

from typing import Annotated

import typer

from fitspeed.console import tables
from fitspeed.console.terminal import out


def workloads() -> None:
    """List the built-in models (with parameter counts) and data sources."""
    tables.print_workloads(out)


def knobs(
    all_: Annotated[bool, typer.Option("--all", help="Also what each knob does, each backend's own knobs, and the "
                                                      "Keras options that are not knobs.")] = False,
) -> None:
    """List every knob, its values, and which backends support it."""
    tables.print_knobs(out, full=all_)
