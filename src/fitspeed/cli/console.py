"""The two consoles every command writes to, and how a command ends on Ctrl-C.

`out` takes the results (tables, `--json`), `err` the progress and the notes,
so that `fitspeed measure ... --json > record.json` keeps only the record.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console

# markup off: a user's text ('[/]' in a name, pip install 'fitspeed[jax]') prints as it is
out = Console(markup=False)
err = Console(stderr=True, markup=False)


@contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C: the running trial is stopped, what finished is saved; say so and exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        err.print("Interrupted. Every finished trial is saved; run the same command again to resume.")
        raise typer.Exit(130) from None
