"""Compare two configurations with interleaved runs: A B A B …, each a fresh process.

Each pair gives the ratio of B's median samples/s to A's. Pairs run back to
back, so slow drift on a shared machine hits both arms of a pair alike; the
ratios then give a median with a 95% confidence interval (`fitspeed.core.stats`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fitspeed.core.record import SCHEMA_VERSION, TrialSpec, throughput
from fitspeed.core.stats import RatioEstimate, ratio_estimate
from fitspeed.measure.runner import run_trial

TrialRunner = Callable[[TrialSpec], dict[str, Any]]


@dataclass
class Comparison:
    spec_a: TrialSpec
    spec_b: TrialSpec
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    confidence: float = 0.95
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def ratios(self) -> list[float]:
        out = []
        for a, b in self.pairs:
            ta, tb = throughput(a), throughput(b)
            if ta and tb:
                out.append(tb / ta)
        return out

    def estimate(self) -> RatioEstimate | None:
        ratios = self.ratios()
        return ratio_estimate(ratios, self.confidence) if ratios else None

    def verdict(self) -> str:
        estimate = self.estimate()
        failed = sum(1 for pair in self.pairs for r in pair if r.get("status") != "ok")
        if estimate is None:
            return "could not compare: no pair finished with both trials ok"
        note = f" ({failed} trial(s) did not finish ok)" if failed else ""
        return estimate.verdict + note

    def record(self) -> dict[str, Any]:
        estimate = self.estimate()
        return {
            "schema": SCHEMA_VERSION,
            "kind": "comparison",
            "id": self.id,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "status": "ok" if estimate and len(estimate.ratios) >= 2 else "failed",
            "model": self.spec_a.model,
            "data": self.spec_a.data,
            "a": self.spec_a.config.to_dict(),
            "b": self.spec_b.config.to_dict(),
            "a_label": self.spec_a.config.label(),
            "b_label": self.spec_b.config.label(),
            "trial_ids": [[a["id"], b["id"]] for a, b in self.pairs],
            "estimate": estimate.to_dict() if estimate else None,
            "verdict": self.verdict(),
        }


def interleave(
    spec_a: TrialSpec,
    spec_b: TrialSpec,
    pairs: int,
    *,
    run: TrialRunner = run_trial,
    on_trial: Callable[[str, int, dict[str, Any]], None] | None = None,
    confidence: float = 0.95,
) -> Comparison:
    """Run `pairs` interleaved pairs; `on_trial(arm, pair, record)` sees each record as it lands."""
    comparison = Comparison(spec_a, spec_b, confidence=confidence)
    for index in range(pairs):
        records = []
        for arm, spec in (("a", spec_a), ("b", spec_b)):
            record = run(spec)
            record.update(compare_id=comparison.id, arm=arm, pair=index)
            if on_trial:
                on_trial(arm, index, record)
            records.append(record)
        comparison.pairs.append((records[0], records[1]))
    return comparison
