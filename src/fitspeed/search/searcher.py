"""What the phases of a search need of the tuner that runs them (`fitspeed.search.tuner.Tuner`).

The screen, the combination, the sampler and the batch-size sweep are each
a module of their own that takes the tuner as a `Searcher`: named here, so
that none of them imports the tuner, which imports them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial

from fitspeed.core.config import TrialConfig
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import TrialRecord
from fitspeed.search.decider import Ask, Decider
from fitspeed.search.events import OnEvent
from fitspeed.search.guard import GuardVerdict
from fitspeed.search.ledger import Ledger
from fitspeed.search.phase import Phase
from fitspeed.search.settings import TuneSettings
from fitspeed.search.space import Dimension
from fitspeed.search.workers import Busy, Workers


class Searcher(Protocol):
    dims: list[Dimension]
    choices: dict[str, tuple[Any, ...]]
    settings: TuneSettings
    base: TrialConfig
    ledger: Ledger
    decider: Decider
    study: optuna.Study
    workers: Workers
    emit: OnEvent

    def measure(self, config: TrialConfig, phase: Phase, tag: str = "", budgeted: bool = True,
                stop_below: float | None = None, ahead: int = 0) -> TrialRecord | None: ...

    def measure_round(self, asks: Sequence[Ask], first: int = 0, budgeted: bool = True,
                      ahead: int = 0) -> list[TrialRecord | None]: ...

    def measure_round_or_busy(self, asks: Sequence[Ask], first: int = 0) -> list[TrialRecord | Busy | None]: ...

    def measure_or_busy(self, config: TrialConfig, phase: Phase, tag: str = "",
                        stop_below: float | None = None) -> TrialRecord | Busy | None: ...

    def _once(self, unit: str, stored: Callable[[], Any], compute: Callable[[], Any]) -> Any: ...

    def _spent(self, ahead: int = 0) -> bool: ...

    def _config(self, knob_values: dict[str, Any], quiet: bool = False) -> TrialConfig | None: ...

    def guarded(self, config: TrialConfig) -> GuardVerdict | None: ...

    def _challenge(self, incumbent: TrialConfig, config: TrialConfig, purpose: Phase) -> TrialConfig: ...

    def _settle(self, phases: tuple[Phase, ...] | None = None) -> None: ...

    def _run(self, trial: optuna.Trial, config: TrialConfig, phase: Phase,
             stop_below: float | None = None) -> TrialRecord: ...

    def _run_orphan(self, trial: FrozenTrial) -> None: ...

    def _distributions(self) -> dict[str, BaseDistribution]: ...

    def _attrs(self, config: TrialConfig, phase: Phase, key: str, stop_below: float | None) -> JSONObject: ...

    def _params(self, config: TrialConfig) -> JSONObject: ...
