"""`fitspeed tune`: the search for the fastest configuration that trains the same, its verification and best.json."""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Optional, Protocol

import typer

from fitspeed.cli import tables, tune_tables
from fitspeed.cli.console import err, interruptible, out
from fitspeed.cli.options import JsonOpt, MonitorOpt, parse_duration, parse_int_list
from fitspeed.cli.workload import Workload, workload_command
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.record import brief_reason
from fitspeed.core.sequential import level

if TYPE_CHECKING:
    from fitspeed.core.record import TrialRecord
    from fitspeed.search.decision import Decision
    from fitspeed.search.events import TuneEvent


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
) -> None:
    """Find the fastest configuration that trains the same, and verify it."""
    from fitspeed.core import best_json
    from fitspeed.search.summary import study_data, study_summary
    from fitspeed.search.tuner import Tuner, TuneSettings

    script = workload.script
    if script is not None:
        study = study or f"{workload.model}-{(script['sha256'] or 'command')[:8]}"
        if batch_sizes:
            raise UserError(f"Expected no --batch-sizes with a training command: its batch size is its own. Received: "
                            f"--batch-sizes {batch_sizes}. Drop it, and vary the size through the script's arguments.")
    settings = TuneSettings(
        script=script, model=workload.model, data=workload.data, base=workload.base, trials=trials,
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
    from fitspeed.cli.console import TerminalProgress
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


class Shown(Protocol):
    """Where a tune's progress goes: a bar (a new one for each stage), its description, and a line per event
    (`fitspeed.api.progress`)."""

    def start(self, total: int | None, what: str) -> None: ...
    def describe(self, text: str) -> None: ...
    def line(self, text: str, advance: bool = False) -> None: ...


AFTER_SEARCH = "after the search: the lean step (outside --trials) and the verification"  # the second stage's bar


def tune_events(shown: Shown, base: TrialConfig) -> Callable[[TuneEvent], None]:
    """What a tune shows of each event as it happens: the same lines from the CLI and from `fitspeed.tune`.

    The bar the caller started counts the search's trial processes against
    `--trials` (a batch-size sweep's are not counted). The lean step and the
    verification come after it, their trials as many as their pairs need (the
    lean step's are outside `--trials`, and in the simulator about as many as
    the search's; a verification may run past the share it was left): the
    first of their trials ends that bar where it stands and starts one with no
    total, so that no bar runs past its end (a notebook's showed 125/40).
    """
    from fitspeed.search.events import (
        DecisionMade,
        GuardChecked,
        LeanStarted,
        Note,
        TrialFinished,
        TrialStarted,
        VerificationStarted,
    )
    from fitspeed.search.phase import Phase

    searching = True  # until a trial of the lean step or the verification starts

    def event(event: TuneEvent) -> None:
        nonlocal searching
        match event:
            case LeanStarted(config, knobs, pairs, share):
                if searching:
                    searching = False
                    shown.start(None, AFTER_SEARCH)
                shown.line(lean_line(config, knobs, pairs, share))
            case TrialStarted(phase, config):
                if searching and phase in (Phase.LEAN, Phase.VERIFY):
                    searching = False
                    shown.start(None, AFTER_SEARCH)
                shown.describe(f"{phase}: {config.label()}")
            case TrialFinished(phase, record):
                shown.line(trial_line(phase, record, base), advance=phase != Phase.BATCH_SIZE)
            case GuardChecked(config, verdict):
                shown.line(f"{'guard':>9} {config.label()}: {'ok' if verdict.ok else 'rejected'}, {verdict.reason}")
            case VerificationStarted(config, pairs):
                shown.describe(f"verifying {config.label()} in up to {pairs} pairs")
            case DecisionMade(decision):
                shown.line(decision_line(decision))
            case Note(text):
                shown.line(text)

    return event


def lean_line(config: TrialConfig, knobs: tuple[str, ...], pairs: int, share: float) -> str:
    """The line that starts the lean step (`search.events.LeanStarted`).

    >>> lean_line(TrialConfig(jit_compile=True, inter_op_threads=1), ("inter_op_threads=1",), 24, 1.02)
    'lean step: inter_op_threads=1 has no evidence of its own in the answer jit_compile=True inter_op_threads=1; it is taken out and timed against the answer in up to 24 pairs, and stays only where it is worth 1.02x or more'

    Several are timed in one pass, each round timing the answer once for all of them:

    >>> lean_line(TrialConfig(jit_compile=True, inter_op_threads=1), ("jit_compile=True", "inter_op_threads=1"), 24,
    ...           1.02).split("; ")[1]
    'each is taken out and timed against the answer in up to 24 pairs, in rounds that time the answer once for all, and stays only where it is worth 1.02x or more'
    """
    one = len(knobs) == 1
    return (f"lean step: {', '.join(knobs)} {'has' if one else 'have'} no evidence of {'its' if one else 'their'} own "
            f"in the answer {config.label()}; {'it is' if one else 'each is'} taken out and timed against the answer "
            f"in up to {pairs} pairs{'' if one else ', in rounds that time the answer once for all'}, and stays only "
            f"where it is worth {share:.2f}x or more")


def trial_line(phase: str, record: TrialRecord, base: TrialConfig) -> str:
    """The line `tune` prints for a finished trial; the baseline's failure on the user's input ends the command.

    That failure (data the model cannot take, a builder that raises) leaves
    nothing to compare against. A configuration the search made that fails
    on the user's input is a failed trial like any other: printed, and the
    search goes on without it.
    """
    if record.user_error and record.spec.config == base:
        raise UserError(record.reason or "")
    speed = record.throughput
    return (f"{phase:>9} {record.spec.config.label()}: {record.status}"
            + (f", {speed:,.0f} samples/s" if speed else f" ({brief_reason(record.reason)})")
            + tables.monitor_brief(record.monitor))


def decision_line(decision: Decision) -> str:
    """The line `tune` prints for a decision as it is made, with why it stopped where the decider says.

    >>> from fitspeed.search.decision import Decision
    >>> decision_line(Decision.from_dict({"id": "s1", "purpose": "sampler", "a": {}, "b": {"prefetch": 2},
    ...     "verdict": "not confirmed", "pairs": [], "why": "the budget ran out"}))
    '  decided prefetch=2 against defaults: not confirmed after 0 pair(s) (the budget ran out)'

    A pair whose incumbent's trial failed is named, never dropped in silence:

    >>> decision_line(Decision.from_dict({"id": "v1", "purpose": "verify", "a": {}, "b": {"jit_compile": True},
    ...     "verdict": "not confirmed", "pairs": [[100.0, 120.0]], "lost_pairs": [{"pair": 1, "order": "AB",
    ...     "status": "crashed", "reason": "SIGKILL"}]}))
    '  decided jit_compile=True against defaults: not confirmed after 1 pair(s) (1 more lost: the trial of defaults crashed: SIGKILL)'

    A polish or model step, or a head-to-head choice, keeps B when its estimate leans B's way: kept or not, and
    the estimate (its 2% interval would say nothing):

    >>> decision_line(Decision.from_dict({"id": "m1", "purpose": "model", "a": {}, "b": {"jit_compile": True},
    ...     "verdict": "slower", "pairs": [[100.0, 96.0]] * 3, "ratio": 0.96, "low": 0.955, "high": 0.965,
    ...     "confidence": 0.02}))
    '   fitted jit_compile=True against defaults: not kept after 3 pair(s), estimate 0.96×'
    """
    from fitspeed.search.phase import Phase

    if decision.purpose == Phase.SCREEN:  # one trial against its round's baseline (else the screen's): no pairs
        return (f"{'screened':>9} {decision.b_label}: {decision.verdict}, its trial at "
                f"{decision.ratio or 0:.2f}× the baseline timed beside it")
    if decision.purpose == Phase.RACE:  # one pair that only orders the candidates
        ratio = f"{decision.ratio:.2f}× in one pair" if decision.ratio else "no pair"
        return f"{'raced':>9} {decision.b_label} against {decision.a_label}: {ratio}"
    interval = (f", {level(decision.confidence)} CI {decision.low:.2f}–{decision.high:.2f}"
                if decision.low is not None and decision.high is not None else "")
    verdict = str(decision.verdict)
    if decision.is_choice:  # kept when the estimate leans its way: a choice, with no interval to speak of
        verdict = decision.kept
        interval = f", estimate {decision.ratio:.2f}×" if decision.ratio is not None else ""
    said = {Phase.BUNDLE: "bundled", Phase.POLISH: "polished", Phase.MODEL: "fitted"}.get(decision.purpose, "decided")
    first = decision.lost_pairs[0] if decision.lost_pairs else None
    lost = (f" ({len(decision.lost_pairs)} more lost: the trial of "
            f"{decision.b_label if first.get('side') == 'b' else decision.a_label} "
            f"{first.get('status', 'failed')}: {first.get('reason')})" if first else "")
    return (f"{said:>9} {decision.b_label} against {decision.a_label}: {verdict} after "
            f"{len(decision.pairs)} pair(s){lost}{interval}" + (f" ({decision.why})" if decision.why else ""))
