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

    def to_dict(self) -> dict[str, float]:
        return {"median": self.median, "min": self.min, "max": self.max, "cv": self.cv, "n": self.n}


def describe(values: Sequence[float]) -> Spread:
    """Median with its spread.

    >>> describe([1.0, 2.0, 3.0]).median
    2.0
    """
    if not values:
        raise ValueError("describe needs at least one value")
    mean = statistics.fmean(values)
    cv = statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0
    return Spread(statistics.median(values), min(values), max(values), cv, len(values))


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
            return f"B is {self.median:.2f}× faster ({self.low:.2f}–{self.high:.2f})"
        return (
            f"B is {1 / self.median:.2f}× slower ({1 / self.high:.2f}–{1 / self.low:.2f})"
        )

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


# -- paired, adaptive decisions ----------------------------------------------
#
# Taken from: perfgate's paired mode (baseline and candidate alternate, a t
# interval on the paired differences, more pairs while it is not significant,
# up to a cap); Optuna's WilcoxonPruner (stop a candidate as soon as it is
# surely worse than the best, here: its first pair at 0.7x or less);
# torch.utils.benchmark's adaptive_autorange (measure until the spread is small
# enough, or a time cap); pyperf (fresh worker processes, and a warning where a
# result is unstable: our pooled noise is that figure).


@dataclass(frozen=True)
class Noise:
    """The machine's noise on one paired log ratio: its standard deviation and degrees of freedom."""

    sd: float
    df: int

    def to_dict(self) -> dict[str, float]:
        return {"sd": self.sd, "df": self.df}


def pooled_noise(groups: Sequence[Sequence[float]], nulls: Sequence[float] = ()) -> Noise | None:
    """The noise on a paired log ratio, pooled over a study's comparisons.

    `groups` are the log ratios of each comparison (each gives n - 1 degrees of
    freedom around its own mean); `nulls` are log ratios whose true value is 0,
    such as two baseline trials in a row (one degree of freedom each). The
    spread is the pooled standard deviation with each residual clipped at
    WINSOR robust sds (1.4826 times the median absolute residual), so one
    outlying trial does not widen every interval, while a lucky few residuals
    near zero cannot make every interval falsely narrow either (a median of a
    handful of residuals alone can come out at a tenth of the true spread).

    >>> noise = pooled_noise([[0.10, 0.30], [0.5, 0.5, 0.8]], nulls=[0.1, -0.1, 0.46])
    >>> round(noise.sd, 3), noise.df
    (0.199, 6)
    >>> pooled_noise([[0.2]]) is None
    True
    """
    residuals: list[float] = [abs(x) for x in nulls]
    df = len(nulls)
    for group in groups:
        if len(group) > 1:
            mean = statistics.fmean(group)
            residuals += [abs(x - mean) for x in group]
            df += len(group) - 1
    if not df:
        return None
    robust = 1.4826 * statistics.median(residuals)
    clip = WINSOR * robust if robust > 0 else math.inf
    return Noise(math.sqrt(sum(min(r, clip) ** 2 for r in residuals) / df), df)


WINSOR = 2.5  # pooled_noise clips a residual at this many robust sds
OUTLIER_SDS = 3.0  # with a known noise, a pair this many noise sds from the median pair is left out
FUTILE_AFTER = 3  # after this many pairs an estimate below 1 + min_gain ends the comparison ("no gain")
PROMISING = 2.0  # an estimate at 1 + PROMISING * min_gain or more is on course for a win ...
EXTEND = 2  # ... and may take this many times max_pairs


@dataclass(frozen=True)
class PairedStep:
    """Where a paired comparison stands: `verdict` None means take another pair.

    Verdicts: "faster" (the interval lies above 1, the estimate clears
    1 + min_gain, and most pairs agree), "no gain" (the interval lies below
    1 + min_gain, or after two pairs most show no gain at all), "slower" (below 1, or the first pair at
    `clearly_slower` or less), "not confirmed" (the cap came first).
    """

    verdict: str | None
    pairs: int
    ratio: float | None  # the geometric mean of the pairs' ratios
    low: float | None
    high: float | None
    confidence: float = 0.95  # the interval's

    def to_dict(self) -> dict[str, object]:
        return {"verdict": self.verdict, "pairs": self.pairs, "ratio": self.ratio, "low": self.low,
                "high": self.high, "confidence": self.confidence}


def promising(ratio: float | None, min_gain: float) -> bool:
    """An estimate on course for a win: far enough above 1 + min_gain to be worth more pairs.

    >>> promising(1.2, 0.05), promising(1.08, 0.05), promising(None, 0.05)
    (True, False, False)
    """
    return ratio is not None and ratio >= 1 + PROMISING * min_gain


def paired_step(
    ratios: Sequence[float],
    min_gain: float,
    max_pairs: int,
    noise: Noise | None = None,
    confidence: float = 0.95,
    clearly_slower: float = 0.7,
) -> PairedStep:
    """Decide B against A from per-pair ratios, or ask for another pair.

    The interval is a t interval on the mean log ratio; its spread pools this
    comparison's own pairs with the study's `noise`, so that with a known noise
    one pair can already decide a large difference. Worked examples, with a
    noise of 0.12 on a paired log ratio (a CV of about 8% per trial) known
    from 10 degrees of freedom:

    A 2.5x win is decided in one pair, a clear loss too:

    >>> noise = Noise(0.12, 10)
    >>> paired_step([2.5], 0.05, 8, noise).verdict, paired_step([0.6], 0.05, 8, noise).verdict
    ('faster', 'slower')

    A 3% question, below min_gain, is given up as futile after three pairs;
    one pair below 1 (short of clearly slower) is never a verdict by itself:

    >>> [paired_step([1.03] * n, 0.05, 8, noise).verdict for n in (1, 2, 3)]
    [None, None, 'no gain']
    >>> paired_step([0.9], 0.05, 8, noise).verdict is None
    True

    An estimate at 1 + PROMISING * min_gain or more may take up to EXTEND times the
    cap before it is "not confirmed":

    >>> [paired_step([1.2] * n, 0.05, 4, Noise(0.3, 10)).verdict for n in (4, 5, 8)]
    [None, None, 'faster']

    One pair that a load burst threw far off is left out, once the noise is known:

    >>> step = paired_step([1.3, 1.25, 0.7, 1.28], 0.05, 8, noise)
    >>> step.verdict, round(step.ratio, 2)
    ('faster', 1.28)

    Without a noise figure the first pair gives no interval; pairs that agree
    soon do:

    >>> [paired_step([1.5, 1.45, 1.55][:n], 0.05, 8).verdict for n in (1, 2, 3)]
    [None, 'faster', 'faster']
    >>> step = paired_step([0.95, 0.97, 0.96], 0.05, 8)
    >>> step.verdict, round(step.high, 3)
    ('slower', 0.985)
    """
    n = len(ratios)
    if n == 0:
        return PairedStep(None, 0, None, None, None)
    if any(r <= 0 or not math.isfinite(r) for r in ratios):
        raise ValueError(f"ratios must be positive and finite, got {list(ratios)}")
    logs = [math.log(r) for r in ratios]
    if n == 1 and ratios[0] <= clearly_slower:
        return PairedStep("slower", n, ratios[0], None, None)
    if n == 1 and ratios[0] < 1:  # one pair never rejects short of clearly slower: it may be a load burst
        return PairedStep(None if max_pairs > 1 else "not confirmed", n, ratios[0], None, None)
    if noise and noise.df >= 3 and noise.sd > 0 and n >= 3:  # a pair far from the others: a load burst
        middle = statistics.median(logs)
        kept = [x for x in logs if abs(x - middle) <= OUTLIER_SDS * noise.sd]
        if 2 * len(kept) > n:  # never more than a minority left out
            logs, n = kept, len(kept)
    mean = statistics.fmean(logs)
    ratio = math.exp(mean)
    squares = sum((x - mean) ** 2 for x in logs)
    df = n - 1 + (noise.df if noise else 0)
    if noise:
        squares += noise.df * noise.sd**2
    if df == 0:
        return PairedStep(None if n < max_pairs else "not confirmed", n, ratio, None, None, confidence)
    from scipy import stats as scipy_stats

    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, df)) * math.sqrt(squares / df / n)
    low, high = math.exp(mean - half), math.exp(mean + half)
    threshold = 1 + min_gain
    verdict: str | None = None
    if low > 1 and ratio >= threshold and statistics.median_low(logs) > 0:
        verdict = "faster"
    elif high < 1:
        verdict = "slower"
    elif high < threshold or (n >= 2 and statistics.median_high(logs) <= 0):
        verdict = "no gain"
    elif n >= FUTILE_AFTER and ratio < threshold:
        verdict = "no gain"  # futile: more pairs would at best confirm less than min_gain
    elif len(ratios) >= max_pairs * (EXTEND if promising(ratio, min_gain) else 1):
        verdict = "not confirmed"
    return PairedStep(verdict, len(ratios), ratio, low, high, confidence)
