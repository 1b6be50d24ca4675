"""The polish: the screen's changes tried once more on top of the final incumbent, before the verification.

The combination judges a change on top of the incumbent of its time; the
sampler may then replace that incumbent with another (a change that clashed
with the old one may help on the new), and a 5-8% step in a bundle that
lost to noise is never looked at again. The polish takes the final
incumbent and every change the screen found at BUNDLE_FLOOR or better whose
knob it leaves at the default (one value per knob, its best; a change
judged alone only if its screen trial gained), less what the search has
seen fail there: a change clearly slower (CLEARLY_LOST) on top of this
incumbent alone, a big one (BIG) in any step that lost on top of it, one a
joint estimate put at CLEARLY_LOST or less; at most one big change. It puts
them on top of the incumbent together and compares that with the incumbent
in POLISH_PAIRS fresh pairs (`polish_design`): kept when the robust
estimate is above 1, as a head-to-head choice is. It is a choice of what to
hand the verification, not a claim: a truly neutral change kept costs the
answer nothing, and the verification decides the whole answer on pairs of
its own. A step that loses is tried again without its big change (the
likelier clash), else without the one that screened worst, while the budget
allows (POLISH_STEPS). A numerics change that failed the guard
(`Ledger.rejected`) is never put back.

Before those steps, a challenger the budget cut short while it led the
final incumbent (the sampler's last find, whose pairs had it ahead when the
search's share of the budget ran out) is decided first, the same way: the
search found it on top of this very incumbent.

Then, where the budget is left, the best change the screen put under
BUNDLE_FLOOR (not one judged alone) whose knob no decision and no joint
estimate has changed goes on top of the incumbent alone, decided the same
way: a change that helps only beside another (one inter-op thread beside
steps_per_execution) may screen under 1.0x alone and would otherwise never
be tried.

The race at the end of the combination and the sampler leave POLISH_RESERVE
trials of the budget for it (`polish_room`).
"""

from __future__ import annotations

import math
from typing import Any

from fitspeed.core.config import TrialConfig
from fitspeed.core.sequential import Design
from fitspeed.search.combination import BIG, BUNDLE_FLOOR
from fitspeed.search.lean import changed_knobs
from fitspeed.search.phase import Phase
from fitspeed.search.searcher import Searcher

POLISH_PAIRS = 3  # fresh pairs per polish step; kept when the robust estimate is above 1
MIN_PAIRS = 2  # or this many, where the budget left pays for no more
POLISH_STEPS = 2  # at most this many steps: all together, then without the big one or the worst-screened
POLISH_RESERVE = 2 * POLISH_PAIRS  # the phases before it leave this many trials for the polish
POLISH_AFTER = 3  # where the budget pays for this many decisions or more
CLEARLY_LOST = 0.9  # a change estimated at this ratio or below on top of the incumbent is left out


def polish_room(plan: dict[str, int]) -> int:
    """The trials the phases before the polish leave for it: POLISH_RESERVE where the budget
    (`budget_plan`) pays for POLISH_AFTER decisions or more, else none (the combination needs them more).

    >>> polish_room({"decisions": 4}), polish_room({"decisions": 2})
    (6, 0)
    """
    return POLISH_RESERVE if plan["decisions"] >= POLISH_AFTER else 0


def polish_design(pairs: int, left: int) -> Design:
    """A polish step: POLISH_PAIRS fresh pairs (no more than `--pairs`, nor than the `left` trials of the
    search's budget pay for, down to MIN_PAIRS), B kept when its estimate is above 1.

    >>> d = polish_design(5, 20)
    >>> d.min_pairs, d.max_pairs, d.min_gain, polish_design(5, 5).max_pairs
    (3, 3, 0.0, 2)
    """
    n = max(1, min(POLISH_PAIRS, pairs, max(MIN_PAIRS, left // 2)))
    return Design(0.49, n, n, 0.0, futile_from=n, futility_z=0.0)


class Polish:
    """The polish phase of one tuner's search."""

    def __init__(self, tuner: Searcher) -> None:
        self.tuner = tuner

    def run(self, promising: list[tuple[TrialConfig, float]]) -> None:
        """Put the left-out changes on top of the final incumbent; keep them if fresh pairs lean their way.

        First a challenger the budget cut short while it led the final
        incumbent; last, where the budget is left, the best change the screen
        put under BUNDLE_FLOOR that nothing tried.
        """
        self._unfinished()
        self._steps(promising)
        self._untried(promising)

    def _unfinished(self) -> None:
        """A challenger the budget cut short while it led the final incumbent: decided first, as a polish step."""
        incumbent = self.tuner.ledger.incumbent()
        rejected = self.tuner.ledger.rejected()
        ahead = [d for d in self.tuner.ledger.decisions()
                 if d.a == incumbent and d.why == "the budget ran out" and d.ratio is not None
                 and d.ratio > 1.0 and d.purpose != Phase.VERIFY]
        if not ahead:
            return
        config = max(ahead, key=lambda d: d.ratio or 0.0).b
        if not set(self._changes(config).items()) & rejected and not self.tuner.spent(2 * MIN_PAIRS - 1):
            self.tuner.challenge(incumbent, config, Phase.POLISH)

    def _untried(self, promising: list[tuple[TrialConfig, float]]) -> None:
        """The best-screened change under BUNDLE_FLOOR whose knob no decision or joint estimate changed, alone."""
        incumbent = self.tuner.ledger.incumbent()
        if self.tuner.spent(2 * MIN_PAIRS - 1):
            return
        alone = {d.knob for d in self.tuner.dims if d.alone}
        tried = {k for d in self.tuner.ledger.decisions() if d.purpose != Phase.SCREEN for k in changed_knobs(d.b, d.a)}
        tried |= {m.split("=")[0] for f in self.tuner.ledger.factorials() for m in f["members"]}
        for single, ratio in promising:  # best first
            changes = self._changes(single)
            if ratio >= BUNDLE_FLOOR or alone & set(changes) or set(changes) & tried \
                    or set(changes.items()) & self.tuner.ledger.rejected() \
                    or any(getattr(incumbent, k) != getattr(self.tuner.base, k) for k in changes):
                continue
            config = self.tuner.config_of(knob_values={**incumbent.to_dict(), **changes})
            if config is not None and config != incumbent:
                self.tuner.challenge(incumbent, config, Phase.POLISH)
            return

    def _steps(self, promising: list[tuple[TrialConfig, float]]) -> None:
        incumbent = self.tuner.ledger.incumbent()
        screened = dict(promising)
        members = self.members(incumbent, promising)
        for _ in range(POLISH_STEPS):
            if not members or self.tuner.spent(2 * MIN_PAIRS - 1):
                return
            changes = {k: v for single in members for k, v in self._changes(single).items()}
            config = self.tuner.config_of(knob_values={**incumbent.to_dict(), **changes})
            if config is None or config == incumbent:
                return
            after = self.tuner.challenge(incumbent, config, Phase.POLISH)
            if after != incumbent:  # kept, or another worker's winner replaced the incumbent meanwhile
                return
            # the big change is the likelier clash; else the one that screened worst
            members = members[1:] if screened[members[0]] >= BIG else members[:-1]

    def members(self, incumbent: TrialConfig, promising: list[tuple[TrialConfig, float]]) -> list[TrialConfig]:
        """The screen's changes at BUNDLE_FLOOR or better whose knob `incumbent` leaves alone; best per knob, best first."""
        alone = {d.knob for d in self.tuner.dims if d.alone}
        gained = 1 + self.tuner.settings.min_gain
        lost: set[str] = set()  # knobs in a change that lost on top of this incumbent
        slower: set[str] = set()  # knobs that were clearly slower on top of it alone
        for decision in self.tuner.ledger.decisions():
            if decision.a != incumbent or decision.verdict.is_faster() or decision.purpose == Phase.VERIFY:
                continue
            added = set(changed_knobs(decision.b, incumbent))
            lost |= added
            if len(added) == 1 and decision.ratio is not None and decision.ratio <= CLEARLY_LOST:
                slower |= added
        negative = {m for f in self.tuner.ledger.factorials() for m, e in zip(f["members"], f["effects"] or [],
                                                                               strict=False)
                    if e <= math.log(CLEARLY_LOST)}
        chosen: dict[str, tuple[TrialConfig, float]] = {}
        rejected = self.tuner.ledger.rejected()  # numerics changes that failed the guard
        for single, ratio in promising:
            changes = self._changes(single)
            knob = next(iter(changes), None)
            if knob is None or ratio < BUNDLE_FLOOR or (alone & set(changes) and ratio < gained) \
                    or set(changes.items()) & rejected:
                continue
            if any(getattr(incumbent, k) != getattr(self.tuner.base, k) for k in changes):
                continue  # that knob is set already
            if knob in slower or (ratio >= BIG and knob in lost) or single.label() in negative:
                continue  # it lost on top of this incumbent, or a joint estimate found it slower
            if knob not in chosen or ratio > chosen[knob][1]:
                chosen[knob] = (single, ratio)
        ranked = sorted(chosen.values(), key=lambda item: -item[1])
        return [single for index, (single, ratio) in enumerate(ranked) if index == 0 or ratio < BIG]  # one big

    def _changes(self, config: TrialConfig) -> dict[str, Any]:
        return {k: v for k, v in config.to_dict().items() if v != getattr(self.tuner.base, k)}
