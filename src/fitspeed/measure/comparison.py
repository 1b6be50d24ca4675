"""Compare two configurations in pairs, each pair one round of two fresh processes.

Each pair gives the ratio of B's samples/s to A's. A pair is a lockstep round
(`fitspeed.measure.rounds`): A's and B's processes live together and take
turns window by window, so the machine's drift falls on both arms alike;
where two processes cannot run together, A and B run one after the other,
and the comparison says why (`Comparison.why`). Which arm times first is a
coin per pair. The ratios give a median with a 95% confidence interval
(`fitspeed.core.stats`).

A trial's samples/s is the median of its timed windows, or with
`statistic="best"` its fastest window: on a machine shared with other work,
interference only ever slows a window down, so the fastest window is the
steadiest estimate of what the configuration does when left alone
(docs/benchmarks/null_test.md has the widths each gives here).

With `until_width`, pairs go on past `pairs` until the interval is that narrow
(high - low, on the ratio) or `max_pairs` have run.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field, replace

from fitspeed.core.errors import UserError
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import SCHEMA_VERSION, OnTrial, Status, TrialRecord, TrialRunner, TrialSpec
from fitspeed.core.sequential import pair_order
from fitspeed.core.stats import RatioEstimate, ratio_estimate
from fitspeed.measure.rounds import RoundRunner, Rounds, as_rounds

STATISTICS = ("mean", "median", "best")


def speed(record: TrialRecord, statistic: str = "mean") -> float | None:
    """A trial's samples/s by `statistic`: the geometric mean of its windows (its figure, `throughput`), their
    median, or its fastest window ("best").

    >>> from fitspeed.core.record import new_record
    >>> r = new_record(TrialSpec(model="tiny"), Status.OK,
    ...                metrics={"samples_per_s": {"median": 900.0, "max": 1000.0, "geomean": 910.0}})
    >>> speed(r), speed(r, "median"), speed(r, "best")
    (910.0, 900.0, 1000.0)
    """
    figure = record.metrics.samples_per_s if record.metrics is not None else None
    if record.status != Status.OK or figure is None:
        return None
    if statistic == "best":
        return figure.max
    if statistic == "median":
        return figure.median
    return record.throughput


@dataclass
class Comparison:
    spec_a: TrialSpec
    spec_b: TrialSpec
    pairs: list[tuple[TrialRecord, TrialRecord]] = field(default_factory=list)
    confidence: float = 0.95
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    statistic: str = "mean"
    until_width: float | None = None
    designs: list[str] = field(default_factory=list)  # each pair's: lockstep or sequential
    why: str | None = None  # why pairs ran sequentially, where they did

    def design(self) -> str:
        """How the pairs were measured, in a sentence.

        >>> c = Comparison(TrialSpec(model="tiny"), TrialSpec(model="tiny"), designs=["lockstep"] * 3)
        >>> c.design()
        'lockstep rounds: A and B alive together, timed in turns (3 of 3 pairs)'
        >>> Comparison(c.spec_a, c.spec_b, designs=["sequential"], why="2 trials do not fit").design()
        'sequential pairs (2 trials do not fit)'
        """
        together = self.designs.count("lockstep")
        if together:
            return (f"lockstep rounds: A and B alive together, timed in turns ({together} of {len(self.designs)} "
                    "pairs)")
        return f"sequential pairs ({self.why})" if self.why else "sequential pairs"

    def ratios(self) -> list[float]:
        out = []
        for a, b in self.pairs:
            ta, tb = speed(a, self.statistic), speed(b, self.statistic)
            if ta and tb and ta > 0 and tb > 0:  # a record written before windows were checked may hold less
                out.append(tb / ta)
        return out

    def estimate(self) -> RatioEstimate | None:
        ratios = self.ratios()
        return ratio_estimate(ratios, self.confidence) if ratios else None

    def verdict(self) -> str:
        estimate = self.estimate()
        failed = sum(1 for pair in self.pairs for r in pair if r.status != Status.OK)
        if estimate is None:
            return "could not compare: no pair finished with both trials ok"
        note = f" ({failed} trial(s) did not finish ok)" if failed else ""
        return estimate.verdict + note

    def record(self) -> JSONObject:
        estimate = self.estimate()
        return {
            "schema": SCHEMA_VERSION,
            "kind": "comparison",
            "id": self.id,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "status": Status.OK if estimate and len(estimate.ratios) >= 2 else Status.FAILED,
            "model": self.spec_a.model,
            "data": self.spec_a.data,
            "a": self.spec_a.config.to_dict(),
            "b": self.spec_b.config.to_dict(),
            "a_label": self.spec_a.config.label(),
            "b_label": self.spec_b.config.label(),
            "trial_ids": [[a.id, b.id] for a, b in self.pairs],
            "statistic": self.statistic,
            "until_width": self.until_width,
            "width": estimate.high - estimate.low if estimate and len(estimate.ratios) >= 2 else None,
            "estimate": estimate.to_dict() if estimate else None,
            "verdict": self.verdict(),
            "designs": list(self.designs),
            "design": self.design(),
        }


def check(statistic: str, until_width: float | None) -> None:
    """Refuse a statistic or a target width `interleave` cannot use, in one sentence."""
    if statistic not in STATISTICS:
        raise UserError(f"Expected --statistic to be one of {', '.join(STATISTICS)}. Received: {statistic!r}. "
                        "Use --statistic mean, --statistic median or --statistic best.")
    if until_width is not None and not (0 < until_width < 10):
        raise UserError(f"Expected --until-width to be a width on the ratio B/A between 0 and 10, such as 0.06 "
                        f"(±3%). Received: {until_width}. Use for example --until-width 0.06.")


def width(comparison: Comparison) -> float | None:
    """The interval's width on B/A (high - low), or None before two pairs finished ok."""
    estimate = comparison.estimate()
    if estimate is None or len(estimate.ratios) < 2:
        return None
    return estimate.high - estimate.low


def interleave(
    spec_a: TrialSpec,
    spec_b: TrialSpec,
    pairs: int,
    *,
    run: TrialRunner | RoundRunner | None = None,
    on_trial: OnTrial | None = None,
    confidence: float = 0.95,
    statistic: str = "mean",
    until_width: float | None = None,
    max_pairs: int | None = None,
) -> Comparison:
    """Run `pairs` pairs, each one round (`fitspeed.measure.rounds`) in which a coin says which arm times
    first; `on_trial(arm, record)` sees each record as its round lands, the first arm's first.

    Each record says its `arm` ("a" or "b") and its `pair` (0 is the first). `run` is a
    `Rounds` (the default: lockstep where two trials fit) or a plain trial runner (a test's fake),
    whose pairs run as sequential trials.

    With `until_width`, go on until the interval is at most that wide, or `max_pairs` pairs ran.
    """
    check(statistic, until_width)
    runner = as_rounds(run if run is not None else Rounds())
    cap = max(pairs, max_pairs or pairs)
    comparison = Comparison(spec_a, spec_b, confidence=confidence, statistic=statistic, until_width=until_width)
    index = 0
    while index < pairs or (until_width is not None and index < cap and _wider(comparison, until_width)):
        # a coin per pair: in lockstep, which arm's turn comes first; sequential, which trial runs first
        b_first = pair_order(comparison.id, "compare", index)
        done = runner.round([spec_a, spec_b], first=1 if b_first else 0)
        comparison.designs.append(done.design)
        comparison.why = comparison.why or done.why
        records: dict[str, TrialRecord] = {}
        for arm, record in (("b", done.records[1]), ("a", done.records[0])) if b_first else zip("ab", done.records):
            record = replace(record, extra={**record.extra, "compare_id": comparison.id, "arm": arm, "pair": index,
                                            "first": not records})
            if on_trial:
                on_trial(arm, record)
            records[arm] = record
        comparison.pairs.append((records["a"], records["b"]))
        index += 1
    return comparison


def _wider(comparison: Comparison, until_width: float) -> bool:
    """Whether another pair is worth running: the interval is too wide, or there is none yet but one can come."""
    current = width(comparison)
    if current is None:
        return bool(comparison.ratios())  # one ok pair: one more gives an interval; none: more will not help
    return current > until_width
