"""Pure statistics on measured figures: summaries, ratios and verdicts.

Nothing here imports a framework or reads a clock; every function takes plain
numbers and returns plain numbers, so the tables and plots draw from one place.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    median: float
    min: float
    max: float
    cv: float  # coefficient of variation: stdev / mean, 0 for one value
    n: int
    geomean: float | None = None  # the geometric mean (None in records made before it was kept)

    @property
    def center(self) -> float:
        """The figure that stands for the values: their geometric mean, or their median where it was not kept."""
        return self.geomean if self.geomean is not None else self.median

    def to_dict(self) -> dict[str, float]:
        return {"median": self.median, "min": self.min, "max": self.max, "cv": self.cv, "n": self.n,
                **({"geomean": self.geomean} if self.geomean is not None else {})}


def describe(values: Sequence[float]) -> Spread:
    """Median and geometric mean, with the spread.

    >>> figure = describe([1.0, 2.0, 4.0])
    >>> figure.median, round(figure.geomean, 6), figure.center == figure.geomean
    (2.0, 2.0, True)
    """
    if not values:
        raise ValueError("describe needs at least one value")
    mean = statistics.fmean(values)
    cv = statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0
    geomean = math.exp(statistics.fmean(math.log(v) for v in values)) if all(v > 0 for v in values) else None
    return Spread(statistics.median(values), min(values), max(values), cv, len(values), geomean)


@dataclass(frozen=True)
class RatioEstimate:
    """B over A: the median per-pair ratio and a confidence interval (95% by default).

    The interval is a t interval on the log ratios, turned back into a ratio;
    with one pair there is no interval and both ends equal the ratio.
    """

    ratios: tuple[float, ...]
    median: float
    low: float
    high: float
    confidence: float = 0.95

    @property
    def verdict(self) -> str:
        if len(self.ratios) < 2:
            return "too few pairs for an interval"
        if self.low <= 1.0 <= self.high:
            return "no measurable difference"
        if self.low > 1.0:
            return f"B is at least {self.low:.2f}× faster ({self.low:.2f}–{self.high:.2f}, median {self.median:.2f}×)"
        return (f"B is at least {1 / self.high:.2f}× slower "
                f"({1 / self.high:.2f}–{1 / self.low:.2f}, median {1 / self.median:.2f}×)")

    def to_dict(self) -> dict[str, object]:
        return {
            "ratios": list(self.ratios),
            "median": self.median,
            "ci_low": self.low,
            "ci_high": self.high,
            "confidence": self.confidence,
            "verdict": self.verdict,
        }


def ratio_estimate(ratios: Sequence[float], confidence: float = 0.95) -> RatioEstimate:
    """Estimate B/A from per-pair ratios (each pair measured back to back).

    >>> est = ratio_estimate([1.40, 1.45, 1.42, 1.38, 1.44])
    >>> round(est.median, 2), est.low > 1
    (1.42, True)
    """
    if not ratios or any(r <= 0 or not math.isfinite(r) for r in ratios):
        raise ValueError(f"ratios must be positive and finite, got {list(ratios)}")
    logs = [math.log(r) for r in ratios]
    median = statistics.median(ratios)
    if len(logs) < 2:
        return RatioEstimate(tuple(ratios), median, median, median, confidence)
    from scipy import (
        stats as scipy_stats,  # imported here: it costs half a second at start-up
    )

    mean = statistics.fmean(logs)
    half = scipy_stats.t.ppf(0.5 + confidence / 2, len(logs) - 1) * statistics.stdev(logs)
    half /= math.sqrt(len(logs))
    return RatioEstimate(
        tuple(ratios), median, math.exp(mean - half), math.exp(mean + half), confidence
    )


def share_interval(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The 95% Wilson score interval of a share of `k` in `n` (a rate of claims, rejections, ...).

    >>> [round(x, 4) for x in share_interval(4, 400)]
    [0.0039, 0.0254]
    >>> [round(x, 4) for x in share_interval(0, 200)]
    [0.0, 0.0188]
    """
    if n < 1:
        raise ValueError(f"Expected at least one trial to take a share of. Received n={n}.")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
