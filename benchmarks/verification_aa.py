"""Error rate, power and coverage of the sequential paired decisions, under many noise models, by simulation.

    python benchmarks/verification_aa.py [--runs 2000] [--ratios 1.0,1.05,1.1,1.2,1.5]
        [--models "gaussian cv10,B 3x noisier,..."] [--designs verification,...] [--seeds report] [--json]

Each run is one decision made by `fitspeed.core.sequential.step` exactly as
the tuner and `fitspeed doctor` make it: pairs measured one after another,
each in a random order (`pair_order`), the decision looking after every pair
until it stops. Trials scatter by a `NoiseModel`: a total CV split into a
slow drift shared by neighbouring trials (AR(1), rho 0.9) and each trial's
own part, which may be heavy-tailed (Student t); load bursts (a trial at
x0.4-0.6); 3x outliers; the second slot of a pair faster (`slot_bias`); a
component both trials of a pair share; and each side's own spread (the
answer 3-4x noisier than the defaults, or the other way round). `NOISE_MODELS`
names the twelve measured.

The designs (`DESIGNS`): the verification, one-sided 2.5%, looks from 3 to 10
pairs, whose prior is each side's own trial-to-trial noise Welch-combined, as
`Ledger.pair_noise` measures it (the defaults from 5 screen baselines after
the cold first, the answer from the 3 trials of the steps that chose it);
`fitspeed doctor`'s confirmation (`confirm_design`: 2.5%, 3 to 10 pairs, no
prior, so each look has its own boundary); a combination step with no prior. For each design, noise model and
true ratio it prints how often the decision said "faster" (with its 95%
Wilson interval), "slower"/"no gain", "not confirmed", the mean pairs, and
how often the interval held the true ratio: over all runs (unconditional)
and over the runs that said "faster".

Seeds: `--seeds dev` draws from 0..999_999 (used while the design was being
chosen), `--seeds report` from 10_000_000 on (the reported figures).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from dataclasses import dataclass

from fitspeed.core.sequential import Design, Noise, pair_order, pooled_noise, step, welch
from fitspeed.core.stats import share_interval
from fitspeed.measure.doctor import CONFIRM_PAIRS, confirm_design
from fitspeed.search.decider import combine_design, verify_design

DEV_SEEDS, REPORT_SEEDS = 0, 10_000_000


@dataclass(frozen=True)
class NoiseModel:
    """How trials scatter: a total CV split into drift (AR(1), rho 0.9) and each trial's own part, which may be
    heavy-tailed; load bursts; the second slot's gain; a component shared by a pair's two trials; and each side's
    own spread (`b_scale`, `a_scale`: multiples of the own part's sd for B's and A's trials)."""

    cv: float = 0.10
    drift_share: float = 0.25
    tail_df: float | None = None
    bursts: float = 0.0  # chance a trial comes in at x0.4-0.6
    slow_outliers: float = 0.0  # chance a trial takes 3x as long (x1/3)
    slot_bias: float = 1.04
    pair_share: float = 0.0  # share of the own variance that both trials of a pair share
    a_scale: float = 1.0
    b_scale: float = 1.0


NOISE_MODELS = {
    "gaussian cv10": NoiseModel(),
    "gaussian cv30": NoiseModel(cv=0.30),
    "drift half": NoiseModel(drift_share=0.5),
    "slot bias 1.09": NoiseModel(slot_bias=1.09),
    "3x outliers 2%": NoiseModel(slow_outliers=0.02),
    "correlated pairs": NoiseModel(pair_share=0.5),
    "heavy tails t3": NoiseModel(tail_df=3.0),
    "load bursts 3%": NoiseModel(bursts=0.03),
    "B 3x noisier": NoiseModel(b_scale=3.0),
    "B 4x noisier t3": NoiseModel(b_scale=4.0, tail_df=3.0),
    "A 3x noisier": NoiseModel(a_scale=3.0),
    "everything": NoiseModel(cv=0.2, tail_df=3.0, bursts=0.03, slot_bias=1.09, b_scale=3.0, pair_share=0.3),
}


@dataclass
class Machine:
    model: NoiseModel
    rng: random.Random
    drift: float = 0.0
    shared: float = 0.0

    def _own(self, sd: float) -> float:
        df = self.model.tail_df
        if df is None:
            return self.rng.gauss(0.0, sd)
        t = self.rng.gauss(0.0, 1.0) / math.sqrt(self.rng.gammavariate(df / 2, 2.0) / df)
        return t * sd * math.sqrt((df - 2) / df) if df > 2 else t * sd

    def trial(self, true: float, second: bool, side: str = "a") -> float:
        m, rho = self.model, 0.9
        self.drift = rho * self.drift + self.rng.gauss(0.0, m.cv * math.sqrt(m.drift_share * (1 - rho * rho)))
        own_sd = m.cv * math.sqrt(1 - m.drift_share) * (m.b_scale if side == "b" else m.a_scale)
        private = own_sd * math.sqrt(1 - m.pair_share)
        speed = true * math.exp(self.drift + self.shared * (m.b_scale if side == "b" else m.a_scale)
                                + self._own(private))
        if second:
            speed *= m.slot_bias
        if self.rng.random() < m.bursts:
            speed *= self.rng.uniform(0.4, 0.6)
        if self.rng.random() < m.slow_outliers:
            speed /= 3.0
        return speed

    def pair(self, ratio: float, b_first: bool) -> float:
        m = self.model
        self.shared = self.rng.gauss(0.0, m.cv * math.sqrt((1 - m.drift_share) * m.pair_share))
        if b_first:
            b = self.trial(ratio, False, "b")
            a = self.trial(1.0, True, "a")
        else:
            a = self.trial(1.0, False, "a")
            b = self.trial(ratio, True, "b")
        self.shared = 0.0
        return b / a


def prior(machine: Machine, ratio: float) -> Noise | None:
    """The verification's prior, as a study measures it: each side's own earlier trials, Welch-combined
    (`Ledger.pair_noise`). A: 6 screen baselines, one every four trials, the first left out as a cold start; B:
    the 3 trials of the search steps that chose it."""
    a_logs, b_logs = [], []
    for index in range(24):
        speed = machine.trial(1.0, index > 0, "a")
        if index % 4 == 0 and index:
            a_logs.append(math.log(speed))
    for index in range(3):
        b_logs.append(math.log(machine.trial(ratio, index % 2 == 1, "b")))
    return welch(pooled_noise([a_logs]), pooled_noise([b_logs]), "simulated own trials")


def one(design: Design, ratio: float, model: NoiseModel, seed: int, with_prior: bool) -> tuple[str, int, bool]:
    rng = random.Random(seed)
    machine = Machine(model, rng)
    noise = prior(machine, ratio) if with_prior else None
    ratios: list[float] = []
    result = step(ratios, design, noise)
    while result.verdict is None:
        ratios.append(machine.pair(ratio, pair_order(seed, "decision", len(ratios))))
        result = step(ratios, design, noise)
    covered = result.low is not None and result.high is not None and result.low <= ratio <= result.high
    return str(result.verdict), result.pairs, covered


def table(design: Design, ratios: tuple[float, ...], runs: int, model: NoiseModel, base: int,
          with_prior: bool) -> list[dict]:
    rows = []
    for index, ratio in enumerate(ratios):
        out = [one(design, ratio, model, base + 100_000 * index + k, with_prior) for k in range(runs)]
        faster = [o for o in out if o[0] == "faster"]
        rows.append({
            "ratio": ratio,
            "faster": len(faster) / runs,
            "faster_n": len(faster),
            "futile": sum(o[0] in ("slower", "no gain") for o in out) / runs,
            "not_confirmed": sum(o[0] == "not confirmed" for o in out) / runs,
            "mean_pairs": statistics.fmean(o[1] for o in out),
            "coverage_of_claims": (sum(o[2] for o in faster) / len(faster)) if faster else None,
            "coverage": sum(o[2] for o in out) / runs,
            "claims": len(faster),
        })
    return rows


PAIRS, MIN_GAIN = 5, 0.05  # `fitspeed tune`'s defaults (doctor's confirmation: CONFIRM_PAIRS)
DESIGNS = {  # the designs as the tuner and doctor build them, and whether a decision starts from a prior
    "verification": (verify_design(PAIRS, MIN_GAIN, 1), True),
    "doctor's confirmation (no prior)": (confirm_design(CONFIRM_PAIRS), False),
    "combination step (no prior)": (combine_design(PAIRS, MIN_GAIN), False),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="decisions per design, ratio and noise model")
    parser.add_argument("--ratios", default="1.0,1.05,1.1,1.2,1.5", help="true B/A ratios")
    parser.add_argument("--models", default=",".join(NOISE_MODELS), help="noise models, comma-separated")
    parser.add_argument("--designs", default=",".join(DESIGNS), help="designs, comma-separated")
    parser.add_argument("--seeds", choices=("dev", "report"), default="report")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ratios = tuple(float(r) for r in args.ratios.split(","))
    base = REPORT_SEEDS if args.seeds == "report" else DEV_SEEDS
    results = {}
    for name in args.designs.split(","):
        design, with_prior = DESIGNS[name]
        for model in args.models.split(","):
            results[f"{name}, {model}"] = table(design, ratios, args.runs, NOISE_MODELS[model], base, with_prior)
    if args.json:
        print(json.dumps({"runs": args.runs, "seeds": args.seeds, "results": results}))
        return
    print(f"{args.runs} decisions per row, {args.seeds} seeds")
    for title, rows in results.items():
        print(f"\n{title}")
        print(f"{'true':>6}  {'faster':>7}  {'95% CI of faster':>16}  {'futile':>7}  {'not conf.':>9}  {'pairs':>5}  "
              f"{'coverage':>8}  {'coverage (claims)':>17}")
        for row in rows:
            low, high = share_interval(row["faster_n"], args.runs)
            claims = "–" if row["coverage_of_claims"] is None else f"{row['coverage_of_claims']:.1%}"
            print(f"{row['ratio']:>6.2f}  {row['faster']:>7.1%}  {f'{low:.1%}–{high:.1%}':>16}  {row['futile']:>7.1%}  "
                  f"{row['not_confirmed']:>9.1%}  {row['mean_pairs']:>5.1f}  {row['coverage']:>8.1%}  {claims:>17}")


if __name__ == "__main__":
    main()
