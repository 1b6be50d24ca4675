"""The `fitspeed` command line: the typer app (`program`), and one module per command, named after it.

`options` declares the options several commands take, `console` the two
consoles they write to, `workload` the workload options of the commands that
run one, resolved once to a `Workload` that makes their `TrialSpec`s, and
`tables` draws the terminal tables.

May import every other layer, typer and rich; rich appears in this layer only.
Heavy libraries (keras, tensorflow, matplotlib) are imported only inside the
commands that need them, so `fitspeed --help` answers at once.
"""

from fitspeed.cli.program import app as app
from fitspeed.cli.program import main as main

__all__ = ["app", "main"]
