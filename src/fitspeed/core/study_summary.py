"""`StudySummary`: what a tuning study concluded, typed, as `tune` hands it to the tables, best.json, the report and the API.

`fitspeed.search.summary.study_summary` builds it, from a study or from a
results file; nothing downstream reads it by key. `to_dict` is its JSON
(`show --json`, best.json, report.json), key for key in the order those files
have always had; `from_dict` reads one back (`fitspeed.load` of a best.json,
or a hand-made one), with the defaults of a study that has not got that far. Its rows are table
rows, typed (`TrialRow`, `DecisionRow`); the verification's estimate, a
knob's share, the batch-size figures and the environment stay the JSON they
are written as (`JSONObject`).

>>> summary = StudySummary.from_dict({"study": "s", "baseline": {"config": {}, "samples_per_s": 100.0},
...                                   "best": {"config": {"jit_compile": True}, "claimed": True}})
>>> summary.best.label, summary.best.verified, summary.answer.label(), list(summary.to_dict())[:4]
('jit_compile=True', False, 'jit_compile=True', ['study', 'model', 'data', 'script'])
>>> StudySummary.from_dict(summary.to_dict()) == summary
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from fitspeed.core.config import TrialConfig
from fitspeed.core.json_data import JSONObject

NOT_VERIFIED = "not verified yet"  # the verdict of a study that stopped before its verification


def share_text(share: Mapping[str, Any]) -> str:
    """One knob's own share of the answer's speed-up, with the interval its evidence measured and how.

    >>> share_text({"knob": "precision", "value": "mixed_bfloat16", "ratio": 1.62, "how": "added alone",
    ...             "low": 1.31, "high": 2.0, "confidence": 0.7})
    'precision=mixed_bfloat16 1.62× (added alone; 70% CI 1.31–2.00)'
    >>> share_text({"knob": "steps_per_execution", "value": 64, "ratio": 1.06, "how": "taken out"})
    'steps_per_execution=64 +6% (taken out)'
    """
    ratio = float(share["ratio"])
    figure = f"{ratio:.2f}×" if ratio >= 1.5 else f"+{100 * (ratio - 1):.0f}%"
    low, high, confidence = share.get("low"), share.get("high"), share.get("confidence")
    interval = (f"; {100 * confidence:.3g}% CI {low:.2f}–{high:.2f}" if low is not None and high is not None
                and confidence else "")
    return f"{share['knob']}={share['value']} {figure} ({share['how']}{interval})"


class TrialRow(TypedDict):
    """One configuration measured in the study: its figure against the baseline's, and what became of it."""

    config: str  # its label
    changes: JSONObject  # the knobs it sets differently from the baseline
    phase: str | None
    status: str
    samples_per_s: float | None  # the median of its own trials
    ratio: float | None  # against the baseline's median
    outcome: str
    guard: JSONObject | None  # the numerics guard's verdict, where it ran
    compile_s: float | None
    ms_per_step: float | None
    jit_compile_resolved: bool | None
    trials: int


class DecisionRow(TypedDict):
    """One paired decision as a table row (`fitspeed.search.summary.decision_row`)."""

    purpose: str
    incumbent: str
    candidate: str
    change: str
    pairs: int
    figures: list[list[float]]
    ratio: float | None
    low: float | None
    high: float | None
    interval: str
    verdict: str
    why: str | None
    measured_by: NotRequired[list[str]]  # each pair's design: lockstep or sequential


def pairs_title(rows: Sequence[Mapping[str, Any]]) -> str:
    """How the decisions' pairs were measured, for the decisions table's title.

    >>> pairs_title([{"measured_by": ["lockstep"] * 3}, {"measured_by": ["lockstep"]}])
    'decisions (pairs against the incumbent, each a lockstep round)'
    >>> pairs_title([{"measured_by": ["lockstep"]}, {"measured_by": ["sequential"] * 2}])
    'decisions (pairs against the incumbent: 1 in lockstep rounds, 2 sequential)'
    >>> pairs_title([{}])
    'decisions (interleaved pairs against the incumbent)'
    """
    designs = [d for row in rows for d in row.get("measured_by") or ()]
    together, apart = designs.count("lockstep"), designs.count("sequential")
    if together and not apart:
        return "decisions (pairs against the incumbent, each a lockstep round)"
    if together:
        return f"decisions (pairs against the incumbent: {together} in lockstep rounds, {apart} sequential)"
    return "decisions (interleaved pairs against the incumbent)"


@dataclass(frozen=True)
class Baseline:
    """The defaults the study started from: their figure (the median of their trials) and loss curve."""

    config: TrialConfig
    samples_per_s: float | None = None
    loss_curve: tuple[float | None, ...] = ()
    trials: int = 0
    load: str | None = None  # how the defaults' own speed changed during the study, where it did (absent if not)

    def to_dict(self) -> JSONObject:
        out: JSONObject = {"config": self.config.to_dict(), "samples_per_s": self.samples_per_s,
                           "loss_curve": list(self.loss_curve), "trials": self.trials}
        if self.load is not None:
            out["load"] = self.load
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Baseline:
        return cls(config=TrialConfig.from_dict(values.get("config") or {}), samples_per_s=values.get("samples_per_s"),
                   loss_curve=tuple(values.get("loss_curve") or ()), trials=int(values.get("trials") or 0),
                   load=values.get("load"))


@dataclass(frozen=True)
class Best:
    """The search's answer and the verification's word on it: claimed, or "keep the defaults", or not verified yet."""

    config: TrialConfig
    label: str
    samples_per_s: float | None = None
    trials: int = 0
    claimed: bool = False
    agreement: str | None = None  # why the single figures and the verdict differ, where they do
    verdict: str = NOT_VERIFIED
    why: str | None = None
    estimate: JSONObject | None = None  # the verification's estimate and interval, where it claimed
    shares: tuple[JSONObject, ...] = ()  # each knob's own share of the speed-up (`search.lean`)
    rewrite: JSONObject | None = None  # what its trial rewrote in the model, for best.json's snippet

    @property
    def verified(self) -> bool:
        """The verification ran (whether or not it claimed)."""
        return self.verdict != NOT_VERIFIED

    def to_dict(self) -> JSONObject:
        return {"config": self.config.to_dict(), "label": self.label, "samples_per_s": self.samples_per_s,
                "trials": self.trials, "claimed": self.claimed, "agreement": self.agreement,
                "verdict": self.verdict, "why": self.why, "estimate": self.estimate,
                "shares": [dict(s) for s in self.shares], "rewrite": self.rewrite}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Best:
        config = TrialConfig.from_dict(values.get("config") or {})
        return cls(config=config, label=str(values.get("label") or config.label()),
                   samples_per_s=values.get("samples_per_s"), trials=int(values.get("trials") or 0),
                   claimed=bool(values.get("claimed")), agreement=values.get("agreement"),
                   verdict=str(values.get("verdict") or NOT_VERIFIED), why=values.get("why"),
                   estimate=values.get("estimate"), shares=tuple(values.get("shares") or ()),
                   rewrite=values.get("rewrite"))


@dataclass(frozen=True)
class StudySummary:
    """A tuning study's answer and evidence (see the module's docstring)."""

    study: str
    baseline: Baseline
    best: Best
    model: str | None = None
    data: str | None = None
    script: JSONObject | None = None  # the script tuned, by file name and SHA-256 (`fitspeed run` checks it)
    environment: JSONObject | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    skipped_groups: tuple[tuple[tuple[str, ...], str], ...] = ()  # skipped knobs, grouped by reason
    refused: tuple[dict[str, str], ...] = ()  # combinations refused before any trial (`Ledger.put_refusal`)
    effects: tuple[TrialRow, ...] = ()  # each knob alone
    rejected: tuple[TrialRow, ...] = ()
    batch_sizes: JSONObject = field(default_factory=lambda: {"rows": []})  # `search.batch_figures.figures`
    trials: tuple[TrialRow, ...] = ()
    decisions: tuple[DecisionRow, ...] = ()
    determinism: JSONObject | None = None
    read_notes: tuple[str, ...] = ()
    failures: tuple[dict[str, str], ...] | None = None  # each crash's stderr tail, where a report loaded it
    processes: dict[str, int] = field(default_factory=dict)  # trial processes by stage (`search.summary.processes`)
    cost: JSONObject | None = None  # the study's time and what its answer saves per run (`search.cost.saving`)

    @property
    def answer(self) -> TrialConfig:
        """What best.json recommends: the best where the verification claimed it, else the baseline."""
        return self.best.config if self.best.claimed else self.baseline.config

    def to_dict(self) -> JSONObject:
        out: JSONObject = {
            "study": self.study, "model": self.model, "data": self.data, "script": self.script,
            "environment": self.environment, "skipped": dict(self.skipped),
            "skipped_groups": [(list(knobs), reason) for knobs, reason in self.skipped_groups],
            "refused": [dict(r) for r in self.refused], "baseline": self.baseline.to_dict(),
            "best": self.best.to_dict(), "effects": [dict(r) for r in self.effects],
            "rejected": [dict(r) for r in self.rejected], "batch_sizes": self.batch_sizes,
            "trials": [dict(r) for r in self.trials], "decisions": [dict(r) for r in self.decisions],
            "determinism": self.determinism, "read_notes": list(self.read_notes), "processes": dict(self.processes),
            "cost": self.cost}
        if self.failures is not None:
            out["failures"] = [dict(f) for f in self.failures]
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> StudySummary:
        failures = values.get("failures")
        return cls(
            study=str(values.get("study") or ""), baseline=Baseline.from_dict(values.get("baseline") or {}),
            best=Best.from_dict(values.get("best") or {}), model=values.get("model"), data=values.get("data"),
            script=values.get("script"), environment=values.get("environment"),
            skipped=dict(values.get("skipped") or {}),
            skipped_groups=tuple((tuple(knobs), str(reason)) for knobs, reason in values.get("skipped_groups") or ()),
            refused=tuple(values.get("refused") or ()), effects=tuple(values.get("effects") or ()),
            rejected=tuple(values.get("rejected") or ()), batch_sizes=values.get("batch_sizes") or {"rows": []},
            trials=tuple(values.get("trials") or ()), decisions=tuple(values.get("decisions") or ()),
            determinism=values.get("determinism"), read_notes=tuple(values.get("read_notes") or ()),
            failures=None if failures is None else tuple(failures),
            processes={str(k): int(v) for k, v in (values.get("processes") or {}).items()},
            cost=values.get("cost"))
