"""`fitspeed doctor`: is this training input-bound, and what would fix it?

Runs in the parent and never imports a framework; every measurement is a trial
child (`fitspeed.measure.runner`), in one of `fitspeed.trial.doctor`'s modes:

1. input:    the input pipeline alone, as fit() would read it: t_input per batch;
2. compute:  training alone, on batches already in memory: t_compute per step;
3. together: the usual timing protocol (mode "time"): t_together per step;
4. epochs:   a multi-epoch fit() timed at its edges: time lost between epochs
             and between the last batch and fit() returning.

The share of step time spent waiting for input is

    wait = min(max(0, 1 - t_compute / t_together), t_input / t_together)

the part of a training step that the same step with its data already in memory
does not need, and never more than the input costs on its own (a step waits
for its batch at most as long as the batch takes to make). XProf's input-pipeline analyzer thresholds name it: 20% or more
is "highly input-bound", 5% or more "moderately input-bound", less "not
input-bound". Then doctor tries the fixes that apply to this kind of data
(`fitspeed.core.input_kinds`), each a trial of its own, and ranks them by measured gain.
Each fix is one trial (a screen); the top fix is then confirmed against the
unchanged configuration in fresh interleaved pairs, each in a random order
(`fitspeed.core.sequential`: a one-sided 2.5% sequential test over its looks,
from 3 pairs up to `pairs`, CONFIRM_PAIRS (10) unless a caller says otherwise,
on the pairs' own noise), and only a confirmed gain
is recommended; a fix that gained in its one trial but was not confirmed is
listed as such. Gains under 5% are reported as none. The epoch-edge fix
(data_autotune=False) is confirmed the same way, on fit()'s whole time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from fitspeed.core.config import TrialConfig
from fitspeed.core.data_ref import DataKind
from fitspeed.core.input_kinds import data_kind, why_not
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import Mode, OnTrial, Status, TrialRecord, TrialRunner, TrialSpec
from fitspeed.core.sequential import Design, Verdict, pair_order, step

HIGH = 0.20
MODERATE = 0.05
MIN_GAIN = 1.05
STALL_SHARE = 0.03  # epoch-edge time worth a try of data_autotune=false
# The confirmation's most pairs. With no prior noise each look's boundary is its own t quantile at one nominal
# level (`sequential.pocock_p`): a 1.5x fix is confirmed in 85-100% of runs under ten of twelve noise models
# (64% at CV 30%, 50% under "everything"), where 3-5 pairs and one constant boundary confirmed it in 35-38%
# with one side 3-4x noisier; a fix that does nothing is "faster" in 1.1-2.4% and ends after 6-8 pairs on
# average (docs/benchmarks/sequential_decisions.md, `benchmarks/verification_aa.py`).
CONFIRM_PAIRS = 10



def wait_share(compute_s: float, together_s: float, input_s: float | None = None) -> float:
    """The share of a training step spent waiting for input.

    A step waits at most as long as the input takes on its own: with no
    overlap a step is the input plus the compute, so the part of the gap past
    `input_s` (a trial's own noise, a slower first window) is not waiting for
    input, and the share is capped there.

    >>> wait_share(0.010, 0.025), wait_share(0.010, 0.009)
    (0.6, 0.0)
    >>> wait_share(0.023, 0.0324, input_s=0.0005)  # 29% slower together, but the input costs 0.5 ms
    0.015432
    """
    if together_s <= 0:
        return 0.0
    share = max(0.0, 1.0 - compute_s / together_s)
    if input_s is not None:
        share = min(share, max(0.0, input_s) / together_s)
    return round(share, 6)


def verdict(share: float) -> str:
    """XProf's words for a wait share.

    >>> verdict(0.31), verdict(0.07), verdict(0.01)
    ('highly input-bound', 'moderately input-bound', 'not input-bound')
    """
    if share >= HIGH:
        return "highly input-bound"
    if share >= MODERATE:
        return "moderately input-bound"
    return "not input-bound"


@dataclass(frozen=True)
class Fix:
    """A candidate fix: knob changes, and the measurement that judges it."""

    changes: dict[str, Any]
    why: str = ""

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.changes.items())


def candidate_fixes(kind: str | None, base: TrialConfig, cores: int) -> list[Fix]:
    """The fixes doctor tries for data of `kind`, skipping those already set.

    >>> [f.label() for f in candidate_fixes("pydataset", TrialConfig(), 2)]
    ['workers=2 use_multiprocessing=False', 'workers=2 use_multiprocessing=True']
    """
    fixes: list[Fix] = []
    if kind == DataKind.IMAGES:
        singles: list[tuple[dict[str, Any], str]] = [
            ({"prefetch": "autotune"}, "overlap the next batch's preparation with this step (article 001, item 2)"),
            ({"map_parallelism": "autotune"}, "decode and augment examples on every core (article 001, item 3)"),
            ({"cache": "memory"}, "decode each file once; later epochs read decoded examples (item 7)"),
            ({"vectorize": True}, "augment once per batch instead of once per example (item 6)"),
        ]
        for changes, why in singles:
            fixes.append(Fix(changes, why=why))
        fixes.append(Fix({k: v for c, _ in singles for k, v in c.items()},
                         why="all of the above together"))
    elif kind == DataKind.PYDATASET:
        workers = max(2, cores)
        fixes.append(Fix({"workers": workers, "use_multiprocessing": False},
                         why="worker threads: help only where __getitem__ releases the GIL (numpy, I/O)"))
        fixes.append(Fix({"workers": workers, "use_multiprocessing": True},
                         why="worker processes: Python work runs on every core, past the GIL (article 002)"))
    elif kind == DataKind.DATASET:
        fixes.append(Fix({"prefetch": "autotune"}, why="overlap input with training (article 001, item 2)"))
    out = []
    for fix in fixes:
        changes = {k: v for k, v in fix.changes.items() if getattr(base, k) != v}
        if changes and not any(why_not(k, kind, base.backend) for k in changes):
            out.append(replace(fix, changes=changes))
    return out


def stall_fix(kind: str | None, base: TrialConfig) -> Fix | None:
    """data_autotune=false, where it applies and is not set already."""
    if not base.data_autotune or why_not("data_autotune", kind, base.backend) or kind == DataKind.PYDATASET:
        return None
    return Fix({"data_autotune": False},
               why="tearing down an autotuned tf.data pipeline waits on its autotune thread at each epoch's end")


@dataclass
class Diagnosis:
    model: str
    data: str | None
    base: TrialConfig
    records: dict[str, TrialRecord] = field(default_factory=dict)
    fixes: list[JSONObject] = field(default_factory=list)

    def ok(self, name: str) -> JSONObject | None:
        record = self.records.get(name)
        if record and record.status == Status.OK and record.metrics is not None:
            return record.metrics.to_dict()
        return None

    def summary(self) -> JSONObject:
        """Plain data: the figures, the share and the ranked recommendations."""
        together, compute, inputs, epochs = (self.ok(n) for n in ("together", "compute", "input", "epochs"))
        out: JSONObject = {"model": self.model, "data": self.data, "config": self.base.changed(),
                               "kind": (together or inputs or {}).get("data_kind") or data_kind(self.data)}
        if together and compute:
            share = wait_share(compute["ms_per_step"], together["ms_per_step"],
                               inputs.get("ms_per_batch") if inputs else None)
            out["wait_share"] = share
            out["verdict"] = verdict(share)
        out["ms_per_step"] = {"input": inputs and inputs["ms_per_batch"], "compute": compute and compute["ms_per_step"],
                              "together": together and together["ms_per_step"]}
        if epochs:
            out["epochs"] = {k: epochs[k] for k in ("boundary_s", "end_s", "lost_s", "fit_s", "lost_share", "step_s")}
        if inputs and inputs.get("profile"):
            out["profile"] = inputs["profile"]
        if inputs and inputs.get("pipeline"):
            out["pipeline"] = inputs["pipeline"]
        out["failed"] = {n: r.reason for n, r in self.records.items() if r.status != Status.OK}
        ranked = sorted(self.fixes, key=lambda f: f.get("gain") or 0.0, reverse=True)
        confirmed = [f for f in ranked if (f.get("gain") or 0) >= MIN_GAIN
                     and (f.get("confirmed") or {}).get("verdict") == Verdict.FASTER]
        out["recommendations"] = confirmed
        out["unconfirmed"] = [f for f in ranked if f not in confirmed and (f.get("gain") or 0) >= MIN_GAIN
                              and not f.get("confirmed")]
        out["no_gain"] = [f for f in ranked if f not in confirmed and f not in out["unconfirmed"]]
        return out


Pair = Callable[[str, int, TrialConfig, bool], "tuple[float | None, float | None]"]  # (fixed, unchanged) figures


def _confirm_top(diagnosis: Diagnosis, base: TrialConfig, pairs: int, pair: Pair) -> None:
    """The top fix against the unchanged configuration, in fresh pairs (rounds), each in a random order.

    The fix's own screen trial chose it, so it is not evidence here.
    """
    timed = [f for f in diagnosis.fixes if (f.get("gain") or 0) >= MIN_GAIN]
    if timed:
        top = max(timed, key=lambda f: f["gain"])
        _confirm(top, base, pairs, pair)


def confirm_design(pairs: int = CONFIRM_PAIRS) -> Design:
    """The confirmation's design: one-sided 2.5% over looks from 3 pairs to `pairs`, with no prior noise (each
    side's noise is the confirmation's own pairs', so each look has its own boundary, `sequential.pocock_p`;
    `benchmarks/verification_aa.py` measures its A/A rate and power).

    >>> d = confirm_design()
    >>> d.alpha, d.min_pairs, d.max_pairs
    (0.025, 3, 10)
    """
    return Design(0.025, max(2, pairs), min(3, max(2, pairs)), MIN_GAIN - 1, futile_from=min(3, max(2, pairs)))


def _confirm(fix: JSONObject, base: TrialConfig, pairs: int, pair: Pair) -> None:
    """`fix` against the unchanged configuration in fresh pairs; `pair(label, index, config, fix_first)` measures
    one (a round: in lockstep where the two trials fit) and gives both figures, higher for faster."""
    config = base.replace(**fix["change"])
    design = confirm_design(pairs)
    figures: list[list[float]] = []
    result = step([], design)
    label = " ".join(f"{k}={v}" for k, v in fix["change"].items())
    for index in range(design.max_pairs):
        fixed, unchanged = pair(label, index, config, pair_order(label, "doctor", index))
        if not fixed or not unchanged:
            break
        figures.append([unchanged, fixed])
        result = step([b / a for a, b in figures], design)
        if result.verdict:
            break
    fix["confirmed"] = {**result.to_dict(), "verdict": result.verdict or Verdict.NOT_CONFIRMED, "figures": figures,
                        "design": design.to_dict()}


def diagnose(
    model: str,
    data: str | None,
    base: TrialConfig,
    *,
    steps: int | None = None,
    repeats: int = 3,
    epochs: int = 4,
    seed: int = 0,
    timeout_s: float | None = 900.0,
    try_fixes: bool = True,
    pairs: int = CONFIRM_PAIRS,
    run: TrialRunner | None = None,
    on_trial: OnTrial | None = None,
    script: JSONObject | None = None,
) -> Diagnosis:
    """Run the measurements, then the fixes; every record is kept in the diagnosis.

    `on_trial(name, record)` sees each record as it lands.
    """
    from fitspeed.measure.rounds import Rounds, as_rounds

    runner = as_rounds(run if run is not None else Rounds())
    landed = on_trial or (lambda name, record: None)
    diagnosis = Diagnosis(model, data, base)

    def spec(mode: Mode, config: TrialConfig, count: int, fixed: int | None = None) -> TrialSpec:
        return TrialSpec(model=model, data=data, config=config, steps=fixed or steps, repeats=count, seed=seed,
                         timeout_s=timeout_s, mode=mode, script=script)

    def trial(name: str, mode: Mode, config: TrialConfig, count: int, fixed: int | None = None) -> TrialRecord:
        record = runner(spec(mode, config, count, fixed))
        landed(name, record)
        return record

    def pairs_of(mode: Mode, count: int, fixed: int | None = None) -> Pair:
        """A confirmation's pair as one round of the fix and the unchanged configuration (`Rounds.round`)."""
        def figure(record: TrialRecord) -> float | None:
            if mode != Mode.EPOCHS:
                return record.throughput
            fit_s = record.measured("fit_s") if record.status == Status.OK else None
            return 1.0 / fit_s if fit_s else None  # fit()'s whole time: higher is faster

        def pair(label: str, index: int, config: TrialConfig, fix_first: bool) -> tuple[float | None, float | None]:
            done = runner.round([spec(mode, config, count, fixed), spec(mode, base, count, fixed)],
                                first=0 if fix_first else 1)
            for name, record in ((f"{label} (pair {index + 1})", done.records[0]),
                                 (f"unchanged (pair {index + 1})", done.records[1])):
                landed(name, record)
            return figure(done.records[0]), figure(done.records[1])
        return pair

    for name, mode, count in (("input", Mode.INPUT, repeats), ("compute", Mode.COMPUTE, repeats),
                              ("together", Mode.TIME, repeats), ("epochs", Mode.EPOCHS, epochs)):
        diagnosis.records[name] = trial(name, mode, base, count)
        if diagnosis.records[name].user_error:
            return diagnosis
    if not try_fixes:
        return diagnosis
    summary = diagnosis.summary()
    kind = summary["kind"]
    base_speed = diagnosis.records["together"].throughput
    if base_speed and summary.get("wait_share", 0.0) >= MODERATE:
        for fix in candidate_fixes(kind, base, os.cpu_count() or 1):
            record = trial(fix.label(), Mode.TIME, base.replace(**fix.changes), repeats)
            speed = record.throughput
            diagnosis.fixes.append({"change": fix.changes, "why": fix.why, "status": record.status,
                                 "reason": record.reason, "gain": speed / base_speed if speed else None,
                                 "measured": f"{base_speed:,.0f} → {speed:,.0f} samples/s" if speed else None})
    _confirm_top(diagnosis, base, pairs, pairs_of(Mode.TIME, repeats))
    stall = stall_fix(kind, base)
    lost = summary.get("epochs")
    if stall and lost and lost["lost_share"] >= STALL_SHARE:
        # The same steps per epoch as the measurement it is compared with.
        same = diagnosis.records["epochs"].measured("steps_per_repeat")
        record = trial(stall.label(), Mode.EPOCHS, base.replace(**stall.changes), epochs, fixed=same)
        after = record.metrics.other if record.status == Status.OK and record.metrics is not None else None
        gain = lost["fit_s"] / after["fit_s"] if after else None
        found: JSONObject = {
            "change": stall.changes, "why": stall.why, "status": record.status, "reason": record.reason,
            "gain": gain,
            "measured": (f"time lost at epoch edges and fit() end {lost['lost_s']:.2f} s → {after['lost_s']:.2f} s; "
                         f"fit() {lost['fit_s']:.2f} s → {after['fit_s']:.2f} s") if after else None,
        }
        diagnosis.fixes.append(found)
        if gain and gain >= MIN_GAIN:  # one trial chose it; fresh pairs of fit()'s whole time decide it
            _confirm(found, base, pairs, pairs_of(Mode.EPOCHS, epochs, same))
    return diagnosis
