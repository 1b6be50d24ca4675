"""`fitspeed show` and `fitspeed report`: a finished study or results file again, as terminal tables or an HTML page.

Neither runs a trial: both read what `tune`, `measure` or `compare` stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from fitspeed.cli.options import JsonOpt, StorageOpt
from fitspeed.console import tune_tables
from fitspeed.console.terminal import err, out


def show(
    study: Annotated[Optional[str], typer.Argument(help="Study name [default: the newest].")] = None,
    storage: StorageOpt = "sqlite:///fitspeed.db",
    as_json: JsonOpt = False,
) -> None:
    """Show a study's table again, without running anything."""
    from fitspeed.report.html import load_summary

    summary = load_summary(None, study, storage)  # the page's summary: with each crash's stderr tail
    if as_json:
        print(json.dumps(summary.to_dict(), indent=2, default=str))
    else:
        tune_tables.print_tune(out, summary)


def report(
    source: Annotated[Optional[str], typer.Argument(help="A results file from measure/compare (.jsonl) or a study database (.db) [default: the newest study in --storage].")] = None,
    study: Annotated[Optional[str], typer.Option("--study", help="Study name [default: the newest].")] = None,
    storage: StorageOpt = "sqlite:///fitspeed.db",
    workload: Annotated[Optional[str], typer.Option("--workload", help="For a results file with several workloads: which one, as 'MODEL · DATA' [default: the newest].")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for index.html, the PNG plots and report.json.")] = Path("fitspeed-report"),
    show_tables: Annotated[bool, typer.Option("--tables", help="Also print the terminal tables (`fitspeed show` prints them alone).")] = False,
) -> None:
    """Write an offline HTML report with plots, from a study or a results file."""
    from fitspeed.report.html import load_summary, write

    summary = load_summary(source, study, storage, workload)
    for note in summary.read_notes:
        err.print(note, highlight=False)
    if show_tables:
        tune_tables.print_tune(out, summary)
    else:  # the tables were tune's output already (run.sh printed each twice): the verdict, once
        best = summary.best
        out.print(f"verdict: {best.verdict}" + (f" — {best.why}" if best.why else ""), highlight=False)
    written = write(summary, out_dir)
    drawn = sum(path is not None for path in written.plots.values())
    err.print(f"report written to {written.index} ({drawn} of {len(written.plots)} plots)", highlight=False)
