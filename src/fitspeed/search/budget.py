"""What a `--trials` budget buys on a search space: the screen, the decisions and the verification."""

from __future__ import annotations

from fitspeed.search.decider import VERIFY_MIN_PAIRS
from fitspeed.search.space import Dimension

SCREEN_GROUP = 3  # the screen measures the baseline again after this many candidates
DECISIONS = 5  # the default budget pays for the screen, the verification and this many decisions of 2 pairs
SCREEN_ONLY = ("screening only (--screen-only): each knob is timed once beside the baseline; nothing is decided "
               "or verified, and the answer stays the defaults")
VERIFY_RESERVE = 2 * VERIFY_MIN_PAIRS + 1  # kept inside --trials: a verification's first look is 6 trials, 7.0 on average in the simulator


def budget_plan(dims: list[Dimension], trials: int, pairs: int) -> dict[str, int]:
    """What `trials` buys on this space: the screen, the decisions on its best candidates, the verification.

    The screen measures one value of each knob (every value of a knob whose
    values are alternatives), and the baseline again after every
    SCREEN_GROUP of them; a knob measured for its cost alone (deterministic)
    takes one trial; a decision is counted at 2 pairs; the verification at
    its first look, VERIFY_MIN_PAIRS.

    >>> from fitspeed.search.space import Dimension
    >>> plan = budget_plan([Dimension("a", (1,)), Dimension("b", (1, 2), each=True)], 12, 5)
    >>> plan["screen"], plan["smallest"], plan["decisions"]
    (5, 16, 0)
    """
    screened = sum(len(d.values) if d.each else 1 for d in dims if d.searched and not d.cost_only
                   and d.knob != "batch_size")
    costs = sum(1 for d in dims if d.searched and d.cost_only)  # measured once for their cost, in the budget
    screen = screened + costs + 1 + -(-screened // SCREEN_GROUP)  # the baseline first, then after each group
    decision = 2 * 2
    smallest = screen + decision + VERIFY_RESERVE
    left = max(0, trials - VERIFY_RESERVE - screen)
    return {"screen": screen, "verify": VERIFY_RESERVE, "decision": decision, "smallest": smallest,
            "decisions": left // decision, "suggested": screen + VERIFY_RESERVE + DECISIONS * decision}


def refusal(plan: dict[str, int], trials: int) -> str | None:
    """Why `trials` is refused before any trial: it cannot pay for an answer ; None where it pays.

    >>> plan = {"screen": 5, "decision": 4, "verify": 7, "smallest": 16, "suggested": 32}
    >>> print(refusal(plan, 12))  # doctest: +NORMALIZE_WHITESPACE
    Expected a budget that pays for an answer on this search space: the screen takes 5 trials, one decision 4 and
    the verification 7, 16 in all. Received: --trials 12 (trials=12 from Python). Pass --trials 16 or more (the
    default, 32, pays for 5 decisions), or --screen-only (screen_only=True) to time each knob once and decide nothing.
    >>> refusal(plan, 16) is None
    True
    """
    if trials >= plan["smallest"]:
        return None
    return (f"Expected a budget that pays for an answer on this search space: the screen takes {plan['screen']} "
            f"trials, one decision {plan['decision']} and the verification {plan['verify']}, {plan['smallest']} in "
            f"all. Received: --trials {trials} (trials={trials} from Python). Pass --trials {plan['smallest']} or "
            f"more (the default, {plan['suggested']}, pays for {DECISIONS} decisions), or --screen-only "
            f"(screen_only=True) to time each knob once and decide nothing.")
