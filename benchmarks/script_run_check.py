"""Does `fitspeed run best.json -- CMD` reproduce the speed-up `fitspeed tune` verified?

    python benchmarks/script_run_check.py best.json [--pairs 3] [--seed N] -- python train.py --epochs 15

Runs the whole command, to its end, as it is (A) and under `fitspeed run
best.json` (B), interleaved in pairs, in a random order (`sequential.pair_order`: a coin
for the first pair, then alternating, so a second slot's advantage cancels;
`--seed` fixes it). The speed of each run is read from Keras's
own progress bar: the median ms/step over its epochs after the first (the
first holds tracing and compilation). Prints every run, then B's speed-up over
A per pair and their median, next to the interval in best.json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import time

from fitspeed.core.sequential import pair_order

STEP = re.compile(r"(\d+(?:\.\d+)?)(ms|s|us)/step")
UNIT = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def ms_per_step(output: str) -> float | None:
    """The median ms/step over the epochs after the first, from Keras's progress-bar lines."""
    steps = [float(m.group(1)) * UNIT[m.group(2)] for m in STEP.finditer(output)]
    return statistics.median(steps[1:]) if len(steps) > 1 else None


def run(command: list[str]) -> tuple[float | None, float, int]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    return ms_per_step(done.stdout + done.stderr), time.perf_counter() - started, done.returncode


def main() -> None:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("best")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None, help="the pairs' order: a coin for each block of two pairs, the second the other way (default: a fresh coin)")
    args = parser.parse_args(argv[:split])
    if not argv[split + 1:]:
        parser.error("expected the training command after --, as in: best.json -- python train.py")
    seed = random.randrange(2**31) if args.seed is None else args.seed
    command = argv[split + 1:]
    best = json.loads(open(args.best).read())
    plain = command
    tuned = [sys.executable, "-m", "fitspeed", "run", args.best, "--", *command]
    ratios = []
    for pair in range(args.pairs):
        first = "B" if pair_order(seed, "script_run_check", pair) else "A"  # a coin for each block of two pairs
        runs = {side: run(plain if side == "A" else tuned) for side in (first, "B" if first == "A" else "A")}
        (a, a_wall, a_code), (b, b_wall, b_code) = runs["A"], runs["B"]
        ratio = a / b if a and b else None
        if ratio:
            ratios.append(ratio)
        print(f"pair {pair + 1} ({first}{'B' if first == 'A' else 'A'}): as is {a} ms/step ({a_wall:.0f} s, exit {a_code}); "
              f"fitspeed run {b} ms/step ({b_wall:.0f} s, exit {b_code}); speed-up {ratio and round(ratio, 3)}",
              flush=True)
    verified = (best.get("best") or {}).get("estimate") or (best.get("verification") or {}).get("estimate") or {}
    print(f"knobs: {best.get('knobs')}")
    if ratios:
        print(f"speed-up of the full runs: median {statistics.median(ratios):.3f} over {len(ratios)} pairs "
              f"({', '.join(f'{r:.3f}' for r in ratios)})")
    if verified:
        low, high = verified.get("ci_low"), verified.get("ci_high")
        print(f"tune's verified interval: {verified.get('median'):.3f} ({low:.3f}-{high:.3f})")
        if ratios:
            inside = low <= statistics.median(ratios) <= high
            print(f"within the interval: {'yes' if inside else 'NO'}")


if __name__ == "__main__":
    main()
