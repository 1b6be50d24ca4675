"""Trials forked from a fork server against trials in a fresh interpreter: wall time, samples/s, peak memory.

    python benchmarks/warm_start.py [--pairs 8] [--model tiny] [--steps 32] [--backend tensorflow] [--json]
    python benchmarks/warm_start.py --script "examples/mnist_convnet.py --synthetic" [--pairs 8] [--steps 32]

With --script "FILE ARGS" the trial is a user's `python FILE ARGS`
(`fitspeed.trial.warm_script` when forked) instead of a built-in model.

Each pair runs the same trial twice through `fitspeed.measure.runner.run_trial`
in a random order: once forked from the fork server (`fitspeed.measure.warm_start`),
once cold (`FITSPEED_WARM_START=0`). One warm trial runs first so that its
server's import is paid before the pairs. It prints every pair and the
medians of three ratios, warm over cold: a trial's wall time (what a search
saves), its samples/s (must stay about 1: a fork must not change what is
measured; with the t interval `compare` uses) and its peak host memory
(about 1: counted alike).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import statistics
import sys

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialSpec
from fitspeed.core.stats import ratio_estimate
from fitspeed.measure import training_command, warm_start
from fitspeed.measure.runner import run_trial


def once(spec: TrialSpec, warm: bool) -> dict[str, float]:
    os.environ[warm_start.SWITCH] = "1" if warm else "0"
    record = run_trial(spec)
    if record.status != Status.OK or record.warm_start != warm or record.metrics is None:
        raise SystemExit(f"a {'warm' if warm else 'cold'} trial ended {record.status}: {record.reason}")
    return {"wall_s": record.wall_s or 0.0, "samples_per_s": record.throughput or 0.0,
            "peak_host_mb": record.metrics.other["peak_host_mb"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--backend", default="tensorflow")
    parser.add_argument("--script", default=None, help='a training script and its arguments, run as `python FILE ARGS`: "FILE ARGS"')
    parser.add_argument("--seed", type=int, default=None, help="the pair orders' seed (default: random)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    spec = TrialSpec(model=args.model, config=TrialConfig(backend=args.backend), steps=args.steps)
    if args.script:
        script = training_command.describe([sys.executable, *shlex.split(args.script)])
        spec = TrialSpec(model=training_command.label(script), data=training_command.DATA, script=script,
                         config=TrialConfig(backend=args.backend), steps=args.steps)
        args.model = spec.model
    rng = random.Random(args.seed)
    once(spec, warm=True)  # the server's import, paid once before the pairs
    pairs = []
    for index in range(args.pairs):
        order = [True, False]
        rng.shuffle(order)
        pair = {("warm" if warm else "cold"): once(spec, warm) for warm in order}
        pairs.append(pair)
        if not args.json:
            print(f"pair {index + 1} ({'warm first' if order[0] else 'cold first'}): " + ", ".join(
                f"{kind} {p['wall_s']:.2f} s {p['samples_per_s']:,.0f} samples/s {p['peak_host_mb']:.0f} MiB"
                for kind, p in pair.items()), flush=True)
    ratios = {name: statistics.median(p["warm"][name] / p["cold"][name] for p in pairs)
              for name in ("wall_s", "samples_per_s", "peak_host_mb")}
    speed = ratio_estimate([p["warm"]["samples_per_s"] / p["cold"]["samples_per_s"] for p in pairs])
    summary = {"model": args.model, "backend": args.backend, "steps": args.steps, "pairs": pairs,
               "median_warm_over_cold": ratios, "samples_per_s_interval": [speed.low, speed.high],
               "median_wall_s": {kind: statistics.median(p[kind]["wall_s"] for p in pairs) for kind in ("warm", "cold")},
               "load_average": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    print(f"median warm/cold over {args.pairs} pairs ({args.model}, {args.backend}, {args.steps} steps): "
          f"wall time {ratios['wall_s']:.2f}× ({summary['median_wall_s']['warm']:.2f} s against "
          f"{summary['median_wall_s']['cold']:.2f} s), samples/s {ratios['samples_per_s']:.2f}× "
          f"(95% CI {speed.low:.2f}–{speed.high:.2f}), "
          f"peak host memory {ratios['peak_host_mb']:.2f}×")


if __name__ == "__main__":
    main()
