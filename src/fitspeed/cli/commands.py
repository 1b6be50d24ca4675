"""The `fitspeed` command line.

Heavy libraries (keras, tensorflow, matplotlib) are never imported here:
trials run in child processes, so `fitspeed --help` answers at once.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.text import Text

from fitspeed.cli import tables
from fitspeed.core.config import TrialConfig
from fitspeed.core.data_ref import DataRef, is_callable_ref
from fitspeed.core.errors import UserError
from fitspeed.core.knobs import check_backend_installed
from fitspeed.core.record import TrialSpec, brief_reason, throughput
from fitspeed.core.sequential import level
from fitspeed.core.workloads import MODELS, check_model, is_saved_model
from fitspeed.measure import results

app = typer.Typer(
    help="Make Keras training fast, and prove it with numbers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's own help: it wraps at word boundaries and never crops an example, shows no `<bool>` beside a
    # flag, and prints '[default: …]' in a help text as written (rich's markup read it as a tag)
    rich_markup_mode=None,
)
# markup off: a user's text ('[/]' in a name, pip install 'fitspeed[jax]') prints as it is
out = Console(markup=False)
err = Console(stderr=True, markup=False)

DEFAULT_RESULTS = Path("fitspeed-results.jsonl")

Workload = Annotated[str, typer.Argument(help="Built-in model (see `fitspeed workloads`), module:function or a saved model.keras.")]
DataOpt = Annotated[Optional[str], typer.Option("--data", help="synthetic, cifar10, fashion_mnist, npz:PATH or module:function.")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", help="A knob as name=value; repeat for more (see `fitspeed knobs`).")]
StepsOpt = Annotated[Optional[int], typer.Option("--steps", help="Timed steps per repeat, a multiple of steps_per_execution [default: about 1 s of training].")]
RepeatsOpt = Annotated[int, typer.Option("--repeats", help="Timed repeats per trial.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for data, weights and shuffling.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds before a trial is stopped and recorded as timeout.")]
MemoryOpt = Annotated[Optional[str], typer.Option("--memory-limit", help="Resident memory limit per trial, such as 4GiB or 2048 (MiB); over it the trial is recorded as oom.")]
ResultsOpt = Annotated[Path, typer.Option("--results", help="JSON-lines file the records are appended to.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the machine-readable record(s) instead of tables.")]
AugmentOpt = Annotated[bool, typer.Option("--augment", help="With --data images:DIR: random crop and flip per example (same as --data images+augment:DIR).")]
Target = Annotated[Optional[str], typer.Argument(help="Built-in model (see `fitspeed workloads`), module:function or a saved model.keras; or, after `--`, your training command, run unchanged: -- python train.py --epochs 15.", show_default=False)]
CommandArgs = Annotated[Optional[list[str]], typer.Argument(help="The rest of the training command after `--`.", show_default=False)]
FitOpt = Annotated[int, typer.Option("--fit", help="With a training command: which of its fit() calls to time (1 is the first).")]
MonitorOpt = Annotated[bool, typer.Option("--monitor", help="Sample the trial's process tree and the GPUs; each record gains mean/peak CPU, threads, device use and power.")]

_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_MEMORY_UNITS = {"": 1.0, "k": 1 / 1024, "kb": 1 / 1024, "kib": 1 / 1024, "m": 1.0, "mb": 1.0, "mib": 1.0,
                 "g": 1024.0, "gb": 1024.0, "gib": 1024.0, "t": 1024.0**2, "tb": 1024.0**2, "tib": 1024.0**2}
_TIME_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def _quantity(text: str, units: dict[str, float], option: str, examples: str) -> float:
    """A number with an optional unit, scaled by `units`; a UserError otherwise."""
    match = _QUANTITY.match(text)
    if not match or match.group(2).lower() not in units:
        raise UserError(f"Expected {option} as {examples}. Received: {text!r}.")
    value = float(match.group(1)) * units[match.group(2).lower()]
    if value <= 0:  # a zero budget or limit cannot measure even the baseline
        raise UserError(f"Expected {option} to be more than zero, as {examples}. Received: {text!r}.")
    return value


def parse_memory(text: str | None) -> int | None:
    """MiB from '2048', '512MiB', '4GiB' or '1.5G'.

    >>> parse_memory("4GiB"), parse_memory("1.5G"), parse_memory("2048")
    (4096, 1536, 2048)
    """
    if text is None:
        return None
    mib = _quantity(text, _MEMORY_UNITS, "--memory-limit", "a size such as 4GiB, 512MiB or 2048 (MiB)")
    return max(1, int(mib))


def parse_duration(text: str | None) -> float | None:
    """Seconds from '90', '90s', '20m' or '1.5h'.

    >>> parse_duration("20m"), parse_duration("1.5h")
    (1200.0, 5400.0)
    """
    if text is None:
        return None
    return _quantity(text, _TIME_UNITS, "--time", "a duration such as 90s, 20m or 1h")


def _data(text: str | None, augment: bool) -> str | None:
    """`--data` (with `--augment`) as its canonical reference; None for the model's default."""
    if text is None and not augment:
        return None
    return str(DataRef.parse(text, augment=augment))


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
    script: dict[str, Any] | None = None,
) -> TrialSpec:
    config = TrialConfig.from_assignments(assignments, base=base)
    check_backend_installed(config.backend)
    if script is not None:  # a training command names itself, and loads its own data
        from fitspeed.measure import training_command

        model, data = training_command.label(script), training_command.DATA
    else:
        model = check_model(workload)
    return TrialSpec(model=model, data=data, config=config, steps=steps, repeats=repeats, seed=seed,
                     timeout_s=timeout, memory_limit_mb=parse_memory(memory_limit), script=script)


@contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C: the running trial is stopped, what finished is saved; say so and exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        err.print("Interrupted. Every finished trial is saved; run the same command again to resume.")
        raise typer.Exit(130) from None


def _script(workload: str | None, command: list[str] | None, fit: int, data: str | None = None) -> dict[str, Any] | None:
    """The training command after `--` (`fitspeed.measure.training_command`), or None for a built-in or module:function workload.

    Click hands the first word after `--` to WORKLOAD and the rest to COMMAND; a
    single word is a command when it names a file or a path (`-- ./train.sh`).
    """
    if workload is None:
        raise UserError("Expected a workload (a built-in model or module:function) or a training command after "
                        "`--`, such as `fitspeed measure -- python train.py`. Received neither.")
    if not command and (workload in MODELS or is_callable_ref(workload) or is_saved_model(workload)
                        or not ("/" in workload or workload.endswith((".py", ".sh")) or Path(workload).is_file())):
        return None
    if data is not None:
        raise UserError(f"Expected no --data with a training command: the script loads its own. Received: --data "
                        f"{data}. Drop --data, or point your script at that data with its own arguments.")
    from fitspeed.measure import training_command

    return training_command.describe([workload, *(command or [])], fit)


def _check_user_error(record: dict[str, Any]) -> None:
    """A record that failed on the user's input ends the command with its message."""
    if record.get("user_error"):
        raise UserError(record["reason"])


@app.command()
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

    script = _script(workload, command, fit, data)
    if script is not None and profile:
        raise UserError("Expected --profile with a built-in or module:function workload. Received it with a "
                        "training command, which fitspeed does not trace yet. Drop --profile.")
    spec = _spec(workload or "", _data(data, augment), set_ or [], steps, repeats, seed, timeout, memory_limit,
                 script=script)
    spec = dataclasses.replace(spec, monitor=monitor, profile_dir=_profile_dir(workload or "") if profile else None)
    workload = spec.model
    results.check_writable(results_path)
    doing = f"measuring {workload} ({spec.config.label()})…"
    if not err.is_terminal:  # no spinner without a terminal: say once that a trial is running
        err.print(f"{doing} in a fresh process; a slow configuration can take minutes", highlight=False)
    with _interruptible(), err.status(doing):
        record = run_trial(spec)
    if script is not None and record.get("user_error"):
        results.append(results_path, [record])  # the record keeps the script's traceback and log tail
    _check_user_error(record)
    results.append(results_path, [record])
    if as_json:
        print(json.dumps(record, indent=2))
    else:
        tables.print_trials(out, [record], title=f"{workload} · {record['spec']['data'] or 'synthetic'}")
        from fitspeed.cli.convert import rewrite_brief

        if rewrite_brief(record.get("rewrite")):
            out.print(rewrite_brief(record.get("rewrite")), highlight=False)
        if record.get("profile"):
            tables.print_profile(out, record["profile"])
        err.print(f"record appended to {results_path}", highlight=False)
    if record["status"] != "ok":
        raise typer.Exit(1)


def _profile_dir(workload: str) -> str:
    """A fresh folder for one profile: fitspeed-profiles/WORKLOAD-YYYYMMDD-HHMMSS."""
    import time

    name = re.sub(r"[^\w.-]+", "_", workload).strip("_") or "workload"
    return str(Path("fitspeed-profiles", f"{name}-{time.strftime('%Y%m%d-%H%M%S')}").absolute())


@app.command()
def compare(
    workload: Target = None,
    command: CommandArgs = None,
    fit: FitOpt = 1,
    a: Annotated[Optional[list[str]], typer.Option("--a", help="A knob of configuration A as name=value; repeat for more.")] = None,
    b: Annotated[Optional[list[str]], typer.Option("--b", help="A knob of configuration B as name=value; repeat for more.")] = None,
    pairs: Annotated[int, typer.Option("--pairs", min=2, max=100, help="Interleaved A/B pairs, each trial a fresh process (an interval needs 2).")] = 5,
    confidence: Annotated[float, typer.Option("--confidence", min=0.5, max=0.9999, help="Confidence level of the interval on B/A.")] = 0.95,
    until_width: Annotated[Optional[float], typer.Option("--until-width", help="Add pairs past --pairs until the interval on B/A is this narrow (0.06 is ±3%), up to --max-pairs.")] = None,
    max_pairs: Annotated[int, typer.Option("--max-pairs", min=2, max=200, help="The most pairs --until-width may run.")] = 40,
    statistic: Annotated[str, typer.Option("--statistic", help="A trial's samples/s: median (of its windows) or best (its fastest window, steadier on a busy machine).")] = "median",
    data: DataOpt = None,
    augment: AugmentOpt = False,
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
    from fitspeed.measure.comparison import check, interleave

    check(statistic, until_width)
    base = TrialConfig.from_assignments(set_ or [])
    script = _script(workload, command, fit, data)
    data = _data(data, augment)
    spec_a = _spec(workload or "", data, a or [], steps, repeats, seed, timeout, memory_limit, base, script)
    spec_b = _spec(workload or "", data, b or [], steps, repeats, seed, timeout, memory_limit, base, script)
    results.check_writable(results_path)

    from rich.progress import Progress

    most = max(pairs, max_pairs) if until_width is not None else pairs
    with _interruptible(), Progress(console=err, transient=True) as progress:
        task = progress.add_task("comparing", total=2 * most)

        def landed(arm: str, pair: int, record: dict[str, Any]) -> None:
            _check_user_error(record)
            results.append(results_path, [record])
            progress.advance(task)
            progress.update(task, description=f"pair {pair + 1}/{most}: {arm} {record['status']}")

        comparison = interleave(spec_a, spec_b, pairs, on_trial=landed, confidence=confidence,
                                statistic=statistic, until_width=until_width, max_pairs=max_pairs)
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


def _int_list(text: str | None, option: str) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise UserError(f"Expected {option} as positive integers separated by commas, such as "
                        f"32,64,128. Received: {text!r}.")
    return values


@app.command()
def tune(
    workload: Target = None,
    command: CommandArgs = None,
    fit: FitOpt = 1,
    data: DataOpt = None,
    augment: AugmentOpt = False,
    set_: SetOpt = None,
    trials: Annotated[Optional[int], typer.Option("--trials", min=1, help="Trial processes in the study, every decision's pairs and the verification's first included (a rerun continues to this total) [default: what this search space needs: the screen, five decisions and the verification; 40 for tiny].")] = None,
    time_budget: Annotated[Optional[str], typer.Option("--time", help="Search time for this run, such as 20m.")] = None,
    study: Annotated[Optional[str], typer.Option("--study", help="Study name [default: WORKLOAD-DATA]; an existing one resumes.")] = None,
    storage: Annotated[str, typer.Option("--storage", help="Optuna storage: sqlite:///FILE, postgresql://USER:PW@HOST/DB (many machines), or journal:PATH (a file on a shared disk). Workers started on one study share its search (docs/distributed.md).")] = "sqlite:///fitspeed.db",
    heartbeat: Annotated[int, typer.Option("--heartbeat", min=1, help="Seconds between a worker's heartbeats; one silent for twice this is taken as dead and its trial is measured again.")] = 30,
    allow_shared_host: Annotated[bool, typer.Option("--allow-shared-host", help="Run even if another worker measures on this host and device (their speeds then include each other's load).")] = False,
    space: Annotated[Optional[list[str]], typer.Option("--space", help="Replace a knob's values to try, as knob=v1,v2; repeat for more.")] = None,
    knobs_only: Annotated[Optional[str], typer.Option("--knobs", help="Search only these knobs, such as steps_per_execution,precision.")] = None,
    batch_sizes: Annotated[Optional[str], typer.Option("--batch-sizes", help="Also measure throughput at these batch sizes, such as 32,64,128,256 (changes the recipe).")] = None,
    pairs: Annotated[int, typer.Option("--pairs", min=2, max=100, help="The verification against the defaults looks at up to twice this many fresh pairs; a search step at up to 3 (or twice this, if fewer).")] = 5,
    steps: StepsOpt = None,
    repeats: RepeatsOpt = 3,
    seed: SeedOpt = 0,
    timeout: TimeoutOpt = 900.0,
    memory_limit: MemoryOpt = None,
    best_path: Annotated[Path, typer.Option("--best", help="Where to write the best configuration and its snippet.")] = Path("best.json"),
    as_json: JsonOpt = False,
    monitor: MonitorOpt = False,
) -> None:
    """Find the fastest configuration that trains the same, and verify it."""
    from fitspeed.search import best_json
    from fitspeed.search.events import (
        DecisionMade,
        GuardChecked,
        Note,
        TrialFinished,
        TrialStarted,
        TuneEvent,
        VerificationStarted,
    )
    from fitspeed.search.summary import study_data, study_summary
    from fitspeed.search.tuner import Tuner, TuneSettings

    base = TrialConfig.from_assignments(set_ or [])
    check_backend_installed(base.backend)
    script = _script(workload, command, fit, data)
    if script is not None:
        from fitspeed.measure import training_command

        workload, data = training_command.label(script), training_command.DATA
        study = study or f"{workload}-{(script['sha256'] or 'command')[:8]}"
        if batch_sizes:
            raise UserError(f"Expected no --batch-sizes with a training command: its batch size is its own. Received: "
                            f"--batch-sizes {batch_sizes}. Drop it, and vary the size through the script's arguments.")
    settings = TuneSettings(
        script=script,
        model=(workload or "") if script else check_model(workload or ""),
        data=data if script else _data(data, augment), base=base, trials=trials,
        time_s=parse_duration(time_budget), study=study, storage=storage, steps=steps, repeats=repeats,
        seed=seed, timeout_s=timeout, memory_limit_mb=parse_memory(memory_limit), pairs=pairs,
        space=tuple(space or ()), knobs=tuple((knobs_only or "").split(",")),
        batch_sizes=_int_list(batch_sizes, "--batch-sizes"), monitor=monitor, heartbeat_s=heartbeat,
    )
    from fitspeed.machine import host_lock
    from rich.progress import Progress

    with _interruptible(), host_lock.hold(host_lock.device(), f"study {settings.study_name}", allow_shared_host), \
            Progress(console=err, transient=True) as progress:
        task = progress.add_task("tuning", total=trials)

        def event(event: TuneEvent) -> None:
            match event:
                case TrialStarted(phase, config):
                    progress.update(task, description=f"{phase}: {config.label()}")
                case TrialFinished(phase, record):
                    if phase != "batch_size":
                        progress.advance(task)
                    speed = throughput(record)
                    label = TrialConfig.from_dict(record["spec"]["knobs"]).label()
                    _check_user_error(record)
                    err.print(f"{phase:>9} {label}: {record['status']}"
                              + (f", {speed:,.0f} samples/s" if speed else f" ({brief_reason(record.get('reason'))})")
                              + tables.monitor_brief(record.get("monitor")),
                              highlight=False)
                case GuardChecked(config, verdict):
                    err.print(f"{'guard':>9} {config.label()}: {'ok' if verdict['ok'] else 'rejected'}, "
                              f"{verdict['reason']}", highlight=False)
                case VerificationStarted(config, pairs):
                    progress.update(task, description=f"verifying {config.label()} in up to {pairs} pairs")
                case DecisionMade(decision):
                    interval = (f", {level(decision.get('confidence', 0.95))} CI "
                                f"{decision['low']:.2f}–{decision['high']:.2f}"
                                if decision.get("low") is not None else "")
                    if decision["purpose"] == "screen":  # one trial against the baseline's median: no pairs
                        err.print(f"{'screened':>9} {decision['b_label']}: {decision['verdict']}, its trial at "
                                  f"{decision['ratio']:.2f}× the median of the screen's baseline trials", highlight=False)
                        return
                    if decision["purpose"] == "race":  # one pair that only orders the candidates
                        ratio = f"{decision['ratio']:.2f}× in one pair" if decision.get("ratio") else "no pair"
                        err.print(f"{'raced':>9} {decision['b_label']} against {decision['a_label']}: {ratio}",
                                  highlight=False)
                        return
                    said = "bundled" if decision["purpose"] == "bundle" else "decided"
                    err.print(f"{said:>9} {decision['b_label']} against {decision['a_label']}: "
                              f"{decision['verdict']} after {len(decision['pairs'])} pair(s){interval}",
                              highlight=False)
                case Note(text):
                    err.print(text, highlight=False)

        tuner = Tuner(settings, on_event=event)
        progress.update(task, total=tuner.ledger.trials)
        tuner.run()
        summary = study_summary(study_data(tuner.study))
    kept = best_json.set_aside(best_path, summary["study"])
    best_json.write(best_path, summary)
    if kept is not None:
        err.print(f"{best_path} held another study's answer: it is kept as {kept}", highlight=False)
    if as_json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        tables.print_tune(out, summary)
        from fitspeed.search.storages import shown

        err.print(f"study {settings.study_name} in {shown(storage)}; best configuration and snippet in {best_path}",
                  highlight=False)


@app.command()
def scale(
    workload: Target = None,
    command: CommandArgs = None,
    fit: FitOpt = 1,
    devices: Annotated[str, typer.Option("--devices", help="Device counts to measure against 1 device, such as 1,2,4.")] = "1,2",
    pairs: Annotated[int, typer.Option("--pairs", min=2, max=100, help="Interleaved pairs (1 device, N devices) per count.")] = 5,
    statistic: Annotated[str, typer.Option("--statistic", help="A trial's samples/s: median (of its windows) or best (its fastest window).")] = "median",
    tolerance: Annotated[float, typer.Option("--tolerance", min=0.0, help="Numerics guard: allowed relative change of the final loss.")] = 0.10,
    data: DataOpt = None,
    augment: AugmentOpt = False,
    set_: SetOpt = None,
    steps: StepsOpt = None,
    repeats: RepeatsOpt = 3,
    seed: SeedOpt = 0,
    timeout: TimeoutOpt = 900.0,
    memory_limit: MemoryOpt = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for scale.json (every trial) and scaling.png.")] = Path("fitspeed-scale"),
    as_json: JsonOpt = False,
) -> None:
    """Data-parallel scaling over 1..N devices: speed-up, efficiency and loss, against 1 device in pairs."""
    from fitspeed.cli import scale as scaling

    script = _script(workload, command, fit, data)
    spec = _spec(workload or "", _data(data, augment), set_ or [], steps, repeats, seed, timeout, memory_limit,
                 script=script)
    scaling.run(spec, _int_list(devices, "--devices"), pairs=pairs, statistic=statistic, tolerance=tolerance,
                out_dir=out_dir, as_json=as_json, out=out, err=err)


@app.command()
def show(
    study: Annotated[Optional[str], typer.Argument(help="Study name [default: the newest].")] = None,
    storage: Annotated[str, typer.Option("--storage", help="Optuna storage URL.")] = "sqlite:///fitspeed.db",
    as_json: JsonOpt = False,
) -> None:
    """Show a study's table again, without running anything."""
    from fitspeed.search.studies import load_study
    from fitspeed.search.summary import study_data, study_summary

    summary = study_summary(study_data(load_study(study, storage)))
    if as_json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        tables.print_tune(out, summary)


@app.command()
def report(
    source: Annotated[Optional[str], typer.Argument(help="A results file from measure/compare (.jsonl) or a study database (.db) [default: the newest study in --storage].")] = None,
    study: Annotated[Optional[str], typer.Option("--study", help="Study name [default: the newest].")] = None,
    storage: Annotated[str, typer.Option("--storage", help="Optuna storage URL.")] = "sqlite:///fitspeed.db",
    workload: Annotated[Optional[str], typer.Option("--workload", help="For a results file with several workloads: which one, as 'MODEL · DATA' [default: the newest].")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for index.html, the PNG plots and report.json.")] = Path("fitspeed-report"),
    show_tables: Annotated[bool, typer.Option("--tables", help="Also print the terminal tables (`fitspeed show` prints them alone).")] = False,
) -> None:
    """Write an offline HTML report with plots, from a study or a results file."""
    from fitspeed.report.html import load_summary, write

    summary = load_summary(source, study, storage, workload)
    for note in summary["read_notes"]:
        err.print(note, highlight=False)
    if show_tables:
        tables.print_tune(out, summary)
    else:  # the tables were tune's output already (run.sh printed each twice): the verdict, once
        best = summary["best"]
        out.print(f"verdict: {best['verdict']}" + (f" — {best['why']}" if best.get("why") else ""), highlight=False)
    written = write(summary, out_dir)
    drawn = sum(path is not None for path in written.plots.values())
    err.print(f"report written to {written.index} ({drawn} of {len(written.plots)} plots)", highlight=False)


@app.command(context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
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


@app.command()
def workloads() -> None:
    """List the built-in models (with parameter counts) and data sources."""
    tables.print_workloads(out)


@app.command()
def knobs() -> None:
    """List every knob, its values, and which backends support it."""
    tables.print_knobs(out)


@app.command()
def doctor(
    workload: Target = None,
    command: CommandArgs = None,
    fit: FitOpt = 1,
    data: DataOpt = None,
    augment: AugmentOpt = False,
    set_: SetOpt = None,
    steps: StepsOpt = None,
    repeats: RepeatsOpt = 3,
    epochs: Annotated[int, typer.Option("--epochs", min=2, help="Epochs of the fit() timed at its edges.")] = 4,
    fixes: Annotated[bool, typer.Option("--fixes/--no-fixes", help="Try the candidate fixes and measure their gain.")] = True,
    model: Annotated[bool, typer.Option("--model", help="Check the model instead: sizes, RNN kernels, XLA blockers, output dtype; FLOPs against the measured matmul rate; the slowest layers.")] = False,
    seed: SeedOpt = 0,
    timeout: TimeoutOpt = 900.0,
    results_path: ResultsOpt = DEFAULT_RESULTS,
    as_json: JsonOpt = False,
) -> None:
    """Is training input-bound? Input alone, training alone, both; epoch-edge stalls; ranked fixes. With --model: the model's own findings."""
    from fitspeed.cli.doctor import print_diagnosis
    from fitspeed.measure.doctor import diagnose

    script = _script(workload, command, fit, data)
    data = _data(data, augment)
    spec = _spec(workload or "", data, set_ or [], steps, repeats, seed, timeout, None, script=script)
    workload = spec.model
    results.check_writable(results_path)
    if model:  # one trial in mode "model" (fitspeed.trial.model_check)
        import dataclasses

        from fitspeed.cli.model_check import print_model_check
        from fitspeed.measure.runner import run_trial

        spec = dataclasses.replace(spec, mode="model", profile_dir=_profile_dir(workload))
        with _interruptible(), err.status(f"checking {workload}…"):
            record = run_trial(spec)
        _check_user_error(record)
        results.append(results_path, [record])
        print(json.dumps(record, indent=2)) if as_json else print_model_check(out, record)
        raise typer.Exit(0 if record["status"] == "ok" else 1)

    def landed(name: str, record: dict[str, Any]) -> None:
        _check_user_error(record)
        results.append(results_path, [record])
        metrics = record.get("metrics") or {}
        detail = (f"{metrics['ms_per_step']:.1f} ms per step" if "ms_per_step" in metrics
                  else f"{metrics.get('lost_s', 0):.2f} s lost at epoch edges" if "lost_s" in metrics
                  else record.get("reason"))
        err.print(f"{name:>9}: {record['status']}, {detail}", highlight=False)

    with _interruptible(), err.status(f"diagnosing {workload}…"):
        diagnosis = diagnose(spec.model, spec.data, spec.config, steps=steps, repeats=repeats, epochs=epochs,
                             seed=seed, timeout_s=timeout, try_fixes=fixes, on_trial=landed, script=script)
    summary = diagnosis.summary()
    if as_json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print_diagnosis(out, summary)


@app.command("run", context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
def run_script(
    config: Annotated[Path, typer.Argument(help="A best.json written by `fitspeed tune`.")],
    command: Annotated[list[str], typer.Argument(help="Your training command after `--`, such as -- python train.py --epochs 15.", show_default=False)],
    seed: Annotated[int, typer.Option("--seed", help="Seed set at keras import when the configuration has deterministic=true (give it before CONFIG); otherwise the run keeps its own randomness.")] = 0,
    force: Annotated[bool, typer.Option("--force", help="Say nothing when best.json was tuned on another workload or another version of the script (give it before CONFIG).")] = False,
) -> None:
    """Run your training command to its end with a configuration applied, unchanged; exit with its status."""
    from fitspeed.measure import training_command

    chosen, best = training_command.load_config(config)
    command = command[1:] if command[:1] == ["--"] else command  # Click keeps `--` after the first argument here
    err.print(f"running `{' '.join(command)}` with {chosen.label()}", highlight=False)
    raise typer.Exit(training_command.run(chosen, command, seed=seed, best=best, force=force))


@app.command()
def convert(
    model: Annotated[Path, typer.Argument(help="A saved model.keras.", show_default=False)],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to save the converted model (.keras).", show_default=False)],
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="data_format=... or precision=... (backend=, onednn= say where the check runs); repeat for more.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite -o if it exists.")] = False,
    unsafe: Annotated[bool, typer.Option("--unsafe", help="Load Python code the file holds (a Lambda layer's function): only for a file you trust, such as one you saved yourself.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Rewrite a saved model for data_format and precision: same weights, outputs checked equal, then saved."""
    from fitspeed.cli import convert as conversion

    conversion.run(out, err, model, output, set_ or [], force, as_json, unsafe=unsafe)


@app.command("reproduce")
def reproduce_command(
    name: Annotated[str, typer.Argument(help="steps-per-execution, input-pipeline, batch-and-workers, precision-and-determinism or channels-first (articles 000-004).")],
    quick: Annotated[bool, typer.Option("--quick", help="Cut-down models, steps and epochs: minutes on a 2-core CPU [default: the article's sizes, meant for a GPU].")] = False,
    data: Annotated[Optional[str], typer.Option("--data", help="npz:PATH with x, y (and x_test, y_test), or synthetic [default: CIFAR-10 from the Keras cache if there, else class templates].")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for NAME/results.json, table.md, chart.png and index.html.")] = Path("fitspeed-reproductions"),
    tiny: Annotated[bool, typer.Option("--tiny", hidden=True, help="Seconds, for the tests.")] = False,
) -> None:
    """Rerun an article's experiment here: a table beside the article's figures, with accuracy, and a chart."""
    from fitspeed.cli.reproduce import reproduce

    with _interruptible():
        reproduce(name, size="tiny" if tiny else "quick" if quick else "full", data=data, out=out_dir, say=err,
                  console=out)


@app.command("make-images")
def make_images(
    folder: Annotated[Path, typer.Argument(help="Folder to write CLASS/NNNNNN.jpg files into.")],
    count: Annotated[int, typer.Option("--count", min=1, help="Images to write.")] = 2000,
    size: Annotated[int, typer.Option("--size", min=8, help="Height and width in pixels.")] = 32,
    source: Annotated[str, typer.Option("--source", help="synthetic or cifar10 (downloads once).")] = "synthetic",
    seed: SeedOpt = 0,
) -> None:
    """Write a folder of JPEG images in class subfolders, for --data images:DIR."""
    from fitspeed.cli.make_images import write

    with err.status(f"writing {count} images…"):
        written = write(folder, count, size, source, seed)
    out.print(f"wrote {sum(written.values())} images of {size}x{size} in {len(written)} classes to {folder}; "
              f"use --data images:{folder}", highlight=False)


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

