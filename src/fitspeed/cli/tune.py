"""`fitspeed tune`: the search for the fastest configuration that trains the same, its verification and best.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from fitspeed.cli.interrupt import interruptible
from fitspeed.cli.options import JsonOpt, MonitorOpt
from fitspeed.cli.workload import workload_command
from fitspeed.console import tune_tables
from fitspeed.console.option_values import parse_duration, parse_int_list
from fitspeed.console.terminal import TerminalProgress, err, out
from fitspeed.console.tune_lines import tune_events
from fitspeed.console.workload import Workload
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError


@workload_command(after="set_", through="pairs")
def tune(
    workload: Workload,
    trials: Annotated[Optional[int], typer.Option("--trials", min=1, help="Trial processes in the study, every decision's pairs and the verification's first included; the lean step's pairs and the guard's runs come on top (a rerun continues to this total) [default: what this search space needs: the screen, five decisions and the verification; about 40 for tiny, by what is installed: the run says how many].")] = None,
    time_budget: Annotated[Optional[str], typer.Option("--time", help="Search time for this run, such as 20m.")] = None,
    study: Annotated[Optional[str], typer.Option("--study", help="Study name [default: WORKLOAD-DATA]; an existing one resumes.")] = None,
    storage: Annotated[str, typer.Option("--storage", help="Optuna storage: sqlite:///FILE, postgresql://USER:PW@HOST/DB (many machines), or journal:PATH (a file on a shared disk). Workers started on one study share its search (docs/distributed.md).")] = "sqlite:///fitspeed.db",
    heartbeat: Annotated[int, typer.Option("--heartbeat", min=1, help="Seconds between a worker's heartbeats; one silent for twice this is taken as dead and its trial is measured again.")] = 30,
    allow_shared_host: Annotated[bool, typer.Option("--allow-shared-host", help="Run even if another worker measures on this host and device (their speeds then include each other's load).")] = False,
    space: Annotated[Optional[list[str]], typer.Option("--space", help="Replace a knob's values to try, as knob=v1,v2; repeat for more.")] = None,
    knobs_only: Annotated[Optional[str], typer.Option("--knobs", help="Search only these knobs, such as steps_per_execution,precision.")] = None,
    batch_sizes: Annotated[Optional[str], typer.Option("--batch-sizes", help="Also measure throughput at these batch sizes, such as 32,64,128,256 (changes the recipe).")] = None,
    pairs: Annotated[int, typer.Option("--pairs", min=2, max=100, help="The verification against the defaults looks at up to four times this many fresh pairs; a search step at up to 3 (or twice this, if fewer).")] = 5,
    best_path: Annotated[Path, typer.Option("--best", help="Where to write the best configuration and its snippet.")] = Path("best.json"),
    as_json: JsonOpt = False,
    monitor: MonitorOpt = False,
    guard_margin: Annotated[float, typer.Option("--guard-margin", min=0.0, max=1.0, help="The numerics guard rejects a change of numerics only where its held-out loss is shown worse than the baseline's by more than this share of the baseline's loss; printed in every verdict.")] = 0.01,
    screen_only: Annotated[bool, typer.Option("--screen-only", help="Time each knob once beside the baseline and stop: nothing decided or verified, so best.json keeps the defaults. A --trials too small to decide is refused without it.")] = False,
    allow_batch_callbacks: Annotated[bool, typer.Option("--allow-batch-callbacks", help="With a training command whose callbacks act per batch: try steps_per_execution above 1 anyway; Keras then calls their batch hooks once per execution, N times less often.")] = False,
    processes: Annotated[Optional[int], typer.Option("--processes", min=1, help="Run every trial as this many processes (keras.distribution on JAX: --set backend=jax), each over --set devices=N; the search then tries steps_per_execution and --batch-sizes unless --knobs names more.")] = None,
) -> None:
    """Find the fastest configuration that trains the same, and verify it."""
    from fitspeed.core import best_json
    from fitspeed.search.summary import study_data, study_summary
    from fitspeed.search.tuner import Tuner, TuneSettings

    script = workload.script
    base = over_processes(workload.base, processes, script is not None)
    if script is not None:
        study = study or f"{workload.model}-{(script['sha256'] or 'command')[:8]}"
        if batch_sizes:
            raise UserError(f"Expected no --batch-sizes with a training command: its batch size is its own. Received: "
                            f"--batch-sizes {batch_sizes}. Drop it, and vary the size through the script's arguments.")
    settings = TuneSettings(
        script=script, model=workload.model, data=workload.data, base=base, trials=trials,
        time_s=parse_duration(time_budget), study=study, storage=storage, steps=workload.steps,
        repeats=workload.repeats, seed=workload.seed, timeout_s=workload.timeout_s,
        memory_limit_mb=workload.memory_limit_mb, pairs=pairs,
        space=tuple(space or ()), knobs=tuple((knobs_only or "").split(",")),
        batch_sizes=parse_int_list(batch_sizes, "--batch-sizes"), monitor=monitor, heartbeat_s=heartbeat,
        allow_batch_callbacks=allow_batch_callbacks, screen_only=screen_only, guard_margin=guard_margin,
    )
    if allow_batch_callbacks and workload.is_script:
        err.print("--allow-batch-callbacks: steps_per_execution is tried above 1 even where the script's callbacks "
                  "act per batch; an answer with it calls their batch hooks once per execution, not once per batch",
                  highlight=False)
    from fitspeed.machine import host_lock

    bar = TerminalProgress()
    with interruptible(), host_lock.hold(host_lock.device(), f"study {settings.study_name}", allow_shared_host):
        tuner = Tuner(settings, on_event=tune_events(bar, settings.base))
        bar.start(tuner.ledger.trials, "tuning")
        try:
            tuner.run()
        finally:
            bar.close()
        summary = study_summary(study_data(tuner.study))
    kept = best_json.set_aside(best_path, summary.study)
    best_json.write(best_path, summary)
    if kept is not None:
        err.print(f"{best_path} held another study's answer: it is kept as {kept}", highlight=False)
    if as_json:
        print(json.dumps(summary.to_dict(), indent=2, default=str))
    else:
        tune_tables.print_tune(out, summary)
        from fitspeed.search.storages import shown

        err.print(f"study {settings.study_name} in {shown(storage)}; best configuration and snippet in {best_path}",
                  highlight=False)


def over_processes(base: TrialConfig, processes: int | None, is_script: bool) -> TrialConfig:
    """The baseline with `--processes N`: every trial of the search runs as N processes (the `processes` knob).

    >>> over_processes(TrialConfig(backend="jax"), 2, False).processes, over_processes(TrialConfig(), None, False).processes
    (2, 1)
    >>> over_processes(TrialConfig(backend="jax", processes=4), 2, False)
    Traceback (most recent call last):
    ...
    fitspeed.core.errors.UserError: Expected the process count in --processes only. Received: --processes 2 and --set processes=4. Drop --set processes.
    """
    if processes is None:
        return base
    if base.processes not in (1, processes):
        raise UserError(f"Expected the process count in --processes only. Received: --processes {processes} and "
                        f"--set processes={base.processes}. Drop --set processes.")
    if is_script and processes > 1:
        from fitspeed.measure.processes import SCRIPT_REASON

        raise UserError(f"Expected a built-in or builder model with --processes {processes}: {SCRIPT_REASON}.")
    return base.replace(processes=processes)  # a backend with no multi-process route refuses it in a sentence
