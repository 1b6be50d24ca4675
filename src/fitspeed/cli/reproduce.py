"""`fitspeed reproduce NAME`: run one article's experiment, print its table, write its folder.

The experiment itself is `fitspeed.reproduce`; this module parses the options,
shows progress, and prints the table (`fitspeed.reproduce.output.table`) with rich.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from fitspeed.cli.interrupt import interruptible
from fitspeed.console.terminal import err, out
from fitspeed.core.errors import UserError
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import Metrics, Status, TrialRecord


def reproduce(
    name: Annotated[str, typer.Argument(help="steps-per-execution, input-pipeline, batch-and-workers, precision-and-determinism or channels-first (articles 000-004).")],
    quick: Annotated[bool, typer.Option("--quick", help="Cut-down models, steps and epochs: minutes on a 2-core CPU [default: the article's sizes, meant for a GPU].")] = False,
    data: Annotated[Optional[str], typer.Option("--data", help="npz:PATH with x, y (and x_test, y_test), or synthetic [default: CIFAR-10 from the Keras cache if there, else class templates].")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for NAME/results.json, table.md, chart.png and index.html.")] = Path("fitspeed-reproductions"),
    tiny: Annotated[bool, typer.Option("--tiny", hidden=True, help="Seconds, for the tests.")] = False,
) -> None:
    """Rerun an article's experiment here: a table beside the article's figures, with accuracy, and a chart."""
    with interruptible():
        run_article(name, size="tiny" if tiny else "quick" if quick else "full", data=data, out=out_dir, say=err,
                    console=out)


def print_table(console: Console, summary: JSONObject) -> None:
    from fitspeed.reproduce import output

    shown = output.table(summary)
    grid = Table(title=f"{summary['name']} (article {summary['article']})", header_style="bold")
    for header in shown["headers"]:
        grid.add_column(header, overflow="fold")
    for cells, baseline in zip(shown["rows"], shown["baselines"]):
        grid.add_row(*cells, style="dim" if baseline else None)
    console.print(grid)
    for line in output.context_lines(summary):
        console.print(f"- {line}", highlight=False)


def run_article(name: str, *, size: str, data: str | None, out: Path, say: Console, console: Console) -> Path:
    """Run experiment `name` at `size` ("tiny", "quick" or "full"); return its folder."""
    from fitspeed.measure.runner import run_trial
    from fitspeed.reproduce import articles, output  # the experiments, and numpy: not for `fitspeed --help`
    from fitspeed.reproduce.data import choose, images_folder
    from fitspeed.reproduce.experiment import run, trial_count

    if name not in articles.PLANS:
        raise UserError(f"Unknown reproduction {name!r}. Expected one of: {', '.join(articles.PLANS)}.")
    started = time.perf_counter()
    folder = out / name
    train, test = articles.SAMPLES[size]
    choice = choose(data, articles.SHAPES[size], train, test, folder, seed=0)
    ref = choice.ref
    described = f"{choice.name}, {choice.train} training and {choice.test} held-out samples"
    if name == "input-pipeline":
        ref = f"images:{images_folder(choice, folder)}"
        described += ", written as JPEG files (every tenth held out)"
    plan = articles.PLANS[name][1](size, ref)
    total = trial_count(plan)
    say.print(f"{name} ({size}): {total} trials, each in a fresh process, on {described}", highlight=False)

    done = [0]

    def landed(row: str, record: TrialRecord) -> None:
        done[0] += 1
        metrics = record.metrics or Metrics()
        accuracy = metrics.val_accuracy
        say.print(f"  [{done[0]}/{total}] {row}: {record.status}"
                  + (f", {metrics.samples_per_s.center:,.0f} samples/s" if metrics.samples_per_s else "")
                  + (f", accuracy {100 * accuracy:.1f}%" if accuracy is not None else "")
                  + (f" ({record.reason})" if record.status != Status.OK else "")
                  + f" [{record.wall_s or 0:.0f} s]", highlight=False, markup=False)

    results = run(plan, described, run_trial=run_trial, on_trial=landed)
    summary, written = output.write(results, out)
    print_table(console, summary)
    say.print(f"{name}: {time.perf_counter() - started:.0f} s in all; results.json, table.md and chart.png in "
              f"{written}, page {out / 'index.html'}", highlight=False)
    return written
