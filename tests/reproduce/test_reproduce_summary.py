"""The summary and table of a reproduction, from records (no trials): baselines, percentages, marks."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record
from fitspeed.reproduce.data import templates
from fitspeed.reproduce.experiment import (
    Plan,
    Results,
    Row,
    run,
    summarize,
    trial_count,
)
from fitspeed.reproduce.output import chart_data, markdown, table


def _record(speed: float, accuracy: float, seed: int = 0, **fields: Any) -> TrialRecord:
    """An ok trial of seed `seed` (a reproduction's engine note in `reproduce`, where given, says its seed)."""
    return new_record(TrialSpec(model="tiny", seed=seed), Status.OK, **fields,
                        metrics={"samples_per_s": {"median": speed}, "val_accuracy": accuracy},
                        environment={"cpu": "test CPU", "cpu_count": 2, "cpu_features": ["avx2"],
                                     "backend": "tensorflow", "versions": {"keras": "3"}, "onednn": False})


def _plan(seeds: tuple[int, ...]) -> Plan:
    spec = TrialSpec(model="tiny", mode="train", steps=4)
    rows = (Row("a", {"knob": "base"}, spec, group="g", baseline=True),
            Row("b", {"knob": "fast"}, spec, group="g", article=90.0),
            Row("c", {"knob": "gone"}, None, group="g", skipped="needs a second device"))
    return Plan("demo", "000", "t", "claim", "a TPU", (("knob", "knob"),), rows, seeds, "sizes",
                article_unit="% of base")


def test_percent_of_baseline_time_and_the_accuracy_mark() -> None:
    results = Results(_plan((0, 1)), "templates")
    results.records = {"a": [_record(100.0, 0.80, 0), _record(100.0, 0.82, 1)],
                       "b": [_record(200.0, 0.70, 0), _record(200.0, 0.71, 1)]}
    summary = summarize(results)
    a, b, c = summary["rows"]
    assert a["percent_of_baseline_time"] == 100.0 and b["percent_of_baseline_time"] == 50.0
    assert b["accuracy"]["n"] == 2 and "more than the band" in b["accuracy_mark"]
    assert a["accuracy_mark"] is None and c["status"] == "skipped"
    shown = table(summary)
    assert shown["headers"][:4] == ["knob", "status", "samples/s", "time % of baseline"]
    assert shown["rows"][2][1] == "skipped: needs a second device"
    assert "⚠" in shown["rows"][1][-1]
    assert "no accelerator here" in markdown(summary)
    assert [bar["label"] for bar in chart_data(summary)["bars"]] == ["a", "b"]


def test_within_the_spread_is_not_marked() -> None:
    results = Results(_plan((0, 1)), "templates")
    results.records = {"a": [_record(100.0, 0.70, 0), _record(100.0, 0.90, 1)],
                       "b": [_record(100.0, 0.75, 0), _record(100.0, 0.80, 1)]}
    assert summarize(results)["rows"][1]["accuracy_mark"] is None


def test_a_row_with_seeds_of_its_own_runs_only_those() -> None:
    spec = TrialSpec(model="tiny", mode="train", steps=4)
    plan = _plan((0, 1))
    plan = dataclasses.replace(plan, rows=(plan.rows[0], Row("d", {"knob": "one seed"}, spec, group="g", seeds=(0,))))
    ran: list[int] = []

    def fake(trial: TrialSpec) -> TrialRecord:
        ran.append(trial.seed)
        return _record(100.0, 0.8)

    results = run(plan, "templates", run_trial=fake)
    assert trial_count(plan) == len(ran) == 3
    assert [r.extra["reproduce"]["seed"] for r in results.records["a"]] == [0, 1]
    assert [r.extra["reproduce"]["seed"] for r in results.records["d"]] == [0]


def test_templates_are_learnable_by_nearest_template() -> None:
    """Classes differ by their pattern: the nearest class mean classifies held-out samples well above chance."""
    x, y, xt, yt = templates((16, 16, 3), 10, 1000, 200, seed=3)
    means = np.stack([x[y == k].mean(axis=0) for k in range(10)])
    nearest = np.argmin(((xt[:, None] - means[None]) ** 2).sum(axis=(2, 3, 4)), axis=1)
    accuracy = float(np.mean(nearest == yt))
    assert accuracy > 0.3, accuracy


def test_two_runs_of_one_seed_are_no_spread() -> None:
    """Article 003 runs each row twice from one seed: the runs repeat each other, so only the floor decides."""
    results = Results(_plan((0,)), "templates")
    results.records = {"a": [_record(100.0, 0.80, reproduce={"seed": 0})] * 2,
                       "b": [_record(100.0, 0.79, reproduce={"seed": 0})] * 2}
    assert summarize(results)["rows"][1]["accuracy_mark"] is None  # one point below: within the 2-point floor
    results.records["b"] = [_record(100.0, 0.75, reproduce={"seed": 0})] * 2
    mark = summarize(results)["rows"][1]["accuracy_mark"]
    assert mark and "one seed, no spread" in mark


def test_the_mark_is_one_sided_and_scaled_by_the_spread_over_seeds() -> None:
    results = Results(_plan((0, 1, 2)), "templates")
    base = [_record(100.0, a, reproduce={"seed": s}) for s, a in enumerate((0.70, 0.80, 0.75))]
    results.records = {"a": base,
                       "b": [_record(100.0, a, reproduce={"seed": s}) for s, a in enumerate((0.95, 0.96, 0.97))]}
    assert summarize(results)["rows"][1]["accuracy_mark"] is None  # far better: never marked
    results.records["b"] = [_record(100.0, a, reproduce={"seed": s}) for s, a in enumerate((0.66, 0.70, 0.68))]
    assert summarize(results)["rows"][1]["accuracy_mark"] is None  # 7 points below, within 3 sd (5 points each)
    results.records["b"] = [_record(100.0, a, reproduce={"seed": s}) for s, a in enumerate((0.55, 0.58, 0.56))]
    assert "more than the band" in summarize(results)["rows"][1]["accuracy_mark"]
