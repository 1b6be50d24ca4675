"""`fitspeed monitor`: a command, a process or the host sampled to CSV (CPU per core, threads, memory, I/O, GPUs) and a PNG plot."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from fitspeed.console import tables
from fitspeed.console.terminal import err, out
from fitspeed.core.errors import UserError


def monitor(
    command: Annotated[Optional[list[str]], typer.Argument(help="The command to watch, after `--`; without one, sample until Ctrl-C.", show_default=False)] = None,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between samples.")] = 1.0,
    out_path: Annotated[Path, typer.Option("--out", help="CSV to write (one row per sample); the plot goes beside it as .png.")] = Path("fitspeed-monitor.csv"),
    pid: Annotated[Optional[int], typer.Option("--pid", help="Follow this running process and its children instead of starting a command.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
) -> None:
    """Sample CPU per core, threads, memory, I/O and NVIDIA GPUs to CSV and a PNG plot."""
    import shlex

    from fitspeed.machine.sampler import check_interval
    from fitspeed.machine.usage import usage_figures
    from fitspeed.machine.watch import watch

    check_interval(interval)
    if out_path.exists() and not force:  # it may be someone's results: never truncate it unasked
        raise UserError(f"Expected --out to name a new file. Received: {str(out_path)!r}, which exists "
                        "and would be overwritten. Choose another path, or pass --force to overwrite it.")
    what = _short(shlex.join(command)) if command else f"process {pid}" if pid is not None else "the host"
    err.print(f"sampling {what} every {interval:g} s into {out_path}"
              + ("" if command or pid is not None else "; Ctrl-C to stop"), highlight=False)
    watched = watch(command or [], out=out_path, interval_s=interval, pid=pid,
                    say=lambda text: err.print(text, highlight=False, markup=False))
    png, why = None, f"; none taken, the command ended within the first {interval:g} s interval"
    if watched.samples:  # the plot is best effort: the command's exit status comes back whatever happens
        from fitspeed.report.monitor_plot import plot

        try:
            png = plot(out_path, title=f"fitspeed monitor: {what}")
        except Exception as error:  # a full disk, a plotting failure: say so, keep the CSV
            why = f"; the plot could not be drawn ({type(error).__name__}: {error})"
    tables.print_monitor(out, usage_figures(watched.samples, interval), len(watched.samples))
    err.print(f"{len(watched.samples)} samples in {out_path}" + (f", plot in {png}" if png else why),
              highlight=False, markup=False)
    if watched.exit_code:
        raise typer.Exit(watched.exit_code)


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
