"""How far the verification's estimate is from the truth, over its claims: the Huber estimate at the stop and the
median-unbiased one (`fitspeed.core.sequential.median_unbiased`).

    python benchmarks/estimate_bias.py [--decisions 1000] [--ratios 1.08,1.15,1.3] [--noise 0.05,0.14] [--json]

Each decision is the verification's design (`verify_design(5, 0.05, 1)`:
one-sided 2.5%, looks from 3 to 20 pairs) on paired log ratios drawn Gaussian
around log(true ratio) with the given sd, starting from a prior noise of that
sd on 20 degrees of freedom, as a study's noise would be. Over the decisions
that claim, it prints the median and the mean of estimate / truth for both
estimates, and the share of claims whose estimate is at or above the truth
(0.5 for an estimate median-unbiased over claims).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics

from fitspeed.core.sequential import Noise, median_unbiased, step
from fitspeed.search.decider import verify_design


def run(ratio: float, sd: float, decisions: int, seed: int) -> dict[str, float | int | None]:
    design = verify_design(5, 0.05, 1)
    prior = Noise(sd, 20, "a study's noise")
    rng = random.Random(f"{seed}/{ratio}/{sd}")
    at_stop, unbiased = [], []
    for _ in range(decisions):
        ratios: list[float] = []
        result = step(ratios, design, prior)
        while result.verdict is None:
            ratios.append(math.exp(rng.gauss(math.log(ratio), sd)))
            result = step(ratios, design, prior)
        if not result.verdict.is_faster() or result.ratio is None or result.noise is None:
            continue
        at_stop.append(result.ratio / ratio)
        prior_df = max(0, result.noise.df - (len(ratios) - 1))
        unbiased.append(median_unbiased(design, len(ratios), result.ratio, result.noise, prior_df) / ratio)
    if not at_stop:
        return {"ratio": ratio, "sd": sd, "claims": 0}
    return {"ratio": ratio, "sd": sd, "claims": len(at_stop), "claim_share": len(at_stop) / decisions,
            "at_stop_median": statistics.median(at_stop), "at_stop_mean": statistics.fmean(at_stop),
            "unbiased_median": statistics.median(unbiased), "unbiased_mean": statistics.fmean(unbiased),
            "unbiased_at_or_above": sum(u >= 1 for u in unbiased) / len(unbiased)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--decisions", type=int, default=1000)
    parser.add_argument("--ratios", default="1.08,1.15,1.3")
    parser.add_argument("--noise", default="0.05,0.14")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [run(float(r), float(s), args.decisions, args.seed) for s in args.noise.split(",")
            for r in args.ratios.split(",")]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| true ratio | paired sd | claims | at the stop: median, mean (x truth) | median-unbiased: median, mean "
          "| share at or above the truth |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        if not row["claims"]:
            print(f"| {row['ratio']} | {row['sd']} | 0 | – | – | – |")
            continue
        print(f"| {row['ratio']} | {row['sd']} | {row['claims']} ({100 * row['claim_share']:.0f}%) | "
              f"{row['at_stop_median']:.3f}, {row['at_stop_mean']:.3f} | {row['unbiased_median']:.3f}, "
              f"{row['unbiased_mean']:.3f} | {100 * row['unbiased_at_or_above']:.0f}% |")


if __name__ == "__main__":
    main()
