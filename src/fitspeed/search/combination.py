"""Combination by evidence: the screen's promising changes built, one decision at a time, into an incumbent.

First the (at most MAX_ALONE) changes that screened big, each decided alone
on top of the incumbent; then every other change together as one bundle, and a
bundle that lost taken apart by a joint estimate of its members
(`fitspeed.search.factorial`); then two values of one knob that both
screened well chosen head to head, on top of what the bundle built; what is
still waiting is raced and decided one at a time. Every decision is the tuner's (`Tuner.challenge`: fresh
pairs, then the numerics guard); this module only chooses what to decide,
in what order.
"""

from __future__ import annotations

from typing import Any

from fitspeed.core.backends import backend_of
from fitspeed.core.config import TrialConfig
from fitspeed.core.sequential import Design, Verdict
from fitspeed.search.decider import decision_id
from fitspeed.search.factorial import MAX_FACTORS, design, estimate
from fitspeed.search.guard import numeric_changes
from fitspeed.search.phase import Phase
from fitspeed.search.searcher import Searcher



RACE_ROUNDS = 2  # the changes left are raced on top of a new incumbent at most this often
BIG = 1.25  # a change that screened at this ratio or more is decided alone, before the bundle
MAX_ALONE = 2  # at most this many (a low screen baseline makes every change look big): the rest go in the bundle
# A waiting change joins the bundle when its screen trial came in at this ratio or better: a change the screen put
# below its own round's baseline rides in no bundle (it is tried alone in the polish). 0.9 until lockstep rounds:
# on 1,200 development worlds measured in lockstep (3,000,000 on, --trials 40) 1.0 spent 6.7 trials a study fewer
# (95% CI 4.4-8.9; 7.0 of them in the lean step, which no longer tests passengers screened at 0.90x and 0.98x), for
# the same answers (best speed captured +0.0009, CI -0.0021 to +0.0038; within 3% of the best 53.8% against 52.0%)
# and no false claim in the 172 null worlds either way.
BUNDLE_FLOOR = 1.0
JOINT_KEEP = 0.0  # a change whose joint estimate (log speed) is above this is built on
JOINT_TRIES = 3  # a joint step that loses is decided again without its smallest member, at most this often


class Combination:
    """The combination phase of one tuner's search."""

    def __init__(self, tuner: Searcher) -> None:
        self.tuner = tuner

    def combine(self, promising: list[tuple[TrialConfig, float]], hold: int = 0) -> None:
        """Add each promising change on top of the incumbent; keep it only if fresh pairs say it helps.

        First the (at most MAX_ALONE) changes that screened at BIG or more, in
        the screen's order, each decided on top of the incumbent (one at a time, so that two big
        changes that clash are told apart). Then the rest, and the big ones
        that showed no gain, go on top of the new incumbent together, as one
        bundle; a bundle that lost is taken apart by a joint estimate of its
        members, never by screen rank (`_joint`). A change whose knob the
        incumbent already sets to another value that also screened well (two
        mixed precisions) is then compared head to head with it on top of
        what the bundle built, in a fixed number of pairs (`choose_design`):
        the better estimate stays. The choice comes after the bundle because
        it is the smaller question (two values that both screened big, often
        a few percent apart) and costs 6-10 trials: made first, it spent the
        budget a bundle of several 1.1-1.6x changes needed (on 2,035
        development worlds, choosing after the bundle captured +0.0034 of the
        best speed, se 0.0010), and made on top of the bundle it is asked
        beside the changes the answer holds. What is still waiting after it is raced on top of the
        new incumbent (a change may help only beside another): one fresh pair
        each, which only orders them; the ones whose pair came out ahead are
        then decided in that order, on pairs of their own. A round that
        changed the incumbent races what is left once more on top of it. The
        race leaves `hold` trials of the budget for a later phase (the polish).

        A change judged alone (`Dimension.alone`: turning off oneDNN where
        TensorFlow turned it on) is combined only if its screen trial gained.
        One that was slower, failed or failed the guard is not tried again: a
        joint step that was faster but failed the guard is decided again
        without its numerics change estimated biggest, and a numerics change
        the guard rejected (`Ledger.rejected`) joins no bundle.
        """
        alone = {d.knob for d in self.tuner.dims if d.alone}

        def is_alone(config: TrialConfig) -> bool:
            return bool(alone & set(config.changed()))

        gained = 1 + self.tuner.settings.min_gain
        strong = [c for c, ratio in promising if ratio >= BIG or (is_alone(c) and ratio >= gained)][:MAX_ALONE]
        # a change judged alone joins the bundle when its screen trial gained, though it was not among the strong
        weak = [c for c, ratio in promising if c not in strong and (not is_alone(c) or ratio >= gained)]
        incumbent = self.tuner.base
        again: list[TrialConfig] = []
        alternatives: list[TrialConfig] = []
        for single in strong:
            config = self._on_top(incumbent, single)
            if config is None:  # its knob is set already, to another value that screened well
                alternatives.append(single)
                continue
            if config == incumbent or self.tuner.spent():
                continue
            incumbent, verdict = self._try(incumbent, config)
            if verdict is not None and verdict.is_open():
                again.append(single)
        waiting = again + weak
        incumbent, waiting = self._joint(incumbent, waiting, dict(promising))
        for single in alternatives:  # head to head, once the other strong changes and the bundle are in
            config = self._on_top(incumbent, single, swap=True)
            if config is not None and config != incumbent and not self.tuner.spent():
                incumbent, _ = self._try(incumbent, config, Phase.CHOOSE)
        with self.tuner.ledger.held_back(hold):  # the race leaves `hold` trials for a later phase
            self._race_rounds(incumbent, waiting)

    def _race_rounds(self, incumbent: TrialConfig, waiting: list[TrialConfig]) -> None:
        """Race what is still waiting on top of `incumbent`, and decide those whose pair came out ahead."""
        for _ in range(RACE_ROUNDS):
            if not waiting or self.tuner.spent():
                return
            before = incumbent
            left = []
            for single in self._race(incumbent, waiting):
                config = self._on_top(incumbent, single)
                if config is None or config == incumbent or self.tuner.spent():
                    continue
                incumbent, verdict = self._try(incumbent, config)
                if verdict is not None and verdict.is_open() and incumbent == before:
                    left.append(single)
            waiting = [s for s in waiting if s in left or self._adds(incumbent, s)] \
                if incumbent != before else []

    def _joint(self, incumbent: TrialConfig, waiting: list[TrialConfig],
               screened: dict[TrialConfig, float]) -> tuple[TrialConfig, list[TrialConfig]]:
        """The waiting changes on top of `incumbent`: together as one bundle, then by a joint estimate if it lost.

        Every waiting change that screened at BUNDLE_FLOOR or better (one value
        per knob, its best) goes on top of the incumbent as one bundle: small
        wins (4-10%) are below what three pairs resolve one at a time at a 10%
        trial noise, but four of them together are a 1.2x step that two or
        three pairs decide. One change alone is decided at once (a race pair
        would only order it). A bundle that lost (a member may clash with the
        incumbent or with another) is not halved by screen rank: its members
        are measured together on top of the incumbent in a two-level design
        (`_factorial`), those whose estimated effect is positive are built on,
        decided again on fresh pairs, and the one estimated smallest is left
        out each time that loses, at most JOINT_TRIES times.

        Returns the incumbent after it, and the changes still waiting (raced
        next): none once the joint estimate has judged them. A change that
        rides in a kept bundle was not decided alone: the bundle was, and the
        verification decides the whole answer.
        """
        members = self._members(incumbent, waiting, screened)
        if not members or self.tuner.spent():
            return incumbent, waiting
        if len(members) == 1:
            config = self._on_top(incumbent, members[0])
            return (self._try(incumbent, config)[0] if config and config != incumbent else incumbent), []
        every = {k: v for single in members for k, v in self._changes(single).items()}
        config = self.tuner.config_of(knob_values={**incumbent.to_dict(), **every})
        if config is None or config == incumbent:
            return incumbent, waiting
        after, _ = self._try(incumbent, config, Phase.BUNDLE)
        if after == config:
            return after, [s for s in waiting if self._adds(after, s)]
        if after != incumbent:  # another worker's winner replaced the incumbent meanwhile
            return after, waiting
        members = members[:MAX_FACTORS]
        if self.tuner.spent(len(design(len(members))) + 2):  # the design and a decision's first pair
            return incumbent, waiting
        estimated = self._factorial(incumbent, members)
        if estimated is None:
            return incumbent, waiting
        keep = [m for m, e in sorted(zip(members, estimated, strict=True), key=lambda item: -item[1])
                if e > JOINT_KEEP]
        for _ in range(JOINT_TRIES):
            keep = [m for m in keep if not self._rejected(m)]  # a numerics change that failed the guard is left out
            changes = {k: v for single in keep for k, v in self._changes(single).items()}
            config = self.tuner.config_of(knob_values={**incumbent.to_dict(), **changes}) if keep else None
            if config is None or config == incumbent or self.tuner.spent():
                break
            after, verdict = self._try(incumbent, config, Phase.BUNDLE if len(keep) > 1 else Phase.COMBINE)
            if after != incumbent:  # kept, or another worker's winner replaced the incumbent meanwhile
                return after, []
            numeric = [m for m in keep if numeric_changes(m, self.tuner.base)]
            # faster but not kept: it failed the guard, so its numerics change estimated biggest is left out;
            # else the smallest (the whole bundle's own decision is stored: it is not measured twice)
            keep = [m for m in keep if m is not numeric[0]] if verdict is not None and verdict.is_faster() and numeric \
                else keep[:-1]
        return incumbent, []

    def _factorial(self, incumbent: TrialConfig, members: list[TrialConfig]) -> list[float] | None:
        """Each member's estimated effect on top of `incumbent` (`fitspeed.search.factorial.estimate`)."""
        def run(on: list[int]) -> TrialConfig | None:
            changes = {k: v for single, flag in zip(members, on, strict=True) if flag > 0
                       for k, v in self._changes(single).items()}
            return self.tuner.config_of(knob_values={**incumbent.to_dict(), **changes})

        return estimate(self.tuner.ledger, self.tuner.measure, self.tuner.once, self.tuner.settings.seed, incumbent,
                        [m.label() for m in members], run)

    def _members(self, incumbent: TrialConfig, waiting: list[TrialConfig],
                 screened: dict[TrialConfig, float]) -> list[TrialConfig]:
        """The waiting changes that screened at BUNDLE_FLOOR or better, one value per knob (its best), best first.

        A knob measured on top of another counts as itself (`jit_compile` of
        `backend=torch jit_compile=True`, `auto_scale_loss` of `precision=mixed_float16
        auto_scale_loss=False`); members that set one knob to two values (two
        backends) never share a bundle: the best-screened one stays.
        """
        chosen: dict[str, TrialConfig] = {}
        for single in waiting:
            changes = self._changes(single)
            knob = list(changes)[-1] if changes else None  # a knob set on top of another is declared after it
            if knob is None or screened.get(single, 0.0) < BUNDLE_FLOOR or not self._adds(incumbent, single) \
                    or self._rejected(single):
                continue
            if knob not in chosen or screened[single] > screened[chosen[knob]]:
                chosen[knob] = single
        kept: list[TrialConfig] = []
        for single in sorted(chosen.values(), key=lambda c: -screened[c]):
            changes = self._changes(single)
            if all(self._changes(other).get(k, v) == v for other in kept for k, v in changes.items()):
                kept.append(single)  # members agree on every knob they share: one backend, one precision
        return kept

    def _try(self, incumbent: TrialConfig, config: TrialConfig,
             purpose: Phase = Phase.COMBINE) -> tuple[TrialConfig, Verdict | None]:
        """Challenge `incumbent` with `config`: the incumbent after it, and the decision's verdict."""
        after = self.tuner.challenge(incumbent, config, purpose)
        decision = self.tuner.ledger.decision(decision_id(purpose, incumbent, config))
        return after, decision.verdict if decision else None

    def _race(self, incumbent: TrialConfig, singles: list[TrialConfig]) -> list[TrialConfig]:
        """The `singles` whose one fresh pair on top of `incumbent` came out ahead, best first.

        The race's pairs only choose which changes get a decision, and in what
        order: they are never evidence in that decision.
        """
        probe = Design(alpha=0.05, max_pairs=1, min_pairs=1, min_gain=self.tuner.settings.min_gain)
        ahead: list[tuple[float, int, TrialConfig]] = []
        for index, single in enumerate(singles):
            config = self._on_top(incumbent, single)
            if config is None or config == incumbent or self.tuner.spent(2 * 2):  # room for its pair and a decision
                continue
            raced = self.tuner.decider.decide(Phase.RACE, incumbent, config, probe)
            if raced.ratio is not None and raced.pairs and raced.ratio >= 1.0:
                ahead.append((raced.ratio, index, single))
        return [single for _, _, single in sorted(ahead, key=lambda item: (-item[0], item[1]))]

    def _rejected(self, single: TrialConfig) -> bool:
        """Whether `single`'s change is a numerics change that failed the guard (`Ledger.rejected`)."""
        return bool(set(self._changes(single).items()) & self.tuner.ledger.rejected())

    def _changes(self, config: TrialConfig) -> dict[str, Any]:
        """The knobs `config` sets differently from the baseline, with their values."""
        return {k: v for k, v in config.to_dict().items() if v != getattr(self.tuner.base, k)}

    def _adds(self, incumbent: TrialConfig, single: TrialConfig) -> bool:
        """Whether `single`'s change goes on top of `incumbent` and changes it."""
        config = self._on_top(incumbent, single)
        return config is not None and config != incumbent

    def _on_top(self, incumbent: TrialConfig, single: TrialConfig, swap: bool = False) -> TrialConfig | None:
        """`single`'s change on top of `incumbent`; None when that knob is set already or cannot be.

        With `swap`, a knob the incumbent sets to another value takes this
        value instead: two alternatives compared head to head; another backend
        takes the incumbent's place with the knobs it cannot run (JAX's
        threads) at their defaults, and a knob the incumbent's backend cannot
        run (TensorFlow's threads beside backend=jax) is tried on the
        baseline's backend in the incumbent's place. A knob the
        incumbent sets to this same value already is no clash: a backend's own
        knob (`backend=torch jit_compile=True`) goes on top of an incumbent
        that runs that backend.
        """
        changes = self._changes(single)
        if not swap and any(getattr(incumbent, k) not in (getattr(self.tuner.base, k), v) for k, v in changes.items()):
            return None  # that knob is set already, to a value that ranked higher
        values = {**incumbent.to_dict(), **changes}
        if swap and "backend" not in changes and any(backend_of(incumbent.backend).cannot(k) for k in changes):
            changes = {**changes, "backend": self.tuner.base.backend}  # a knob of the baseline's backend alone:
            values["backend"] = self.tuner.base.backend                 # its best against the other backend's
        if swap and "backend" in changes:  # another backend in its place: what it cannot run goes back to default
            other = backend_of(changes["backend"])
            values.update({k: getattr(self.tuner.base, k) for k in self._changes(incumbent)
                           if k not in changes and other.cannot(k)})
        return self.tuner.config_of(knob_values=values)
