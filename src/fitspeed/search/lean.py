"""The lean answer: every knob the verification is handed has evidence of its own.

The search builds its answer in steps, and a step may add several changes at
once (a bundle, the polish, a sampler's configuration): a change that did
nothing can ride in on its neighbours' gain. Each knob is one more thing that
can break on the user's side, so before the verification each changed knob
of the final incumbent must show its own share of the speed-up:

- a knob that a step added alone, decided faster on top of the incumbent of
  its time by at least MIN_SHARE (`own_evidence`), has shown it;
- every other knob is taken out of the incumbent and timed against it, all
  of them in one pass of rounds, outside the budget like the verification.
  Each round is one `measure_round` (in lockstep where the trials fit: the
  incumbent and the incumbent less each knob still open, timed in turns in
  the same seconds) in a random order, and each knob's sequential test
  (`lean_design`: 2 to 24 pairs; taken out on 4 at the fewest) takes the
  pair (the incumbent less it, that round's incumbent). A knob stays only
  where taking it out is slower: a "faster" verdict for the incumbent with
  an estimate of at least MIN_SHARE. The knobs' tests share one family level,
  LEAN_FAMILY_ALPHA (Bonferroni over the knobs tested), so that where nothing
  helps at most that share of answers keeps a neutral knob; and a test ends
  "no gain" as soon as its share can no longer reach MIN_SHARE (the upper end
  of its 60% interval below it). A knob whose test ends otherwise goes
  at once: a neutral knob costs nothing to leave out, and among answers
  within the noise the one with fewer changes is preferred. The knobs still
  open are measured against the leaner incumbent from the next round on,
  their earlier pairs kept, and each one's decision says after which pair
  the knob went out of both its sides.

One trial of the incumbent stands in each round for every open knob's pair,
where the one-at-a-time decider measured it once for each knob: on 1,200
development worlds (1,032 where something helps; CV 10%, `--trials 40`) the
pass made 35.3 lean trials a study against 39.1, and answered within 3% of
the best in 505 against 497, keeping 0.0007 more of the best speed (se
0.0014; docs/benchmarks/search_simulation.md, nineteenth round).

Each knob's test starts from the study's noise, or from its two sides' own
where that is wider (as any search step), and after every round from its two
sides' own noise over all their trials so far where that is wider still
(`Ledger.pair_noise`, this pass's trials included): a value that makes every
trial of a configuration 3-4x noisier sits on the incumbent's side of every
pair until it goes, and read at the study's quieter noise its own pairs kept
it 37% of the time in 300 simulated lean steps (29% with the sides' own).
A pair whose trial failed on either side is kept in the knob's decision with
the side, status and reason, and counts against the most pairs.

A knob that went while its pairs leaned its way (an estimate of at least
MIN_SHARE, but "not confirmed" or "no gain") is looked at once more after
the pass, put back on top of the leaner incumbent, where a knob taken out
after it changed that incumbent; it comes back only where its pairs now show
it faster by MIN_SHARE, the same evidence as any knob's, at its share of the
family level (LEAN_AGAIN_SHARE of the knob's).

A knob that others mean something only beside (mixed_float16, beside which
alone auto_scale_loss=False does anything) is taken out with them: its arm
is the incumbent less it and every knob that would mean nothing without it,
and a decision that measured that arm is the knob's own evidence. A knob that
goes takes those knobs with it. Where the search still cannot measure the
incumbent without a knob, the knob stays, and so does one whose removal would
fail the numerics guard. Each knob's share, the ratio its evidence measured
with that decision's interval, goes with the verification into best.json and
the tables (`shares`).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from fitspeed.core.config import TrialConfig, config_key
from fitspeed.core.errors import KnobError
from fitspeed.core.json_data import JSONObject
from fitspeed.core.knobs import get_knob
from fitspeed.core.record import TrialRecord
from fitspeed.core.sequential import Design, Noise, Step, step
from fitspeed.search import studies
from fitspeed.search.decider import Ask, decision_id, design_of, search_noise, wider
from fitspeed.search.decision import Decision, LostPair
from fitspeed.search.events import LeanStarted
from fitspeed.search.ledger import LEANED
from fitspeed.search.phase import Phase
from fitspeed.search.searcher import Searcher

MIN_SHARE = 1.02  # a knob whose own evidence is below this ratio is no part of the answer
LEAN_FIRST_LOOK = 2  # no knob is kept on one pair: one starved trial decided it
LEAN_FUTILE_FROM = 4  # nor taken out ("slower", "no gain") on fewer than four
LEAN_MAX_PAIRS = 24  # the most pairs a knob's test takes, the pass measuring the incumbent once a round for all
# The lean step's family level: where nothing helps, at most this share of its answers keeps a neutral knob. Each
# of the m knobs it tests gets LEAN_FAMILY_ALPHA / m (Bonferroni), of which LEAN_AGAIN_SHARE goes to the second look
# a knob may get after the pass. Before lockstep rounds each knob's test was one-sided 25% with no correction, and an
# audit of the real lean step on a fake machine where nothing helps found 44-57% of answers with two or more neutral
# knobs; at lockstep's noise (a paired sd of 0.04-0.07 where sequential pairs had 0.10-0.33,
# docs/benchmarks/lockstep.md) a 5% family costs a real 1.05x knob a few pairs, not its place
LEAN_FAMILY_ALPHA = 0.05
LEAN_AGAIN_SHARE = 0.2
# A test ends "no gain" once the upper end of its 60% interval is below MIN_SHARE: its share can no longer reach
# 1.02x. An 80% interval (the decider's) kept a neutral knob's test going to 24 pairs at 10% per-trial noise
LEAN_FUTILITY_Z = 0.8416


def lean_design(knobs: int, again: bool = False) -> Design:
    """The design of one knob's test when the lean step tests `knobs` of them (`again`: its second look).

    >>> d = lean_design(3)
    >>> round(d.alpha, 4), d.max_pairs, d.min_pairs, d.futile_from, round(d.confidence, 3)
    (0.0133, 24, 2, 4, 0.973)
    >>> round(lean_design(3, again=True).alpha, 4), round(lean_design(1).alpha, 3)
    (0.0033, 0.04)
    """
    share = LEAN_AGAIN_SHARE if again else 1 - LEAN_AGAIN_SHARE
    return Design(alpha=LEAN_FAMILY_ALPHA * share / max(1, knobs), max_pairs=LEAN_MAX_PAIRS,
                  min_pairs=LEAN_FIRST_LOOK, min_gain=MIN_SHARE - 1, futile_from=LEAN_FUTILE_FROM,
                  futility_z=LEAN_FUTILITY_Z)


LEAN_DESIGN = lean_design(1)  # one knob's test alone


@dataclass(frozen=True)
class _Gone:
    """A knob the pass took out: the decision that took it out, and the incumbent right after it went."""

    knob: str
    value: Any
    decision: Decision
    at: TrialConfig


@dataclass
class _Test:
    """One knob's test in the pass: its pairs (the incumbent less it, the incumbent), each from the round it ran in.

    `arm` is the incumbent of the moment less this knob (and less each knob that means nothing without it), built
    on `on`; None where the search cannot measure that, or once the knob went out with another. A pair
    whose trial failed on either side has no ratio: it is kept in `lost` with the side, status and reason, and
    counts against the design's most pairs. `went` names each knob that went out of both sides while the test
    ran, after how many of its pairs.
    """

    knob: str
    value: Any
    arm: TrialConfig | None = None
    on: TrialConfig | None = None
    design: Design = LEAN_DESIGN
    prior: Noise | None = None
    own: Noise | None = None  # the study's noise, or the two sides' own before this pass where wider, when built
    result: Step = field(default_factory=lambda: step([], LEAN_DESIGN))
    pairs: list[tuple[float, float]] = field(default_factory=list)
    orders: list[str] = field(default_factory=list)
    designs: list[str] = field(default_factory=list)  # each pair's: lockstep or sequential
    lost: list[LostPair] = field(default_factory=list)
    went: list[tuple[str, int]] = field(default_factory=list)

    @property
    def tried(self) -> int:
        return len(self.pairs) + len(self.lost)

    @property
    def ended(self) -> bool:
        return self.result.verdict is not None or self.tried >= self.design.max_pairs

    def take(self, arm: TrialRecord | None, incumbent: TrialRecord | None, order: str, sides: Noise | None) -> None:
        """This round's pair: `arm`'s trial and the incumbent's, run in `order` ("AB": the arm first). `sides`, the
        two sides' own noise from all their trials so far (`Ledger.pair_noise`), widens the prior where wider."""
        self.prior = search_noise(wider(self.own, sides))
        for side, record in (("a", arm), ("b", incumbent)):
            if record is None or record.throughput is None:
                self.lost.append(LostPair(pair=self.tried, order=order, side=side,
                                          status=str(record.status) if record else "not measured",
                                          reason=(record.reason if record else None) or "no reason given"))
                return
        assert arm is not None and incumbent is not None and arm.throughput and incumbent.throughput
        self.pairs.append((arm.throughput, incumbent.throughput))
        self.orders.append(order)
        self.designs.append(design_of(incumbent))
        self.result = step([b / a for a, b in self.pairs], self.design, self.prior)

    def why(self) -> str | None:
        """What the stored decision says of pairs measured on an incumbent that has since lost a knob."""
        return "; ".join(f"{label} went out of both sides after pair {n}" for label, n in self.went) or None


@dataclass(frozen=True)
class Share:
    """One knob's own share of the answer's speed-up, and the decision that measured it."""

    knob: str
    value: Any
    ratio: float
    decision: str
    how: str  # "added alone" or "taken out"
    low: float | None = None  # the decision's interval on the share, at `confidence`
    high: float | None = None
    confidence: float | None = None

    def to_dict(self) -> JSONObject:
        return {"knob": self.knob, "value": self.value, "ratio": self.ratio, "decision": self.decision,
                "how": self.how, "low": self.low, "high": self.high, "confidence": self.confidence}


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
        if (alone(changed_knobs(decision.b, decision.a), decision.a) == {knob: value}
                and decision.verdict.is_faster() and (decision.ratio or 0.0) >= MIN_SHARE):
            found = decision
    return found


def alone(changes: dict[str, Any], without: TrialConfig) -> dict[str, Any]:
    """`changes` less the knobs that mean nothing in `without` (`Knob.idle_in`): what a step that made `changes`
    on top of `without` decided, where the lean step took a knob out with the knobs that need it.

    >>> alone({"precision": "mixed_float16", "auto_scale_loss": False}, TrialConfig())
    {'precision': 'mixed_float16'}
    >>> alone({"auto_scale_loss": False}, TrialConfig(precision="mixed_float16"))
    {'auto_scale_loss': False}
    """
    return {k: v for k, v in changes.items() if not get_knob(k).idle_in(without)}


class Lean:
    """Takes out of the final incumbent each knob with no evidence of its own (see the module's docstring)."""

    def __init__(self, tuner: Searcher) -> None:
        self.tuner = tuner

    def once(self) -> None:
        """Lean the final chain of incumbents once (`ledger.LEANED`): one worker leans it, the others wait for it."""
        tuner = self.tuner

        def leaned() -> bool | None:
            return True if tuner.study.user_attrs.get(LEANED) == config_key(tuner.ledger.incumbent()) else None

        def lean() -> bool:
            tuner.study.set_user_attr(LEANED, config_key(self.run()))
            return True

        tuner.once(LEANED, leaned, lean)

    def run(self) -> TrialConfig:
        """Lean the final incumbent; the incumbent it leaves."""
        tuner = self.tuner
        incumbent = tuner.ledger.incumbent()
        changes = changed_knobs(incumbent, tuner.base)
        if len(changes) < 2:  # one change, or none: the verification itself is its evidence
            return incumbent
        # a lean decision is evidence for its own knob only, so what has none is known before the first
        tests = [_Test(knob, value) for knob, value in changes.items()
                 if own_evidence(tuner.ledger.decisions(), knob, value) is None]
        for test in tests:  # the family's level split over the knobs tested (`lean_design`)
            test.design = lean_design(len(tests))
            test.result = step([], test.design)
        looked_at = [f"{t.knob}={t.value}" for t in tests if self._without(incumbent, t.knob, quiet=True) is not None]
        if looked_at:
            tuner.emit(LeanStarted(incumbent, tuple(looked_at), LEAN_MAX_PAIRS, MIN_SHARE))
        incumbent, gone = self._star(incumbent, tests)
        for out in gone:
            if out.at == incumbent or (out.decision.ratio or 0.0) < MIN_SHARE:
                continue  # nothing went out after it (the same comparison again), or its pairs did not lean its way
            back = tuner.config_of({**changed_knobs(incumbent, tuner.base), out.knob: out.value})
            again = lean_design(len(tests), again=True)
            if back is not None and _shows_share(tuner.decider.decide(Phase.LEAN, incumbent, back, again,
                                                                      budgeted=False)):
                incumbent, _ = self._move(incumbent, back)
        return incumbent

    def _star(self, incumbent: TrialConfig, tests: list[_Test]) -> tuple[TrialConfig, list[_Gone]]:
        """The pass: rounds of the incumbent and the incumbent less each open knob, each once, in a random order,
        until every knob's test has ended; a knob that ends without a share goes at once (the incumbent after it,
        and the knobs that went)."""
        tuner = self.tuner
        ident = decision_id(Phase.LEAN, incumbent, incumbent)  # the pass's name, in its trials' tags
        for test in tests:
            self._build(test, incumbent, ident)
        gone: list[_Gone] = []
        for index in itertools.count():
            running = [t for t in tests if t.arm is not None and not t.ended]
            if not running:
                break
            self._round(ident, index, incumbent, running)
            for test in sorted((t for t in running if t.ended), key=lambda t: t.result.ratio or 0.0):
                assert test.arm is not None and test.on is not None  # running tests have both
                decision = tuner.decider.store(Phase.LEAN, test.arm, test.on, test.pairs, test.result, test.design,
                                               test.why(), test.orders, test.lost, test.designs)
                if _shows_share(decision) or _gone_from(incumbent, tuner.base, test.knob):
                    continue  # it stays, or it went out already with a knob it means nothing without
                to = self._without(incumbent, test.knob)
                if to is None:
                    continue  # the search cannot measure the incumbent without it: it stays
                after, moved = self._move(incumbent, to)  # not where the rest cannot train the same without it
                if moved:
                    gone.append(_Gone(test.knob, test.value, decision, after))
                if after != incumbent:
                    incumbent = after
                    for other in (t for t in tests if not t.ended):
                        if other.tried:
                            other.went.append((f"{test.knob}={test.value}", other.tried))
                        self._build(other, incumbent, ident)
        return incumbent, gone

    def _build(self, test: _Test, incumbent: TrialConfig, ident: str) -> None:
        """Point `test` at `incumbent` less its knob (None where the search cannot measure that, or once the knob
        went out with a knob it means nothing without); its prior, once."""
        gone = _gone_from(incumbent, self.tuner.base, test.knob)
        test.arm, test.on = None if gone else self._without(incumbent, test.knob), incumbent
        if test.arm is not None and test.prior is None:  # its own trials in this pass are its evidence, not its prior
            ledger = self.tuner.ledger
            test.own = wider(ledger.noise(), ledger.pair_noise(test.arm, incumbent, leave_out=ident))
            test.prior = search_noise(test.own)
            test.result = step([], test.design, test.prior)

    def _round(self, ident: str, index: int, incumbent: TrialConfig, running: list[_Test]) -> None:
        """Measure the incumbent and each running test's arm once, in a random order; each test takes its pair."""
        order: list[_Test | None] = [None, *running]
        random.Random(f"{self.tuner.settings.seed}/{ident}/{index}").shuffle(order)
        asks = []
        for test in order:
            config = incumbent if test is None else test.arm
            assert config is not None
            asks.append(Ask(config, Phase.LEAN, f"#{ident}:{index}" + ("" if test is None else f"-{test.knob}")))
        # one round: in lockstep, every configuration of it timed in turns in the same seconds
        speeds = dict(enumerate(self.tuner.measure_round(asks, first=0, budgeted=False)))
        middle = order.index(None)
        for slot, test in enumerate(order):
            if test is not None:
                assert test.arm is not None  # a running test's
                test.take(speeds[slot], speeds[middle], "AB" if slot < middle else "BA",
                          self.tuner.ledger.pair_noise(test.arm, incumbent))

    def _move(self, incumbent: TrialConfig, to: TrialConfig) -> tuple[TrialConfig, bool]:
        """Make `to` the incumbent where its numerics pass the guard; the incumbent after, and whether it moved."""
        tuner = self.tuner
        verdict = tuner.guarded(to)
        if verdict is not None and not verdict.ok:
            return incumbent, False
        with tuner.workers.lock.held():
            added = tuner.ledger.chain_add(to, over=incumbent, again=True)
        return (to if added else tuner.ledger.incumbent()), added

    def _without(self, incumbent: TrialConfig, knob: str, quiet: bool = False) -> TrialConfig | None:
        """`incumbent` with `knob` back at the user's baseline, and with it each changed knob that means nothing
        without it (auto_scale_loss=False, without mixed_float16); None where the search cannot measure that."""
        base = self.tuner.base
        values = {**changed_knobs(incumbent, base), knob: getattr(base, knob)}
        try:
            less = base.replace(**values)
            values.update({k: getattr(base, k) for k in changed_knobs(less, base) if get_knob(k).idle_in(less)})
        except KnobError:
            pass  # refused by `config_of` below, which says why
        return self.tuner.config_of(values, quiet=quiet)


def _gone_from(incumbent: TrialConfig, base: TrialConfig, knob: str) -> bool:
    """`knob` is back at the user's baseline in `incumbent`: it went out with a knob it means nothing without."""
    return bool(getattr(incumbent, knob) == getattr(base, knob))


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
                             "taken out" if decision.purpose == Phase.LEAN else "added alone",
                             decision.low, decision.high, decision.confidence).to_dict())
    return out
