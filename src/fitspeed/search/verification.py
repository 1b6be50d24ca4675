"""Verification: the one claim a study makes, on fresh trials, at its stated level.

The newest incumbent is compared with the defaults in fresh pairs
(`Decider`, `verify_design`), one-sided at 2.5%, in up to 4 x `--pairs`
pairs. With MAX_FALLBACKS above 1, an incumbent not confirmed faster would
be followed by the one before it, and so on, the 2.5% split over them
(Bonferroni with weights fixed before the first pair, halving from the
newest: `verify_share`) and a fallback verified in at most `--pairs` pairs;
it is 1, since on the simulator's development seeds no claim came from a
fallback, while a fallback cost up to 10 trials and left the newest only
4/7 of the 2.5% (of three).
Either way, on a machine where nothing helps the study claims a speed-up at
most 2.5% of the time. The chain is fixed before the verification's first
trial and none of its trials was seen by the search. "Keep the defaults"
when none is confirmed.

The verdict the user sees is this decision's: its robust estimate, its
repeated confidence interval and the interval's level.
"""

from __future__ import annotations

from fitspeed.core.config import TrialConfig
from fitspeed.core.json_data import JSONObject
from fitspeed.core.sequential import Design, Noise, level, median_unbiased
from fitspeed.search.decider import Decider, verify_design
from fitspeed.search.decision import Decision
from fitspeed.search.events import OnEvent, VerificationStarted
from fitspeed.search.lean import shares_of
from fitspeed.search.ledger import BUDGET, Ledger
from fitspeed.search.phase import Phase

MAX_FALLBACKS = 1  # verification tries at most this many incumbents, newest first: the newest alone


def verify(ledger: Ledger, decider: Decider, emit: OnEvent, pairs: int, min_gain: float,
           has_baseline: bool) -> JSONObject:
    """Verify the chain of incumbents against the defaults; the stored verification."""
    chain = ledger.incumbents()
    base = ledger.base
    # the lean step may take every change out of the answer (none showed a share of its own): the newest incumbent
    # is then the defaults, and there is nothing to verify (an older one holds what the lean step took out)
    leaned_away = bool(chain) and chain[-1] == base
    candidates = [] if leaned_away else list(reversed(chain))[:MAX_FALLBACKS]
    design = verify_design(pairs, min_gain, len(candidates))
    tried: list[Decision] = []
    verification: JSONObject | None = None
    for index, config in enumerate(candidates):
        design = verify_design(pairs, min_gain, len(candidates), index)
        emit(VerificationStarted(config, design.max_pairs))
        decision = decider.decide(Phase.VERIFY, base, config, design, budgeted=False)
        tried.append(decision)
        if decision.verdict.is_faster():
            verification = claim(config, decision, tried, shares_of(ledger.decisions(), config, base))
            break
    if verification is None:
        why = (short_budget(ledger) or "no change was confirmed faster than the baseline in pairs" if not chain
               else "no change showed a share of its own when taken out of the answer" if leaned_away
               else "the speed-up was not confirmed: " + "; ".join(
                   f"{d.b_label}: {d.verdict}" for d in tried))
        verification = {"config": base.to_dict(), "verdict": "keep the defaults", "claimed": False,
                        "estimate": None, "why": why if has_baseline else "no baseline",
                        "tried": [d.id for d in tried], "design": design.to_dict()}
    earlier = len({d.id for d in ledger.decisions() if d.purpose == Phase.VERIFY} - {d.id for d in tried})
    if earlier:  # a run after an earlier one changed the answer: its verification is a fresh 2.5% test
        verification["earlier_verifications"] = earlier
        if verification["claimed"]:
            verification["verdict"] = rerun_verdict(str(verification["verdict"]), earlier)
            verification["estimate"]["verdict"] = verification["verdict"]
    verification["chain"] = [c.to_dict() for c in chain]
    return verification


def rerun_verdict(verdict: str, earlier: int) -> str:
    """A claim made after `earlier` verifications of the same study, saying so: each is a 2.5% test of its own.

    >>> rerun_verdict("B is at least 1.20× faster (95% CI 1.20–1.50; estimate 1.31×)", 1)
    'B is at least 1.20× faster (95% CI 1.20–1.50; estimate 1.31×); verified on a rerun of this study, after 1 earlier verification: each is its own 2.5% test, so running a study again until it claims raises the chance of a false claim'
    """
    return (f"{verdict}; verified on a rerun of this study, after {earlier} earlier "
            f"verification{'s' if earlier > 1 else ''}: each is its own 2.5% test, so running a study again until "
            "it claims raises the chance of a false claim")


def short_budget(ledger: Ledger) -> str | None:
    """Why no change was decided, when the budget was the reason: --screen-only, or a budget that paid for the screen
    and no more (a study from before such budgets were refused)."""
    plan = ledger.study.user_attrs.get(BUDGET) or {}
    if plan.get("screen_only"):
        return ("screened only (--screen-only): each knob was timed once, beside the baseline; nothing was decided, "
                "so nothing is claimed. The screen's ratios are single trials: tune without --screen-only to decide")
    if not plan or plan.get("trials", 0) >= plan.get("smallest", 0):
        return None
    return (f"no change was decided: --trials {plan['trials']} paid for the screen and little more; "
            f"--trials {plan['smallest']} screens, decides and verifies on this space, and the default, "
            f"--trials {plan['suggested']}, pays for several")


def claim(config: TrialConfig, decision: Decision, tried: list[Decision],
          shares: list[JSONObject] | None = None) -> JSONObject:
    """The verification's claim from its decision: the estimate and interval the user sees, and each knob's share
    (`fitspeed.search.lean.shares_of`)."""
    confidence = decision.confidence
    ratios = [b / a for a, b in decision.pairs]
    unbiased = unbiased_estimate(decision)
    # the lower bound first: it is what the claim guarantees at its level; then the estimate with the stopping
    # rule's bias taken out (a sequential design stops on lucky runs)
    verdict = (f"B is at least {decision.low:.2f}× faster ({level(confidence)} CI "
               f"{decision.low:.2f}–{decision.high:.2f}; estimate {unbiased:.2f}×)")
    estimate = {"ratios": ratios, "median": unbiased, "at_stop": decision.ratio, "ci_low": decision.low,
                "ci_high": decision.high, "confidence": confidence, "verdict": verdict,
                "statistic": "median-unbiased estimate of the mean log ratio (stage-wise order; the Huber estimate "
                             "at the stop is at_stop)", "pairs": len(ratios),
                "noise": decision.noise.to_dict() if decision.noise else None, "orders": list(decision.orders)}
    return {"config": config.to_dict(), "estimate": estimate, "claimed": True, "verdict": verdict,
            "why": None, "decision": decision.id, "tried": [d.id for d in tried],
            "fell_back": len(tried) > 1, "design": dict(decision.design) if decision.design else None,
            "shares": shares}


def unbiased_estimate(decision: Decision) -> float:
    """The claim's ratio with the stopping rule's bias taken out (`sequential.median_unbiased`), from the
    decision: its design, its pairs, its estimate at the stop and the noise it decided on."""
    found, noise = decision.design, decision.noise
    if decision.ratio is None:
        raise ValueError(f"Expected a decision with an estimate to claim. Received decision {decision.id} without one.")
    if not found or not noise or not decision.pairs:
        return float(decision.ratio)
    design = Design(found["alpha"], found["max_pairs"], found["min_pairs"], found["min_gain"],
                    futile_from=found.get("futile_from", 1))
    pairs = len(decision.pairs)
    prior_df = max(0, int(noise.df) - (pairs - 1))  # the decision's noise pools its prior with its own pairs
    return median_unbiased(design, pairs, float(decision.ratio), Noise(float(noise.sd), int(noise.df)), prior_df)
