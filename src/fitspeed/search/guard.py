"""The numerics guard: a speed-up that makes the model learn worse is not one.

A configuration whose knobs change numerics (see `Knob.changes_numerics`) is
trained, like the baseline, for GUARD_EPOCHS x GUARD_STEPS steps in a
train-mode trial, and then measured on held-out data it did not train on
(`TrialSpec.validate`: loss, and accuracy where the labels are classes). Knobs
that do not change numerics (steps_per_execution, threads) are reset to the
baseline's values, so every guard run trains exactly the same steps.

The question is one-sided, at a stated margin: does the candidate learn worse
than the baseline by more than δ, MARGIN (1%) of the baseline's loss
(`--guard-margin`)? Both train at the same seeds (spec.seed, +1, ...): each
seed sets the weights' init and the data order, while the data itself stays
that of spec.seed (`data_seed`). So the two runs at one seed differ only by
the change, and the guard judges the paired gaps seed by seed, d =
candidate's held-out loss - baseline's (`judge`, `paired_gap`). A script's
held-out data is its own: the samples its `validation_split` holds out (cut
as Keras cuts them) or its `validation_data` arrays; where there is none the
final training loss stands in, and the verdict says so. Lower loss is better.

The rule, in `fitspeed.search.guard_stats` (the statistics, pure functions):
FIRST_SEEDS (5) paired seeds; then as many as Stein's rule asks for 80% power
against a gap of 2δ (`seeds_needed`), up to MAX_SEEDS (24), where a seed's
gaps vary by much of the margin; the candidate fails when the lower bound of
the mean gap lies above δ, or when its mean gap is above δ and its own spread
over seeds is far above the baseline's (`PairedGap.unstable`). Where the
seeds cannot see 2δ, a pass says so and names the margin they can see. A
failure on the paired gap alone is replicated before it stands: N fresh
seeds of each side, judged on their own at REPLICATION_LEVEL (`replicates`,
`replicate`). A lower loss is never rejected. `benchmarks/guard_power.py`
measures the four rates through `judge` (docs/benchmarks/guard_power.md).
Accuracy, where there is one, is reported beside the loss but does not
decide, so the 2.5% holds.

A non-finite loss fails, and so does a model whose output is not float32 under
a mixed policy. A training script's baseline whose loss varies over seeds by
more than MAX_SPREAD of its mean cannot judge any candidate (`unreproducible`).

Budget, in trial processes: the baseline's FIRST_SEEDS to MAX_SEEDS runs,
stored per seed and shared by every candidate of the search; the candidate's
as many (N), fewer when a run fails or is not finite (the verdict is known
then); N more of each where a failure is replicated. `compare`, the unpaired
band over seeds, is what `fitspeed reproduce`'s accuracy mark uses; the guard
does not.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fitspeed.core.config import TrialConfig
from fitspeed.core.json_data import JSONObject
from fitspeed.core.knobs import KNOBS_BY_NAME
from fitspeed.core.record import Metrics, Mode, Status, TrialRecord, TrialSpec
from fitspeed.search.guard_stats import FIRST_SEEDS as FIRST_SEEDS
from fitspeed.search.guard_stats import GAP_LEVEL as GAP_LEVEL
from fitspeed.search.guard_stats import LEVEL as LEVEL
from fitspeed.search.guard_stats import MARGIN as MARGIN
from fitspeed.search.guard_stats import MAX_SEEDS as MAX_SEEDS
from fitspeed.search.guard_stats import POWER as POWER
from fitspeed.search.guard_stats import REPLICATION_LEVEL as REPLICATION_LEVEL
from fitspeed.search.guard_stats import PairedGap as PairedGap
from fitspeed.search.guard_stats import paired_gap as paired_gap
from fitspeed.search.guard_stats import settled
from fitspeed.search.guard_stats import stein_seeds as stein_seeds
from fitspeed.search.guard_stats import target_sd

GUARD_STEPS = 64
GUARD_EPOCHS = 4
# How many baseline seed-to-seed sds an accuracy may fall below its baseline in `compare` (`fitspeed
# reproduce`'s mark, unpaired): the difference of two means over 3 seeds each, over the sd from 3 baseline
# runs, follows at worst Student's t with 2 degrees of freedom scaled by sqrt(2/3): 3 sd is t = 3.67.
SPREAD_MULTIPLE = 3.0
# The floor on the accuracy band of `compare`, in accuracy (2 points): rounding can flip a few held-out
# samples of a few hundred; `fitspeed reproduce` marks nothing smaller either.
ACCURACY_FLOOR = 0.02
# A script's baseline whose held-out (or final) loss varies over seeds by more than this share of its own
# mean cannot judge a candidate: its seeds are not what sets its runs.
MAX_SPREAD = 0.25
FIRST_EPOCH_SHARE = 0.10  # a loss's scale is at least this share of the first epoch's loss (`scale`)


@dataclass(frozen=True)
class Comparison:
    """One measure of a candidate against the baseline's runs over seeds, one-sided.

    `band` is how much worse the candidate's mean may be than the baseline's:
    SPREAD_MULTIPLE baseline seed-to-seed sds, never less than `floor`.
    """

    measure: str  # "held-out loss", "held-out accuracy", "final training loss"
    baseline: float  # mean over the baseline's runs
    candidate: float  # mean over the candidate's runs
    sd: float | None  # the baseline's seed-to-seed sd; None from one run
    band: float
    floor: float
    higher_is_better: bool
    runs: tuple[int, int]  # (baseline, candidate) runs

    @property
    def worse_by(self) -> float:
        """How much worse the candidate is (negative: better)."""
        gap = self.candidate - self.baseline
        return -gap if self.higher_is_better else gap

    @property
    def ok(self) -> bool:
        return self.worse_by <= self.band

    def _value(self, value: float) -> str:
        return f"{100 * value:.1f}%" if self.higher_is_better else f"{value:.3g}"

    def _gap(self, value: float) -> str:
        return f"{100 * value:.1f} points" if self.higher_is_better else f"{value:.2g}"

    def text(self) -> str:
        """The comparison in a sentence.

        >>> compare("held-out loss", [1.60, 1.65, 1.70], [1.50, 1.55, 1.52], floor=0.05).text()
        "held-out loss 1.52 is below the baseline's 1.65 (sd 0.05 over 3 seeds)"
        """
        runs = self.runs[0]
        where = (f"one seed, no spread: the floor {self._gap(self.floor)}" if self.sd is None
                 else f"{SPREAD_MULTIPLE:g} x sd {self._gap(self.sd)} over {runs} seeds"
                 if self.band > self.floor else f"sd {self._gap(self.sd)} over {runs} seeds: the floor")
        if self.worse_by <= 0:
            side = "above" if self.higher_is_better else "below"
            sd = f"sd {self._gap(self.sd)} over {runs} seeds" if self.sd is not None else "one seed"
            return f"{self.measure} {self._value(self.candidate)} is {side} the baseline's {self._value(self.baseline)} ({sd})"
        side = "below" if self.higher_is_better else "above"
        verdict = "within" if self.ok else "more than"
        return (f"{self.measure} {self._value(self.candidate)} is {self._gap(self.worse_by)} {side} the baseline's "
                f"{self._value(self.baseline)}, {verdict} the band {self._gap(self.band)} ({where})")

    def to_dict(self) -> JSONObject:
        return {"measure": self.measure, "baseline": self.baseline, "candidate": self.candidate, "sd": self.sd,
                "band": self.band, "worse_by": self.worse_by, "ok": self.ok, "runs": list(self.runs)}


def compare(measure: str, baseline: Sequence[float], candidate: Sequence[float], *, floor: float,
            higher_is_better: bool = False, multiple: float = SPREAD_MULTIPLE) -> Comparison:
    """Whether the candidate's runs do at least as well as the baseline's, within its spread over seeds.

    Worked examples, held-out losses from three seeds each. Lower always passes:

    >>> compare("held-out loss", [1.60, 1.65, 1.70], [1.50, 1.55, 1.52], floor=0.05).ok
    True

    Worse by less than 3 sd passes; by more fails:

    >>> c = compare("held-out loss", [1.60, 1.65, 1.70], [1.70, 1.72, 1.74], floor=0.05)
    >>> c.ok, round(c.band, 3)
    (True, 0.15)
    >>> compare("held-out loss", [1.60, 1.65, 1.70], [2.10, 2.20, 2.15], floor=0.05).text()
    "held-out loss 2.15 is 0.5 above the baseline's 1.65, more than the band 0.15 (3 x sd 0.05 over 3 seeds)"

    Identical seeds (sd 0) leave the floor, so a rounding difference passes:

    >>> compare("held-out loss", [1.6, 1.6, 1.6], [1.601, 1.602, 1.6], floor=0.05).text()
    "held-out loss 1.6 is 0.001 above the baseline's 1.6, within the band 0.05 (sd 0 over 3 seeds: the floor)"

    Accuracy, higher is better, in points:

    >>> compare("held-out accuracy", [0.80, 0.82, 0.78], [0.70, 0.71, 0.69], floor=0.02, higher_is_better=True).text()
    "held-out accuracy 70.0% is 10.0 points below the baseline's 80.0%, more than the band 6.0 points (3 x sd 2.0 points over 3 seeds)"
    """
    if not baseline or not candidate:
        raise ValueError("Expected at least one baseline and one candidate value to compare.")
    sd = statistics.stdev(baseline) if len(baseline) > 1 else None
    band = max(multiple * sd if sd is not None else 0.0, floor)
    return Comparison(measure, statistics.fmean(baseline), statistics.fmean(candidate), sd, band, floor,
                      higher_is_better, (len(baseline), len(candidate)))


def numeric_changes(config: TrialConfig, baseline: TrialConfig) -> dict[str, object]:
    """The knobs of `config` that differ from `baseline` and change numerics."""
    ours, theirs = config.to_dict(), baseline.to_dict()
    return {
        name: value
        for name, value in ours.items()
        if value != theirs[name] and KNOBS_BY_NAME[name].changes_numerics
    }


def seeds(spec: TrialSpec, count: int = FIRST_SEEDS) -> tuple[int, ...]:
    """The seeds the guard trains at: spec.seed and the next `count` - 1 (the first stage, by default).

    >>> seeds(TrialSpec(model="tiny", seed=7)), seeds(TrialSpec(model="tiny", seed=7), 7)[-1]
    ((7, 8, 9, 10, 11), 13)
    """
    return tuple(spec.seed + i for i in range(count))


def guard_spec(spec: TrialSpec, baseline: TrialConfig, seed: int | None = None) -> TrialSpec:
    """The train-mode trial that checks `spec`'s numerics against `baseline`, at `seed` (default spec.seed).

    Every seed trains on the data of spec.seed (`data_seed`) and is measured on its held-out part.
    """
    config = baseline.replace(**numeric_changes(spec.config, baseline))
    return TrialSpec(
        model=spec.model,
        data=spec.data,
        config=config,
        steps=GUARD_STEPS,
        repeats=GUARD_EPOCHS,
        seed=spec.seed if seed is None else seed,
        data_seed=spec.seed,
        timeout_s=spec.timeout_s,
        memory_limit_mb=spec.memory_limit_mb,
        mode=Mode.TRAIN,
        script=spec.script,
        validate=True,
        build_first=True,
    )


@dataclass(frozen=True)
class GuardRun:
    """What the guard reads from one train-mode trial."""

    status: str
    reason: str | None = None
    curve: tuple[float | None, ...] = ()
    val_loss: float | None = None
    val_accuracy: float | None = None
    output_dtype: str | None = None
    seed: int | None = None

    @classmethod
    def from_record(cls, record: TrialRecord) -> GuardRun:
        metrics = record.metrics or Metrics()
        return cls(status=record.status, reason=record.reason, curve=metrics.loss_curve, val_loss=metrics.val_loss,
                   val_accuracy=metrics.val_accuracy, output_dtype=record.measured("output_dtype"), seed=record.spec.seed)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> GuardRun:
        return cls(**{**values, "curve": tuple(values.get("curve") or ())})

    def to_dict(self) -> JSONObject:
        return {"status": self.status, "reason": self.reason, "curve": list(self.curve), "val_loss": self.val_loss,
                "val_accuracy": self.val_accuracy, "output_dtype": self.output_dtype, "seed": self.seed}

    @property
    def final(self) -> float | None:
        return self.curve[-1] if self.curve else None

    @property
    def finite(self) -> bool:
        """Ran, and ended with a finite training loss (and held-out loss, where it has one)."""
        values = [self.final, *([self.val_loss] if self.val_loss is not None else [])]
        return self.status == Status.OK and all(v is not None and math.isfinite(v) for v in values)

    def trouble(self) -> str:
        """Why this run cannot be read, in a few words."""
        if self.status in (Status.OK, Status.NAN):
            return "the loss is not finite" + (f" ({self.reason})" if self.reason else "")
        return f"its guard run {self.status}" + (f": {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class GuardVerdict:
    ok: bool
    reason: str
    baseline_curve: tuple[float | None, ...]
    curve: tuple[float | None, ...]
    runs: tuple[int, int] = (0, 0)  # trial processes: (baseline, candidate)
    checks: tuple[PairedGap, ...] = ()

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> GuardVerdict:
        """The verdict as a study stores it (`to_dict`).

        >>> verdict = judge([GuardRun("ok", curve=(2.3, 1.7), val_loss=v) for v in (1.60, 1.65, 1.70, 1.62, 1.68)],
        ...                 [GuardRun("ok", curve=(2.3, 1.7), val_loss=v) for v in (1.61, 1.64, 1.71, 1.62, 1.69)])
        >>> GuardVerdict.from_dict(verdict.to_dict()) == verdict
        True
        """
        runs = values.get("runs") or {}
        return cls(ok=bool(values["ok"]), reason=str(values.get("reason", "")),
                   baseline_curve=tuple(values.get("baseline_curve") or ()), curve=tuple(values.get("curve") or ()),
                   runs=(int(runs.get("baseline", 0)), int(runs.get("candidate", 0))),
                   checks=tuple(PairedGap.from_dict(check) for check in values.get("checks") or ()))

    def to_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "reason": self.reason,
                "baseline_curve": list(self.baseline_curve), "curve": list(self.curve),
                "runs": {"baseline": self.runs[0], "candidate": self.runs[1]},
                "checks": [c.to_dict() for c in self.checks]}


GuardRunner = Callable[[TrialConfig, int], GuardRun]  # (config, seed) -> that config's guard run at that seed


def paired(run: GuardRunner, spec: TrialSpec, baseline: TrialConfig, config: TrialConfig, *, script: bool = False,
           margin: float = MARGIN) -> GuardVerdict:
    """`config` against `baseline`, paired seed by seed (`judge`): the guard's whole rule, for the tuner's search
    and `fitspeed scale` alike. `run(config, seed)` gives one guard run (`guard_spec`'s trial: a store may
    answer it).

    The first stage, FIRST_SEEDS seeds of each, sets how many seeds the verdict takes (`seeds_needed`, at most
    MAX_SEEDS); both then run to that many. A failure on the paired gap alone is replicated on as many fresh
    seeds of each side before it stands (`replicates`). A script whose baseline varies too much over seeds
    (`settled_by_baseline`) is settled by one candidate run.
    """
    first = seeds(spec)
    base_runs = runs_at(run, baseline, first)
    candidate = runs_at(run, config, first[:1])
    if not (script and settled_by_baseline(base_runs, candidate)):
        candidate = runs_at(run, config, first, candidate)
        every = seeds(spec, seeds_needed(base_runs, candidate, margin))
        base_runs = runs_at(run, baseline, every, base_runs)
        candidate = runs_at(run, config, every, candidate)
    judged = judge(base_runs, candidate, script=script, margin=margin)
    if replicates(base_runs, candidate, judged):
        n = len(base_runs)
        again = seeds(spec, 2 * n)
        base_runs = runs_at(run, baseline, again, base_runs)
        candidate = runs_at(run, config, again, candidate)
        judged = replicate(judged, base_runs[n:], candidate[n:], script=script, margin=margin)
    return judged


def runs_at(run: GuardRunner, config: TrialConfig, at: Sequence[int],
            runs: Sequence[GuardRun] | None = None) -> list[GuardRun]:
    """`config`'s guard runs at the seeds `at`, after the `runs` it has (at the first seeds), stopping at a run
    that already decides the verdict (`stop_early`)."""
    found = list(runs or [])
    for seed in at[len(found):]:
        if stop_early(found):
            break
        found.append(run(config, seed))
    return found


def stop_early(candidate: Sequence[GuardRun]) -> bool:
    """After a candidate run that failed or is not finite the verdict is known: run no more seeds."""
    return any(not run.finite or (run.output_dtype not in (None, "float32")) for run in candidate)


def _losses(baseline: Sequence[GuardRun], candidate: Sequence[GuardRun]) -> tuple[str, list[float], list[float]]:
    """The measure the guard judges, and its values on each side: held-out loss where every run has one."""
    if all(run.val_loss is not None for run in [*baseline, *candidate]):
        return ("held-out loss", [run.val_loss for run in baseline if run.val_loss is not None],
                [run.val_loss for run in candidate if run.val_loss is not None])
    return ("final training loss", [run.final for run in baseline if run.final is not None],
            [run.final for run in candidate if run.final is not None])


def seeds_needed(baseline: Sequence[GuardRun], candidate: Sequence[GuardRun], margin: float = MARGIN) -> int:
    """How many paired seeds the guard runs, from the first FIRST_SEEDS of each side (`stein_seeds`).

    Before the first stage is complete, or after a run that settles the
    verdict (`stop_early`), that is the seeds there are (at least FIRST_SEEDS);
    where the first stage's gaps settle it (`settled`), FIRST_SEEDS.

    >>> runs = lambda losses: [GuardRun("ok", curve=(2.3, 1.7), val_loss=v) for v in losses]
    >>> base = runs([1.60, 1.65, 1.70, 1.62, 1.68])
    >>> seeds_needed(base, runs([1.65, 1.68, 1.75, 1.66, 1.71])), seeds_needed(base, runs([1.7, 1.6, 1.62, 1.75, 1.6]))
    (7, 24)
    """
    pairs = min(len(baseline), len(candidate))
    if pairs < FIRST_SEEDS or stop_early(candidate) or not all(run.finite for run in baseline[:FIRST_SEEDS]):
        return max(FIRST_SEEDS, pairs)
    _, base, cand = _losses(baseline[:FIRST_SEEDS], candidate[:FIRST_SEEDS])
    delta = margin * abs(statistics.fmean(base))  # the margin in the loss's units
    if settled(base, cand, delta):
        return FIRST_SEEDS
    gaps = [c - b for b, c in zip(base, cand)]
    return stein_seeds(statistics.stdev(gaps), delta if delta > 0 else target_sd(base, cand))


def judge(baseline: Sequence[GuardRun], candidate: Sequence[GuardRun], script: bool = False,
          level: float = GAP_LEVEL, margin: float = MARGIN) -> GuardVerdict:
    """The verdict on a candidate from its guard runs and the baseline's, paired seed by seed (the same order).

    `level` is the paired test's, one-sided: GAP_LEVEL, or REPLICATION_LEVEL where fresh seeds replicate a
    failure (`replicate`).

    >>> runs = lambda losses, accs: [GuardRun("ok", curve=(2.3, 1.7), val_loss=v, val_accuracy=a)
    ...                              for v, a in zip(losses, accs)]
    >>> base = runs([1.60, 1.65, 1.70, 1.62, 1.68], [0.42, 0.44, 0.43, 0.45, 0.41])
    >>> judge(base, runs([1.40, 1.45, 1.42, 1.44, 1.41], [0.50, 0.52, 0.49, 0.50, 0.51])).ok
    True
    >>> v = judge(base, runs([1.66, 1.67, 1.74, 1.66, 1.72], [0.40, 0.43, 0.41, 0.44, 0.40]))
    >>> v.ok, v.reason
    (False, "held-out loss 1.69 is 0.04 above the baseline's 1.65 over 5 paired seeds (97% interval of the gap 0.019 to 0.061; the margin 0.017, 1% of the baseline's loss): worse by more than the margin; held-out accuracy 41.6% against the baseline's 43.0% (reported; the loss decides)")
    >>> judge(base, [GuardRun("nan", "the loss became nan at epoch 2", curve=(2.3, float("nan")))]).reason
    'the loss is not finite (the loss became nan at epoch 2)'
    >>> judge(base, [GuardRun("ok", curve=(2.3, 1.6), output_dtype="bfloat16")]).reason
    "the model's output is bfloat16, not float32: the loss would read 16-bit values; give the output layer dtype='float32'"

    Without held-out data (a training script's), the final training loss decides, and the reason says so:

    >>> finals = lambda losses: [GuardRun("ok", curve=(2.3, c)) for c in losses]
    >>> judge(finals([1.0, 1.1, 1.05, 0.98, 1.02]), finals([0.9, 1.0, 0.97, 0.9, 0.93])).reason
    "no held-out data (a training script brings none): judged on the final training loss; final training loss 0.94 is 0.09 below the baseline's 1.03 over 5 paired seeds (97% interval of the gap -0.1 to -0.075; the margin 0.01, 1% of the baseline's loss): within the margin"
    """
    runs = (len(baseline), len(candidate))
    keep = (baseline[0].curve if baseline else (), candidate[0].curve if candidate else ())

    def verdict(ok: bool, reason: str, checks: tuple[PairedGap, ...] = ()) -> GuardVerdict:
        return GuardVerdict(ok, reason, *keep, runs=runs, checks=checks)

    for run in candidate:
        if run.output_dtype not in (None, "float32"):
            return verdict(False, f"the model's output is {run.output_dtype}, not float32: the loss would read "
                                  "16-bit values; give the output layer dtype='float32'")
    bad = [run for run in candidate if not run.finite]
    if bad or not candidate:
        return verdict(False, bad[0].trouble() if bad else "the candidate has no guard run")
    bad = [run for run in baseline if not run.finite]
    if bad or not baseline:
        return verdict(False, f"the baseline cannot judge it: {bad[0].trouble()}" if bad else "no baseline run")
    measure, base, cand = _losses(baseline, candidate)
    note = "" if measure == "held-out loss" else \
        "no held-out data (a training script brings none): judged on the final training loss; "
    if script:
        unsteady = unreproducible(measure, base)
        if unsteady:
            return verdict(False, unsteady)
    loss = paired_gap(measure, base, cand, level=level, margin=margin)
    reason = note + loss.text()
    pairs = loss.pairs
    accuracies = [[run.val_accuracy for run in side[:pairs] if run.val_accuracy is not None]
                  for side in (baseline, candidate)]
    if measure == "held-out loss" and all(len(side) == pairs for side in accuracies):
        reason += (f"; held-out accuracy {100 * statistics.fmean(accuracies[1]):.1f}% against the baseline's "
                   f"{100 * statistics.fmean(accuracies[0]):.1f}% (reported; the loss decides)")
    return verdict(loss.ok, reason, (loss,))


def replicates(baseline: Sequence[GuardRun], candidate: Sequence[GuardRun], verdict: GuardVerdict) -> bool:
    """Whether `verdict`, `judge`'s on these runs (the rule's N seeds), fails on the paired gap alone, so that N
    fresh seeds must replicate it before it stands (`replicate`).

    A failure the first stage settles (a label shuffle), a spread far above the baseline's (`PairedGap.unstable`),
    a loss that is not finite or an output that is not float32 stands at once:

    >>> runs = lambda losses: [GuardRun("ok", curve=(2.3, 1.7), val_loss=v) for v in losses]
    >>> base = runs([1.60, 1.65, 1.70, 1.62, 1.68])
    >>> worse = runs([1.66, 1.67, 1.74, 1.66, 1.72])
    >>> replicates(base, worse, judge(base, worse))
    True
    >>> shuffled = runs([2.30, 2.41, 2.33, 2.29, 2.38])
    >>> replicates(base, shuffled, judge(base, shuffled)), replicates(base, base, judge(base, base))
    (False, False)
    """
    if verdict.ok or not verdict.checks:
        return False
    gap = verdict.checks[0]
    if gap.low <= gap.margin or gap.unstable or gap.pairs < 2:
        return False
    _, base, cand = _losses(baseline[:FIRST_SEEDS], candidate[:FIRST_SEEDS])
    return not settled(base, cand, gap.share * abs(statistics.fmean(base)))


def replicate(verdict: GuardVerdict, baseline: Sequence[GuardRun], candidate: Sequence[GuardRun],
              script: bool = False, margin: float = MARGIN) -> GuardVerdict:
    """`verdict`, a failure on the paired gap over the rule's N seeds, judged again on N fresh seeds of each side.

    The fresh runs are judged on their own (`judge` at REPLICATION_LEVEL): the
    candidate fails only where they fail too. Both checks are kept, the first N's first.

    >>> runs = lambda losses: [GuardRun("ok", curve=(2.3, 1.7), val_loss=v) for v in losses]
    >>> base = runs([1.60, 1.65, 1.70, 1.62, 1.68])
    >>> first = judge(base, runs([1.66, 1.67, 1.74, 1.66, 1.72]))
    >>> again = replicate(first, runs([1.61, 1.66, 1.64, 1.69, 1.63]), runs([1.60, 1.67, 1.63, 1.70, 1.62]))
    >>> again.ok, again.runs, len(again.checks)
    (True, (10, 10), 2)
    >>> again.reason.split("; again on fresh seeds, ")[1]
    "held-out loss 1.64 is 0.002 below the baseline's 1.65 over 5 paired seeds (50% interval of the gap -0.0056 to 0.0016; the margin 0.016, 1% of the baseline's loss): within the margin, so the failure is not replicated and the candidate passes"
    >>> replicate(first, runs([1.61, 1.66, 1.64, 1.69, 1.63]), runs([1.66, 1.70, 1.69, 1.74, 1.69])).ok
    False
    """
    again = judge(baseline, candidate, script=script, level=REPLICATION_LEVEL, margin=margin)
    checks = tuple(dataclasses.replace(check, needed=None) for check in again.checks)  # the rule asks no more
    said = checks[0].text() if checks else again.reason
    outcome = "so the failure is not replicated and the candidate passes" if again.ok else "so the failure is replicated"
    return GuardVerdict(again.ok, f"{verdict.reason}; again on fresh seeds, {said}, {outcome}",
                        verdict.baseline_curve, verdict.curve,
                        runs=(verdict.runs[0] + again.runs[0], verdict.runs[1] + again.runs[1]),
                        checks=verdict.checks + checks)


UNSTEADY = "the script's training varies too much over seeds to judge a candidate"


def settled_by_baseline(baseline: Sequence[GuardRun], candidate: Sequence[GuardRun]) -> bool:
    """Whether a script's baseline runs alone settle its verdict: they vary too much over seeds to judge any
    candidate (`unreproducible`), so more candidate runs would change nothing and are not made."""
    return judge(baseline, candidate, script=True).reason.startswith(UNSTEADY)


def unreproducible(measure: str, baseline: Sequence[float]) -> str | None:
    """Why a script's baseline runs vary too much over seeds to judge a candidate, or None.

    A training script seeds (or does not seed) its own data order and weights;
    when its baseline's loss varies over seeds by more than MAX_SPREAD of its
    own mean, what sets a run is not the seed, and pairing runs by seed means nothing:

    >>> unreproducible("final training loss", [1.0, 1.02, 0.99]) is None
    True
    >>> unreproducible("final training loss", [1.0, 1.6, 0.7])
    "the script's training varies too much over seeds to judge a candidate: its baseline's final training loss has sd 0.46 over 3 seeds, 42% of its mean 1.1 (over 25%), so the guard cannot tell a numerics change from the script's own noise; seed its data order and weights from keras.utils.set_random_seed (or shuffle(seed=...)), or train longer"
    """
    if len(baseline) < 2:
        return None
    sd, on = statistics.stdev(baseline), max(abs(statistics.fmean(baseline)), 1e-3)
    if sd <= MAX_SPREAD * on:
        return None
    return (f"{UNSTEADY}: its baseline's "
            f"{measure} has sd {sd:.2g} over {len(baseline)} seeds, "
            f"{100 * sd / on:.0f}% of its mean {on:.2g} (over {100 * MAX_SPREAD:.0f}%), so the guard "
            "cannot tell a numerics change from the script's own noise; seed its data order and weights from "
            "keras.utils.set_random_seed (or shuffle(seed=...)), or train longer")
