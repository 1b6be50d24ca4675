"""Small changes estimated together: a two-level fractional factorial on top of the incumbent.

After the big winners, the changes left (4-10% each, below what a few pairs
resolve one at a time at a 10% trial noise) are measured together: each run
of a two-level design (`design`) is the incumbent with some of them on, in a
random order. On the log scale each change's main effect on top of the
incumbent is estimated from every run (`effects`): its standard error is
about 2 sigma / sqrt(N) for N runs, against sigma sqrt(2) for one pair, so 8
runs estimate up to 7 changes about as well as 4 pairs each would.
A change that clashes with the incumbent shows as a negative effect.

The runs only choose which changes to build on: they are never evidence in a
decision or in the verification, which are made on fresh pairs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import numpy as np

from fitspeed.core.config import TrialConfig
from fitspeed.core.json_data import JSONObject
from fitspeed.search.decider import STOP_SHARE, Measure, Once, decision_id
from fitspeed.search.ledger import FACTORIAL, Ledger
from fitspeed.search.phase import Phase


MAX_FACTORS = 7  # an 8-run design estimates at most 7 main effects
# columns of the 8-run design, in the order taken: the three base factors, then their three-way product
# (a 2^(4-1) design of resolution IV for four changes), then the two-way products
_EIGHT = ((1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1), (1, 1, 0), (1, 0, 1), (0, 1, 1))


def design(k: int) -> list[list[int]]:
    """The runs of a two-level design for `k` changes (1-7): each a list of +1 (on) or -1 (off), one per change.

    Four runs for up to 3 changes, eight for up to 7; every column is balanced
    and orthogonal to every other, so each main effect is estimated from all runs.

    >>> design(2)
    [[-1, -1], [1, -1], [-1, 1], [1, 1]]
    >>> rows = design(5)
    >>> len(rows), [sum(r[j] for r in rows) for j in range(5)]
    (8, [0, 0, 0, 0, 0])
    """
    if not 1 <= k <= MAX_FACTORS:
        raise ValueError(f"Expected 1 to {MAX_FACTORS} changes. Received: {k}.")
    if k <= 3:
        base = [(a, b) for b in (-1, 1) for a in (-1, 1)]
        columns = [lambda r: r[0], lambda r: r[1], lambda r: r[0] * r[1]]
        return [[columns[j](r) for j in range(k)] for r in base]
    rows = []
    for c in (-1, 1):
        for b in (-1, 1):
            for a in (-1, 1):
                levels = (a, b, c)
                rows.append([math.prod(levels[i] for i in range(3) if mask[i]) for mask in _EIGHT[:k]])
    return rows


def run_order(n: int, seed: object, ident: str) -> list[int]:
    """The order the runs are measured in: a random permutation, the same on a resumed run.

    >>> sorted(run_order(8, 1, "x")) == list(range(8)), run_order(8, 1, "x") == run_order(8, 1, "x")
    (True, True)
    """
    order = list(range(n))
    random.Random(f"{seed}/{ident}/factorial").shuffle(order)
    return order


def estimate(ledger: Ledger, measure: Measure, once: Once, seed: object, incumbent: TrialConfig,
             members: list[str], run: Callable[[list[int]], TrialConfig | None]) -> list[float] | None:
    """Each of `members`' effect on top of `incumbent`, from one two-level design; stored, made by one worker.

    `run(on)` is the configuration of one run: the incumbent with the members
    whose entry in `on` is +1 (None: the backend cannot do it, not measured).
    The runs are measured in a random order (`run_order`), each a fresh trial
    of its own (phase "factorial"), cut short like a decision's candidate when
    clearly slower than the incumbent. None when the runs measured cannot
    estimate every effect (the budget ran out, runs failed).
    """
    rows = design(len(members))
    ident = decision_id(Phase.FACTORIAL, incumbent, run([1] * len(members)) or incumbent)

    def compute() -> JSONObject:
        figure = ledger.figure(incumbent)
        logs: list[float | None] = [None] * len(rows)
        order = run_order(len(rows), seed, ident)
        for index in order:
            config = run(rows[index])
            if config is None:
                continue
            record = measure(config, Phase.FACTORIAL, f"#{ident}:f{index}", stop_below=figure and STOP_SHARE * figure)
            if record is None:
                break
            speed = record.throughput
            logs[index] = math.log(speed) if speed else None
        result = {"id": ident, "incumbent": incumbent.to_dict(), "members": members, "rows": rows,
                  "order": order, "logs": logs, "effects": effects(rows, logs)}
        ledger.put_factorial(ident, result)
        return result

    done = once(FACTORIAL + ident, lambda: ledger.factorial(ident), compute)
    return list(done["effects"]) if done.get("effects") is not None else None


def effects(rows: Sequence[Sequence[int]], logs: Sequence[float | None]) -> list[float] | None:
    """Each change's main effect on the log speed (on minus off), by least squares.

    Runs whose log is None (failed, not measured) are left out; None when the
    runs left cannot estimate every effect. Eight runs have too few to spare
    to tell a starved run from the one the design pairs it with, so none is
    left out: one run at 0.5x moves every effect by 0.17 on the log scale,
    and the fresh pairs that decide the changes built on are what catches it.

    >>> rows = design(4)
    >>> logs = [0.1 * r[0] + 0.02 * r[1] for r in rows]
    >>> [round(e, 3) + 0.0 for e in effects(rows, logs)]  # + 0.0: no -0.0
    [0.2, 0.04, 0.0, 0.0]
    >>> logs[3] = None  # a run that failed: the other seven still estimate four effects
    >>> [round(e, 3) + 0.0 for e in effects(rows, logs)]  # + 0.0: no -0.0
    [0.2, 0.04, 0.0, 0.0]
    """
    kept = [(r, y) for r, y in zip(rows, logs, strict=True) if y is not None]
    k = len(rows[0]) if rows else 0
    if len(kept) < k + 1:
        return None
    x = np.array([[1.0, *map(float, r)] for r, _ in kept])
    if np.linalg.matrix_rank(x) < k + 1:
        return None
    coef = np.linalg.lstsq(x, np.array([y for _, y in kept]), rcond=None)[0]
    return [2.0 * float(c) for c in coef[1:]]  # a coefficient is half the on-minus-off difference
