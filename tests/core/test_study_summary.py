"""The typed summary writes the JSON that best.json, `show --json` and report.json have always held, key for key."""

from __future__ import annotations

import dataclasses
import json

from fitspeed.core.config import TrialConfig
from fitspeed.core.study_summary import NOT_VERIFIED, Baseline, Best, StudySummary
from fitspeed.search.decision import Decision

# the keys in the order the summary dict had them before it was typed (search/summary.py at 9515824)
SUMMARY_KEYS = ["study", "model", "data", "script", "environment", "skipped", "skipped_groups", "refused",
                "baseline", "best", "effects", "rejected", "batch_sizes", "trials", "decisions", "determinism",
                "read_notes", "processes", "cost"]  # processes, cost: added at the end (where a study's trial processes
# went; what the tune took and what its answer saves, `search.cost`)
BEST_KEYS = ["config", "label", "samples_per_s", "trials", "claimed", "agreement", "verdict", "why", "estimate",
             "shares", "rewrite"]
# a decision as `Decider.store` wrote it before it was typed: Step.to_dict's keys first, then the decision's own
DECISION_KEYS = ["verdict", "pairs", "ratio", "low", "high", "confidence", "noise", "id", "purpose", "a", "b",
                 "a_label", "b_label", "orders", "design", "min_gain", "why", "lost_pairs"]


def summary() -> StudySummary:
    fast = TrialConfig(jit_compile=True)
    return StudySummary(
        study="tiny-synthetic", model="tiny", baseline=Baseline(TrialConfig(), 100.0, (2.0, None), 3),
        best=Best(fast, fast.label(), 150.0, 2, claimed=True, verdict="B is at least 1.30× faster",
                  estimate={"median": 1.5, "ci_low": 1.3, "ci_high": 1.7, "ratios": [1.5, 1.5, 1.5]},
                  shares=({"knob": "jit_compile", "value": True, "ratio": 1.5},)),
        skipped={"cache": "cache applies to images"}, skipped_groups=((("cache",), "applies to images"),),
        read_notes=("one line skipped",))


def test_the_summary_writes_its_keys_in_the_order_the_files_have_always_had() -> None:
    written = summary().to_dict()
    assert list(written) == SUMMARY_KEYS and list(written["best"]) == BEST_KEYS
    assert list(written["baseline"]) == ["config", "samples_per_s", "loss_curve", "trials"]
    text = json.dumps(written)
    assert '"skipped_groups": [[["cache"], "applies to images"]]' in text and '"loss_curve": [2.0, null]' in text
    assert "failures" not in written  # only a report's summary has them
    with_failures = dataclasses.replace(summary(), failures=({"trial": "defaults", "status": "crashed"},))
    assert list(with_failures.to_dict())[-1] == "failures"


def test_a_summary_reads_back_from_its_json_as_itself() -> None:
    for made in (summary(), dataclasses.replace(summary(), failures=())):
        assert StudySummary.from_dict(json.loads(json.dumps(made.to_dict()))) == made
    bare = StudySummary.from_dict({"study": "s", "baseline": {}, "best": {"config": {"jit_compile": True}}})
    assert bare.best.verdict == NOT_VERIFIED and not bare.best.verified and bare.answer == TrialConfig()


def test_a_decision_is_stored_in_the_order_the_study_has_always_stored_it() -> None:
    decision = Decision.from_dict({"id": "c1", "purpose": "combine", "a": {}, "b": {"jit_compile": True},
                                   "verdict": "faster", "pairs": [[100.0, 150.0]], "orders": ["BA"],
                                   "lost_pairs": [{"pair": 1, "order": "AB", "status": "failed", "reason": "x"}]})
    assert list(decision.to_dict()) == DECISION_KEYS
    assert Decision.from_dict(json.loads(json.dumps(decision.to_dict()))).to_dict() == json.loads(
        json.dumps(decision.to_dict()))
