"""The paired decider: B against A in fresh pairs, each in a random order, until the design decides.

Every decision of the search is one `fitspeed.core.sequential` design, made
on trials measured for it alone: a trial that selected a candidate (its
screen trial, a sampler trial) is never evidence in that candidate's
decision. Pair `index` of decision `ident` measures B first or A first by a
fair coin (`pair_order`), the same coin on a resumed run, so the second slot's
advantage (measured here: the second of two back-to-back trials ran several
percent faster) averages out instead of favouring one side. No pair is ever
dropped: a pair whose incumbent's trial failed has no ratio, so it is kept
in the decision's `lost_pairs` with the trial's status and reason, counted
against the design's `max_pairs`, and shown; every other pair enters the
estimate, which is robust instead (a Huber M-estimate).

The designs (`combine_design`, `verify_design`):
- a combination step asks "does the evidence lean towards this change?",
  one-sided at 35% over all its looks (a 30% repeated interval), looks from
  the first pair to 3, futile when an 80% interval's upper end is below
  1 + 2 min_gain. It is a choice of what to build on, not a claim: a budget
  of 40 trials at a 10% trial-to-trial noise cannot prove each of three
  1.25x steps at 5% and still verify, and a 5-10% step that is left out is
  speed the answer never has. Its operating characteristics at a paired
  noise of 0.14 (about 10% per trial), 4,000 simulated steps each: it keeps
  a change that is truly 0.90x 7% of the time, 0.95x 16%, 1.00x 32% (a
  neutral change kept costs nothing), 1.05x 52%, 1.10x 69%, 1.25x 97%, in
  1.3-1.9 pairs on average (at 20% it kept 1.05x a third of the time and
  1.10x half of it, and the simulated search was right 9 points less
  often). The claim is the verification's, made on fresh pairs;
- the verification asks "is the answer faster than the defaults?", one-sided
  at 2.5% split over the incumbents it may fall back to (the newest alone
  while `verification.MAX_FALLBACKS` is 1), halving from the newest
  (`verify_share`: a 95% repeated interval when there is one, 2/3 of
  2.5% for the newest of two), looks from 3 pairs, so that one starved trial
  on either side can neither make nor hide a claim; up to 4 x `--pairs` pairs
  for the newest, `--pairs` for an incumbent it falls back to.

The noise the verification starts from is each side's own (`Ledger.pair_noise`):
the spread of A's own trials and of B's own trials in the study, never this
decision's, combined with Welch-Satterthwaite degrees of freedom; nothing is
borrowed from other configurations, so an answer noisier than the defaults
gets the wider interval it deserves, and a side with fewer than two trials
gives no prior. A search step starts from the study's pooled noise
(`Ledger.noise`: the screen's baselines and earlier decisions' pairs) or the
two sides' own where that is noisier (`wider`), with SEARCH_PRIOR pooled
into it (10% per trial, as 4 degrees of freedom: `search_noise`), so that
the study's first steps do not stand on a spread of three baselines. Its
source and degrees of freedom are stored with the decision.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fitspeed.core.config import TrialConfig, config_key
from fitspeed.core.record import TrialRecord
from fitspeed.core.sequential import Design, Noise, Step, Verdict, pair_order, step
from fitspeed.search import studies
from fitspeed.search.decision import Decision, LostPair
from fitspeed.search.events import DecisionMade, OnEvent
from fitspeed.search.ledger import DECISION, Ledger
from fitspeed.search.phase import Phase
from fitspeed.search.storages import StudyLock

COMBINE_ALPHA = 0.35  # a choice, not a claim: see the module's docstring for what it keeps
COMBINE_MAX_PAIRS = 3  # a combination step that has not decided in 3 pairs is a gain too small to chase one at a time
VERIFY_ALPHA = 0.025
CHOOSE_PAIRS = 3  # a head-to-head choice between two alternatives takes this many pairs
CHOOSE_MORE_PAIRS = 5  # or this many, where the budget has room for them and a decision after
VERIFY_MIN_PAIRS = 3  # one starved trial among three pairs moves a Huber estimate by under half a noise sd
VERIFY_PAIRS = 4  # the newest incumbent's most pairs, in --pairs: 2 left 1.4-1.9x answers with a noisier knob
                  # value or load bursts unclaimed (development worlds: +0.0048 of the best speed captured, se 0.0011)
STOP_SHARE = 0.5  # a candidate's trial stops early below this share of the incumbent's figure
SEARCH_PRIOR = Noise(0.14, 4, "a prior of 10% trial noise")  # pooled into every search step's noise, never the claim's

Measure = Callable[..., "TrialRecord | None"]
Once = Callable[[str, Callable[[], Any], Callable[[], Any]], Any]


@dataclass(frozen=True)
class Ask:
    """One trial of a round, as the tuner measures it: a configuration, for a phase, under a tag, and the figure
    below which it stops early (a candidate's)."""

    config: TrialConfig
    phase: Phase
    tag: str = ""
    stop_below: float | None = None


MeasureRound = Callable[..., "list[TrialRecord | None]"]  # (asks, first=, budgeted=, ahead=): a record per ask


def design_of(record: TrialRecord | None) -> str:
    """How a trial was measured: "lockstep" (in a round with others, in turns) or "sequential".

    >>> from fitspeed.core.record import Status, TrialSpec, new_record
    >>> design_of(new_record(TrialSpec(model="tiny"), Status.OK, round={"design": "lockstep"})), design_of(None)
    ('lockstep', 'sequential')
    """
    found = (record.extra.get("round") or {}) if record is not None else {}
    return str(found.get("design") or "sequential")


def combine_design(pairs: int, min_gain: float) -> Design:
    """A combination step's design for `--pairs` and `--min-gain`.

    >>> combine_design(5, 0.05).max_pairs, round(combine_design(5, 0.05).confidence, 2)
    (3, 0.3)
    """
    top = min(max(2, 2 * pairs), COMBINE_MAX_PAIRS)
    return Design(COMBINE_ALPHA, top, 1, 2 * min_gain, futile_from=1)


def search_noise(measured: Noise | None, prior: Noise | None = None) -> Noise:
    """The noise a search step starts from: the study's, pooled with `prior` (SEARCH_PRIOR) as so many degrees of freedom.

    A study's first decisions stand on a noise from one to three degrees of
    freedom: three screen baselines that agreed closely (a spread of 0.04
    where a paired log ratio truly spreads 0.14) let one pair decide a step
    that was noise. SEARCH_PRIOR (10% per trial, 4 degrees of freedom) keeps
    a step to the evidence it has; its weight fades as the study's own
    degrees of freedom grow. Only the search's choices use it: the
    verification's noise is the study's and its own pairs' alone, and its
    level holds on those (`benchmarks/verification_aa.py`).

    >>> round(search_noise(Noise(0.04, 2)).sd, 3), search_noise(Noise(0.04, 2)).df
    (0.117, 6)
    >>> round(search_noise(None).sd, 2), round(search_noise(Noise(0.3, 60)).sd, 3)
    (0.14, 0.293)
    """
    prior = prior or SEARCH_PRIOR
    if measured is None or measured.df == 0:
        return prior
    df = measured.df + prior.df
    sd = math.sqrt((measured.df * measured.sd ** 2 + prior.df * prior.sd ** 2) / df)
    return Noise(sd, df, f"{measured.source} and {prior.source} ({prior.df} degrees of freedom)")


def wider(pooled: Noise | None, own: Noise | None) -> Noise | None:
    """The noisier of the study's pooled noise and the two sides' own (`Ledger.pair_noise`), for a search step.

    A search step may stand on the study's pooled noise (it is a choice, not a
    claim), but never on one quieter than its own two configurations have
    shown: a configuration that contends for threads would otherwise win its
    steps by luck.

    >>> wider(Noise(0.1, 20, "pooled"), Noise(0.3, 3, "own")).source, wider(Noise(0.1, 20), None).sd
    ('own', 0.1)
    """
    if pooled is None or (own is not None and own.sd > pooled.sd):
        return own
    return pooled


def verify_share(fallbacks: int, index: int = 0) -> float:
    """The share of the verification's 2.5% spent on the `index`-th incumbent tried (0: the newest) of `fallbacks`.

    Halving from the newest (4/7, 2/7, 1/7 of three; 2/3, 1/3 of two): the
    shares sum to 1, so the study's claim stays at 2.5% (Bonferroni with
    weights fixed before the first pair), and most of it goes where the
    search's answer is. An older incumbent is a fallback for a last step
    that was a mistake; its gain is usually the larger part of the newest's.

    >>> [round(verify_share(3, i), 3) for i in range(3)], verify_share(1)
    ([0.571, 0.286, 0.143], 1.0)
    """
    n = max(1, fallbacks)
    if not 0 <= index < n:
        raise ValueError(f"Expected an incumbent's index below {n}. Received: {index}.")
    return float(2 ** (n - 1 - index) / (2 ** n - 1))


def verify_design(pairs: int, min_gain: float, fallbacks: int, index: int = 0) -> Design:
    """The verification's design for the `index`-th incumbent tried (0: the newest) of `fallbacks`.

    Its one-sided error is that incumbent's share of 2.5% (`verify_share`).
    The newest is looked at up to VERIFY_PAIRS x `pairs` pairs, an incumbent the
    verification falls back to up to `pairs`: on the simulator's development
    seeds no study's claim came from a fallback (300 studies where something
    helps), while a fallback that ran to 10 pairs cost 20 trials. Futility
    asks for twice min_gain: a gain too small to show in this many pairs is
    not worth the rest of them. A big win still stops at the first look; the
    later looks are for an answer whose trials scatter (a noisier knob value,
    load bursts), where 10 pairs left 1.4-1.9x answers unclaimed.

    >>> d = verify_design(5, 0.05, 3)
    >>> round(d.alpha, 4), d.min_pairs, d.max_pairs, round(d.confidence, 3)
    (0.0143, 3, 20, 0.971)
    >>> fallback = verify_design(5, 0.05, 3, index=2)
    >>> round(fallback.alpha, 4), fallback.max_pairs, verify_design(5, 0.05, 1).alpha
    (0.0036, 5, 0.025)
    """
    top = max(2, VERIFY_PAIRS * pairs) if index == 0 else max(2, pairs)
    first = min(VERIFY_MIN_PAIRS, top)
    return Design(VERIFY_ALPHA * verify_share(fallbacks, index), top, first, 2 * min_gain, futile_from=first)


def choose_design(pairs: int, room: bool = False) -> Design:
    """Two alternatives head to head (two mixed precisions): a fixed number of fresh pairs, the better estimate wins.

    Both already beat what they replace, so the question is which to build
    on, not whether either helps: B is kept when its robust estimate is above
    1 after CHOOSE_PAIRS pairs, or CHOOSE_MORE_PAIRS where the budget has
    `room` for them, "no gain" when below (no early stop, no interval worth
    printing). The cost is fixed; the chance of keeping the slower of two 7%
    apart at a 10% trial noise is about a fifth in 3 pairs, an eighth in 5.

    >>> d = choose_design(5)
    >>> d.min_pairs, d.max_pairs, choose_design(5, room=True).max_pairs
    (3, 3, 5)
    """
    n = max(1, min(CHOOSE_MORE_PAIRS if room else CHOOSE_PAIRS, pairs))
    return Design(0.49, n, n, 0.0, futile_from=n, futility_z=0.0)


def decision_id(purpose: Phase, a: TrialConfig, b: TrialConfig) -> str:
    """A short name for the comparison of `b` with `a`, the same on a resumed run.

    Hashed from the purpose's text, so a study stored before `Phase` keeps its ids:

    >>> a, b = TrialConfig(), TrialConfig(jit_compile=True)
    >>> decision_id(Phase.COMBINE, a, b), decision_id(Phase.VERIFY, a, b)
    ('658c1441', '19fd52ec')
    """
    text = f"{purpose}|{config_key(a)}|{config_key(b)}"
    return hashlib.sha1(text.encode()).hexdigest()[:8]


class Decider:
    """Makes and stores paired decisions; one worker makes each, the others read its answer."""

    def __init__(self, ledger: Ledger, measure: Measure, once: Once, lock: StudyLock, emit: OnEvent,
                 seed: int, measure_round: MeasureRound | None = None) -> None:
        self.ledger = ledger
        self.measure = measure
        self.once = once
        self.lock = lock
        self.emit = emit
        self.seed = seed
        self.measure_round: MeasureRound = measure_round or self._one_by_one

    def _one_by_one(self, asks: list[Ask], first: int = 0, budgeted: bool = True,
                    ahead: int = 0) -> list[TrialRecord | None]:
        """A round's trials measured one after another with `measure`, `first` first (no runner for rounds)."""
        order = [first, *(i for i in range(len(asks)) if i != first)]
        records: list[TrialRecord | None] = [None] * len(asks)
        for n, i in enumerate(order):
            ask = asks[i]
            records[i] = self.measure(ask.config, ask.phase, ask.tag, budgeted=budgeted, stop_below=ask.stop_below,
                                      ahead=ahead + len(order) - 1 - n)
            if records[i] is None:
                break
        return records

    def decide(self, purpose: Phase, a: TrialConfig, b: TrialConfig, design: Design,
               budgeted: bool = True) -> Decision:
        """Compare `b` with `a` in fresh interleaved pairs until `design` decides; stored and returned.

        One that ran out of budget is taken up again when the budget allows more pairs.
        """
        ident = decision_id(purpose, a, b)

        def stored() -> Decision | None:
            found = self.ledger.decision(ident)
            if found and (found.why != "the budget ran out" or self.ledger.spent() or not budgeted):
                return found
            return None

        decision: Decision = self.once(DECISION + ident, stored, lambda: self._decide(purpose, a, b, design, budgeted))
        return decision

    def _decide(self, purpose: Phase, a: TrialConfig, b: TrialConfig, design: Design,
                budgeted: bool) -> Decision:
        ident = decision_id(purpose, a, b)
        own = self.ledger.pair_noise(a, b, leave_out=ident)
        prior = own if purpose == Phase.VERIFY else search_noise(wider(self.ledger.noise(), own))
        pairs: list[tuple[float, float]] = []
        orders: list[str] = []
        lost: list[LostPair] = []
        designs: list[str] = []
        why = None
        result = step([], design, prior)
        for index in range(design.max_pairs):
            if result.verdict:
                break
            b_first = pair_order(self.seed, ident, index)
            figure = self.ledger.figure(a)
            stop_below = figure and STOP_SHARE * figure
            # a comparison starts only if it can reach its first look; then a pair is claimed whole, as one round
            ahead = 2 * design.min_pairs - 2 if index == 0 else 0
            record_a, record_b = self.measure_round(
                [Ask(a, purpose, f"#{ident}:{index}a"), Ask(b, purpose, f"#{ident}:{index}b", stop_below or None)],
                first=1 if b_first else 0, budgeted=budgeted, ahead=ahead)
            if record_b is not None and record_b.throughput is None:
                why = f"{record_b.status}: {record_b.reason or 'no reason given'}"
                result = step([], design, prior)
                break
            if record_a is None or record_b is None:
                why = "the budget ran out"
                break
            speed_a, speed_b = record_a.throughput, record_b.throughput
            if speed_a is None or speed_b is None:
                # the incumbent's trial failed this time: the pair is kept in the record with its reason, and
                # it uses one of the design's pairs, but a ratio it does not have cannot enter the estimate
                lost.append(LostPair(pair=index, order="BA" if b_first else "AB", side="a",
                                     status=str(record_a.status), reason=record_a.reason or "no reason given"))
                continue
            pairs.append((speed_a, speed_b))
            orders.append("BA" if b_first else "AB")
            designs.append(design_of(record_b))
            result = step([sb / sa for sa, sb in pairs], design, prior)
        return self.store(purpose, a, b, pairs, result, design, why, orders, lost, designs)

    def store(self, purpose: Phase, a: TrialConfig, b: TrialConfig, pairs: list[tuple[float, float]],
              result: Step, design: Design | None, why: str | None = None,
              orders: list[str] | None = None, lost: list[LostPair] | None = None,
              designs: list[str] | None = None) -> Decision:
        decision = Decision(
            id=decision_id(purpose, a, b), purpose=Phase(purpose), a=a, b=b,
            verdict=result.verdict or Verdict.NOT_CONFIRMED, pairs=tuple(pairs),
            orders=tuple(orders or ()), ratio=result.ratio, low=result.low, high=result.high,
            confidence=result.confidence, noise=result.noise, min_gain=design.min_gain if design else None,
            why=why, design=design.to_dict() if design else None, lost_pairs=tuple(lost or ()),
            measured_by=tuple(designs or ()))
        with self.lock.held():  # one order for all workers
            changed = self.ledger.put_decision(decision)
        if changed:
            self.emit(DecisionMade(decision))
        return decision
