"""Optuna's sampler (TPE) over the joint space, with the rest of the search's budget.

A configuration it finds faster than the incumbent's figure is compared with
the incumbent in fresh pairs (`Tuner.challenge`) before it replaces it. A
configuration that holds a numerics change the guard rejected
(`Ledger.rejected`) is not measured: Optuna is told it failed.
"""

from __future__ import annotations

from optuna.trial import FrozenTrial, TrialState

from fitspeed.core.config import config_key
from fitspeed.search import studies
from fitspeed.search.decider import STOP_SHARE
from fitspeed.search.phase import Phase
from fitspeed.search.searcher import Searcher
from fitspeed.search.workers import Busy

MAX_DUPLICATE_ASKS = 25


class Sampler:
    """The sampler phase of one tuner's search."""

    def __init__(self, tuner: Searcher) -> None:
        self.tuner = tuner

    def run(self) -> None:
        """Optuna's sampler over the joint space; a configuration it finds faster is confirmed in pairs."""
        duplicates = 0
        while not self.tuner.spent() and self.tuner.choices and duplicates < MAX_DUPLICATE_ASKS:
            # a joint configuration far slower than the incumbent (a slow precision, say) is cut short
            figure = self.tuner.ledger.figure(self.tuner.ledger.incumbent())
            stop_below = figure and STOP_SHARE * figure
            left = self.tuner.workers.waiting()  # a dead worker's trial first: Optuna's ask would take it anyway
            if left:
                self.tuner.run_orphan(left[0])
                continue
            with self.tuner.workers.lock.held():  # asking and claiming are one step: no two workers take one config
                if self.tuner.spent() or self.tuner.workers.waiting():
                    continue
                trial = self.tuner.ask()
                config = self.tuner.config_of(knob_values=dict(trial.params))
                if config is None or set(config.to_dict().items()) & self.tuner.ledger.rejected():
                    # a combination the backend cannot do, or one holding a numerics change that failed the guard
                    duplicates += 1
                    self.tuner.study.tell(trial, state=TrialState.FAIL)
                    continue
                key = config_key(config)
                done = studies.measured(self.tuner.study)
                measured_before = [t for k, t in done.items() if k == key or k.startswith(key + "#")]
                claimed = None if measured_before else self.tuner.claim_asked(trial, config, Phase.SAMPLER, stop_below)
            if claimed is None or isinstance(claimed, (Busy, FrozenTrial)):  # alone, or in a decision's pairs
                duplicates += 1
                if isinstance(claimed, Busy):  # another worker measures it right now: its figure, once in
                    self.tuner.measure(config, Phase.SAMPLER)
                value = self.tuner.ledger.figure(config)
                if value is None:
                    self.tuner.study.tell(trial, state=TrialState.FAIL)
                else:
                    self.tuner.study.tell(trial, value)
                continue
            duplicates = 0
            speed = self.tuner.run_claimed(claimed, config, Phase.SAMPLER, stop_below).throughput
            incumbent = self.tuner.ledger.incumbent()
            while True:  # another worker's winner may have replaced the incumbent meanwhile: beat that one
                figure = self.tuner.ledger.figure(incumbent)
                if not (speed and figure and speed > figure * (1 + self.tuner.settings.min_gain)):
                    break
                after = self.tuner.challenge(incumbent, config, Phase.SAMPLER)
                if after in (incumbent, config):
                    break
                incumbent = after
