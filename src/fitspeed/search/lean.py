"""The lean answer: every knob the verification is handed has evidence of its own.

The search builds its answer in steps, and a step may add several changes at
once (a bundle, the polish, a sampler's configuration): a change that did
nothing can ride in on its neighbours' gain. Each knob is one more thing that
can break on the user's side, so before the verification each changed knob
of the final incumbent must show its own share of the speed-up:

- a knob that a step added alone, decided faster on top of the incumbent of
  its time by at least MIN_SHARE (`own_evidence`), has shown it;
- every other knob is taken out of the incumbent, one at a time, and the
  incumbent is compared with that (`LEAN_DESIGN`: 2 to 16 fresh pairs, each in a
  random order, outside the budget like the verification; a knob is taken out
  on 4 pairs at the fewest). It stays only
  where taking it out is slower: a "faster" verdict for the incumbent with an
  estimate of at least MIN_SHARE. Otherwise it goes: a neutral knob costs
  nothing to leave out, and among answers within the noise the one with
  fewer changes is preferred.

A knob taken out may be looked at once more after the pass, put back on
top of the leaner incumbent, where a knob taken out after it changed that
incumbent: a value that makes every trial of a configuration 3-4x noisier
sits on both sides of every other knob's pairs until it goes. It comes back
only where its pairs now show it faster by MIN_SHARE, the same evidence as
any knob's. It is looked at again

- where its pairs leaned its way (estimate at least MIN_SHARE, but "not
  confirmed" or "no gain"), at the first look's level: on 1,713 development
  worlds the answer kept 0.003 more of the best speed, 33 more within 3%, at
  2 more lean trials a study;
- or where the incumbent's own trial-to-trial noise (`Ledger.trial_noise`)
  has fallen by QUIETER since: the scatter can end pairs early as "slower"
  as easily as "not confirmed". At half the level (`LEAN_AGAIN`), since a
  neutral knob then has two chances: 0.002 more (se 0.0005) on 1,542 fresh
  development worlds, 17 more within 3%, at 2 more lean trials a study.
  Looking again at every knob taken out kept about as much at 7 more trials,
  and at the first look's level it kept two neutral knobs 31 and 41 times in
  100 lean steps against 26 and 27 with one look (docs/benchmarks/search_simulation.md,
  sixteenth round).

A knob that cannot be taken out alone (another knob needs it) stays, and so
does one whose removal would fail the numerics guard. Each knob's share, the
ratio its evidence measured, goes with the verification into best.json and
the tables (`shares`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from fitspeed.core.config import TrialConfig
from fitspeed.core.json_data import JSONObject
from fitspeed.core.sequential import Design, Noise
from fitspeed.search import studies
from fitspeed.search.decision import Decision
from fitspeed.search.events import LeanStarted
from fitspeed.search.ledger import LEANED
from fitspeed.search.phase import Phase
from fitspeed.search.searcher import Searcher

MIN_SHARE = 1.02  # a knob whose own evidence is below this ratio is no part of the answer
LEAN_FIRST_LOOK = 2  # no knob is kept on one pair: one starved trial decided it
LEAN_FUTILE_FROM = 4  # nor taken out ("slower", "no gain") on fewer than four
# one-sided 25% over looks at 2 to 16 pairs: a neutral knob is kept at most one time in four, and then only when its
# estimate is at least MIN_SHARE, so a knob of the answer has shown a share of its own. Looks from the first pair
# took knobs worth 1.2-1.3x out on one pair at 0.6-0.7x (a load burst on the incumbent's side): 6 of 262 lean
# decisions on 100 development worlds (`benchmarks/search_simulation.py --worlds 100 --seeds dev`), and 6 pairs
# kept 16 of 51 knobs worth 1.02-1.10x (docs/benchmarks/search_simulation.md, tenth round). Up to 16 pairs: with
# every effect known exactly the rule costs no answer anything (`benchmarks/search_bound.py`, lean-oracle: 174 of
# 174 development worlds within 3%), so what it took was power; 16 pairs made 12 answers right and 2 wrong of 174
# (eleventh round), at 11 trial processes a study outside --trials. Taking a knob out from the second pair still
# took knobs worth 1.1-1.3x out on two pairs such as 1.03x and 0.58x; from the fourth, on 600 development worlds,
# the answer kept 0.005 more of the best speed at 2 more lean trials a study (thirteenth round)
LEAN_DESIGN = Design(alpha=0.25, max_pairs=16, min_pairs=LEAN_FIRST_LOOK, min_gain=MIN_SHARE - 1,
                     futile_from=LEAN_FUTILE_FROM)
# the second look at a knob taken out on pairs that did not lean its way: the same pairs and evidence at half the
# level, so that a neutral knob's two chances together keep it about as often as one look did
LEAN_AGAIN = replace(LEAN_DESIGN, alpha=LEAN_DESIGN.alpha / 2)
QUIETER = 1.5  # ... once the incumbent's own trial noise has fallen by this factor since the knob went


@dataclass(frozen=True)
class _TakenOut:
    """A knob the lean pass took out: where it went, and whether its second look is due."""

    knob: str
    value: Any
    at: TrialConfig  # the incumbent without it
    leaned: bool  # its pairs leaned its way: "not confirmed" or "no gain" at an estimate of MIN_SHARE or more
    noise: Noise | None  # the incumbent's own trial noise when it went


@dataclass(frozen=True)
class Share:
    """One knob's own share of the answer's speed-up, and the decision that measured it."""

    knob: str
    value: Any
    ratio: float
    decision: str
    how: str  # "added alone" or "taken out"

    def to_dict(self) -> JSONObject:
        return {"knob": self.knob, "value": self.value, "ratio": self.ratio, "decision": self.decision,
                "how": self.how}


def changed_knobs(config: TrialConfig, base: TrialConfig) -> dict[str, Any]:
    """The knobs of `config` that differ from `base`, with their values.

    >>> changed_knobs(TrialConfig(jit_compile=True, steps_per_execution=4), TrialConfig())
    {'steps_per_execution': 4, 'jit_compile': True}
    """
    mine, theirs = config.to_dict(), base.to_dict()
    return {k: v for k, v in mine.items() if v != theirs.get(k)}


def own_evidence(decisions: list[Decision], knob: str, value: Any) -> Decision | None:
    """The last decision that found `knob`=`value` alone faster by MIN_SHARE or more, or None: a step that added
    it alone, or a lean step that took it out (the screen's one-trial verdicts and the races are no evidence).

    >>> made = [Decision.from_dict(d) for d in (
    ...     {"purpose": "bundle", "a": {}, "b": {"jit_compile": True, "prefetch": 2}, "verdict": "faster",
    ...      "ratio": 1.3, "id": "b1"},
    ...     {"purpose": "combine", "a": {}, "b": {"jit_compile": True}, "verdict": "faster", "ratio": 1.2, "id": "c1"})]
    >>> own_evidence(made, "jit_compile", True).id, own_evidence(made, "prefetch", 2)
    ('c1', None)
    """
    found = None
    for decision in decisions:
        if decision.purpose in (Phase.SCREEN, Phase.RACE, Phase.VERIFY):
            continue
        if (changed_knobs(decision.b, decision.a) == {knob: value} and decision.verdict.is_faster()
                and (decision.ratio or 0.0) >= MIN_SHARE):
            found = decision
    return found


class Lean:
    """Takes out of the final incumbent each knob with no evidence of its own (see the module's docstring)."""

    def __init__(self, tuner: Searcher) -> None:
        self.tuner = tuner

    def once(self) -> None:
        """Lean the final chain of incumbents once (`ledger.LEANED`): one worker leans it, the others wait for it."""
        tuner = self.tuner

        def leaned() -> bool | None:
            return True if tuner.study.user_attrs.get(LEANED) == studies.config_key(tuner.ledger.incumbent()) else None

        def lean() -> bool:
            tuner.study.set_user_attr(LEANED, studies.config_key(self.run()))
            return True

        tuner._once(LEANED, leaned, lean)

    def run(self) -> TrialConfig:
        """Lean the final incumbent; the incumbent it leaves."""
        tuner = self.tuner
        incumbent = tuner.ledger.incumbent()
        changes = changed_knobs(incumbent, tuner.base)
        if len(changes) < 2:  # one change, or none: the verification itself is its evidence
            return incumbent
        taken_out: list[_TakenOut] = []
        # a lean decision is evidence for its own knob only, so what has none is known before the first
        unproven = [(knob, value) for knob, value in changes.items()
                    if own_evidence(tuner.ledger.decisions(), knob, value) is None]
        looked_at = [f"{knob}={value}" for knob, value in unproven
                     if tuner._config({**changes, knob: getattr(tuner.base, knob)}, quiet=True) is not None]
        if looked_at:
            tuner.emit(LeanStarted(incumbent, tuple(looked_at), LEAN_DESIGN.max_pairs, MIN_SHARE))
        for knob, value in unproven:
            without = tuner._config({**changed_knobs(incumbent, tuner.base), knob: getattr(tuner.base, knob)})
            if without is None:
                continue  # another knob needs it: it stays, with that knob's evidence
            decision = tuner.decider.decide(Phase.LEAN, without, incumbent, LEAN_DESIGN, budgeted=False)
            if _shows_share(decision):
                continue
            noise = tuner.ledger.trial_noise(incumbent)
            incumbent, moved = self._move(incumbent, without)  # not where the rest cannot train the same without it
            if moved:
                leaned = decision.verdict.is_open() and (decision.ratio or 0.0) >= MIN_SHARE
                taken_out.append(_TakenOut(knob, value, without, leaned, noise))
        for out in taken_out:
            if out.at == incumbent:
                continue  # nothing went out after it: its pairs would be the same comparison again
            design = LEAN_DESIGN if out.leaned else LEAN_AGAIN if self._quieter(out.noise, incumbent) else None
            if design is None:
                continue  # no second look is due: its configuration is not even built (nor a refusal of it said)
            back = tuner._config({**changed_knobs(incumbent, tuner.base), out.knob: out.value})
            if back is not None and _shows_share(tuner.decider.decide(Phase.LEAN, incumbent, back, design,
                                                                      budgeted=False)):
                incumbent, _ = self._move(incumbent, back)
        return incumbent

    def _quieter(self, then: Noise | None, incumbent: TrialConfig) -> bool:
        """Whether `incumbent`'s own trial noise is below `then` by QUIETER (both known)."""
        now = self.tuner.ledger.trial_noise(incumbent)
        return then is not None and now is not None and now.sd * QUIETER < then.sd

    def _move(self, incumbent: TrialConfig, to: TrialConfig) -> tuple[TrialConfig, bool]:
        """Make `to` the incumbent where its numerics pass the guard; the incumbent after, and whether it moved."""
        tuner = self.tuner
        verdict = tuner.guarded(to)
        if verdict is not None and not verdict.ok:
            return incumbent, False
        with tuner.workers.lock.held():
            added = tuner.ledger.chain_add(to, over=incumbent, again=True)
        return (to if added else tuner.ledger.incumbent()), added


def _shows_share(decision: Decision) -> bool:
    """The with-knob side was found faster by MIN_SHARE: the knob's own evidence."""
    return decision.verdict.is_faster() and (decision.ratio or 0.0) >= MIN_SHARE


def shares_of(decisions: list[Decision], config: TrialConfig, base: TrialConfig) -> list[JSONObject]:
    """Each knob of `config`'s own share, as best.json and the tables show it: the ratio its own evidence measured.

    An answer of one change has none here: the verification is its evidence.

    >>> made = [Decision.from_dict(d) for d in (
    ...     {"purpose": "combine", "a": {}, "b": {"jit_compile": True}, "verdict": "faster", "ratio": 1.2, "id": "c1"},
    ...     {"purpose": "lean", "a": {"jit_compile": True}, "b": {"jit_compile": True, "prefetch": 2},
    ...      "verdict": "faster", "ratio": 1.06, "id": "l1"})]
    >>> [(s["knob"], s["ratio"], s["how"]) for s in shares_of(made, TrialConfig(jit_compile=True, prefetch=2),
    ...                                                        TrialConfig())]
    [('jit_compile', 1.2, 'added alone'), ('prefetch', 1.06, 'taken out')]
    """
    out = []
    changes = changed_knobs(config, base)
    for knob, value in changes.items() if len(changes) > 1 else ():
        decision = own_evidence(decisions, knob, value)
        if decision is not None:
            out.append(Share(knob, value, float(decision.ratio or 0.0), decision.id,
                             "taken out" if decision.purpose == Phase.LEAN else "added alone").to_dict())
    return out
