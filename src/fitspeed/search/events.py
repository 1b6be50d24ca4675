"""What the tuner announces while it searches: one small frozen type per event.

`Tuner(settings, on_event=callback)` calls `callback(event)` with one of
these, in the way Optuna's callbacks take `(study, trial)`: the receiver
matches on the type (`match event: case TrialFinished(): ...`), never on a
string.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Union

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialRecord
from fitspeed.search.decision import Decision
from fitspeed.search.guard import GuardVerdict
from fitspeed.search.phase import Phase


@dataclass(frozen=True)
class TrialStarted:
    """A configuration's trial is starting, in `phase` (baseline, sweep, combine, sampler, batch_size, ...)."""

    phase: Phase
    config: TrialConfig


@dataclass(frozen=True)
class TrialFinished:
    """A trial's record has landed in the study."""

    phase: Phase
    record: TrialRecord


@dataclass(frozen=True)
class GuardChecked:
    """The numerics guard's verdict on a configuration that changes numerics."""

    config: TrialConfig
    verdict: GuardVerdict


@dataclass(frozen=True)
class VerificationStarted:
    """The best configuration is being verified against the baseline in `pairs` interleaved pairs."""

    config: TrialConfig
    pairs: int


@dataclass(frozen=True)
class LeanStarted:
    """The lean step begins on `config`: `knobs` ("knob=value") have no evidence of their own, and each is taken
    out and timed against it in up to `pairs` pairs (outside --trials); it stays only where worth `share`x."""

    config: TrialConfig
    knobs: tuple[str, ...]
    pairs: int
    share: float


@dataclass(frozen=True)
class DecisionMade:
    """A paired comparison decided (or ran out of pairs): `decision` holds its pairs, interval and verdict."""

    decision: Decision


@dataclass(frozen=True)
class Note:
    """Something the user should read, in one sentence."""

    text: str


TuneEvent = Union[
    TrialStarted, TrialFinished, GuardChecked, DecisionMade, VerificationStarted, LeanStarted, Note
]
OnEvent = Callable[[TuneEvent], None]
