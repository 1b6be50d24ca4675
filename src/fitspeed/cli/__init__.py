"""The `fitspeed` command line: the typer app (`program`), and one module per command, named after it.

`options` declares the options several commands take, `workload` the
workload options of the commands that run one, resolved once to a `Workload`
(`fitspeed.console.workload`) that makes their `TrialSpec`s, and `interrupt`
how a command ends on Ctrl-C. The consoles they write to, the terminal tables
and a tune's lines are in `fitspeed.console`, which the Python API shares.

May import every other layer, typer and rich; rich appears only here and in
console/. Heavy libraries (keras, tensorflow, matplotlib) are imported only
inside the commands that need them, so `fitspeed --help` answers at once.
"""

from fitspeed.cli.program import app as app
from fitspeed.cli.program import main as main

__all__ = ["app", "main"]
