"""`fitspeed measure`: one configuration measured in a fresh process, its record appended and shown."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from fitspeed.cli.interrupt import interruptible
from fitspeed.cli.options import DEFAULT_RESULTS, JsonOpt, MonitorOpt, ResultsOpt
from fitspeed.cli.workload import check_user_error, profile_dir, workload_command
from fitspeed.console import tables
from fitspeed.console.terminal import err, out
from fitspeed.console.workload import Workload
from fitspeed.core.errors import UserError
from fitspeed.core.record import Status
from fitspeed.measure import results


@workload_command(repeats=5)
def measure(
    workload: Workload,
    results_path: ResultsOpt = DEFAULT_RESULTS,
    as_json: JsonOpt = False,
    monitor: MonitorOpt = False,
    profile: Annotated[bool, typer.Option("--profile", help="Trace one more timed window with the backend's profiler (into fitspeed-profiles/); print its top 10 ops and how to open it.")] = False,
) -> None:
    """Measure training speed of one configuration in a fresh process."""
    import dataclasses

    from fitspeed.measure.runner import run_trial

    if workload.is_script and profile:
        raise UserError("Expected --profile with a built-in or module:function workload. Received it with a "
                        "training command, which fitspeed does not trace yet. Drop --profile.")
    spec = dataclasses.replace(workload.spec(), monitor=monitor,
                               profile_dir=profile_dir(workload.model) if profile else None)
    results.check_writable(results_path)
    doing = f"measuring {workload.model} ({spec.config.label()})…"
    if not err.is_terminal:  # no spinner without a terminal: say once that a trial is running
        err.print(f"{doing} in a fresh process; a slow configuration can take minutes", highlight=False)
    with interruptible(), err.status(doing):
        record = run_trial(spec)
    if workload.is_script and record.user_error:
        results.append(results_path, [record.to_dict()])  # the record keeps the script's traceback and log tail
    check_user_error(record)
    results.append(results_path, [record.to_dict()])
    if as_json:
        print(json.dumps(record.to_dict(), indent=2))
    else:
        tables.print_trials(out, [record], title=f"{workload.model} · {record.spec.data or 'synthetic'}")
        from fitspeed.cli.convert import rewrite_brief

        if rewrite_brief(record.extra.get("rewrite")):
            out.print(rewrite_brief(record.extra.get("rewrite")), highlight=False)
        if record.extra.get("profile"):
            tables.print_profile(out, record.extra["profile"])
        err.print(f"record appended to {results_path}", highlight=False)
    if record.status != Status.OK:
        raise typer.Exit(1)
