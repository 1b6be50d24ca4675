"""The `fitspeed` command line: the typer app, terminal tables and `make-images`.

May import every other layer, typer and rich; rich appears in this layer only.
Heavy libraries (keras, tensorflow, matplotlib) are imported only inside the
commands that need them, so `fitspeed --help` answers at once.
"""

from fitspeed.cli.commands import app as app
from fitspeed.cli.commands import main as main

__all__ = ["app", "main"]
