"""The numerics guard's statistics: how many paired seeds it runs, and the paired test of the loss gaps.

Pure functions over held-out losses (lower is better), one value a seed for
each side, paired by seed; `fitspeed.search.guard` reads them from guard
runs. The question is one of non-inferiority at a stated margin δ: is the
candidate's loss shown worse than the baseline's by more than δ, MARGIN (1%)
of the baseline's own loss by default (`fitspeed tune --guard-margin`)? The
same margin holds on every model, whatever its seeds' spread or how well a
seed's two runs pair. The rule, a two-stage design on a paired t test (Stein
1945, with the variance re-estimated at the end as in an internal pilot,
Wittes & Brittain 1990):

1. FIRST_SEEDS (5) paired seeds. Their gaps d = candidate - baseline give
   sd(d).
2. N = ((t(1 - GAP_LEVEL) + t(POWER)) x sd(d) / δ)^2 seeds, t on
   FIRST_SEEDS - 1 degrees of freedom, between FIRST_SEEDS and MAX_SEEDS (24)
   (`stein_seeds`): POWER (80%) against a gap of 2δ, paid for only where a
   seed's gaps vary by much of the margin. None are added where the first
   stage settles the verdict (`settled`): its gaps lie so far from δ, above
   or below, that a t test at EARLY_LEVEL (0.1%) sees it (a label shuffle; a
   change that pairs so well that the gap is shown inside the margin at once).
3. The candidate fails when the one-sided lower bound of mean(d) over the N
   seeds, mean(d) - t(1 - GAP_LEVEL; N - 1) x sd(d over N) / sqrt(N), lies
   above δ (`PairedGap.low`, `PairedGap.margin`). Where N seeds cannot see 2δ
   at POWER (the cap binds), a pass says so, and names the smallest margin
   they can see (`PairedGap.blind`, `PairedGap.visible`): the scale is never
   changed silently.
4. It fails too when mean(d) > δ and its own seed-to-seed sd over the N seeds,
   its farthest seed left out (`trimmed_sd`), is above what an F test at SPREAD_LEVEL (0.25%) allows against the
   baseline's, and at least MIN_SPREAD_RATIO (8) times it (`PairedGap.unstable`).
5. A failure on the paired gap alone (step 3, neither settled at the first
   stage nor unstable) is replicated before it stands: N fresh seeds of each
   side (seeds N to 2N - 1), judged on their own by the same test at
   REPLICATION_LEVEL (25%). The candidate fails only where they fail too.
   A false rejection throws away a speed-up the search found, the largest of
   its losses in `benchmarks/search_diagnosis.py`'s worlds; the replication's
   seeds are paid for only where the first N fail.

A margin of 0 gives the rule before the margin (2026-11-29): "worse at all",
with N aimed at one seed-to-seed sd sigma (the baseline's, or both sides'
pooled where smaller: `target_sd`).

Re-estimating sd(d) over every seed, on N - 1 degrees of freedom, gives the
test its power where the pairs disagree, but N was chosen from the first
seeds' sd, so the test is not exact: a first stage whose gaps happen to agree
stops early with a small sd (the rate at the margin's edge runs up to 1.4x the
nominal GAP_LEVEL of 1.5%). `benchmarks/guard_power.py` measures the rule's
four rates through the real functions (docs/benchmarks/guard_power.md): a
candidate that learns the same rejected at most 0.5%, half a margin worse
passed 99% or more, twice the margin worse rejected 83% or more where the
seeds can see it, and a lower loss never rejected.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fitspeed.core.json_data import JSONObject

FIRST_SEEDS = 5  # the first stage: paired seeds that estimate sd(d) and sigma
MAX_SEEDS = 24  # the cap on N; where it binds (pairs that do not correlate) power at one sigma is still over 80%
LEVEL = 0.025  # one-sided: a candidate that learns the same fails at most this often, both tests together
SPREAD_LEVEL = 0.0025  # of LEVEL, the test that the candidate's seed-to-seed spread is larger (`PairedGap.unstable`)
# The paired test's nominal level. Its measured rate, with N chosen from the first stage and sd(d) taken
# again over every seed, runs up to 1.4x the nominal (2.1% at 1.5%; 2.5% at 2.25%, measured), so the nominal
# is set below LEVEL - SPREAD_LEVEL = 2.25%.
GAP_LEVEL = 0.015
# The F test alone is not robust: where seeds' losses are skewed (a centred lognormal in
# benchmarks/guard_power.py) learning alike spread 3-6x the baseline's in a few studies in a hundred, and a
# loss one sd lower was rejected 1-2% of the time at 3x. At 8x the spread test adds no rejection there that
# was measured (600 studies a setting); a learning rate x10 on tiny spread 9-12x (measured).
MIN_SPREAD_RATIO = 8.0
POWER = 0.80  # against a gap of twice the margin (one baseline seed-to-seed sd where the margin is 0)
# The margin: a candidate fails only where its loss is shown worse than the baseline's by more than this share of
# the baseline's own loss (1%: the same margin on every model, whatever its seeds' spread or their pairing).
MARGIN = 0.01
# The one-sided level at which N fresh seeds replicate a failure on the paired gap (step 5 above).
REPLICATION_LEVEL = 0.25
# The first stage settles the verdict without more seeds where its own gaps already show, at this one-sided
# level, a loss higher (the candidate fails) or lower (it passes) than the baseline's (`settled`).
EARLY_LEVEL = 0.001


@functools.lru_cache(maxsize=256)
def _t(p: float, df: int) -> float:
    """Student's t quantile (the few the guard asks for are cached)."""
    from scipy import stats as scipy_stats  # imported here: it costs half a second at start-up

    return float(scipy_stats.t.ppf(p, df))


@functools.lru_cache(maxsize=64)
def _f(p: float, df: int) -> float:
    """The F quantile with (df, df) degrees of freedom."""
    from scipy import stats as scipy_stats

    return float(scipy_stats.f.ppf(p, df, df))


def _t_cdf(x: float, df: int) -> float:
    from scipy import stats as scipy_stats

    return float(scipy_stats.t.cdf(x, df))


def target_sd(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    """The seed-to-seed sd the seed rule aims at: the baseline's, or both sides' pooled where that is smaller.

    From five seeds, the baseline's sd alone is often far off; where it is
    high by chance the rule would ask for too few seeds. Pooling the
    candidate's runs (which spread alike where it learns alike) halves that
    chance, and taking the smaller never aims at a gap wider than the
    baseline's own sd, so a candidate that spreads more is given no fewer seeds.

    >>> round(target_sd([1.60, 1.65, 1.70, 1.62, 1.68], [1.62, 1.63, 1.71, 1.60, 1.69]), 4)  # the baseline's
    0.0412
    >>> round(target_sd([1.60, 1.70, 1.80, 1.62, 1.68], [1.62, 1.63, 1.64, 1.60, 1.66]), 4)  # pooled, smaller
    0.0579
    """
    sigma = statistics.stdev(baseline)
    pooled = math.sqrt((statistics.variance(baseline) + statistics.variance(candidate)) / 2)
    return min(sigma, pooled)


def stein_seeds(sd_gap: float, sigma: float, first: int = FIRST_SEEDS, most: int = MAX_SEEDS) -> int:
    """The paired seeds needed for POWER against a gap `sigma` past the test's threshold, from the first
    stage's sd of the gaps: with a margin, `sigma` is the margin (power against a gap of twice it).

    N = ((t(1 - GAP_LEVEL) + t(POWER)) x sd_gap / sigma)^2 with t on first - 1
    degrees of freedom (3.298 + 0.941 at 4: 17.97 x the squared ratio), rounded
    up, between `first` and `most`. Gaps that vary half as much as one run
    need the first stage only; as much as one run, 18; more, the cap:

    >>> stein_seeds(0.02, 0.04), stein_seeds(0.03, 0.04), stein_seeds(0.04, 0.04), stein_seeds(0.06, 0.04)
    (5, 11, 18, 24)

    Identical gaps need nothing more; a baseline with no spread gives no sigma to aim at, so the cap:

    >>> stein_seeds(0.0, 0.04), stein_seeds(0.01, 0.0)
    (5, 24)
    """
    if sd_gap <= 0:
        return first
    if sigma <= 0:
        return most
    needed = math.ceil(((_t(1 - GAP_LEVEL, first - 1) + _t(POWER, first - 1)) * sd_gap / sigma) ** 2)
    return min(max(needed, first), most)


def settled(baseline: Sequence[float], candidate: Sequence[float], margin: float = 0.0) -> bool:
    """Whether the first stage alone decides: its gaps' t statistic, from the margin (absolute), is past
    t(1 - EARLY_LEVEL) either way: far above it (the candidate fails) or far below (it passes).

    A label shuffle, measured on tiny, lands 0.7 above the baseline at every seed, and a gap that varies by
    0.1 around that is past 7.17 (t on 4 degrees of freedom) at once; most of one sd worse, with gaps that
    vary by 0.02, is not (t 3.3): the rule's seeds decide it. Nor does a spread far above the baseline's
    settle it at five seeds (`PairedGap.unstable` is judged over the rule's seeds): under skewed noise five
    baseline seeds can spread so little by chance that a loss one sd lower looked unstable in 0.5% of
    studies (measured in `benchmarks/guard_power.py`).

    A failure is settled on the larger of the gaps' sd and the unpaired one, sqrt(var(baseline) +
    var(candidate)): five gaps can agree by chance far more closely than the seeds vary (a loss a margin lower,
    where a seed's gap varies by four margins, was settled as worse in 1 study of 2,000, measured), while a
    label shuffle's 0.7 stands far past either. A pass, which rejects nothing, is settled on the gaps alone.

    >>> base = [1.60, 1.65, 1.70, 1.62, 1.68]
    >>> settled(base, [2.30, 2.41, 2.33, 2.29, 2.38]), settled(base, [1.65, 1.66, 1.76, 1.63, 1.72])
    (True, False)
    >>> settled(base, [1.0, 1.1, 1.05, 0.98, 1.02]), settled(base, [1.729, 2.538, 1.519, 1.198, 1.271])
    (True, False)
    >>> settled(base, [b + 0.03 + e for b, e in zip(base, [0.0, 0.001, -0.001, 0.0005, -0.0005])], margin=0.01)
    False
    """
    pairs = min(len(baseline), len(candidate))
    if pairs < 2:
        return False
    gaps = [c - b for b, c in zip(baseline, candidate)]
    mean, spread = statistics.fmean(gaps) - margin, statistics.stdev(gaps)
    if mean > 0:  # a failure: the seeds' own spread too, so that five gaps agreeing by chance settle nothing
        spread = max(spread, math.sqrt(statistics.variance(baseline[:pairs]) + statistics.variance(candidate[:pairs])))
    if spread == 0:
        return mean != 0
    return abs(mean) * math.sqrt(pairs) / spread > _t(1 - EARLY_LEVEL, pairs - 1)


def trimmed_sd(values: Sequence[float]) -> float:
    """The sd of `values` with the one farthest from their mean left out (of three or more; else the plain sd).

    Under heavy-tailed noise (t, 3 degrees of freedom) one seed in 24 can land
    ten sds out and alone make a loss one sd lower look unstable (3 studies in
    6,000, `benchmarks/guard_power.py`); a learning rate x10 spreads at every seed:

    >>> round(trimmed_sd([1.0, 1.01, 0.99, 1.02, 2.0]), 3), round(trimmed_sd([1.73, 2.54, 1.52, 1.2, 1.27, 2.91]), 3)
    (0.013, 0.539)
    """
    if len(values) < 3:
        return statistics.stdev(values)
    mean = statistics.fmean(values)
    far = max(range(len(values)), key=lambda i: abs(values[i] - mean))
    return statistics.stdev([v for i, v in enumerate(values) if i != far])


@dataclass(frozen=True)
class PairedGap:
    """The candidate's loss against the baseline's over paired seeds: the gap, its bounds, the power.

    `gap` is mean(candidate - baseline) over `pairs` seeds; `low` and `high`
    the one-sided (1 - `level`) bounds of it, from the sd of the gaps over
    every pair on pairs - 1 degrees of freedom. `sd_gap` is the sd of the
    first `first` gaps, which set `needed`, the seeds the rule asks for
    (`stein_seeds`, against `target_sd`; `first` where they settle it). `sd` is the baseline's seed-to-seed
    sd over every pair; `power` the test's power against a gap of one sd at
    these seeds. None where one pair gives no spread. `sd_candidate` and
    `spread_limit` are for `unstable`.
    """

    measure: str  # "held-out loss", "final training loss"
    baseline: float  # mean over the paired seeds
    candidate: float
    pairs: int
    first: int
    sd: float | None
    sd_gap: float | None
    low: float
    high: float
    power: float | None
    needed: int | None
    sd_candidate: float | None = None  # the candidate's seed-to-seed sd, its farthest seed left out (`trimmed_sd`)
    spread_limit: float | None = None  # how many times the baseline's sd it may be (the SPREAD_LEVEL F test)
    level: float = GAP_LEVEL  # one-sided, of `low` and `high`: GAP_LEVEL, or REPLICATION_LEVEL for a replication
    margin: float = 0.0  # δ, absolute: the candidate fails only where `low` lies above it
    share: float = 0.0  # δ as a share of the baseline's loss (MARGIN by default)
    visible: float | None = None  # the smallest margin whose double these seeds see at POWER

    @property
    def gap(self) -> float:
        return self.candidate - self.baseline

    @property
    def worse_by(self) -> float:
        """How much higher the candidate's loss is (negative: lower)."""
        return self.gap

    @property
    def band(self) -> float:
        """How far above the baseline's the candidate's mean may lie and still pass."""
        return self.gap - self.low

    @property
    def unstable(self) -> bool:
        """A higher mean loss, from seeds whose candidate runs spread far more than the baseline's.

        A learning rate x10 can land above and below the baseline from seed to
        seed: a mean gap that its own spread hides from the paired test, and a
        spread that an F test at SPREAD_LEVEL sees, at least MIN_SPREAD_RATIO
        times the baseline's. The candidate's spread leaves its one farthest
        seed out (`trimmed_sd`): one seed far out is a tail, not instability.
        """
        return (self.gap > self.margin and self.sd_candidate is not None and self.spread_limit is not None
                and self.sd is not None and self.sd_candidate > self.spread_limit * self.sd)

    @property
    def ok(self) -> bool:
        """Passes unless the lower bound of the gap lies above the margin, or the gap is above it and the
        candidate's spread over seeds is far above the baseline's (`unstable`): a gap <= the margin always passes."""
        return self.low <= self.margin and not self.unstable

    @property
    def blind(self) -> bool:
        """These seeds cannot see a gap of twice the margin at POWER (the margin is below `visible`), and their
        interval does not show the gap within the margin either (`high` above it)."""
        return self.margin > 0 and self.visible is not None and self.visible > self.margin and self.high > self.margin

    @property
    def runs(self) -> tuple[int, int]:
        return (self.pairs, self.pairs)

    def text(self) -> str:
        """The comparison in a sentence: the gap, its interval, and in the baseline's seed-to-seed sds.

        >>> paired_gap("held-out loss", [1.48, 1.45, 1.53, 1.50, 1.49, 1.50],
        ...            [1.52, 1.44, 1.58, 1.49, 1.53, 1.56]).text()
        "held-out loss 1.52 is 0.028 above the baseline's 1.49 over 6 paired seeds (97% interval of the gap -0.0092 to 0.066, that is -0.35 to 2.5 of the baseline's seed-to-seed sd 0.026): within; 6 seeds had 21% power against a gap of one sd (the rule asks for 19)"
        """
        if self.pairs < 2 or self.sd_gap is None:
            side = "below" if self.gap <= 0 else "above"
            return (f"{self.measure} {self.candidate:.3g} is {abs(self.gap):.2g} {side} the baseline's "
                    f"{self.baseline:.3g} at one paired seed, with no spread to judge a gap by: "
                    + ("within" if self.ok else f"not shown to learn as well (the guard runs {FIRST_SEEDS} seeds)"))
        side = "above" if self.gap > 0 else "below"
        if self.margin > 0:
            sds = f"; the margin {self.margin:.2g}, {100 * self.share:g}% of the baseline's loss"
            outcome = (f"worse by more than the margin" if self.low > self.margin else
                       "the interval reaches the margin" if self.unstable else "within the margin")
        else:
            sds = (f", that is {self.low / self.sd:.2g} to {self.high / self.sd:.2g} of the baseline's seed-to-seed "
                   f"sd {self.sd:.2g}" if self.sd else "; the baseline's runs do not vary over seeds")
            outcome = 'worse' if self.low > 0 else 'the interval holds 0' if self.unstable else 'within'
        text = (f"{self.measure} {self.candidate:.3g} is {abs(self.gap):.2g} {side} the baseline's "
                f"{self.baseline:.3g} over {self.pairs} paired seeds ({100 * (1 - 2 * self.level):g}% interval of "
                f"the gap {self.low:.2g} to {self.high:.2g}{sds}): {outcome}")
        if self.unstable and self.sd_candidate is not None and self.sd:
            text += (f", but its own seed-to-seed sd {self.sd_candidate:.2g} (its farthest seed left out) is "
                     f"{self.sd_candidate / self.sd:.0f}x the "
                     f"baseline's, over the {self.spread_limit:.2g}x that learning alike does not reach: it learns "
                     "unstably")
        if self.ok and self.blind and self.visible is not None and self.baseline:
            asks = f" (the rule asks for {self.needed})" if self.needed is not None and self.needed > self.pairs else ""
            text += (f"; {self.pairs} seeds{asks} see a gap of twice the margin at {100 * POWER:.0f}% only for a "
                     f"margin of {self.visible:.2g} ({100 * self.visible / abs(self.baseline):.2g}% of the loss) or "
                     f"more: a gap of {2 * self.margin:.2g} may pass unseen (--guard-margin sets the margin)")
        elif self.margin <= 0 and self.ok and self.power is not None and self.power < POWER:
            had = f"{100 * self.power:.0f}% power against a gap of one sd"
            if self.pairs >= MAX_SEEDS:
                text += f"; at the cap of {self.pairs} seeds it had {had}"
            elif self.needed is not None and self.needed > self.pairs:
                text += f"; {self.pairs} seeds had {had} (the rule asks for {self.needed})"
        return text

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> PairedGap:
        """The check as `to_dict` stored it; what it derives (`band`, `ok`, `unstable`, ...) is derived again."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})

    def to_dict(self) -> JSONObject:
        return {"measure": self.measure, "baseline": self.baseline, "candidate": self.candidate, "sd": self.sd,
                "band": self.band, "worse_by": self.worse_by, "ok": self.ok, "runs": list(self.runs),
                "low": self.low, "high": self.high, "sd_gap": self.sd_gap, "pairs": self.pairs,
                "first": self.first, "power": self.power, "needed": self.needed, "sd_candidate": self.sd_candidate,
                "spread_limit": self.spread_limit, "unstable": self.unstable, "level": self.level,
                "margin": self.margin, "share": self.share, "visible": self.visible, "blind": self.blind}


def paired_gap(measure: str, baseline: Sequence[float], candidate: Sequence[float],
               first: int = FIRST_SEEDS, level: float = GAP_LEVEL, margin: float = 0.0) -> PairedGap:
    """The paired test of the candidate's losses against the baseline's, seed by seed (the same order).

    Worked examples over FIRST_SEEDS (5) seeds. The same learning, the gaps
    straddling 0, passes; so does any lower mean:

    >>> base = [1.60, 1.65, 1.70, 1.62, 1.68]
    >>> same = paired_gap("held-out loss", base, [1.62, 1.63, 1.71, 1.60, 1.69])
    >>> same.ok, round(same.low, 3), round(same.high, 3)
    (True, -0.028, 0.028)
    >>> paired_gap("held-out loss", base, [1.50, 1.55, 1.52, 1.51, 1.58]).ok
    True

    One sd worse (sd 0.041), with the seeds' two runs correlated, fails:

    >>> worse = paired_gap("held-out loss", base, [1.65, 1.68, 1.75, 1.66, 1.71])
    >>> worse.ok, round(worse.sd, 3), round(worse.low, 3), worse.needed
    (False, 0.041, 0.025, 5)

    The first `first` seeds set the seeds needed; the mean and the sd of the
    gaps are over every pair. Fewer pairs than `first` use what there is.
    """
    pairs = min(len(baseline), len(candidate))
    if pairs < 1:
        raise ValueError("Expected at least one baseline and one candidate value to compare.")
    base, cand = list(baseline[:pairs]), list(candidate[:pairs])
    gaps = [c - b for b, c in zip(base, cand)]
    mean_base, mean_cand = statistics.fmean(base), statistics.fmean(cand)
    gap = mean_cand - mean_base
    delta = margin * abs(mean_base)  # δ: the share of the baseline's own loss, in the loss's units
    stage = min(first, pairs)
    if stage < 2:
        return PairedGap(measure, mean_base, mean_cand, pairs, stage, None, None, gap, gap, None, None, level=level,
                         margin=delta, share=margin)
    sd_gap = statistics.stdev(gaps[:stage])
    spread = statistics.stdev(gaps)
    sigma = statistics.stdev(base)
    quantile = _t(1 - level, pairs - 1)
    half = quantile * spread / math.sqrt(pairs)
    aim = delta if delta > 0 else sigma  # the gap past the threshold the power is for: δ (so 2δ), or one sd
    power = 1.0 if spread == 0 else 1 - _t_cdf(quantile - aim * math.sqrt(pairs) / spread, pairs - 1)
    # the smallest margin δ' whose double these seeds see at POWER: δ' = (t(1 - level) + t(POWER)) sd / sqrt(N)
    visible = (quantile + _t(POWER, pairs - 1)) * spread / math.sqrt(pairs) if delta > 0 else None
    needed = stage if settled(base[:stage], cand[:stage], delta) \
        else stein_seeds(sd_gap, delta if delta > 0 else target_sd(base[:stage], cand[:stage]), stage)
    return PairedGap(measure, mean_base, mean_cand, pairs, stage, sigma, sd_gap, gap - half, gap + half, power,
                     needed, trimmed_sd(cand), max(math.sqrt(_f(1 - SPREAD_LEVEL, pairs - 1)), MIN_SPREAD_RATIO),
                     level, delta, margin, visible)
