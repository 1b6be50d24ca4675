"""The `fitspeed` command line.

Heavy libraries (keras, tensorflow, matplotlib) are never imported here:
trials run in child processes, so `fitspeed --help` answers at once.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from fitspeed import results, tables
from fitspeed.config import TrialConfig
from fitspeed.errors import UserError
from fitspeed.knobs import check_backend_installed
from fitspeed.record import TrialSpec
from fitspeed.workloads import check_data, check_model

app = typer.Typer(
    help="Make Keras training fast, and prove it with numbers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

DEFAULT_RESULTS = Path("fitspeed-results.jsonl")

Workload = Annotated[str, typer.Argument(help="Built-in model (see `fitspeed workloads`) or module:function.")]
DataOpt = Annotated[Optional[str], typer.Option("--data", help="synthetic, cifar10, fashion_mnist, npz:PATH or module:function.")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", help="A knob as name=value; repeat for more (see `fitspeed knobs`).")]
StepsOpt = Annotated[Optional[int], typer.Option("--steps", help="Timed steps per repeat, a multiple of steps_per_execution [default: about 1 s of training].")]
RepeatsOpt = Annotated[int, typer.Option("--repeats", help="Timed repeats per trial.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for data, weights and shuffling.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds before a trial is stopped and recorded as timeout.")]
MemoryOpt = Annotated[Optional[str], typer.Option("--memory-limit", help="Resident memory limit per trial, such as 4GiB or 2048 (MiB); over it the trial is recorded as oom.")]
ResultsOpt = Annotated[Path, typer.Option("--results", help="JSON-lines file the records are appended to.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the machine-readable record(s) instead of tables.")]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def parse_memory(text: str | None) -> int | None:
    """MiB from '2048', '512MiB', '4GiB' or '1.5G'.

    >>> parse_memory("4GiB")
    4096
    """
    if text is None:
        return None
    match = _SIZE.match(text)
    if not match:
        raise UserError(
            f"Expected --memory-limit as a size such as 4GiB, 512MiB or 2048 (MiB). Received: {text!r}."
        )
    number, unit = float(match.group(1)), (match.group(2) or "m").lower()
    scale = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}[unit]
    return max(1, int(number * scale))


def _spec(
    workload: str,
    data: str | None,
    assignments: list[str],
    steps: int | None,
    repeats: int,
    seed: int,
    timeout: float,
    memory_limit: str | None,
    base: TrialConfig | None = None,
) -> TrialSpec:
    config = TrialConfig.from_assignments(assignments, base=base)
    check_backend_installed(config.backend)
    return TrialSpec(
        model=check_model(workload),
        data=check_data(data),
        config=config,
        steps=steps,
        repeats=repeats,
        seed=seed,
        timeout_s=timeout,
        memory_limit_mb=parse_memory(memory_limit),
    )


def _check_user_error(record: dict[str, Any]) -> None:
    """A record that failed on the user's input ends the command with its message."""
    if record.get("user_error"):
        raise UserError(record["reason"])


@app.command()
def measure(
    workload: Workload,
    data: DataOpt = None,
    set_: SetOpt = None,
    steps: StepsOpt = None,
    repeats: RepeatsOpt = 5,
    seed: SeedOpt = 0,
    timeout: TimeoutOpt = 900.0,
    memory_limit: MemoryOpt = None,
    results_path: ResultsOpt = DEFAULT_RESULTS,
    as_json: JsonOpt = False,
) -> None:
    """Measure training speed of one configuration in a fresh process."""
    from fitspeed.runner import run_trial

    spec = _spec(workload, data, set_ or [], steps, repeats, seed, timeout, memory_limit)
    with err.status(f"measuring {workload} ({spec.config.label()})…"):
        record = run_trial(spec)
    _check_user_error(record)
    results.append(results_path, [record])
    if as_json:
        print(json.dumps(record, indent=2))
    else:
        tables.print_trials(out, [record], title=f"{workload} · {record['spec']['data'] or 'synthetic'}")
        err.print(f"record appended to {results_path}", highlight=False)
    if record["status"] != "ok":
        raise typer.Exit(1)


@app.command()
def compare(
    workload: Workload,
    a: Annotated[Optional[list[str]], typer.Option("--a", help="A knob of configuration A as name=value; repeat for more.")] = None,
    b: Annotated[Optional[list[str]], typer.Option("--b", help="A knob of configuration B as name=value; repeat for more.")] = None,
    pairs: Annotated[int, typer.Option("--pairs", min=1, help="Interleaved A/B pairs, each trial a fresh process.")] = 5,
    confidence: Annotated[float, typer.Option("--confidence", min=0.5, max=0.9999, help="Confidence level of the interval on B/A.")] = 0.95,
    data: DataOpt = None,
    set_: SetOpt = None,
    steps: StepsOpt = None,
    repeats: RepeatsOpt = 3,
    seed: SeedOpt = 0,
    timeout: TimeoutOpt = 900.0,
    memory_limit: MemoryOpt = None,
    results_path: ResultsOpt = DEFAULT_RESULTS,
    as_json: JsonOpt = False,
) -> None:
    """Compare two configurations in interleaved runs (A B A B …) and give B/A with a 95% CI."""
    from fitspeed.compare import compare as run_compare

    base = TrialConfig.from_assignments(set_ or [])
    spec_a = _spec(workload, data, a or [], steps, repeats, seed, timeout, memory_limit, base)
    spec_b = _spec(workload, data, b or [], steps, repeats, seed, timeout, memory_limit, base)

    from rich.progress import Progress

    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("comparing", total=2 * pairs)

        def landed(arm: str, pair: int, record: dict[str, Any]) -> None:
            _check_user_error(record)
            results.append(results_path, [record])
            progress.advance(task)
            progress.update(task, description=f"pair {pair + 1}/{pairs}: {arm} {record['status']}")

        comparison = run_compare(spec_a, spec_b, pairs, on_trial=landed, confidence=confidence)
    summary = comparison.record()
    results.append(results_path, [summary])
    if as_json:
        trials = [r for pair in comparison.pairs for r in pair]
        print(json.dumps({**summary, "trials": trials}, indent=2))
    else:
        tables.print_comparison(out, comparison)
        err.print(f"records appended to {results_path}", highlight=False)
    if summary["status"] != "ok":
        raise typer.Exit(1)


@app.command()
def workloads() -> None:
    """List the built-in models (with parameter counts) and data sources."""
    tables.print_workloads(out)


@app.command()
def knobs() -> None:
    """List every knob, its values, and which backends support it."""
    tables.print_knobs(out)


def main() -> None:
    try:
        app()
    except UserError as error:
        err.print(f"[bold red]Error:[/] {error}", highlight=False)
        sys.exit(error.exit_code)
