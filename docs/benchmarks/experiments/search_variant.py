"""A search variant on development worlds, paired against another run: how the fourteenth round's variants were measured.

    PYTHONPATH=$TREE/src python docs/benchmarks/experiments/search_variant.py VARIANT --first 3001800 --worlds 1200 \
        --out variant.json [--against main.json]

Runs `benchmarks/search_diagnosis.py`'s studies (the real `Tuner` on drawn
worlds, CV 10%, `--trials 40`) with one part of the search switched off by a
patch in this process only: `none` (the tree as it is) or `nocombine` (no
combination phase: after the screen, the sampler, the model and the polish).
Run it on main's tree, and on main with `thompson_sampler.patch` applied, for
the two rows of the development note. With `--against`, prints the paired
difference in captured speed over the worlds where something helps, with its
standard error, and the count of answers within 3%. Development seeds only.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

import search_diagnosis  # noqa: E402

from fitspeed.search import combination  # noqa: E402


def paired(before: dict, after: dict) -> str:
    rows_a = {row["seed"]: row for row in before["rows"]}
    rows_b = {row["seed"]: row for row in after["rows"]}
    seeds = [seed for seed, row in rows_a.items() if seed in rows_b and row["best_gain"] > 1 + 1e-9]
    captured = [rows_b[s]["gain"] / rows_b[s]["best_gain"] - rows_a[s]["gain"] / rows_a[s]["best_gain"] for s in seeds]
    right = [sum(rows[s]["cause"] is None for s in seeds) for rows in (rows_a, rows_b)]
    se = statistics.stdev(captured) / math.sqrt(len(seeds))
    return (f"{len(seeds)} worlds where something helps: right {right[0]} -> {right[1]}, "
            f"captured paired {statistics.fmean(captured):+.4f} (se {se:.4f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", choices=["none", "nocombine"])
    parser.add_argument("--first", type=int, default=3_000_000, help="the first development world's seed")
    parser.add_argument("--worlds", type=int, default=600)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--against", type=Path, help="a run of this script on the same worlds to pair with")
    args = parser.parse_args()
    if args.variant == "nocombine":
        combination.Combination.combine = lambda self, promising, hold: None  # type: ignore[method-assign]
    result = search_diagnosis.diagnose(range(args.first, args.first + args.worlds), 40, 0.10, args.jobs)
    args.out.write_text(json.dumps(result))
    print(args.variant, result["right"], result["helps"], round(result["captured"], 4),
          {name: round(count, 1) for name, count in result["trials"].items()})
    if args.against:
        print(paired(json.loads(args.against.read_text()), result))


if __name__ == "__main__":
    main()
