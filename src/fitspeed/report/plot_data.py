"""Plain data for `fitspeed report`: what the page and the five plots show.

Pure functions over a `StudySummary` (`search.summary.study_summary`; compute first, draw second):
`plots.py` draws these series and `html.py` renders the page, and the tests
check the data, not the pixels. `from_results` turns a `measure`/`compare`
results file into the same study-shaped data `study_summary` reads, so a report
looks the same whichever way its numbers were measured.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from fitspeed.core.config import TrialConfig
from fitspeed.core.json_data import JSONObject
from fitspeed.core.knobs import KNOBS_BY_NAME
from fitspeed.core.record import Status, TrialRecord
from fitspeed.core.sequential import level
from fitspeed.core.study_summary import StudySummary
from fitspeed.search.phase import Phase
from fitspeed.core.config import config_key
from fitspeed.search.summary import StudyData, StudyTrial

SAMPLES_PER_BAR = 10_000  # plot 1: seconds to train this many samples


class Bar(TypedDict):
    """Plot 1: one configuration's seconds per SAMPLES_PER_BAR samples."""

    label: str
    seconds: float
    percent: float | None  # of the baseline's time
    baseline: bool
    best: bool


class Step(TypedDict):
    """Plot 2: one bar of the waterfall (`kind`: start, step or end)."""

    label: str
    ratio: float
    kind: str
    measured: bool
    ci: NotRequired[tuple[float, float] | None]  # the end bar's verified interval


class PanelPoint(TypedDict):
    """Plot 3: a knob's value tried alone, or the baseline's own value."""

    value: Any
    samples_per_s: float | None
    status: str
    baseline: bool


class CompilePoint(TypedDict):
    """Plot 4: the compile cost at one steps_per_execution and XLA setting."""

    steps_per_execution: int
    jit_compile: Any  # True, False, or "auto" where Keras's choice is unknown
    label: str
    compile_s: float


class CheckedCurve(TypedDict):
    label: str
    curve: list[float | None]
    ok: bool
    reason: str


class LossCurves(TypedDict):
    """Plot 5: the guard's loss curves, the baseline's against each checked configuration."""

    baseline: list[float | None]
    checked: list[CheckedCurve]
    numeric_tried: list[str]
    title: str


class Series(TypedDict):
    """Everything the five plots draw (report.json's `plots`)."""

    time_bars: list[Bar]
    waterfall: list[Step]
    knob_panels: dict[str, list[PanelPoint]]
    compile: list[CompilePoint]
    loss_curves: LossCurves


# -- a results file as a study ----------------------------------------------

def workloads_in(records: Sequence[JSONObject]) -> list[str]:
    """The workloads ('model · data') of a results file, oldest first."""
    seen: dict[str, None] = {}
    for record in records:
        if record.get("kind") == "trial":
            seen.setdefault(_workload(record["spec"]["model"], record["spec"]["data"]), None)
    return list(seen)


def _workload(model: str, data: str | None) -> str:
    return f"{model} · {data or 'synthetic'}"


def from_results(records: Sequence[JSONObject], workload: str | None = None) -> StudyData:
    """Study-shaped data from the records of one workload (by default, that of the newest trial record).

    Repeats of one configuration (compare's pairs) become one row: the record
    with the median throughput. The baseline is the newest comparison's A, or
    else Keras's defaults if they were measured, or else the first record. The
    newest comparison is the verification.
    """
    names = workloads_in(records)
    if not names:
        raise ValueError("no trial records")
    newest = [r for r in records if r.get("kind") == "trial"][-1]
    name = workload if workload is not None else _workload(newest["spec"]["model"], newest["spec"]["data"])
    if name not in names:
        raise ValueError(f"no records for workload {name!r}; the file has: {', '.join(names)}")
    # each trial record decoded once, beside its stored knobs (a row's config, compared as stored)
    trials = [(r["spec"]["knobs"], TrialRecord.from_dict(r)) for r in records if r.get("kind") == "trial"
              and _workload(r["spec"]["model"], r["spec"]["data"]) == name]
    comparisons = [r for r in records if r.get("kind") == "comparison"
                   and _workload(r["model"], r["data"]) == name]
    groups: dict[str, list[tuple[JSONObject, TrialRecord]]] = {}  # each record with its stored knobs
    for knobs, record in trials:
        groups.setdefault(config_key(record.spec.config), []).append((knobs, record))

    rows: list[StudyTrial] = []
    for number, group in enumerate(groups.values()):
        ok = sorted((g for g in group if g[1].throughput is not None), key=lambda g: g[1].throughput or 0.0)
        knobs, chosen = ok[len(ok) // 2] if ok else group[-1]
        phase = Phase.COMPARE if chosen.extra.get("compare_id") else Phase.MEASURE
        rows.append(StudyTrial(number=number, phase=phase, config=knobs, record=chosen))

    first = trials[0][1]
    defaults = TrialConfig(backend=first.spec.config.backend)
    keys = {config_key(TrialConfig.from_dict(r["config"])) for r in rows}
    if comparisons:
        base = comparisons[-1]["a"]
    elif config_key(defaults) in keys:
        base = defaults.to_dict()
    else:
        base = rows[0]["config"]
    for row in rows:
        if row["config"] == base:
            row["phase"] = Phase.BASELINE
    verification = None
    if comparisons and comparisons[-1].get("estimate"):
        last = comparisons[-1]
        estimate = last["estimate"]
        verification = {"config": last["b"], "claimed": estimate["ci_low"] > 1.0,
                        "verdict": last.get("verdict"), "estimate": estimate, "why": None}
    return StudyData(
        study=name,
        meta={"model": first.spec.model, "data": first.spec.data, "base": base, "workload": name,
              "environment": first.environment},
        trials=rows,
        guards={},
        verification=verification,
    )


# -- the page ---------------------------------------------------------------

# Ended without a word of their own: the child sent no record, or was killed. A failed trial's reason is the
# error it caught, a NaN's is its loss; these have their stderr's tail (`measure.runner`) to say why.
TAIL_STATUSES = (Status.CRASHED, Status.TIMEOUT, Status.OOM)


def failures(trials: Iterable[tuple[str, TrialRecord]]) -> list[dict[str, str]]:
    """Each trial that crashed, timed out or ran out of memory: what it was, how it ended, why, and its stderr's tail.

    `trials` pairs what each trial was for (its configuration, its role) with its record:

    >>> from fitspeed.core.record import Status, TrialSpec, new_record
    >>> def record(status, tail): return new_record(TrialSpec(model="tiny"), status,
    ...     reason="the trial process was killed by SIGABRT before it sent a record", stderr_tail=tail)
    >>> found = failures([("defaults", record(Status.OK, None)),
    ...                   ("devices=2", record(Status.CRASHED, "F0000 x.cc:1] Check failed\\n")),
    ...                   ("precision=mixed_float16", record(Status.FAILED, "Traceback ...\\n"))])
    >>> [(f["trial"], f["status"], f["tail"]) for f in found]
    [('devices=2', 'crashed', 'F0000 x.cc:1] Check failed')]
    """
    return [{"trial": what, "status": record.status.value, "reason": record.reason or "no reason given",
             "tail": record.stderr_tail.rstrip("\n")}
            for what, record in trials if record.status in TAIL_STATUSES and record.stderr_tail]


def study_failures(data: StudyData) -> list[dict[str, str]]:
    """`failures` of a study's trials (`search.summary.study_data`, or `from_results`), each named by its configuration."""
    return failures((TrialConfig.from_dict(trial["config"]).label() + (f" ({trial['phase']})" if trial.get("phase") else ""),
                     trial["record"]) for trial in data["trials"])


def environment_rows(summary: StudySummary) -> list[tuple[str, str]]:
    """Hardware and versions as (name, value) rows, from the richest record we have."""
    env = summary.environment or {}
    rows: list[tuple[str, str]] = []
    for key, label in (("cpu", "CPU"), ("cpu_count", "CPU cores"), ("platform", "platform"),
                       ("python", "Python"), ("backend", "backend"), ("hostname", "host")):
        if env.get(key) is not None:
            rows.append((label, str(env[key])))
    rows += cpu_rows(env)
    for gpu in env.get("gpus") or []:
        rows.append((f"GPU {gpu.get('index')}", f"{gpu.get('name')}, {gpu.get('memory_mb')} MiB"))
    if env.get("driver"):
        rows.append(("NVIDIA driver", str(env["driver"])))
    if "accelerators" in env:
        rows.append(("accelerators", ", ".join(map(str, env["accelerators"])) or "none (CPU only)"))
    for package, version in (env.get("versions") or {}).items():
        if version:
            rows.append((package, str(version)))
    if env.get("fitspeed"):
        rows.append(("fitspeed", str(env["fitspeed"])))
    return rows


def cpu_rows(env: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The CPU features that decide which precision is fast, and whether TensorFlow ran oneDNN.

    >>> cpu_rows({"cpu_features": ["avx2", "amx_bf16"], "onednn": False, "backend": "tensorflow"})
    [('CPU features', 'avx2 amx_bf16'), ('oneDNN (TensorFlow)', 'off')]
    """
    env = env or {}
    rows = []
    if "cpu_features" in env:
        rows.append(("CPU features", " ".join(env["cpu_features"]) or "none of those fitspeed names"))
    if env.get("onednn") is not None:
        rows.append(("oneDNN (TensorFlow)", "on" if env["onednn"] else "off"))
    return rows


def resolution(summary: StudySummary) -> str | None:
    """The tool's resolution on this machine, read from the verification's interval; None before it has two pairs.

    >>> resolution(StudySummary.from_dict({"study": "s", "baseline": {}, "best": {"estimate": {
    ...     "ci_low": 0.97, "ci_high": 1.05, "ratios": [1.0] * 8, "confidence": 0.95}}}))
    'intervals here are 0.080 wide (95%, 8 pairs): differences under about ±4% are not told from noise'
    """
    found = [summary.best.estimate]
    widths = sorted((e["ci_high"] - e["ci_low"], len(e["ratios"]), e.get("confidence", 0.95))
                    for e in found if e and len(e.get("ratios") or []) >= 2)
    if not widths:
        return None
    width, pairs, confidence = widths[len(widths) // 2]  # the median interval
    many = f"the median of {len(widths)} " if len(widths) > 1 else ""
    return (f"{many}intervals here are {width:.3f} wide ({level(confidence)}, {pairs} pairs): "
            f"differences under about ±{50 * width:.0f}% are not told from noise")


def notes(summary: StudySummary) -> list[str]:
    """What a reader must know before trusting the page: partial or failed studies."""
    out = list(summary.read_notes)  # lines of a results file that were skipped, and why
    if summary.baseline.samples_per_s is None:
        out.append("The baseline has no successful measurement, so no speed-up can be given. "
                   "See the failed trials below for the reason.")
    if not summary.best.verified:
        out.append("No verified best yet: the study stopped before the best configuration was "
                   "verified against the baseline. Run the same `fitspeed tune` command again to finish it.")
    failed = [r for r in summary.trials if r["status"] != Status.OK]
    if failed:
        out.append(f"{len(failed)} of {len(summary.trials)} configuration(s) did not finish "
                   f"({', '.join(sorted({r['status'] for r in failed}))}); their reasons are in the table.")
    return out


# -- the five plots ---------------------------------------------------------

def time_bars(summary: StudySummary) -> list[Bar]:
    """Plot 1: seconds per 10,000 samples for each configuration, and % of the baseline's time.

    The baseline comes first, then the others from fastest to slowest (article
    000's chart: duration and % for each setting).
    """
    base_speed = summary.baseline.samples_per_s
    best_label = summary.best.label if summary.best.claimed else None
    bars: list[Bar] = []
    for row in summary.trials:
        speed = row["samples_per_s"]
        baseline = row["outcome"] == "baseline"
        if baseline:  # the reference: the median of the baseline's trials, as in every ratio
            speed = base_speed
        if not speed:
            continue
        seconds = SAMPLES_PER_BAR / speed
        bars.append(Bar(
            label=f"baseline: {row['config']}" if baseline else row["config"],
            seconds=seconds,
            percent=100.0 * base_speed / speed if base_speed else None,
            baseline=baseline,
            best=row["config"] == best_label,
        ))
    bars.sort(key=lambda bar: (not bar["baseline"], bar["seconds"]))
    return bars


def _key(changes: dict[str, Any]) -> str:
    return json.dumps(changes, sort_keys=True, default=str)


def waterfall(summary: StudySummary) -> list[Step]:
    """Plot 2: the baseline (1.0×), each accepted knob of the best in turn, then the best.

    Knobs are added in the order of their own effect, largest first. A step's
    height is the measured speed-up of that combination when it was measured;
    otherwise the product of the knobs' own effects, marked `measured: False`.
    The last bar is the verified median when there is one.
    """
    if summary.baseline.samples_per_s is None:
        return []
    base = summary.baseline.config.to_dict()
    changes = {k: v for k, v in summary.best.config.to_dict().items() if v != base.get(k)}
    by_changes = {_key(r["changes"]): r for r in summary.trials if r["ratio"] is not None}
    alone = {k: by_changes.get(_key({k: v})) for k, v in changes.items()}

    def own_effect(knob: str) -> float:
        row = alone[knob]
        return float(row["ratio"] or 0.0) if row else 0.0  # a row here has its ratio (`by_changes`)

    order = sorted(changes, key=lambda k: -own_effect(k))
    steps: list[Step] = [Step(label="baseline", ratio=1.0, kind="start", measured=True)]
    prefix: dict[str, Any] = {}
    estimate = 1.0
    for knob in order:
        prefix[knob] = changes[knob]
        row = alone[knob]
        estimate *= (row["ratio"] or 0.0) if row else 1.0
        measured = by_changes.get(_key(prefix))
        steps.append(Step(label=f"+ {knob}={changes[knob]}",
                          ratio=(measured["ratio"] or 0.0) if measured else estimate,
                          kind="step", measured=measured is not None))
        if measured:
            estimate = measured["ratio"] or 0.0
    final = summary.best.estimate
    if changes:
        steps.append({"label": "best (verified)" if final else "best",
                      "ratio": final["median"] if final else steps[-1]["ratio"],
                      "kind": "end", "measured": True,
                      "ci": (final["ci_low"], final["ci_high"]) if final else None})
    return steps


def _sort_values(values: list[Any]) -> list[Any]:
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return sorted(values)
    return sorted(values, key=str)


def knob_panels(summary: StudySummary) -> dict[str, list[PanelPoint]]:
    """Plot 3: for each knob, throughput at each value tried alone (the baseline at its own value).

    Only configurations that differ from the baseline in that one knob count, so
    each panel shows that knob's effect and nothing else. A value that failed
    (out of memory, say) is kept with `samples_per_s: None` and its status.
    """
    base = summary.baseline
    panels: dict[str, dict[Any, PanelPoint]] = {}
    for row in summary.trials:
        if len(row["changes"]) != 1:
            continue
        (knob, value), = row["changes"].items()
        panels.setdefault(knob, {})[_hashable(value)] = PanelPoint(
            value=value, samples_per_s=row["samples_per_s"], status=row["status"], baseline=False)
    out = {}
    for knob, points in panels.items():
        value = getattr(base.config, knob, None)
        points.setdefault(_hashable(value), PanelPoint(value=value, samples_per_s=base.samples_per_s,
                                                       status=Status.OK if base.samples_per_s else Status.FAILED,
                                                       baseline=True))
        order = _sort_values([p["value"] for p in points.values()])
        by_value = {_hashable(p["value"]): p for p in points.values()}
        out[knob] = [by_value[_hashable(v)] for v in order]
    return dict(sorted(out.items(), key=lambda item: (item[0] != "steps_per_execution",
                                                      item[0] != "batch_size", item[0])))


def _hashable(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def compile_points(summary: StudySummary) -> list[CompilePoint]:
    """Plot 4: compile time (first execution less a steady one) by steps_per_execution and XLA.

    Only configurations that differ from the baseline in these two knobs at
    most, so nothing else moves the cost.
    """
    base = summary.baseline.config.to_dict()
    points: list[CompilePoint] = []
    for row in summary.trials:
        if row["compile_s"] is None or not set(row["changes"]) <= {"steps_per_execution", "jit_compile"}:
            continue
        resolved = row.get("jit_compile_resolved")
        changes = row["changes"]
        asked = changes.get("jit_compile", base["jit_compile"])
        label = f"jit_compile={asked}"
        if asked == "auto" and resolved is not None:  # Keras decides: say what it decided here
            label += f" (Keras chose {'XLA' if resolved else 'no XLA'} here)"
        points.append(CompilePoint(
            steps_per_execution=changes["steps_per_execution"] if "steps_per_execution" in changes
            else base["steps_per_execution"],
            jit_compile=resolved if resolved is not None else asked,
            label=label,
            compile_s=row["compile_s"],
        ))
    return sorted(points, key=lambda p: (str(p["jit_compile"]), p["steps_per_execution"]))


def loss_curves(summary: StudySummary) -> LossCurves:
    """Plot 5: the guard's loss curves, the baseline against each checked configuration.

    With nothing checked (no knob tried changes numerics), the baseline's own
    loss over the timed epochs is shown, and `checked` is empty.
    """
    checked: list[CheckedCurve] = []
    baseline_curve: list[float | None] = []
    for row in summary.trials:
        verdict = row.get("guard")
        if not verdict:
            continue
        baseline_curve = list(verdict["baseline_curve"])
        checked.append(CheckedCurve(label=row["config"], curve=list(verdict["curve"]),
                                    ok=bool(verdict["ok"]), reason=verdict["reason"]))
    if not checked:
        baseline_curve = list(summary.baseline.loss_curve)
    numeric = {name for name, knob in KNOBS_BY_NAME.items() if knob.changes_numerics}
    tried = [row["config"] for row in summary.trials if set(row["changes"]) & numeric]
    if checked:
        title = "Numerics guard: loss curves"
    elif tried:  # tried, but none was kept far enough to be checked
        title = "Baseline loss (no configuration that changes numerics reached the guard)"
    else:
        title = "Baseline loss (no configuration tried changes numerics)"
    return {"baseline": baseline_curve, "checked": checked, "numeric_tried": tried, "title": title}


def all_series(summary: StudySummary) -> Series:
    """Everything the five plots draw."""
    return Series(
        time_bars=time_bars(summary),
        waterfall=waterfall(summary),
        knob_panels=knob_panels(summary),
        compile=compile_points(summary),
        loss_curves=loss_curves(summary),
    )

