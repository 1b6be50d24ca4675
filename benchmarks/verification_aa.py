"""Error rate, power and coverage of the sequential paired decisions, by simulation.

    python benchmarks/verification_aa.py [--runs 2000] [--cv 0.10] [--seeds report] [--json]

Each run is one decision made by `fitspeed.core.sequential.step` exactly as
the tuner makes it: pairs measured one after another, each in a random order
(`pair_order`), the decision looking after every pair until it stops. The
trials come from the same noise model as `benchmarks/search_simulation.py`:
multiplicative noise at a total CV of `--cv`, a quarter of its variance a
slow drift shared by neighbouring trials (AR(1), rho 0.9), the second trial
of two back to back 4% faster (the slot bias measured here in an A/A run),
and in the heavy-tailed noise a starved trial (x0.4-0.6) with probability
6%. The prior noise each decision starts from is measured the way a study
measures it: from 6 baseline trials of a screen (one every four trials, the
first left out as a cold start) and 4 earlier A/A-like pairs.

For each of the tuner's designs (`fitspeed.search.decider`: the verification,
one-sided 2.5% split over its fallbacks (4/7 of it on the newest of three),
looks from 3 to 10 pairs; a
combination step, one-sided 20%, looks from 1 to 10) and each true ratio, it prints: how often the decision said "faster",
"slower"/"no gain", "not confirmed"; the mean pairs; and over the runs that
said "faster", how often the interval held the true ratio.

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

from fitspeed.core.sequential import Design, Noise, pair_order, pooled_noise, step
from fitspeed.search.decider import combine_design, verify_design

SLOT_BIAS = 1.04
STARVED = 0.06
DEV_SEEDS, REPORT_SEEDS = 0, 10_000_000


@dataclass
class Machine:
    cv: float
    heavy: bool
    rng: random.Random
    drift: float = 0.0

    def trial(self, true: float, second: bool) -> float:
        rho, share = 0.9, 0.25
        self.drift = rho * self.drift + self.rng.gauss(0.0, self.cv * math.sqrt(share) * math.sqrt(1 - rho * rho))
        speed = true * math.exp(self.drift + self.rng.gauss(0.0, self.cv * math.sqrt(1 - share)))
        if second:
            speed *= SLOT_BIAS
        if self.heavy and self.rng.random() < STARVED:
            speed *= self.rng.uniform(0.4, 0.6)
        return speed

    def pair(self, ratio: float, b_first: bool) -> float:
        if b_first:
            b = self.trial(ratio, False)
            a = self.trial(1.0, True)
        else:
            a = self.trial(1.0, False)
            b = self.trial(ratio, True)
        return b / a


def prior(machine: Machine) -> Noise | None:
    """The study's noise before the decision: a screen's baselines and earlier pairs."""
    baselines = []
    for index in range(24):
        speed = machine.trial(1.0, index > 0)
        if index % 4 == 0:
            baselines.append(speed)
    logs = [math.sqrt(2) * math.log(s) for s in baselines[1:]]
    pairs = [math.log(machine.pair(1.0, pair_order("prior", "x", i))) for i in range(4)]
    return pooled_noise([logs, pairs], source="simulated screen baselines and earlier pairs")


def one(design: Design, ratio: float, cv: float, heavy: bool, seed: int) -> tuple[str, int, bool]:
    rng = random.Random(seed)
    machine = Machine(cv, heavy, rng)
    noise = prior(machine)
    ratios: list[float] = []
    result = step(ratios, design, noise)
    while result.verdict is None:
        ratios.append(machine.pair(ratio, pair_order(seed, "decision", len(ratios))))
        result = step(ratios, design, noise)
    covered = result.low is not None and result.high is not None and result.low <= ratio <= result.high
    return str(result.verdict), result.pairs, covered


def table(design: Design, ratios: tuple[float, ...], runs: int, cv: float, heavy: bool, base: int) -> list[dict]:
    rows = []
    for index, ratio in enumerate(ratios):
        out = [one(design, ratio, cv, heavy, base + 100_000 * index + k) for k in range(runs)]
        faster = [o for o in out if o[0] == "faster"]
        rows.append({
            "ratio": ratio,
            "faster": len(faster) / runs,
            "futile": sum(o[0] in ("slower", "no gain") for o in out) / runs,
            "not_confirmed": sum(o[0] == "not confirmed" for o in out) / runs,
            "mean_pairs": statistics.fmean(o[1] for o in out),
            "coverage_of_claims": (sum(o[2] for o in faster) / len(faster)) if faster else None,
            "claims": len(faster),
        })
    return rows


PAIRS, MIN_GAIN = 5, 0.05  # `fitspeed tune`'s defaults
DESIGNS = {  # the tuner's own designs, as it builds them
    "verification (one incumbent)": verify_design(PAIRS, MIN_GAIN, 1),
    "verification (the newest of three)": verify_design(PAIRS, MIN_GAIN, 3),
    "combination step": combine_design(PAIRS, MIN_GAIN),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="decisions per design, ratio and noise")
    parser.add_argument("--cv", type=float, default=0.10)
    parser.add_argument("--ratios", default="1.0,1.05,1.1,1.2,1.5", help="true B/A ratios")
    parser.add_argument("--seeds", choices=("dev", "report"), default="report")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ratios = tuple(float(r) for r in args.ratios.split(","))
    base = REPORT_SEEDS if args.seeds == "report" else DEV_SEEDS
    results = {}
    for noise in ("gaussian", "heavy-tailed"):
        for name, design in DESIGNS.items():
            rows = table(design, ratios, args.runs, args.cv, noise == "heavy-tailed", base)
            results[f"{name}, {noise}"] = rows
    if args.json:
        print(json.dumps({"cv": args.cv, "runs": args.runs, "seeds": args.seeds, "results": results}))
        return
    print(f"{args.runs} decisions per row, CV {args.cv:.0%} per trial, {args.seeds} seeds, "
          f"slot bias x{SLOT_BIAS}, starved trials {STARVED:.0%} in heavy-tailed noise")
    for title, rows in results.items():
        print(f"\n{title}")
        print(f"{'true':>6}  {'faster':>7}  {'futile':>7}  {'not conf.':>9}  {'pairs':>5}  {'coverage (claims)':>17}")
        for row in rows:
            coverage = "–" if row["coverage_of_claims"] is None else f"{row['coverage_of_claims']:.1%}"
            print(f"{row['ratio']:>6.2f}  {row['faster']:>7.1%}  {row['futile']:>7.1%}  "
                  f"{row['not_confirmed']:>9.1%}  {row['mean_pairs']:>5.1f}  {coverage:>17}")


if __name__ == "__main__":
    main()
