"""One model over every timed trial of the study: the configuration it predicts fastest, challenged in fresh pairs.

The screen, the combination, the sampler and the polish each judge a step on
that step's own trials, and a knob of the best configuration is often lost
there: in a bundle beside a member that clashed, or to one starved pair. This
phase reads every timed trial of the study at once (the screen's, every
decision's pairs, the joint estimates' runs, the sampler's): log samples/s,
fitted as additive in each knob value's main effect and in every interaction
of two values of different knobs (a Gaussian linear model with prior sd
MAIN_SD on a main effect and PAIR_SD on an interaction, so an interaction
the trials do not show stays near none; Huber weights, so a load burst moves
the fit little; the trial noise from the study's pooled noise).

The fit's argmax over the space, among configurations made only of changes
that ran at least once, holding no set of changes whose every trial failed
(two changes that fail together fail beside a third) and no change that
failed the numerics guard, is challenged against the incumbent in fresh pairs
(`Tuner.challenge`, with the polish's design) when the fit puts it at least
MIN_PREDICTED ahead. The fit only chooses what to challenge: the pairs, the
guard, the lean step and the verification decide, on trials of their own.

It runs after the sampler, on the polish's reserve of the budget, and before
the polish. On 600 development worlds of the simulator (522 where something
helps; docs/benchmarks/search_simulation.md, thirteenth round) the incumbent
handed to the lean step went from 0.909 to 0.929 of the best speed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialRecord
from fitspeed.search import studies
from fitspeed.search.ledger import BUDGET_FREE
from fitspeed.search.phase import Phase
from fitspeed.search.polish import MIN_PAIRS
from fitspeed.search.searcher import Searcher

Item = tuple[str, Any]  # one change: a knob and its value
Observation = tuple[frozenset[Item], float]  # a timed trial's changes from the baseline, and its log samples/s

MAIN_SD = 0.5  # prior sd of a knob value's log effect: a factor of 0.37-2.7 is one sd
PAIR_SD = 0.15  # prior sd of the log interaction of two values of different knobs
HUBER_K = 1.5  # Huber's constant, in trial sds
PASSES = 6  # of iteratively reweighted least squares
MIN_PREDICTED = 1.03  # the fit's argmax is challenged when it puts it this far ahead of the incumbent
MIN_TRIALS = 4  # timed trials the fit needs before it proposes anything
MOST_CONFIGS = 50_000  # a larger space of measured changes is not enumerated: no proposal
DEFAULT_TRIAL_SD = 0.15  # the trial noise on a log figure where the study has no pooled noise yet


@dataclass(frozen=True)
class Fit:
    """The fitted log speed: an intercept, then a log effect for each of `items` and each of `pairs` (indices)."""

    items: tuple[Item, ...]
    pairs: tuple[tuple[int, int], ...]
    effects: np.ndarray
    intercept: float

    def features(self, rows: Iterable[Iterable[Item]]) -> np.ndarray:
        """One row a configuration: 1 for each change it holds, then 1 for each pair of them it holds both of."""
        index = {item: i for i, item in enumerate(self.items)}
        listed = [list(r) for r in rows]
        main = np.zeros((len(listed), len(self.items)))
        for row, changes in enumerate(listed):
            for item in changes:
                if item in index:
                    main[row, index[item]] = 1.0
        if not self.pairs:
            return main
        first, second = (np.array(side) for side in zip(*self.pairs, strict=True))
        return np.hstack([main, main[:, first] * main[:, second]])

    def predict(self, rows: Iterable[Iterable[Item]]) -> np.ndarray:
        """The fitted log samples/s of configurations with these changes."""
        return self.intercept + self.features(rows) @ self.effects

    def effect(self, item: Item) -> float:
        """One change's fitted main effect, as a ratio."""
        return math.exp(float(self.effects[self.items.index(item)]))


def fit(observations: list[Observation], sd: float) -> Fit:
    """The Huber-weighted posterior mean of the log-speed model over `observations`, trial noise `sd`.

    >>> base, spe, jit = frozenset(), frozenset({("steps_per_execution", 64)}), frozenset({("jit_compile", True)})
    >>> both = spe | jit
    >>> seen = [(base, 0.0), (spe, math.log(1.5)), (jit, math.log(1.1)), (both, math.log(1.65)), (base, 0.0)]
    >>> model = fit(seen, 0.05)
    >>> round(model.effect(("steps_per_execution", 64)), 1), round(model.effect(("jit_compile", True)), 1)
    (1.5, 1.1)
    """
    items = tuple(sorted({item for changes, _ in observations for item in changes}, key=repr))
    pairs = tuple((i, j) for i, j in itertools.combinations(range(len(items)), 2) if items[i][0] != items[j][0])
    shell = Fit(items, pairs, np.zeros(len(items) + len(pairs)), 0.0)
    x = np.hstack([np.ones((len(observations), 1)), shell.features(c for c, _ in observations)])
    y = np.array([v for _, v in observations])
    prior = np.diag([0.0] + [MAIN_SD ** -2] * len(items) + [PAIR_SD ** -2] * len(pairs))
    weights = np.ones(len(y))
    beta = np.zeros(x.shape[1])
    for _ in range(PASSES):
        precision = (x.T * weights) @ x / sd ** 2 + prior
        beta = np.linalg.lstsq(precision, (x.T * weights) @ y / sd ** 2, rcond=None)[0]
        residual = np.abs(y - x @ beta) / sd
        weights = np.where(residual <= HUBER_K, 1.0, HUBER_K / np.maximum(residual, 1e-12))
    return Fit(items, pairs, beta[1:], float(beta[0]))


def changes_of(config: TrialConfig, base: TrialConfig, knobs: Iterable[str]) -> frozenset[Item]:
    """The changes `config` makes to `base` among `knobs`.

    >>> sorted(changes_of(TrialConfig(jit_compile=True), TrialConfig(), ["jit_compile", "precision"]))
    [('jit_compile', True)]
    """
    return frozenset((k, getattr(config, k)) for k in knobs if getattr(config, k) != getattr(base, k))


def ranked(model: Fit, limit: int = MOST_CONFIGS) -> list[tuple[frozenset[Item], float]]:
    """Every combination of the fitted changes (at most one value a knob), the fastest predicted first;
    none where there are more than `limit`.

    >>> model = fit([(frozenset(), 0.0), (frozenset({("jit_compile", True)}), 0.3)], 0.05)
    >>> [(sorted(c), round(v, 2)) for c, v in ranked(model)]
    [([('jit_compile', True)], 0.3), ([], 0.0)]
    """
    values: dict[str, list[Any]] = {}
    for knob, value in model.items:
        values.setdefault(knob, []).append(value)
    knobs = sorted(values)
    options = [[None, *values[k]] for k in knobs]
    if math.prod(len(o) for o in options) > limit:
        return []
    combos = [frozenset((k, v) for k, v in zip(knobs, combo, strict=True) if v is not None)
              for combo in itertools.product(*options)]
    predicted = model.predict(combos)
    order = np.argsort(-predicted, kind="stable")
    return [(combos[i], float(predicted[i])) for i in order]


class Model:
    """The model phase of one tuner's search."""

    def __init__(self, tuner: Searcher) -> None:
        self.tuner = tuner

    def observations(self) -> tuple[list[Observation], set[frozenset[Item]]]:
        """Every timed trial of the search (the study's first, a cold start, left out), and the sets of
        changes whose every trial failed."""
        knobs = list(self.tuner.choices)
        base = self.tuner.base
        seen: list[Observation] = []
        failed: set[frozenset[Item]] = set()
        for trial in sorted(studies.measured(self.tuner.study).values(), key=lambda t: t.number)[1:]:
            if trial.user_attrs.get("phase") in BUDGET_FREE:
                continue
            config = TrialConfig.from_dict(trial.user_attrs["config"])
            if any(v != getattr(base, k) for k, v in config.to_dict().items() if k not in knobs):
                continue  # a knob outside the searched space (a cost-only trial, another batch size)
            changes = changes_of(config, base, knobs)
            speed = TrialRecord.from_dict(trial.user_attrs["record"]).throughput
            if speed:
                seen.append((changes, math.log(speed)))
            else:
                failed.add(changes)
        return seen, failed - {c for c, _ in seen}

    def proposal(self) -> TrialConfig | None:
        """The fit's argmax, where it is at least MIN_PREDICTED ahead of the incumbent; else None."""
        seen, failed = self.observations()
        if len(seen) < MIN_TRIALS:
            return None
        noise = self.tuner.ledger.noise()
        model = fit(seen, max(noise.sd / math.sqrt(2), 0.02) if noise else DEFAULT_TRIAL_SD)
        base, incumbent = self.tuner.base, self.tuner.ledger.incumbent()
        here = float(model.predict([changes_of(incumbent, base, self.tuner.choices)])[0])
        rejected = self.tuner.ledger.rejected()
        for changes, predicted in ranked(model):
            if predicted < here + math.log(MIN_PREDICTED):
                return None
            if any(f <= changes for f in failed) or changes & rejected:
                continue
            config = self.tuner.config_of({**base.to_dict(), **dict(changes)}, quiet=True)
            if config is not None and config != incumbent:
                return config
        return None

    def run(self) -> None:
        """Challenge the fit's argmax against the incumbent in fresh pairs, where the budget pays for a decision."""
        if self.tuner.spent(2 * MIN_PAIRS - 1):
            return
        config = self.proposal()
        if config is not None:
            self.tuner.challenge(self.tuner.ledger.incumbent(), config, Phase.MODEL)
