"""Interleaved pairs: `--until-width` adds pairs until the interval is narrow enough, within a cap."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record
from fitspeed.measure.comparison import check, interleave, width

SPEC = TrialSpec(model="tiny", steps=8, repeats=2)
SPEC_B = replace(SPEC, seed=1)  # the same trial, told apart by its seed


def runner(medians: list[float], best: list[float] | None = None, status: Status = Status.OK) -> Any:
    """A trial runner that gives A the figures at even places and B those at odd places, in turn.

    Each pair runs in a random order, so the runner tells the arms apart by the spec (B's seed is 1).
    """
    fastest = best or medians
    arms = {0: iter(zip(medians[0::2], fastest[0::2])), 1: iter(zip(medians[1::2], fastest[1::2]))}

    def run(spec: TrialSpec) -> TrialRecord:
        median, top = next(arms[spec.seed])
        metrics = {"samples_per_s": {"median": median, "max": top}} if status == Status.OK else None
        return new_record(spec, status, metrics=metrics)

    return run


def test_each_pair_runs_in_a_random_order() -> None:
    comparison = interleave(SPEC, SPEC_B, 40, run=runner([100.0, 110.0] * 40))
    b_first = [b.extra["first"] for _, b in comparison.pairs]
    assert all(a.extra["first"] != b.extra["first"] for a, b in comparison.pairs)
    assert 8 <= sum(b_first) <= 32  # a fair coin: both orders, neither always
    assert comparison.ratios() == pytest.approx([1.1] * 40)  # each ratio is still B over A


def test_each_trial_lands_with_what_it_was_for_and_its_record() -> None:
    landed: list[tuple[str, int, str]] = []
    interleave(SPEC, SPEC_B, 3, run=runner([100.0, 110.0] * 3),
               on_trial=lambda arm, record: landed.append((arm, record.extra["pair"], record.extra["arm"])))
    assert [pair for _, pair, _ in landed] == [0, 0, 1, 1, 2, 2]
    assert all(arm == said for arm, _, said in landed)
    assert all(sorted(arm for arm, p, _ in landed if p == pair) == ["a", "b"] for pair in range(3))


def test_pairs_go_on_until_the_interval_is_narrow_enough() -> None:
    # B/A alternates 1.02, 0.98: the interval narrows as pairs come in
    figures = list(itertools.chain.from_iterable((100.0, 102.0 if i % 2 else 98.0) for i in range(40)))
    comparison = interleave(SPEC, SPEC_B, 2, run=runner(figures), until_width=0.03, max_pairs=40)
    current = width(comparison)
    assert current is not None and current <= 0.03
    assert 3 <= len(comparison.pairs) < 40
    shorter = interleave(SPEC, SPEC_B, 2, run=runner(figures), until_width=0.03, max_pairs=40)
    assert len(shorter.pairs) == len(comparison.pairs)  # the same figures stop at the same pair
    record = comparison.record()
    assert record["until_width"] == 0.03 and record["width"] == pytest.approx(current)


def test_the_cap_stops_a_comparison_that_never_gets_narrow() -> None:
    figures = list(itertools.chain.from_iterable((100.0, 150.0 if i % 2 else 70.0) for i in range(40)))
    comparison = interleave(SPEC, SPEC_B, 2, run=runner(figures), until_width=0.01, max_pairs=6)
    assert len(comparison.pairs) == 6
    assert (width(comparison) or 0) > 0.01


def test_without_a_target_the_pairs_are_what_was_asked() -> None:
    comparison = interleave(SPEC, SPEC_B, 3, run=runner([100.0, 200.0] * 10), max_pairs=30)
    assert len(comparison.pairs) == 3


def test_trials_that_never_finish_do_not_run_to_the_cap() -> None:
    comparison = interleave(SPEC, SPEC_B, 2, run=runner([0.0] * 80, status=Status.CRASHED), until_width=0.05, max_pairs=40)
    assert len(comparison.pairs) == 2 and comparison.estimate() is None


def test_best_reads_each_trials_fastest_window() -> None:
    medians = [100.0, 80.0, 100.0, 120.0, 100.0, 60.0]  # B's medians scatter: interference
    best = [110.0, 111.0, 110.0, 110.0, 110.0, 109.0]  # its fastest windows agree
    by_median = interleave(SPEC, SPEC_B, 3, run=runner(medians, best))
    by_best = interleave(SPEC, SPEC_B, 3, run=runner(medians, best), statistic="best")
    assert by_best.ratios() == pytest.approx([111 / 110, 1.0, 109 / 110])
    assert (width(by_best) or 0) < 0.05 < (width(by_median) or 0)
    assert by_best.record()["statistic"] == "best"


@pytest.mark.parametrize(("statistic", "until", "words"), [
    ("mode", None, "Expected --statistic to be one of mean, median, best. Received: 'mode'."),
    ("median", 0.0, "Expected --until-width to be a width on the ratio B/A"),
    ("median", float("nan"), "Received: nan"),
])
def test_bad_settings_are_one_sentence(statistic: str, until: float | None, words: str) -> None:
    with pytest.raises(UserError, match=words.replace("(", r"\(").replace(".", r"\.")):
        check(statistic, until)
    with pytest.raises(UserError):
        interleave(SPEC, TrialSpec(model="tiny", config=TrialConfig(steps_per_execution=2)), 2,
                   run=runner([1.0] * 4), statistic=statistic, until_width=until)
