"""Paired decisions that may stop early and still hold their error rate.

A decision compares B with A in pairs, each pair measured back to back in a
random order that alternates (`pair_order`); the evidence is the log ratio log(B/A) of each
pair. After every pair, from the design's first look on, the decision looks
at the data and may stop: "faster", "slower", "no gain", or it asks for
another pair, up to the design's `max_pairs`.

**The design: a group-sequential test with a Pocock boundary.** Looking after
every pair and stopping on the first good-looking interval is what made a
naive t interval claim speed-ups where nothing helped (about 10% of A/A runs
instead of 2.5%). Here every look uses one critical value `c`, chosen so that
the chance that *any* look of the design crosses it, when B equals A, is the
design's one-sided `alpha` (Pocock's constant boundary, calibrated for the
design's own looks by a fixed-seed Monte Carlo of the Gaussian random walk,
then carried to a t quantile for the noise's degrees of freedom). The interval
printed at a stop, estimate ± c standard errors, is a repeated confidence
interval (Jennison and Turnbull, ch. 9): it holds the true ratio at every look
at once with probability 1 - 2 alpha, so it holds at whichever look stopped.
Alternatives read and set aside: Optuna's WilcoxonPruner (a per-step p-value
with no correction for repeated looks, fine for pruning, not for a claim);
mSPRT / always-valid p-values (valid with no planned end, at the price of a
wider interval at the end this design does have); alpha spending with an
O'Brien-Fleming shape (narrower at the last look, but a 2x win waits for
many pairs). A Pocock boundary decides a big win in the first look.

**Futility is decided on an interval**, never on the estimate alone:
"slower" when the design's interval lies below 1, "no gain" when the upper
end of an 80% interval (`futility_z`) lies below 1 + min_gain. Stopping for
futility only removes chances to claim, so the claim's error rate holds.

**The estimator is robust and fixed in advance**: a Huber M-estimate of the
mean log ratio (tuning constant 1.345, 95% efficient under Gaussian noise)
with the noise's scale held fixed, so one starved trial (a load burst at
0.4-0.6x) moves the estimate by at most 1.345 scale units / n. No pair is
ever dropped. Its standard error is scale * sqrt(HUBER_VARIANCE / n).

**The noise**: the scale is a pooled standard deviation of a paired log
ratio, its residuals clipped at WINSOR robust sds: the decision's own pairs
(n - 1 degrees of freedom) plus, where given, a `Noise` measured on other
trials (its source and degrees of freedom are part of the decision's record).

The error rate and power of these designs under the simulator's noise are in
docs/benchmarks/sequential_decisions.md (`benchmarks/verification_aa.py`).
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

HUBER_K = 1.345  # Huber's constant: 95% efficiency under Gaussian noise
HUBER_VARIANCE = 1.0 / 0.95  # the M-estimate's variance relative to the mean's, at that constant
CLIP_FROM = 8  # residuals needed before the pooled noise clips any of them
WINSOR = 4.0  # a residual counts towards the scale clipped at this many robust sds (2.5 made A/A claims 3.0%, 4: 2.1%)
CALIBRATION_PATHS = 200_000
CALIBRATION_SEED = 20261123


@dataclass(frozen=True)
class Noise:
    """The noise on one paired log ratio: its standard deviation, degrees of freedom, and where it came from."""

    sd: float
    df: int
    source: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"sd": self.sd, "df": self.df, "source": self.source}


@dataclass(frozen=True)
class Design:
    """A sequential paired test: its one-sided error, its looks, and the gain below which it is futile.

    `alpha` is the chance of "faster" when B equals A, over all looks together;
    the printed interval is a 1 - 2 alpha repeated confidence interval.
    Looks are after each pair from `min_pairs` to `max_pairs`; futility may
    be decided from `futile_from` pairs on (before the first look for a win:
    a clearly slower candidate need not wait).
    """

    alpha: float = 0.025
    max_pairs: int = 10
    min_pairs: int = 3
    min_gain: float = 0.05
    futile_from: int = 1
    futility_z: float = 1.2816  # "no gain" when the upper end of an 80% interval lies below 1 + min_gain

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha}")
        if not 1 <= self.min_pairs <= self.max_pairs:
            raise ValueError(f"need 1 <= min_pairs <= max_pairs, got {self.min_pairs} and {self.max_pairs}")

    @property
    def confidence(self) -> float:
        return 1 - 2 * self.alpha

    def to_dict(self) -> dict[str, object]:
        return {"alpha": self.alpha, "max_pairs": self.max_pairs, "min_pairs": self.min_pairs,
                "min_gain": self.min_gain, "futile_from": self.futile_from, "confidence": self.confidence,
                "boundary_z": pocock_z(self.alpha, self.min_pairs, self.max_pairs)}


def pocock_z(alpha: float, first: int, last: int) -> float:
    """The constant boundary c with P(Z_n >= c for some look n in first..last) = alpha, Z a Gaussian random walk.

    Z_n = S_n / sqrt(n), S_n a sum of n independent standard normals, looked
    at after every n from `first` to `last`: the boundary when the noise is
    known exactly. One look is the plain quantile; more looks need a larger c
    (Pocock's table: 2.41 for 5 two-sided looks at 5%, one-sided 2.5% a side).

    >>> round(pocock_z(0.025, 1, 1), 2)
    1.96
    >>> 2.35 < pocock_z(0.025, 1, 5) < 2.47
    True
    """
    return pocock_t(alpha, first, last, None)


@functools.lru_cache(maxsize=256)
def pocock_t(alpha: float, first: int, last: int, prior_df: int | None) -> float:
    """The constant boundary on the t statistic of a design whose noise is estimated.

    The statistic at look n is mean_n / (s_n / sqrt(n)), where s_n pools a
    prior variance estimate on `prior_df` degrees of freedom with the n
    pairs' own squared deviations (`prior_df` 0: the pairs' own alone, so no
    look before 2 pairs; None: the noise is known, the Gaussian case). One
    estimate of the noise serves every look, so a low one pushes every look
    up at once: the boundary is calibrated on that joint law, by a fixed-seed
    Monte Carlo of CALIBRATION_PATHS paths.

    >>> pocock_t(0.025, 3, 10, 6) > pocock_t(0.025, 3, 10, 60) > pocock_z(0.025, 3, 10)
    True
    >>> pocock_t(0.025, 3, 10, 0) > pocock_t(0.025, 3, 10, 6)
    True
    """
    import numpy as np

    t = _null_t(last, prior_df)[:, first - 1:]
    return float(np.quantile(np.max(t, axis=1), 1 - alpha))


def _null_t(last: int, prior_df: int | None) -> Any:
    """The t statistic at looks 1..`last` of CALIBRATION_PATHS null paths (fixed seed), -inf where undefined.

    The noise pools a prior on `prior_df` degrees of freedom with each path's own squared deviations (0: its own
    alone; None: known, so t is the Gaussian random walk's z).
    """
    import numpy as np

    rng = np.random.default_rng(CALIBRATION_SEED)
    x = rng.standard_normal((CALIBRATION_PATHS, last))
    n = np.arange(1, last + 1, dtype=np.float64)
    sums = np.cumsum(x, axis=1)
    means = sums / n
    if prior_df is None:
        sd = np.ones_like(means)
    else:
        squares = np.maximum(np.cumsum(x * x, axis=1) - sums * means, 0.0)  # each path's own squared deviations
        prior = rng.chisquare(prior_df, size=(CALIBRATION_PATHS, 1)) if prior_df else 0.0
        df = prior_df + n - 1
        with np.errstate(divide="ignore", invalid="ignore"):
            sd = np.sqrt((prior + squares) / df)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = means / sd * np.sqrt(n)
    return np.where(np.isfinite(t), t, -np.inf)


@functools.lru_cache(maxsize=64)
def pocock_p(alpha: float, first: int, last: int) -> tuple[float, ...]:
    """Per-look boundaries on the t statistic of a design with no prior noise, at one nominal level at every look.

    With no prior the noise at look n is the pairs' own, on n - 1 degrees of
    freedom, and a t on 2 degrees of freedom has tails so heavy that one
    constant boundary on t over looks 3..10 (`pocock_t`) is set by the first
    look alone: 4.7-4.9, where a single t test of 10 pairs needs 2.3. Here
    every look instead has the same nominal one-sided level alpha' (each
    look's own t quantile, on its own degrees of freedom), alpha' calibrated
    so that some look crosses with probability alpha under the null, by the
    same fixed-seed Monte Carlo. A boundary for each look from 1 to `last`
    (inf before `first`).

    >>> c = pocock_p(0.025, 3, 10)
    >>> c[:2], c[2] > 6, 2.9 < c[9] < 3.6
    ((inf, inf), True, True)
    """
    import numpy as np
    from scipy import stats as scipy_stats

    t = _null_t(last, 0)[:, first - 1:]
    looks = range(first, last + 1)

    def crossed(nominal: float) -> float:  # the share of null paths past some look's boundary at this level
        bounds = np.array([scipy_stats.t.isf(nominal, look - 1) for look in looks])
        return float(np.mean(np.any(t >= bounds, axis=1)))

    low, high = math.log(alpha / (last - first + 1)), math.log(alpha)  # Bonferroni's level, and one look's
    for _ in range(40):  # bisection on log(nominal): the crossing share rises with it
        middle = (low + high) / 2
        low, high = (middle, high) if crossed(math.exp(middle)) <= alpha else (low, middle)
    nominal = math.exp(low)
    return tuple(math.inf if look < first else float(scipy_stats.t.isf(nominal, look - 1))
                 for look in range(1, last + 1))


def boundary(design: Design, prior_df: int, pairs: int) -> float:
    """The design's boundary at look `pairs` for a decision whose prior noise has `prior_df` degrees of freedom
    (0: none, one nominal level a look, `pocock_p`; else one constant, `pocock_t`, capped at 200)."""
    if prior_df <= 0 and design.min_pairs >= 2:
        return pocock_p(design.alpha, design.min_pairs, design.max_pairs)[min(pairs, design.max_pairs) - 1]
    return pocock_t(design.alpha, design.min_pairs, design.max_pairs, min(int(prior_df), 200))


def huber_location(values: Sequence[float], scale: float) -> float:
    """The Huber M-estimate of location with a fixed scale (iterated from the median).

    >>> round(huber_location([0.0, 0.01, -0.01, 0.92], 0.12), 3)  # one starved trial
    0.054
    """
    center = statistics.median(values)
    if scale <= 0:
        return center
    for _ in range(50):
        psi = [max(-HUBER_K, min(HUBER_K, (x - center) / scale)) for x in values]
        step = scale * statistics.fmean(psi)
        center += step
        if abs(step) < 1e-10 * max(1.0, scale):
            break
    return center


def residuals(values: Sequence[float]) -> list[float]:
    """The absolute residuals of `values` around their median, less the one that is 0 by construction.

    An odd group's median is one of its values: that residual is no noise, and
    counting it pulls a robust scale taken from a handful of residuals down.

    >>> residuals([1.0, 3.0, 2.0]), residuals([0.0, 0.4])
    ([1.0, 1.0], [0.2, 0.2])
    """
    if len(values) < 2:
        return []
    middle = statistics.median(values)
    found = sorted(abs(x - middle) for x in values)
    return found[1:] if len(values) % 2 else found


def pooled_noise(groups: Sequence[Sequence[float]], nulls: Sequence[float] = (), source: str = "") -> Noise | None:
    """The noise on a paired log ratio, pooled over comparisons whose spread is known to be noise.

    `groups` are the log ratios of each comparison (each gives n - 1 degrees
    of freedom around its own median); `nulls` are log ratios whose true value
    is 0 (one degree of freedom each). Each residual counts clipped at WINSOR
    robust sds (1.4826 times the median absolute residual), so one outlying
    trial does not widen every interval.

    >>> noise = pooled_noise([[0.10, 0.30], [0.5, 0.5, 0.8]], nulls=[0.1, -0.1, 0.46])
    >>> round(noise.sd, 3), noise.df
    (0.239, 6)
    >>> pooled_noise([[0.2]]) is None
    True
    """
    found: list[float] = [abs(x) for x in nulls]
    df = len(nulls)
    for group in groups:
        if len(group) > 1:
            found += residuals(group)
            df += len(group) - 1
    if not df:
        return None
    robust = 1.4826 * statistics.median(found)
    # a scale from a handful of residuals is too rough to clip by (three baselines, two of them equal,
    # made it 0.006 where the noise was 0.13): only clip from CLIP_FROM residuals on
    clip = WINSOR * robust if robust > 0 and len(found) >= CLIP_FROM else math.inf
    return Noise(math.sqrt(sum(min(r, clip) ** 2 for r in found) / df), df, source)


def welch(a: Noise | None, b: Noise | None, source: str = "") -> Noise | None:
    """The noise on a paired log ratio log(B/A) from each side's own trial-to-trial noise, or None.

    The variances add; the degrees of freedom are Welch-Satterthwaite's, so a
    side known from few trials weighs the prior down to what it is worth.
    Neither side's noise is ever taken from the other: a side with no
    estimate of its own (fewer than two trials) gives no prior at all, and
    the decision stands on its own pairs.

    >>> round(welch(Noise(0.1, 8), Noise(0.1, 8)).sd, 4), welch(Noise(0.1, 8), Noise(0.1, 8)).df
    (0.1414, 16)
    >>> noisy = welch(Noise(0.05, 10), Noise(0.2, 2))  # a candidate 4x noisier, from 3 trials
    >>> round(noisy.sd, 3), noisy.df
    (0.206, 2)
    >>> welch(Noise(0.1, 8), None) is None
    True
    """
    if a is None or b is None or a.df < 1 or b.df < 1:
        return None
    va, vb = a.sd ** 2, b.sd ** 2
    if va + vb <= 0:
        return None
    df = (va + vb) ** 2 / (va ** 2 / a.df + vb ** 2 / b.df)
    return Noise(math.sqrt(va + vb), max(1, int(df)), source)


class Verdict(StrEnum):
    """How a sequential comparison of B against A ended (`Step.verdict`)."""

    FASTER = "faster"  # the interval lies above 1
    SLOWER = "slower"  # it lies below 1
    NO_GAIN = "no gain"  # an 80% interval's upper end lies below 1 + min_gain
    NOT_CONFIRMED = "not confirmed"  # the last look came first

    def is_faster(self) -> bool:
        """B was shown faster than A: the one verdict a change is kept on, and the verification's claim.

        >>> Verdict.FASTER.is_faster(), Verdict("not confirmed").is_faster()
        (True, False)
        """
        return self is Verdict.FASTER

    def is_open(self) -> bool:
        """Neither shown faster nor shown slower ("no gain", "not confirmed"): worth trying again on a new incumbent.

        >>> [v.is_open() for v in Verdict]
        [False, False, True, True]
        """
        return self in (Verdict.NO_GAIN, Verdict.NOT_CONFIRMED)


@dataclass(frozen=True)
class Step:
    """Where a sequential comparison stands: `verdict` None means take another pair.

    Verdicts: "faster" (the interval lies above 1), "slower" (it lies below
    1), "no gain" (below 1 + min_gain), "not confirmed" (the last look
    came first). `ratio` is the Huber estimate turned back into a ratio.
    """

    verdict: Verdict | None
    pairs: int
    ratio: float | None
    low: float | None
    high: float | None
    confidence: float
    noise: Noise | None = None

    def to_dict(self) -> dict[str, object]:
        return {"verdict": self.verdict, "pairs": self.pairs, "ratio": self.ratio, "low": self.low,
                "high": self.high, "confidence": self.confidence,
                "noise": self.noise.to_dict() if self.noise else None}


def step(ratios: Sequence[float], design: Design, prior: Noise | None = None) -> Step:
    """Decide B against A from the per-pair ratios B/A so far, or ask for another pair.

    Worked examples, with a prior noise of 0.12 on a paired log ratio (about
    8% CV per trial) from 12 degrees of freedom, and the verification's design
    (one-sided 2.5%, looks from 3 to 10 pairs):

    >>> prior, design = Noise(0.12, 12, "example"), Design(0.025, 10, 3, 0.0)

    A 1.5x win is decided at the first look, not before:

    >>> [step([1.5] * n, design, prior).verdict for n in (1, 2, 3)]
    [None, None, <Verdict.FASTER: 'faster'>]

    One starved baseline trial (a 0.4x load burst, so a pair at 2.5x) among
    pairs that show nothing creates no claim, and a starved candidate trial
    does not hide a real 1.5x win:

    >>> step([1.01, 0.99, 2.5, 1.0], design, prior).verdict is None
    True
    >>> step([1.5, 0.6, 1.52], design, prior).verdict
    <Verdict.FASTER: 'faster'>

    Futility is decided on an interval: pairs that show nothing end as "no
    gain" once an 80% interval's upper end falls below 1 + min_gain (here
    1.05, with a noise of 0.05), and the last look that comes first is "not
    confirmed":

    >>> combine = Design(0.05, 8, 2, 0.05)
    >>> [step([1.0] * n, combine, Noise(0.05, 12)).verdict for n in (1, 2)]
    [None, <Verdict.NO_GAIN: 'no gain'>]
    >>> step([1.06] * 8, combine, Noise(0.3, 12)).verdict
    <Verdict.NOT_CONFIRMED: 'not confirmed'>
    """
    n = len(ratios)
    if any(r <= 0 or not math.isfinite(r) for r in ratios):
        raise ValueError(f"ratios must be positive and finite, got {list(ratios)}")
    if n == 0:
        return Step(None, 0, None, None, None, design.confidence, prior)
    logs = [math.log(r) for r in ratios]
    middle = statistics.median(logs)
    own = residuals(logs)
    residual_df = n - 1
    prior_df = prior.df if prior and prior.sd > 0 else 0
    df = residual_df + prior_df
    if df == 0:
        return Step(Verdict.NOT_CONFIRMED if n >= design.max_pairs else None, n, math.exp(middle), None, None,
                    design.confidence, prior)
    squares = prior_df * (prior.sd ** 2 if prior else 0.0)
    if own:
        # the clip's scale: the prior's where there is one (never below it), else the pairs' own, and only
        # from CLIP_FROM residuals on (a robust sd of 2-7 residuals shrank the scale: A/A "faster" 4-6%)
        robust = 1.4826 * statistics.median(own) if len(own) >= CLIP_FROM else math.inf
        if prior_df and prior:
            robust = max(prior.sd, robust if math.isfinite(robust) else 0.0)
        clip = WINSOR * robust if robust > 0 else math.inf
        squares += sum(min(r, clip) ** 2 for r in own)
    scale = math.sqrt(squares / df)
    source = f"{(prior.source if prior else '') or 'a prior figure'} + this comparison's pairs" if prior_df \
        else "this comparison's pairs"
    noise = Noise(scale, df, source)
    center = huber_location(logs, scale)
    half = boundary(design, prior_df, n) * scale * math.sqrt(HUBER_VARIANCE / n)
    futile_half = design.futility_z * scale * math.sqrt(HUBER_VARIANCE / n)
    low, high = math.exp(center - half), math.exp(center + half)
    verdict: Verdict | None = None
    if n >= design.min_pairs and low > 1:
        verdict = Verdict.FASTER
    elif n >= design.futile_from and high < 1:
        verdict = Verdict.SLOWER
    elif n >= design.futile_from and math.exp(center + futile_half) < 1 + design.min_gain:
        verdict = Verdict.NO_GAIN
    elif n >= design.max_pairs:
        verdict = Verdict.NOT_CONFIRMED
    return Step(verdict, n, math.exp(center), low, high, design.confidence, noise)


def median_unbiased(design: Design, pairs: int, ratio: float, noise: Noise, prior_df: int = 0,
                    paths: int = 20_000) -> float:
    """The claim's estimate of B/A with the stopping rule's bias taken out: median-unbiased under stage-wise order.

    A sequential design that stops at its first look above the boundary stops
    on lucky runs, so the estimate at the stop runs high for gains near the
    noise (1.28x the truth at 1.08x and 20% noise, over claims). Ordering the
    outcomes stage-wise (a claim at an earlier look is more extreme; at the
    same look, a larger estimate is), the median-unbiased estimate is the true
    ratio under which an outcome at least as extreme as the one seen has
    probability one half (Jennison and Turnbull, ch. 8). Computed by a
    fixed-seed Monte Carlo of the design's own looks, futility stops
    included, with the noise at the stop taken as known.

    A claim at the design's first look keeps its estimate (no earlier look
    could have stopped it); one made at a later look, after earlier looks
    that did not cross, is pulled towards 1:

    >>> design, noise = Design(0.025, 10, 3, 0.1, futile_from=3), Noise(0.14, 20)
    >>> round(median_unbiased(design, 3, 2.0, noise, 20), 2)
    2.0
    >>> round(median_unbiased(design, 5, 1.2, noise, 20), 2), round(median_unbiased(design, 8, 1.15, noise, 20), 2)
    (1.18, 1.13)

    What it is not: an estimate unbiased over the claims it is computed for.
    The stage-wise median property holds over every outcome of the design
    (claims, futility stops and the last look alike) and with the noise known;
    the code computes it for claims only, with the noise estimated. Over claims
    a gain near the noise is claimed on its lucky runs, and the estimate still
    runs high (`benchmarks/estimate_bias.py --decisions 1000 --seed 20261202`,
    the verification's design): at 1.15x and 1.3x the median claim is within
    1% of the truth (48-55% of claims at or above it), but at 1.08x it is
    1.3% high at a paired sd of 0.05 (77% at or above) and 3.6% high at 0.14
    (every claim at or above; 1.05x high at the stop). This is why a verdict
    leads with its lower bound.
    """
    import numpy as np

    if pairs < 1 or ratio <= 0 or noise.sd <= 0:
        return ratio
    c = np.array([boundary(design, prior_df, look) for look in range(1, design.max_pairs + 1)])
    se1 = noise.sd * math.sqrt(HUBER_VARIANCE)  # one pair's sd, as the estimate's standard error counts it
    rng = np.random.default_rng(CALIBRATION_SEED)
    n = np.arange(1, design.max_pairs + 1, dtype=np.float64)
    noise_means = np.cumsum(rng.standard_normal((paths, design.max_pairs)) * se1, axis=1) / n
    observed = math.log(ratio)
    floor = math.log(1 + design.min_gain)
    half = c * se1 / np.sqrt(n)

    def more_extreme(theta: float) -> float:
        means = noise_means + theta
        claim = (means - half > 0) & (n >= design.min_pairs)
        futile = (n >= design.futile_from) & ((means + half < 0)
                                              | (means + design.futility_z * se1 / np.sqrt(n) < floor))
        stop = claim | futile
        first = np.where(stop.any(axis=1), stop.argmax(axis=1), design.max_pairs - 1)
        rows = np.arange(paths)
        claimed = claim[rows, first]
        look = first + 1
        at = means[rows, first]
        extreme = claimed & ((look < pairs) | ((look == pairs) & (at >= observed)))
        return float(extreme.mean())

    low, high = observed - 6 * se1, observed + 6 * se1
    for _ in range(30):
        middle = (low + high) / 2
        if more_extreme(middle) < 0.5:
            low = middle
        else:
            high = middle
    return math.exp((low + high) / 2)


def level(confidence: float) -> str:
    """A confidence level as a percentage, to a tenth where it is not whole.

    >>> level(0.95), level(1 - 2 * 0.025 / 3), level(0.9)
    ('95%', '98.3%', '90%')
    """
    return f"{100 * confidence:.1f}".rstrip("0").rstrip(".") + "%"


def pair_order(seed: object, ident: str, index: int) -> bool:
    """Whether pair `index` of comparison `ident` measures B first (in a lockstep round: whose turn comes first).

    Pairs go in blocks of two, 0-1, 2-3, ...: a coin per block decides its
    first pair's order, and the second pair of the block takes the other, the
    same on a resumed run. Each pair's order is a fair coin, and the first
    slot's advantage or handicap (the second of two back-to-back trials ran
    several percent faster here) cancels in every block instead of adding its
    spread to the estimate; with an odd number of pairs, the last one's order
    is a fresh coin, so the leftover slot favours neither side.

    >>> orders = [pair_order(0, "abc", i) for i in range(6)]
    >>> orders == [pair_order(0, "abc", i) for i in range(6)], sum(orders)
    (True, 3)
    >>> all(orders[i] != orders[i + 1] for i in range(0, 6, 2))
    True
    >>> sum(pair_order(0, f"c{n}", 2) for n in range(1000))  # a third pair's order: a fair coin
    497
    """
    coin = random.Random(f"{seed}|{ident}|{index // 2}").random() < 0.5
    return coin != (index % 2 == 1)
