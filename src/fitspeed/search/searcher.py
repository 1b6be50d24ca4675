"""What a phase of a search may ask of the tuner that runs it, and what it may record (`fitspeed.search.tuner.Tuner`).

The screen, the combination, the sampler, the model, the polish, the
batch-size sweep and the lean are each a module of their own that takes the
tuner as a `Searcher`: named here, so that none of them imports the tuner,
which imports them. This is the whole contract: a phase uses these public
names and no other member of the tuner (a test reads the phases to keep it
so), and the tuner's private members may change under it.

What a phase may ask (it never rebinds these):
- `settings`, `base`, `dims`, `choices`: the search's settings, the user's
  baseline configuration, the knobs searched and the sampler's joint space;
- `spent`: whether the budget has room for more trials;
- `config_of`: knob values as a configuration this search can measure;
- `guarded`: a configuration's numerics guard verdict (run once, stored);
- `ledger`, `study`: what the study holds (records, decisions, incumbents).

What a phase may record, each through the tuner, so that every worker sees it:
- a measurement: `measure`, `measure_round`, `measure_round_or_busy`;
  the sampler's own trials: `ask`, `claim_asked`, `run_claimed`; a dead
  worker's trial: `run_orphan`;
- a decision: `challenge` (fresh pairs, then the guard, then the chain of
  incumbents), or `decider` for a decision that moves no incumbent;
- a unit of work done by one worker while the others wait: `once`, `settle`,
  and `workers.lock` for a step no two workers may take at once;
- an event for the user: `emit`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import optuna
from optuna.trial import FrozenTrial

from fitspeed.core.config import TrialConfig
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
    """The tuner as a phase sees it (the module's docstring says what each part is for)."""

    @property
    def settings(self) -> TuneSettings:
        """The search's settings (`fitspeed.search.settings.TuneSettings`)."""

    @property
    def base(self) -> TrialConfig:
        """The user's baseline configuration: every change is a change from it."""

    @property
    def dims(self) -> list[Dimension]:
        """The knobs this search covers, with their values (a data function's input knobs once it loaded)."""

    @property
    def choices(self) -> dict[str, tuple[Any, ...]]:
        """The sampler's joint space: each searched knob's values."""

    @property
    def ledger(self) -> Ledger:
        """The study's budget, records, decisions and chain of incumbents (`fitspeed.search.ledger.Ledger`)."""

    @property
    def decider(self) -> Decider:
        """Paired decisions (`fitspeed.search.decider.Decider`): to decide or store one that moves no incumbent."""

    @property
    def study(self) -> optuna.Study:
        """The Optuna study every worker shares."""

    @property
    def workers(self) -> Workers:
        """This worker and the others on the study (`fitspeed.search.workers.Workers`): its lock, what is waiting."""

    @property
    def emit(self) -> OnEvent:
        """Where a phase's events go (`fitspeed.search.events`)."""

    def spent(self, ahead: int = 0) -> bool:
        """The search's budget is used up, or would be after `ahead` more trials."""

    def config_of(self, knob_values: dict[str, Any], quiet: bool = False) -> TrialConfig | None:
        """`knob_values` as a configuration this search can measure, or None (its reason said once, unless
        `quiet`)."""

    def guarded(self, config: TrialConfig) -> GuardVerdict | None:
        """`config`'s numerics guard verdict (stored), or None where it changes no numerics."""

    def measure(self, config: TrialConfig, phase: Phase, tag: str = "", budgeted: bool = True,
                stop_below: float | None = None, ahead: int = 0) -> TrialRecord | None:
        """Measure `config` once (per `tag`), or its stored record; None when out of budget."""

    def measure_round(self, asks: Sequence[Ask], first: int = 0, budgeted: bool = True,
                      ahead: int = 0) -> list[TrialRecord | None]:
        """Measure `asks` as one round, `first`'s turn first: a record per ask, None where the budget has no
        room."""

    def measure_round_or_busy(self, asks: Sequence[Ask], first: int = 0) -> list[TrialRecord | Busy | None]:
        """As `measure_round`, but where another worker measures an ask, each such ask's `Busy` and nothing
        claimed."""

    def ask(self) -> optuna.Trial:
        """Optuna's sampler's next trial over `choices`, not yet claimed."""

    def claim_asked(self, trial: optuna.Trial, config: TrialConfig, phase: Phase,
                    stop_below: float | None = None) -> FrozenTrial | optuna.Trial | Busy | None:
        """Claim `config`'s measurement as the asked `trial`: its finished trial, `Busy`, or `trial`, to run."""

    def run_claimed(self, trial: optuna.Trial, config: TrialConfig, phase: Phase,
                    stop_below: float | None = None) -> TrialRecord:
        """Run `config` as the claimed `trial`; its record, stored in the study."""

    def run_orphan(self, trial: FrozenTrial) -> None:
        """Measure a dead worker's trial that Optuna enqueued again (once)."""

    def challenge(self, incumbent: TrialConfig, config: TrialConfig, purpose: Phase) -> TrialConfig:
        """`config` if fresh pairs find it faster than `incumbent` and it passes the guard; else the incumbent
        after the decision (`incumbent`, or another worker's winner)."""

    def once(self, unit: str, stored: Callable[[], Any], compute: Callable[[], Any]) -> Any:
        """`stored()` once it is there; else `compute()`, by this worker if it takes `unit` first."""

    def settle(self, phases: tuple[Phase, ...] | None = None) -> None:
        """Wait until no other worker measures (in `phases`) or holds a unit; run what dead ones left."""
