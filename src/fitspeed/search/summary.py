"""Pure summaries of a tuning study: the `StudySummary` the tables, best.json, the report and the API draw from.

`study_data` reads an Optuna study into `StudyData`, each trial's record
decoded once into a `TrialRecord` and each decision into a `Decision`;
`study_summary` turns that into the answer (`fitspeed.core.study_summary`):
the baseline, the verified best, each knob's own effect, and every rejected
configuration with its reason. Nothing here runs a trial.
"""

from __future__ import annotations

import json
import statistics
from typing import NotRequired, TypedDict

import optuna

from fitspeed.core.config import TrialConfig
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import Metrics, Status, TrialRecord
from fitspeed.core.study_summary import NOT_VERIFIED, Baseline, Best, DecisionRow, StudySummary, TrialRow
from fitspeed.core.sequential import level
from fitspeed.search import batch_figures, cost, guard
from fitspeed.search.decision import Decision
from fitspeed.search.ledger import BUDGET, BUDGET_FREE, GUARD_RUN, TUNE_S, decisions_of, guards_of, meta_of, refusals_of
from fitspeed.search.phase import Phase
from fitspeed.core.config import config_key


class StudyTrial(TypedDict):
    """One measured trial of a study: its number, phase, stored knob values and decoded record."""

    number: int
    phase: str | None
    config: JSONObject
    record: TrialRecord


class StudyData(TypedDict):
    """A study as `study_summary` reads it: from Optuna (`study_data`) or a results file (`report.plot_data.from_results`)."""

    study: str
    meta: JSONObject  # the study's settings and environment (`ledger.meta_of`)
    trials: list[StudyTrial]
    guards: dict[str, JSONObject]  # the guard's verdicts, by configuration key
    verification: JSONObject | None
    decisions: NotRequired[list[Decision]]
    refused: NotRequired[list[dict[str, str]]]
    guard_runs: NotRequired[int]  # the guard's training runs, each stored once by configuration and seed
    read_notes: NotRequired[list[str]]


def study_data(study: optuna.Study) -> StudyData:
    trials: list[StudyTrial] = []
    for trial in study.get_trials(deepcopy=False):
        if "record" not in trial.user_attrs:
            continue
        trials.append(StudyTrial(number=trial.number, phase=trial.user_attrs.get("phase"),
                                 config=trial.user_attrs["config"],
                                 record=TrialRecord.from_dict(trial.user_attrs["record"])))
    attrs = study.user_attrs
    return {
        "study": study.study_name,
        "meta": meta_of(attrs),
        "trials": trials,
        "guards": guards_of(attrs),
        "verification": attrs.get("verification"),
        "decisions": decisions_of(attrs),
        "refused": refusals_of(attrs),
        "guard_runs": sum(key.startswith(GUARD_RUN) for key in attrs),
    }


def skipped_groups(skipped: dict[str, str]) -> list[tuple[list[str], str]]:
    """Skipped knobs grouped by reason, each knob's own name taken off the front of its reason.

    >>> skipped_groups({"cache": "cache applies to X", "vectorize": "vectorize applies to X",
    ...                 "precision": "mixed_float16: no GPU"})
    [(['cache', 'vectorize'], 'applies to X'), (['precision'], 'mixed_float16: no GPU')]
    """
    groups: dict[str, list[str]] = {}
    for knob, reason in skipped.items():
        text = reason[len(knob) + 1:] if reason.startswith(knob + " ") else reason
        groups.setdefault(text, []).append(knob)
    return [(knobs, text) for text, knobs in groups.items()]


def change_of(decision: Decision) -> str:
    """What B changes on top of A, as a label ("" where nothing: B takes a change of A out).

    >>> change_of(Decision.from_dict({"id": "l1", "purpose": "lean", "a": {"jit_compile": True},
    ...                               "b": {"jit_compile": True, "inter_op_threads": 1}}))
    'inter_op_threads=1'
    """
    a, b = decision.a_label, decision.b_label
    return " ".join(part for part in b.split() if part not in a.split()) if a != "defaults" else b


def decision_row(decision: Decision) -> DecisionRow:
    """One paired decision as a table row: what was compared, in how many pairs, the interval, the verdict.

    >>> row = decision_row(Decision.from_dict({"id": "c1", "purpose": "combine", "a": {}, "b": {"jit_compile": True},
    ...     "pairs": [[100.0, 150.0], [110.0, 160.0]], "ratio": 1.47, "low": 1.2, "high": 1.8, "verdict": "faster"}))
    >>> row["change"], row["pairs"], row["interval"]
    ('jit_compile=True', 2, '1.20–1.80 (95%)')

    A race pair only orders the candidates, and a head-to-head choice (or a
    polish step) keeps the better estimate: none has an interval or a verdict
    of its own.

    >>> decision_row(Decision.from_dict({"id": "r1", "purpose": "race", "a": {}, "b": {"jit_compile": True},
    ...     "pairs": [[100.0, 150.0]], "ratio": 1.5, "low": 0.9, "high": 2.4, "confidence": 0.9,
    ...     "verdict": "not confirmed"}))["verdict"]
    'raced'
    """
    a, b = decision.a_label, decision.b_label
    change = change_of(decision)
    low, high = decision.low, decision.high
    purpose = decision.purpose
    shown = str(decision.verdict)
    if purpose == Phase.RACE or decision.is_choice:
        low = high = None
        shown = "raced" if purpose == Phase.RACE else decision.kept
    return DecisionRow(purpose=purpose, incumbent=a, candidate=b, change=change or b,
                       pairs=len(decision.pairs), figures=[list(p) for p in decision.pairs],
                       ratio=decision.ratio, low=low, high=high,
                       interval=(f"{low:.2f}–{high:.2f} ({level(decision.confidence)})"
                                 if low is not None and high is not None else "–"),
                       verdict=shown, why=decision.why, measured_by=list(decision.measured_by))


def held(check: JSONObject) -> str:
    """Whether a determinism check held, in a few words.

    >>> held({"identical": True, "runs": 2}), held({"identical": False, "runs": 2})
    ('weights bit-identical over 2 runs', 'weights differed over 2 runs')
    """
    return f"weights {'bit-identical' if check['identical'] else 'differed'} over {check['runs']} runs"


def in_answer(answer: TrialConfig | None, changes: JSONObject) -> bool:
    """Whether the study's answer holds every change of a row; True while there is no answer yet (None).

    >>> answer = TrialConfig(steps_per_execution=64)
    >>> in_answer(answer, {"steps_per_execution": 64}), in_answer(answer, {"inter_op_threads": 1}), in_answer(None, {})
    (True, False, True)
    """
    return answer is None or all(getattr(answer, knob) == value for knob, value in changes.items())


def determinism_summary(record: TrialRecord, label: str, ratio: float | None) -> JSONObject:
    """The deterministic knob's cost (its speed against the baseline's) and its weight-hash check."""
    check = record.extra["determinism"]
    return {"config": label, "ratio": ratio, "cost": None if ratio is None else 1 - ratio,
            "samples_per_s": record.throughput, "identical": check["identical"], "held": held(check),
            "hash": check["hashes"][0], "hashes": check["hashes"], "steps": check["steps"],
            "differing": check.get("differing") or [], "how": check.get("how")}


def _first_by_key(trials: list[StudyTrial]) -> dict[str, StudyTrial]:
    out: dict[str, StudyTrial] = {}
    for trial in trials:
        out.setdefault(config_key(TrialConfig.from_dict(trial["config"])), trial)
    return out


def medians(trials: list[StudyTrial]) -> dict[str, float]:
    """Each configuration's figure: the median of its own trials' samples/s, by configuration key.

    >>> from fitspeed.core.record import TrialSpec, new_record
    >>> t = [StudyTrial(number=0, phase=None, config={}, record=new_record(
    ...      TrialSpec(model="tiny"), Status.OK, metrics={"samples_per_s": {"median": v}})) for v in (10.0, 30.0, 20.0)]
    >>> list(medians(t).values())
    [20.0]
    """
    speeds: dict[str, list[float]] = {}
    for trial in trials:
        speed = trial["record"].throughput
        if speed:
            speeds.setdefault(config_key(TrialConfig.from_dict(trial["config"])), []).append(speed)
    return {key: statistics.median(values) for key, values in speeds.items()}


def agreement(base_speed: float | None, best_speed: float | None, verification: JSONObject) -> str | None:
    """One line on why the single figures and the verdict differ, where they do; None where they agree.

    >>> agreement(7266.0, 6164.0, {"claimed": True, "estimate": {"median": 1.59, "pairs": 4}})
    "the medians above put the best at 0.85× the baseline, the verdict at 1.59×: the verdict comes from 4 pairs measured back to back, in a random order, while the medians pool trials measured at different times, under the machine's changing load"
    >>> agreement(4000.0, 6400.0, {"claimed": True, "estimate": {"median": 1.59, "pairs": 4}}) is None
    True
    """
    estimate = verification.get("estimate") or {}
    if not (base_speed and best_speed and verification.get("claimed") and estimate.get("median")):
        return None
    single = best_speed / base_speed
    verified = estimate["median"]
    if single > 1 and abs(single / verified - 1) <= 0.25:
        return None
    return (f"the medians above put the best at {single:.2f}× the baseline, the verdict at {verified:.2f}×: the "
            f"verdict comes from {estimate.get('pairs') or len(estimate.get('ratios') or [])} pairs measured back "
            "to back, in a random order, while the medians pool trials measured at different times, under the "
            "machine's changing load")


LOAD_CHANGE = 1.5  # the defaults' speed late in a study over early, beyond which (or below its inverse) it is said


def load_change(trials: list[StudyTrial], base: TrialConfig) -> str | None:
    """One line where the defaults' own speed changed during the study by LOAD_CHANGE or more; else None.

    The defaults are timed at the start (the baseline, the screen's re-measures)
    and at the end (the verification's pairs). It is one configuration, so a
    change between the two is the machine's: another job came or went. The
    medians of their first three and last three timed trials are compared (of
    fewer than six trials, the first and last halves; two at least). Under a
    trial-to-trial CV of 20% two medians of three differ by 1.5x about 3% of
    the time; a second job on the same cores halves the speed.

    >>> from fitspeed.core.record import TrialSpec, new_record
    >>> def timed(number, speed):
    ...     return StudyTrial(number=number, phase="baseline", config={}, record=new_record(
    ...         TrialSpec(model="tiny"), Status.OK, metrics={"samples_per_s": {"median": speed}}))
    >>> print(load_change([timed(i, s) for i, s in enumerate([1745, 1690, 1802, 800, 778, 760])], TrialConfig()))
    the defaults ran at 1,745 samples/s in their first 3 trials and at 778 in their last 3 (0.45×): the machine's load changed during the study. The pairs, each measured back to back, stay fair but are noisier, so fewer steps may be confirmed; the one-trial screen and the medians above mix both speeds. Tune on a quieter machine for a sharper answer
    >>> load_change([timed(i, s) for i, s in enumerate([1745, 1690, 1802, 1500, 1650, 1600])], TrialConfig()) is None
    True
    """
    key = config_key(base)
    speeds = [t["record"].throughput for t in sorted(trials, key=lambda t: t["number"])
              if t["record"].throughput and config_key(TrialConfig.from_dict(t["config"])) == key]
    k = min(3, len(speeds) // 2)
    if k < 2:
        return None
    early, late = statistics.median(speeds[:k]), statistics.median(speeds[-k:])
    change = late / early
    if 1 / LOAD_CHANGE < change < LOAD_CHANGE:
        return None
    return (f"the defaults ran at {early:,.0f} samples/s in their first {k} trials and at {late:,.0f} in their "
            f"last {k} ({change:.2f}×): the machine's load changed during the study. The pairs, each measured back "
            "to back, stay fair but are noisier, so fewer steps may be confirmed; the one-trial screen and the "
            "medians above mix both speeds. Tune on a quieter machine for a sharper answer")


def processes(data: StudyData) -> dict[str, int]:
    """The study's trial processes by stage, the configurations the numerics guard checked and its training
    runs (no study trials: each is stored once, by configuration and seed), and the `--trials` it was given
    ("trials", where stored). A results file keeps no guard runs: "guard runs" is there only where known.

    "search" counts every timed trial but the lean step's, the verification's
    and a batch-size sweep's: `--trials` bounds it with the verification's
    first look. A tune at `--trials 40` runs about as many again in the lean
    step in the simulator, and the guard's runs on top.

    >>> trial = lambda phase: {"phase": phase}
    >>> data = {"trials": [trial("baseline"), trial("sweep"), trial("lean"), trial("lean"), trial("verify")],
    ...         "guards": {"a": {"ok": True}}, "guard_runs": 10, "meta": {"budget": {"trials": 40}}}
    >>> processes(data)  # doctest: +NORMALIZE_WHITESPACE
    {'search': 2, 'lean': 2, 'verification': 1, 'batch sizes': 0, 'guarded': 1, 'guard runs': 10, 'trials': 40}
    """
    phases = [t.get("phase") for t in data["trials"]]
    out = {"search": sum(p not in BUDGET_FREE for p in phases),
           "lean": phases.count(Phase.LEAN), "verification": phases.count(Phase.VERIFY),
           "batch sizes": phases.count(Phase.BATCH_SIZE), "guarded": len(data.get("guards") or {})}
    if "guard_runs" in data:
        out["guard runs"] = data["guard_runs"]
    budget = (data.get("meta") or {}).get(BUDGET)
    if isinstance(budget, dict) and budget.get("trials"):
        out["trials"] = int(budget["trials"])
    return out


def lean_outcome(decision: Decision) -> str:
    """The outcome of a configuration the lean step built by taking one knob out of its incumbent (`decision.a`),
    where it is not the answer: the knob stayed, or went and the lean step changed more after it.

    >>> made = Decision.from_dict({"purpose": "lean", "a": {"jit_compile": True},
    ...                            "b": {"jit_compile": True, "inter_op_threads": 1}, "verdict": "faster",
    ...                            "ratio": 1.05, "pairs": [[1.0, 1.05]] * 6, "id": "l1"})
    >>> lean_outcome(made)
    'the lean step without inter_op_threads=1, which stays: its share 1.05× in 6 pair(s)'
    """
    knobs = change_of(decision)
    if decision.verdict.is_faster():
        return f"the lean step without {knobs}, which stays: its share {decision.ratio or 0.0:.2f}× in " \
               f"{len(decision.pairs)} pair(s)"
    return f"the lean step took {knobs} out here ({decision.verdict} in {len(decision.pairs)} pair(s)) and changed more after it"


def study_summary(data: StudyData) -> StudySummary:
    meta = data["meta"]
    base = TrialConfig.from_dict(meta["base"])
    by_key = _first_by_key(data["trials"])
    figures = medians(data["trials"])
    base_speed = figures.get(config_key(base))  # the median of the baseline's own trials
    min_gain = float(meta.get("min_gain", 0.05))
    guards = data["guards"]
    # configurations whose numerics passed the guard: a single change kept inside one of them was checked there
    passed = [TrialConfig.from_dict(json.loads(key)) for key, verdict in guards.items() if verdict.get("ok")]

    decided: dict[str, Decision] = {}  # the newest search decision on each candidate
    raced: dict[str, Decision] = {}  # a race pair that no decision followed
    taken_out: dict[str, Decision] = {}  # the lean step's configurations without one knob, by the decision on it
    for decision in data.get("decisions") or []:
        key = config_key(decision.b)
        if decision.purpose == Phase.RACE:
            raced[key] = decision
        elif decision.purpose != Phase.VERIFY:
            decided[key] = decision
        if decision.purpose == Phase.LEAN:
            taken_out.setdefault(config_key(decision.a), decision)
    rows: list[TrialRow] = []
    effects: list[TrialRow] = []
    rejected: list[TrialRow] = []
    batch_sizes: list[TrialRow] = []
    determinism: JSONObject | None = None
    baseline_row: TrialRow | None = None
    baseline_curve: list[float | None] = []
    environment = meta.get("environment")  # the baseline child's, when it ran, is richer
    verification = data.get("verification") or {}
    best_config = TrialConfig.from_dict(verification.get("config") or base.to_dict())
    # what the user is told to change: the verified configuration, the defaults where nothing was claimed,
    # unknown (None) while the study has no verification
    answer = (best_config if verification.get("claimed") else base) if verification else None
    # each knob's own share of a claimed answer (`search.lean`), by (knob, value)
    shares = {(s["knob"], s["value"]): s["ratio"] for s in verification.get("shares") or ()} \
        if verification.get("claimed") else {}
    for key, trial in by_key.items():
        config = TrialConfig.from_dict(trial["config"])
        record: TrialRecord = trial["record"]
        metrics = record.metrics or Metrics()
        speed = figures.get(key) if record.throughput else None
        ratio = speed / base_speed if speed and base_speed else None
        changes = {k: v for k, v in config.to_dict().items() if v != getattr(base, k)}
        verdict = guards.get(key)
        numeric = bool(guard.numeric_changes(config, base))
        if record.status != Status.OK:
            outcome = f"{record.status}: {record.reason or 'no reason given'}"
            if record.status == Status.NAN:
                outcome = f"numerics: {record.reason}"
        elif numeric and verdict and not verdict["ok"]:
            outcome = f"numerics changed: {verdict['reason']}"
        elif key in raced and key not in decided and trial["phase"] == Phase.RACE:
            race = raced[key]
            outcome = (f"raced on top of {race.a_label} ({race.ratio:.2f}× in one pair), not decided"
                       if race.ratio else f"raced on top of {race.a_label}, not decided")
        elif key in decided and trial["phase"] not in (Phase.SWEEP, Phase.BASELINE):
            decision = decided[key]
            outcome = f"{decision.verdict} on top of {decision.a_label} ({len(decision.pairs)} pair(s))"
            if decision.verdict.is_faster():
                outcome = "faster"
        elif trial["phase"] == Phase.LEAN and key in taken_out and answer is not None and config != answer:
            outcome = lean_outcome(taken_out[key])
        elif metrics.stopped_early:
            outcome = (f"slower: cut short after {metrics.stopped_early['after']}"
                       + (f" ({ratio:.2f}×)" if ratio is not None else ""))
        elif config == base:
            outcome = "baseline"
        elif changes.keys() == {"deterministic"}:  # measured for its cost, never a speed candidate
            outcome = "cost only" + (f" ({ratio:.2f}×)" if ratio is not None else "")
            if "identical" in (record.extra.get("determinism") or {}):  # absent, or {"error": ...} if it failed
                outcome += ", " + held(record.extra["determinism"])
                determinism = determinism_summary(record, config.label(), ratio)
        elif ratio is not None and ratio <= 1 + min_gain:
            outcome = f"slower ({ratio:.2f}×)" if ratio < 1 else f"no gain ({ratio:.2f}×)"
            share = shares.get(next(iter(changes.items()))) if len(changes) == 1 else None
            if share is not None:
                # one screen trial read alone, against a share the lean step or a step of its own measured in pairs
                outcome = f"in the answer, its share {share - 1:+.0%} in pairs; screened alone at {ratio:.2f}×"
        elif trial["phase"] == Phase.FACTORIAL:  # one run of a joint estimate: it chose, it decided nothing
            outcome = ("measured with other changes, to estimate each one's effect: not decided"
                       + (f" ({ratio:.2f}×)" if ratio is not None else ""))
        elif trial["phase"] == Phase.SAMPLER:  # its one trial was not ahead of the incumbent's figure
            outcome = f"sampled at {ratio:.2f}× the baseline, not ahead of the incumbent: not decided" \
                if ratio is not None else "sampled, not decided"
        elif numeric and not verdict:
            carrier = next((c for c in passed if in_answer(c, changes)), None)
            screened = f"screened faster ({ratio:.2f}×)" if ratio is not None else "screened faster"
            outcome = (f"{screened} but never kept, so its numerics were not checked" if carrier is None
                       else f"faster; its numerics passed the guard inside {carrier.label()}" if in_answer(answer, changes)
                       else f"{screened} but not in the answer; its numerics passed the guard inside {carrier.label()}")
        elif not in_answer(answer, changes):
            outcome = (f"screened faster ({ratio:.2f}×) but not in the answer" if ratio is not None
                       else "screened faster but not in the answer")
        else:
            outcome = "faster"
        row = TrialRow(config=config.label(), changes=changes, phase=trial["phase"],
                       status=record.status, samples_per_s=speed, ratio=ratio,
                       outcome=outcome, guard=verdict,
                       compile_s=metrics.other.get("compile_s"), ms_per_step=metrics.ms_per_step,
                       jit_compile_resolved=metrics.other.get("jit_compile_resolved"),
                       trials=sum(config_key(TrialConfig.from_dict(t["config"])) == key for t in data["trials"]))
        rows.append(row)
        if config == base:
            baseline_row = row
            baseline_curve = list(metrics.loss_curve)
            environment = dict(record.environment) if record.environment else environment
        if trial["phase"] == Phase.BATCH_SIZE or (changes.keys() == {"batch_size"}):
            batch_sizes.append(row)
        elif trial["phase"] in (Phase.SWEEP, Phase.MEASURE, Phase.COMPARE) and len(changes) == 1:
            effects.append(row)
        if outcome not in ("baseline", "faster") and not outcome.startswith(("cost only", "faster; ", "in the answer")) \
                and trial["phase"] != Phase.BATCH_SIZE:
            rejected.append(row)

    best_trial = by_key.get(config_key(best_config))
    best_speed = figures.get(config_key(best_config))
    if batch_sizes and baseline_row:
        batch_sizes.append(baseline_row)
    return StudySummary(
        study=data["study"],
        model=meta.get("model"),
        data=meta.get("data"),
        script=meta.get("script"),
        environment=environment,
        skipped=meta.get("skipped") or {},
        skipped_groups=tuple((tuple(knobs), text) for knobs, text in skipped_groups(meta.get("skipped") or {})),
        refused=tuple(data.get("refused") or ()),
        baseline=Baseline(config=base, samples_per_s=base_speed, loss_curve=tuple(baseline_curve),
                          trials=sum(config_key(TrialConfig.from_dict(t["config"])) == config_key(base)
                                     for t in data["trials"] if t["record"].throughput),
                          load=load_change(data["trials"], base)),
        best=Best(
            config=best_config,
            label=best_config.label(),
            samples_per_s=best_speed,
            trials=sum(config_key(TrialConfig.from_dict(t["config"])) == config_key(best_config)
                       for t in data["trials"] if t["record"].throughput),
            claimed=bool(verification.get("claimed")),
            agreement=agreement(base_speed, best_speed, verification),
            verdict=verification.get("verdict") or NOT_VERIFIED,
            why=verification.get("why"),
            estimate=verification.get("estimate"),
            shares=tuple(verification.get("shares") or ()),
            rewrite=best_trial["record"].extra.get("rewrite") if best_trial else None,
        ),
        effects=tuple(effects),
        rejected=tuple(rejected),
        # with rematerialization counted: a size fits when any of its rows did (`batch_figures.figures`)
        batch_sizes=batch_figures.figures(batch_sizes, base.to_dict()),
        trials=tuple(rows),
        decisions=tuple(decision_row(d) for d in data.get("decisions") or []),
        determinism=determinism,
        read_notes=tuple(data.get("read_notes") or ()),
        processes=processes(data),
        cost=cost_of(data, base, best_config, base_speed, verification),
    )


def cost_of(data: StudyData, base: TrialConfig, best: TrialConfig, base_speed: float | None,
            verification: JSONObject) -> JSONObject | None:
    """The study's time and what its answer saves per run (`fitspeed.search.cost.saving`); None before the
    verification."""
    if not verification:
        return None

    def records(config: TrialConfig) -> list[TrialRecord]:
        key = config_key(config)
        return [t["record"] for t in data["trials"]
                if t["record"].throughput and config_key(TrialConfig.from_dict(t["config"])) == key]

    def median_of(found: list[TrialRecord], name: str) -> float | None:
        values = [r.measured(name) for r in found if isinstance(r.measured(name), (int, float))]
        return statistics.median(values) if values else None

    own = records(base)
    first = own[0] if own else None
    baseline = {"samples_per_s": base_speed, "compile_s": median_of(own, "compile_s"),
                "batch_size": first.metrics.batch_size if first and first.metrics else None,
                "epochs": first.measured("epochs") if first else None,
                "epoch_steps": first.measured("epoch_steps") if first else None}
    estimate = verification.get("estimate") or {}
    answer = {"ratio": estimate.get("median"), "low": estimate.get("ci_low"),
              "compile_s": median_of(records(best), "compile_s")} if verification.get("claimed") else None
    return cost.saving(baseline, answer, data["meta"].get(TUNE_S))
