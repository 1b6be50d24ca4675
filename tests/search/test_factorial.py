"""The two-level design that estimates small changes together (`fitspeed.search.factorial`); the search's use of it is
tested with the fake runner in test_decisions.py."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from fitspeed.search.factorial import design, effects, run_order


@pytest.mark.parametrize("k", range(1, 8))
def test_every_column_is_balanced_and_orthogonal(k: int) -> None:
    rows = design(k)
    assert len(rows) == (4 if k <= 3 else 8)
    assert k == 1 or len({tuple(r) for r in rows}) == len(rows)
    for i, j in itertools.combinations_with_replacement(range(k), 2):
        assert sum(r[i] * r[j] for r in rows) == (len(rows) if i == j else 0)
    assert all(sum(r[i] for r in rows) == 0 for i in range(k))


def test_each_main_effect_is_estimated_from_every_run() -> None:
    # seven changes in eight runs, each run at 10% noise: each effect's spread is about 2 * 0.1 / sqrt(8),
    # half of what one pair per change gives (0.1 * sqrt(2))
    rng = random.Random(7)
    truth = [0.06, 0.04, -0.5, 0.0, 0.08, -0.02, 0.05]
    errors: list[list[float]] = [[] for _ in truth]
    rows = design(len(truth))
    for _ in range(2000):
        logs = [sum(t * on / 2 for t, on in zip(truth, r, strict=True)) + rng.gauss(0.0, 0.1) for r in rows]
        found = effects(rows, logs)
        assert found is not None
        for e, t, err in zip(found, truth, errors, strict=True):
            err.append(e - t)
    for err in errors:
        assert abs(sum(err) / len(err)) < 0.01
        sd = math.sqrt(sum(e * e for e in err) / len(err))
        assert 0.06 < sd < 0.085  # 2 * 0.1 / sqrt(8) = 0.071; one pair: 0.141


def test_a_failed_run_leaves_the_rest_to_estimate_and_too_few_estimate_nothing() -> None:
    rows = design(4)
    logs: list[float | None] = [0.1 * r[0] for r in rows]
    logs[5] = None
    assert [round(e, 3) for e in effects(rows, logs) or []] == [0.2, 0.0, 0.0, 0.0]
    assert effects(rows, [None] * 4 + logs[4:]) is None


def test_the_run_order_is_random_and_the_same_on_a_resumed_run() -> None:
    orders = {tuple(run_order(8, seed, "abc")) for seed in range(20)}
    assert len(orders) > 10
    assert run_order(8, 3, "abc") == run_order(8, 3, "abc")
