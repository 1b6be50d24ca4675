"""A/A test: compare a configuration with itself; the interval must contain 1.

    python benchmarks/null_test.py [--model tiny] [--pairs 10] [--steps N] [--repeats 3]

Prints every pair's ratio, the median ratio, its 95% interval and the
interval's width: the smallest speed-up `fitspeed compare` can tell from noise
on this machine with these settings.
"""

from __future__ import annotations

import argparse
import time

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialSpec
from fitspeed.machine import environment
from fitspeed.measure.comparison import interleave


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=None, help="timed steps per repeat [default: about 1 s]")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], help="knob name=value for both arms")
    args = parser.parse_args()

    config = TrialConfig.from_assignments(args.set)
    spec = TrialSpec(model=args.model, config=config, steps=args.steps, repeats=args.repeats)
    started = time.perf_counter()

    def show(arm: str, pair: int, record: dict) -> None:
        speed = record["metrics"]["samples_per_s"]["median"] if record["status"] == "ok" else None
        print(f"pair {pair + 1:2d} {arm}: {record['status']:7s} {speed or 0:10.0f} samples/s", flush=True)

    comparison = interleave(spec, spec, args.pairs, on_trial=show)
    estimate = comparison.estimate()
    host = environment.host()
    print()
    print(f"machine: {host['cpu']} ({host['cpu_count']} cores), fitspeed {host['fitspeed']}")
    print(f"A = B = {args.model} {config.label()}, {args.pairs} pairs, "
          f"{args.steps or 'about 1 s of'} steps x {args.repeats} repeats per trial")
    if estimate is None:
        print("no pair finished ok")
        return
    print("ratios B/A: " + " ".join(f"{r:.3f}" for r in estimate.ratios))
    print(f"median ratio {estimate.median:.4f}, 95% CI {estimate.low:.4f}-{estimate.high:.4f}, "
          f"width {estimate.high - estimate.low:.4f}")
    print(f"interval contains 1: {'yes' if estimate.low <= 1 <= estimate.high else 'NO'}")
    print(f"verdict: {comparison.verdict()}")
    print(f"wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
