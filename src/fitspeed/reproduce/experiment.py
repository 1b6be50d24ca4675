"""A reproduction's plan, the engine that runs it, and the summary every output reads.

A `Plan` is a list of `Row`s, each one configuration as a `TrialSpec`. The
engine runs the rows in turn for each seed (every row of seed 0, then every
row of seed 1, …), each trial a fresh process; rows with `runs` > 1 run that
many times on one seed (article 003's bit-identical check), and a row with
`seeds` runs only those of the plan's. Slow drift on a shared machine so
falls on every row alike.

`summarize` turns the records into plain data: per row the speed (median
samples/s over its trials), the time as a percentage of its baseline row's,
the held-out accuracy (mean, with the min–max spread over seeds), and a mark
where accuracy fell below the baseline's by more than the baseline's spread
over seeds allows: the numerics guard's one-sided check (`guard.compare`, a
calibrated multiple of the seed-to-seed sd), never by less than
`ONE_SEED_TOLERANCE`. Runs of one seed are one value (they repeat each other,
often bit for bit): with one seed there is no spread, the floor alone decides,
and the table says so.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import Metrics, OnTrial, Status, TrialRecord, TrialRunner, TrialSpec, brief_reason
from fitspeed.machine import environment
from fitspeed.search import guard

ONE_SEED_TOLERANCE = guard.ACCURACY_FLOOR  # accuracy a row may always fall below its baseline, unmarked

Extra = Callable[["Row", list[TrialRecord], dict[str, list[TrialRecord]]], JSONObject]


@dataclass(frozen=True)
class Row:
    """One configuration of a reproduction."""

    label: str
    cells: dict[str, Any]  # the experiment's own columns (model, batch, steps_per_execution, …)
    spec: TrialSpec | None  # None: skipped, with `skipped` saying why
    group: str = ""  # rows compare with the baseline row of their group
    baseline: bool = False
    skipped: str | None = None
    article: float | None = None  # the article's figure for this row, in the plan's `article_unit`
    runs: int = 1  # trials per seed (article 003: two runs of one seed, for bit-identity)
    timed: bool = True  # False: a row with no speed of its own to compare (a separate measurement)
    seeds: tuple[int, ...] | None = None  # the plan's seeds this row runs (None: all of them)

    def runs_seed(self, seed: int) -> bool:
        return self.spec is not None and (self.seeds is None or seed in self.seeds)


@dataclass(frozen=True)
class Plan:
    name: str
    article: str  # "000" … "004"
    title: str
    claim: str  # what the article found, in a sentence
    article_setup: str  # the article's hardware and software
    columns: tuple[tuple[str, str], ...]  # (cell key, header) of the experiment's own columns
    rows: tuple[Row, ...]
    seeds: tuple[int, ...]
    sizes: str  # what was run: models, steps, epochs; cut-downs named
    article_unit: str = ""  # what Row.article holds, e.g. "% of the unset time"
    article_table: tuple[dict[str, Any], ...] = ()  # the article's own table, as it printed it
    extra: Extra | None = None  # extra columns from a row's records (and all rows' records)
    extra_columns: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()


@dataclass
class Results:
    plan: Plan
    data: str  # what the trials trained on
    records: dict[str, list[TrialRecord]] = field(default_factory=dict)  # row label -> its records
    started: float = field(default_factory=time.time)
    wall_s: float = 0.0


def trial_count(plan: Plan) -> int:
    return sum(row.runs for seed in plan.seeds for row in plan.rows if row.runs_seed(seed))


def run(plan: Plan, data: str, *, run_trial: TrialRunner, on_trial: OnTrial | None = None) -> Results:
    """Every row for every seed, each trial in a fresh process; `on_trial(row label, record)` as each lands.

    A row whose trial ran past its timeout is not run again: its record says how long it was given.
    """
    results = Results(plan, data)
    started = time.perf_counter()
    runs = max((row.runs for row in plan.rows), default=1)
    for seed in plan.seeds:
        for repeat in range(runs):  # A B C A B C: repeated runs interleave too
            for row in plan.rows:
                if row.spec is None or not row.runs_seed(seed) or repeat >= row.runs:
                    continue
                if any(r.status == Status.TIMEOUT for r in results.records.get(row.label, [])):
                    continue
                record = run_trial(dataclasses.replace(row.spec, seed=seed))
                record = dataclasses.replace(record, extra={**record.extra, "reproduce": {"row": row.label, "seed": seed}})
                results.records.setdefault(row.label, []).append(record)
                if on_trial:
                    on_trial(row.label, record)
    results.wall_s = time.perf_counter() - started
    return results


def _ok(records: list[TrialRecord]) -> list[tuple[TrialRecord, Metrics]]:
    return [(r, r.metrics) for r in records if r.status == Status.OK and r.metrics is not None]


def speed_of(records: list[TrialRecord]) -> float | None:
    """Median samples/s over a row's ok trials."""
    speeds = [m.samples_per_s.center for _, m in _ok(records) if m.samples_per_s is not None]
    return statistics.median(speeds) if speeds else None


def _seed(record: TrialRecord) -> Any:
    """The seed a record ran from: the engine's note, else the spec's."""
    return (record.extra.get("reproduce") or {}).get("seed", record.spec.seed)


def accuracy_of(records: list[TrialRecord]) -> JSONObject | None:
    """Held-out accuracy over a row's ok trials: mean, min, max, how many, and the mean of each seed's runs.

    >>> from fitspeed.core.record import new_record
    >>> def ok(accuracy, seed=0, **more):
    ...     spec = TrialSpec(model="tiny", seed=seed)
    ...     return new_record(spec, Status.OK, metrics={"val_accuracy": accuracy}, **more)
    >>> accuracy_of([ok(0.8, seed=0), ok(0.9, seed=1)])
    {'mean': 0.85, 'min': 0.8, 'max': 0.9, 'n': 2, 'per_seed': [0.8, 0.9]}

    Two runs of one seed are one value of the spread over seeds:

    >>> one = ok(0.8, seed=3, reproduce={"seed": 0})
    >>> accuracy_of([one, one])["per_seed"]
    [0.8]
    """
    by_seed: dict[Any, list[float]] = {}
    for record, metrics in _ok(records):
        if metrics.val_accuracy is not None:
            by_seed.setdefault(_seed(record), []).append(metrics.val_accuracy)
    values = [v for runs in by_seed.values() for v in runs]
    if not values:
        return None
    return {"mean": round(statistics.fmean(values), 6), "min": min(values), "max": max(values), "n": len(values),
            "per_seed": [round(statistics.fmean(runs), 6) for runs in by_seed.values()]}


def accuracy_mark(row: JSONObject | None, base: JSONObject | None) -> str | None:
    """Why a row's accuracy counts as below its baseline's, or None: the guard's one-sided check.

    Below by more than SPREAD_MULTIPLE of the baseline's sds over seeds, and by more than
    ONE_SEED_TOLERANCE whatever the spread (`guard.compare`); with one seed, the tolerance alone decides.

    >>> accuracy_mark({"mean": 0.70, "per_seed": [0.69, 0.71]}, {"mean": 0.80, "per_seed": [0.78, 0.82]})
    "held-out accuracy 70.0% is 10.0 points below the baseline's 80.0%, more than the band 8.5 points (3 x sd 2.8 points over 2 seeds)"
    >>> accuracy_mark({"mean": 0.79, "per_seed": [0.79]}, {"mean": 0.80, "per_seed": [0.80]}) is None
    True
    >>> accuracy_mark({"mean": 0.75, "per_seed": [0.75]}, {"mean": 0.80, "per_seed": [0.80]})
    "held-out accuracy 75.0% is 5.0 points below the baseline's 80.0%, more than the band 2.0 points (one seed, no spread: the floor 2.0 points)"
    """
    if not row or not base:
        return None
    check = guard.compare("held-out accuracy", base.get("per_seed") or [base["mean"]],
                          row.get("per_seed") or [row["mean"]], floor=ONE_SEED_TOLERANCE, higher_is_better=True)
    return None if check.ok else check.text()


def _failure(records: list[TrialRecord]) -> TrialRecord | None:
    bad = [r for r in records if r.status != Status.OK]
    return bad[0] if bad else None


def summarize(results: Results) -> JSONObject:
    """Plain data for the table, the chart and the page."""
    plan = results.plan
    bases = {row.group: row for row in plan.rows if row.baseline}
    rows = []
    for row in plan.rows:
        records = results.records.get(row.label, [])
        speed = speed_of(records) if row.timed else None
        base_row = bases.get(row.group)
        base_speed = speed_of(results.records.get(base_row.label, [])) if base_row and base_row.timed else None
        accuracy = accuracy_of(records)
        base_accuracy = accuracy_of(results.records.get(base_row.label, [])) if base_row else None
        extra = plan.extra(row, records, results.records) if plan.extra and records else {}
        failed = _failure(records)
        rows.append({
            "label": row.label,
            "cells": row.cells,
            "group": row.group,
            "baseline": row.baseline,
            "status": ("skipped" if row.skipped else failed.status if failed else Status.OK if records else "not run"),
            "reason": row.skipped or (brief_reason(failed.reason) if failed else None),
            "trials": len(records),
            "samples_per_s": speed,
            "percent_of_baseline_time": (100 * base_speed / speed) if speed and base_speed else None,
            "article": row.article,
            "accuracy": accuracy,
            "accuracy_mark": None if row.baseline else accuracy_mark(accuracy, base_accuracy),
            "extra": extra,
        })
    return {
        "name": plan.name,
        "article": plan.article,
        "title": plan.title,
        "claim": plan.claim,
        "article_setup": plan.article_setup,
        "article_unit": plan.article_unit,
        "article_table": list(plan.article_table),
        "columns": [list(c) for c in plan.columns],
        "extra_columns": [list(c) for c in plan.extra_columns],
        "sizes": plan.sizes,
        "seeds": list(plan.seeds),
        "data": results.data,
        "notes": list(plan.notes),
        "ran_on": ran_on([r for records in results.records.values() for r in records]),
        "rows": rows,
        "trials": sum(len(r) for r in results.records.values()),
        "wall_s": results.wall_s,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(results.started)),
    }


def ran_on(records: list[TrialRecord]) -> JSONObject:
    """What the trials ran on, from their records (the parent's view where none came back)."""
    env = next((r.environment for r in records if r.status == Status.OK and r.environment), None)
    env = env or environment.host("tensorflow")
    features = env.get("cpu_features") or []
    accelerators = env.get("accelerators") or []
    gpus = [g.get("name") for g in env.get("gpus") or []]
    bf16 = [f for f in features if f in ("avx512_bf16", "amx_bf16", "bf16")]
    fp16 = [f for f in features if f in ("avx512_fp16", "amx_fp16")]
    return {
        "device": ", ".join(gpus) if gpus else ", ".join(accelerators) if accelerators else f"CPU: {env.get('cpu')}",
        "accelerator": bool(gpus or accelerators),
        "cpu": env.get("cpu"),
        "cores": env.get("cpu_count"),
        "cpu_features": features,
        "bf16_units": bf16,
        "fp16_units": fp16,
        "onednn": env.get("onednn"),
        "backend": env.get("backend"),
        "versions": {k: v for k, v in (env.get("versions") or {}).items() if v},
    }


def differences(summary: JSONObject) -> list[str]:
    """Where this machine differs from the article's, in words."""
    here = summary["ran_on"]
    out = [f"the article ran on {summary['article_setup']}; this ran on {here['device']}"
           + (f" ({here['cores']} cores)" if not here["accelerator"] else "")]
    if not here["accelerator"]:
        out.append("no accelerator here: every figure is CPU time, where per-step overhead, memory bandwidth "
                   "and the CPU's own vector units decide, not a TPU's or a GPU's")
        units = here["bf16_units"]
        out.append("this CPU has bfloat16 instructions (" + ", ".join(units) + ")" if units else
                   "this CPU has no bfloat16 instructions: mixed_bfloat16 is emulated")
        if here.get("onednn") is not None:
            out.append(f"TensorFlow's oneDNN kernels are {'on' if here['onednn'] else 'off'}")
    return out
