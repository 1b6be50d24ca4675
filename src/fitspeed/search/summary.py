"""Pure summaries of a tuning study: plain data the tables and best.json draw from.

`study_data` reads an Optuna study into plain dicts, each trial's record decoded
once into a `TrialRecord`; `study_summary` turns those
into the answer: the baseline, the verified best, each knob's own effect, and
every rejected configuration with its reason. Nothing here runs a trial.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

import optuna

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Metrics, Status, TrialRecord
from fitspeed.core.sequential import Verdict, level
from fitspeed.search import batch_figures, guard
from fitspeed.search.ledger import decisions_of, guards_of, meta_of, refusals_of
from fitspeed.search.phase import Phase
from fitspeed.search.studies import config_key


def study_data(study: optuna.Study) -> dict[str, Any]:
    trials = []
    for trial in study.get_trials(deepcopy=False):
        if "record" not in trial.user_attrs:
            continue
        trials.append({"number": trial.number, "phase": trial.user_attrs.get("phase"),
                       "config": trial.user_attrs["config"], "record": TrialRecord.from_dict(trial.user_attrs["record"])})
    attrs = study.user_attrs
    return {
        "study": study.study_name,
        "meta": meta_of(attrs),
        "trials": trials,
        "guards": guards_of(attrs),
        "verification": attrs.get("verification"),
        "decisions": decisions_of(attrs),
        "refused": refusals_of(attrs),
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


def decision_row(decision: dict[str, Any]) -> dict[str, Any]:
    """One paired decision as a table row: what was compared, in how many pairs, the interval, the verdict.

    >>> row = decision_row({"purpose": "combine", "a_label": "defaults", "b_label": "jit_compile=True",
    ...                     "pairs": [[100.0, 150.0], [110.0, 160.0]], "ratio": 1.47, "low": 1.2, "high": 1.8,
    ...                     "verdict": "faster", "why": None})
    >>> row["change"], row["pairs"], row["interval"]
    ('jit_compile=True', 2, '1.20–1.80 (95%)')

    A race pair only orders the candidates, and a head-to-head choice (or a
    polish step) keeps the better estimate: none has an interval or a verdict
    of its own.

    >>> decision_row({"purpose": "race", "a_label": "defaults", "b_label": "jit_compile=True",
    ...               "pairs": [[100.0, 150.0]], "ratio": 1.5, "low": 0.9, "high": 2.4, "confidence": 0.9,
    ...               "verdict": "not confirmed", "why": None})["verdict"]
    'raced'
    """
    a, b = decision["a_label"], decision["b_label"]
    change = " ".join(part for part in b.split() if part not in a.split()) if a != "defaults" else b
    low, high = decision.get("low"), decision.get("high")
    purpose = decision["purpose"]
    verdict = decision["verdict"]
    if purpose in (Phase.RACE, Phase.CHOOSE, Phase.POLISH):
        low = high = None
        verdict = "raced" if purpose == Phase.RACE else ("kept" if verdict == Verdict.FASTER else "not kept")
    return {"purpose": purpose, "incumbent": a, "candidate": b, "change": change or b,
            "pairs": len(decision.get("pairs") or []), "figures": decision.get("pairs") or [],
            "ratio": decision.get("ratio"), "low": low, "high": high,
            "interval": (f"{low:.2f}–{high:.2f} ({level(decision.get('confidence', 0.95))})"
                         if low is not None and high is not None else "–"),
            "verdict": verdict, "why": decision.get("why")}


def held(check: dict[str, Any]) -> str:
    """Whether a determinism check held, in a few words.

    >>> held({"identical": True, "runs": 2}), held({"identical": False, "runs": 2})
    ('weights bit-identical over 2 runs', 'weights differed over 2 runs')
    """
    return f"weights {'bit-identical' if check['identical'] else 'differed'} over {check['runs']} runs"


def determinism_summary(record: TrialRecord, label: str, ratio: float | None) -> dict[str, Any]:
    """The deterministic knob's cost (its speed against the baseline's) and its weight-hash check."""
    check = record.extra["determinism"]
    return {"config": label, "ratio": ratio, "cost": None if ratio is None else 1 - ratio,
            "samples_per_s": record.throughput, "identical": check["identical"], "held": held(check),
            "hash": check["hashes"][0], "hashes": check["hashes"], "steps": check["steps"],
            "differing": check.get("differing") or [], "how": check.get("how")}


def _first_by_key(trials: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for trial in trials:
        out.setdefault(config_key(TrialConfig.from_dict(trial["config"])), trial)
    return out


def medians(trials: list[dict[str, Any]]) -> dict[str, float]:
    """Each configuration's figure: the median of its own trials' samples/s, by configuration key.

    >>> from fitspeed.core.record import TrialSpec, new_record
    >>> t = [{"config": {}, "record": TrialRecord.from_dict(new_record(TrialSpec(model="tiny"), Status.OK,
    ...      metrics={"samples_per_s": {"median": v}}))} for v in (10.0, 30.0, 20.0)]
    >>> list(medians(t).values())
    [20.0]
    """
    speeds: dict[str, list[float]] = {}
    for trial in trials:
        speed = trial["record"].throughput
        if speed:
            speeds.setdefault(config_key(TrialConfig.from_dict(trial["config"])), []).append(speed)
    return {key: statistics.median(values) for key, values in speeds.items()}


def agreement(base_speed: float | None, best_speed: float | None, verification: dict[str, Any]) -> str | None:
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


def study_summary(data: dict[str, Any]) -> dict[str, Any]:
    meta = data["meta"]
    base = TrialConfig.from_dict(meta["base"])
    by_key = _first_by_key(data["trials"])
    figures = medians(data["trials"])
    base_speed = figures.get(config_key(base))  # the median of the baseline's own trials
    min_gain = float(meta.get("min_gain", 0.05))
    guards = data["guards"]
    # configurations whose numerics passed the guard: a single change kept inside one of them was checked there
    passed = [TrialConfig.from_dict(json.loads(key)) for key, verdict in guards.items() if verdict.get("ok")]

    decided: dict[str, dict[str, Any]] = {}  # the newest search decision on each candidate
    raced: dict[str, dict[str, Any]] = {}  # a race pair that no decision followed
    for decision in data.get("decisions") or []:
        key = config_key(TrialConfig.from_dict(decision["b"]))
        if decision["purpose"] == Phase.RACE:
            raced[key] = decision
        elif decision["purpose"] != Phase.VERIFY:
            decided[key] = decision
    rows, effects, rejected, batch_sizes = [], [], [], []
    determinism: dict[str, Any] | None = None
    baseline_row: dict[str, Any] | None = None
    baseline_curve: list[float | None] = []
    environment = meta.get("environment")  # the baseline child's, when it ran, is richer
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
            outcome = (f"raced on top of {race['a_label']} ({race['ratio']:.2f}× in one pair), not decided"
                       if race.get("ratio") else f"raced on top of {race['a_label']}, not decided")
        elif key in decided and trial["phase"] not in (Phase.SWEEP, Phase.BASELINE):
            decision = decided[key]
            outcome = (f"{decision['verdict']} on top of {decision['a_label']} "
                       f"({len(decision.get('pairs') or [])} pair(s))")
            if decision["verdict"] == Verdict.FASTER:
                outcome = "faster"
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
        elif trial["phase"] == Phase.FACTORIAL:  # one run of a joint estimate: it chose, it decided nothing
            outcome = ("measured with other changes, to estimate each one's effect: not decided"
                       + (f" ({ratio:.2f}×)" if ratio is not None else ""))
        elif trial["phase"] == Phase.SAMPLER:  # its one trial was not ahead of the incumbent's figure
            outcome = f"sampled at {ratio:.2f}× the baseline, not ahead of the incumbent: not decided" \
                if ratio is not None else "sampled, not decided"
        elif numeric and not verdict:
            carrier = next((c for c in passed if all(getattr(c, k) == v for k, v in changes.items())), None)
            outcome = (f"faster; its numerics passed the guard inside {carrier.label()}" if carrier
                       else f"screened faster ({ratio:.2f}×) but never kept, so its numerics were not checked"
                       if ratio is not None else "screened faster but never kept, so its numerics were not checked")
        else:
            outcome = "faster"
        row = {"config": config.label(), "changes": changes, "phase": trial["phase"],
               "status": record.status, "samples_per_s": speed, "ratio": ratio,
               "outcome": outcome, "guard": verdict,
               "compile_s": metrics.other.get("compile_s"), "ms_per_step": metrics.ms_per_step,
               "jit_compile_resolved": metrics.other.get("jit_compile_resolved"),
               "trials": sum(config_key(TrialConfig.from_dict(t["config"])) == key for t in data["trials"])}
        rows.append(row)
        if config == base:
            baseline_row = row
            baseline_curve = list(metrics.loss_curve)
            environment = dict(record.environment) if record.environment else environment
        if trial["phase"] == Phase.BATCH_SIZE or (changes.keys() == {"batch_size"}):
            batch_sizes.append(row)
        elif trial["phase"] in (Phase.SWEEP, Phase.MEASURE, Phase.COMPARE) and len(changes) == 1:
            effects.append(row)
        if outcome not in ("baseline", "faster") and not outcome.startswith(("cost only", "faster; ")) \
                and trial["phase"] != Phase.BATCH_SIZE:
            rejected.append(row)

    verification = data.get("verification") or {}
    best_config = TrialConfig.from_dict(verification.get("config") or base.to_dict())
    best_trial = by_key.get(config_key(best_config))
    best_speed = figures.get(config_key(best_config))
    if batch_sizes and baseline_row:
        batch_sizes.append(baseline_row)
    return {
        "study": data["study"],
        "model": meta.get("model"),
        "data": meta.get("data"),
        "script": meta.get("script"),  # the script tuned, by file name and SHA-256 (`fitspeed run` checks it)
        "environment": environment,
        "skipped": meta.get("skipped") or {},
        "skipped_groups": skipped_groups(meta.get("skipped") or {}),
        # combinations the search proposed and refused before any trial, with the reason (`Ledger.put_refusal`)
        "refused": data.get("refused") or [],
        "baseline": {"config": base.to_dict(), "samples_per_s": base_speed, "loss_curve": baseline_curve,
                     "trials": sum(config_key(TrialConfig.from_dict(t["config"])) == config_key(base)
                                   for t in data["trials"] if t["record"].throughput)},
        "best": {
            "config": best_config.to_dict(),
            "label": best_config.label(),
            "samples_per_s": best_speed,
            "trials": sum(config_key(TrialConfig.from_dict(t["config"])) == config_key(best_config)
                          for t in data["trials"] if t["record"].throughput),
            "claimed": bool(verification.get("claimed")),
            "agreement": agreement(base_speed, best_speed, verification),
            "verdict": verification.get("verdict") or "not verified yet",
            "why": verification.get("why"),
            "estimate": verification.get("estimate"),
            # each knob's own share of the speed-up: the ratio its own evidence measured (`search.lean`)
            "shares": verification.get("shares") or [],
            # what its trial rewrote in the model (fitspeed.trial.transform), for best.json's snippet
            "rewrite": best_trial["record"].extra.get("rewrite") if best_trial else None,
        },
        "effects": effects,
        "rejected": rejected,
        # with rematerialization counted: a size fits when any of its rows did (`batch_figures.figures`)
        "batch_sizes": batch_figures.figures(batch_sizes, base.to_dict()),
        "trials": rows,
        "decisions": [decision_row(d) for d in data.get("decisions") or []],
        "determinism": determinism,
        "read_notes": list(data.get("read_notes") or []),
    }
