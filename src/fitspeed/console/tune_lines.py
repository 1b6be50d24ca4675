"""What a tune shows as it runs: a line for each of its events, the same from `fitspeed tune` and `fitspeed.tune`.

`tune_events` turns the search's typed events (`fitspeed.search.events`)
into calls on a `Shown`: the CLI's `TerminalProgress`, or the progress the
Python API chose for where it runs (`fitspeed.api.progress`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from fitspeed.console import tables
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.record import brief_reason
from fitspeed.core.sequential import level

if TYPE_CHECKING:
    from fitspeed.core.record import TrialRecord
    from fitspeed.search.decision import Decision
    from fitspeed.search.events import TuneEvent


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
