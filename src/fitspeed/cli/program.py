"""The `fitspeed` program: its typer app, every command registered in the order `--help` lists them, and `main`.

Each command lives in the module named after it (`fitspeed.cli.tune` holds
`tune`); `show` and `report` share `report`, `workloads` and `knobs` share
`catalog`. The options several commands take are declared once in
`fitspeed.cli.options`; the workload options of measure, compare, tune, scale
and doctor once as a group, in `fitspeed.cli.workload`.
"""

from __future__ import annotations

import sys

import typer
from rich.text import Text

from fitspeed.cli import catalog, compare, convert, doctor, make_images, measure, monitor, report, reproduce, run, scale, tune
from fitspeed.console.terminal import err
from fitspeed.core.errors import UserError

app = typer.Typer(
    help="Make Keras training fast, and prove it with numbers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's own help: it wraps at word boundaries and never crops an example, shows no `<bool>` beside a
    # flag, and prints '[default: …]' in a help text as written (rich's markup read it as a tag)
    rich_markup_mode=None,
)
# a training command's own options go to it untouched
_PASS_THROUGH = {"allow_interspersed_args": False, "ignore_unknown_options": True}

app.command()(measure.measure)
app.command()(compare.compare)
app.command()(tune.tune)
app.command()(scale.scale)
app.command()(report.show)
app.command()(report.report)
app.command(context_settings=_PASS_THROUGH)(monitor.monitor)
app.command()(catalog.workloads)
app.command()(catalog.knobs)
app.command()(doctor.doctor)
app.command("run", context_settings=_PASS_THROUGH)(run.run_script)
app.command()(convert.convert)
app.command("reproduce")(reproduce.reproduce)
app.command("make-images")(make_images.make_images)


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (`timeout`, a closed session) ends a command like Ctrl-C: the trial stopped, the rest saved."""
    raise KeyboardInterrupt


def main() -> None:
    import signal

    signal.signal(signal.SIGTERM, _terminate)
    try:
        app()
    except UserError as error:
        err.print(Text.assemble(("Error:", "bold red"), f" {error}"), highlight=False)
        sys.exit(error.exit_code)
