"""`fitspeed compare`: two configurations in interleaved runs (A B A B …), and B/A with its interval."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from fitspeed.cli.interrupt import interruptible
from fitspeed.cli.options import DEFAULT_RESULTS, JsonOpt, ResultsOpt
from fitspeed.cli.workload import check_user_error, workload_command
from fitspeed.console import tables
from fitspeed.console.terminal import err, out
from fitspeed.console.workload import Workload
from fitspeed.core.record import Status, TrialRecord
from fitspeed.measure import results


@workload_command(after="fit", through="statistic")
def compare(
    workload: Workload,
    a: Annotated[Optional[list[str]], typer.Option("--a", help="A knob of configuration A as name=value; repeat for more.")] = None,
    b: Annotated[Optional[list[str]], typer.Option("--b", help="A knob of configuration B as name=value; repeat for more.")] = None,
    pairs: Annotated[int, typer.Option("--pairs", min=2, max=100, help="Interleaved A/B pairs, each trial a fresh process (an interval needs 2).")] = 5,
    confidence: Annotated[float, typer.Option("--confidence", min=0.5, max=0.9999, help="Confidence level of the interval on B/A.")] = 0.95,
    until_width: Annotated[Optional[float], typer.Option("--until-width", help="Add pairs past --pairs until the interval on B/A is this narrow (0.06 is ±3%), up to --max-pairs.")] = None,
    max_pairs: Annotated[int, typer.Option("--max-pairs", min=2, max=200, help="The most pairs --until-width may run.")] = 40,
    statistic: Annotated[str, typer.Option("--statistic", help="A trial's samples/s: mean (the geometric mean of its windows), median (of its windows) or best (its fastest window).")] = "mean",
    results_path: ResultsOpt = DEFAULT_RESULTS,
    as_json: JsonOpt = False,
) -> None:
    """Compare two configurations in interleaved runs (A B A B …) and give B/A with a 95% CI."""
    from fitspeed.measure.comparison import check, interleave

    check(statistic, until_width)
    spec_a, spec_b = workload.spec(a or []), workload.spec(b or [])
    results.check_writable(results_path)

    from rich.progress import Progress

    most = max(pairs, max_pairs) if until_width is not None else pairs
    with interruptible(), Progress(console=err, transient=True) as progress:
        task = progress.add_task("comparing", total=2 * most)

        def landed(arm: str, record: TrialRecord) -> None:
            check_user_error(record)
            results.append(results_path, [record.to_dict()])
            progress.advance(task)
            progress.update(task, description=f"pair {record.extra['pair'] + 1}/{most}: {arm} {record.status}")

        comparison = interleave(spec_a, spec_b, pairs, on_trial=landed, confidence=confidence,
                                statistic=statistic, until_width=until_width, max_pairs=max_pairs)
    summary = comparison.record()
    results.append(results_path, [summary])
    if as_json:
        trials = [r.to_dict() for pair in comparison.pairs for r in pair]
        print(json.dumps({**summary, "trials": trials}, indent=2))
    else:
        tables.print_comparison(out, comparison)
        err.print(f"records appended to {results_path}", highlight=False)
    if summary["status"] != Status.OK:
        raise typer.Exit(1)
