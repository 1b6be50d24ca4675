"""How a command ends on Ctrl-C."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

from fitspeed.console.terminal import err


@contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C: the running trial is stopped, what finished is saved; say so and exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        err.print("Interrupted. Every finished trial is saved; run the same command again to resume.")
        raise typer.Exit(130) from None
