"""`fitspeed measure`: one configuration measured in a fresh process, its record appended and shown."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from fitspeed.cli import tables
from fitspeed.cli.console import err, interruptible, out
from fitspeed.cli.options import (
    DEFAULT_RESULTS,
    AugmentOpt,
    CommandArgs,
    DataOpt,
    FitOpt,
    JsonOpt,
    MemoryOpt,
    MonitorOpt,
    RepeatsOpt,
    ResultsOpt,
    SeedOpt,
    SetOpt,
    StepsOpt,
    Target,
    TimeoutOpt,
)
from fitspeed.cli.workload import check_user_error, data_ref, profile_dir, training_script, trial_spec
from fitspeed.core.errors import UserError
from fitspeed.core.record import Status
from fitspeed.measure import results


def measure(
    workload: Target = None,
    command: CommandArgs = None,
    fit: FitOpt = 1,
    data: DataOpt = None,
    augment: AugmentOpt = False,
    set_: SetOpt = None,
    steps: StepsOpt = None,
    repeats: RepeatsOpt = 5,
    seed: SeedOpt = 0,
    timeout: TimeoutOpt = 900.0,
    memory_limit: MemoryOpt = None,
    results_path: ResultsOpt = DEFAULT_RESULTS,
    as_json: JsonOpt = False,
    monitor: MonitorOpt = False,
    profile: Annotated[bool, typer.Option("--profile", help="Trace one more timed window with the backend's profiler (into fitspeed-profiles/); print its top 10 ops and how to open it.")] = False,
) -> None:
    """Measure training speed of one configuration in a fresh process."""
    import dataclasses

    from fitspeed.measure.runner import run_trial

    script = training_script(workload, command, fit, data)
    if script is not None and profile:
        raise UserError("Expected --profile with a built-in or module:function workload. Received it with a "
                        "training command, which fitspeed does not trace yet. Drop --profile.")
    spec = trial_spec(workload or "", data_ref(data, augment), set_ or [], steps, repeats, seed, timeout,
                      memory_limit, script=script)
    spec = dataclasses.replace(spec, monitor=monitor, profile_dir=profile_dir(workload or "") if profile else None)
    workload = spec.model
    results.check_writable(results_path)
    doing = f"measuring {workload} ({spec.config.label()})…"
    if not err.is_terminal:  # no spinner without a terminal: say once that a trial is running
        err.print(f"{doing} in a fresh process; a slow configuration can take minutes", highlight=False)
    with interruptible(), err.status(doing):
        record = run_trial(spec)
    if script is not None and record.user_error:
        results.append(results_path, [record.to_dict()])  # the record keeps the script's traceback and log tail
    check_user_error(record)
    results.append(results_path, [record.to_dict()])
    if as_json:
        print(json.dumps(record.to_dict(), indent=2))
    else:
        tables.print_trials(out, [record], title=f"{workload} · {record.spec.data or 'synthetic'}")
        from fitspeed.cli.convert import rewrite_brief

        if rewrite_brief(record.extra.get("rewrite")):
            out.print(rewrite_brief(record.extra.get("rewrite")), highlight=False)
        if record.extra.get("profile"):
            tables.print_profile(out, record.extra["profile"])
        err.print(f"record appended to {results_path}", highlight=False)
    if record.status != Status.OK:
        raise typer.Exit(1)
