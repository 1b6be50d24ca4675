"""A/A test: compare a configuration with itself; the interval must contain 1.

    python benchmarks/null_test.py [--model tiny] [--pairs 10] [--steps N] [--repeats 3]
        [--window 1.0] [--statistic mean|median|best] [--until-width W --max-pairs N] [--cpus 0,1] [--budget S]
        [--sequential]

Each pair is one lockstep round (`fitspeed.measure.rounds`: A's and B's
processes alive together, timed window by window in turns), as `fitspeed
compare` measures it; `--sequential` runs A's trial and then B's instead.

Prints every pair's ratio, the median ratio, its 95% interval and the
interval's width: the smallest speed-up `fitspeed compare` can tell from noise
on this machine with these settings. The same pairs are summarised by each
statistic (each trial's figure, the geometric mean of its windows; their
median; and its fastest window), so one run compares them; `--statistic` picks the one `--until-width` stops on.
`--cpus` pins the trial processes to those CPUs (they inherit this process's
affinity).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from typing import Any

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialRecord, TrialSpec
from fitspeed.core.stats import ratio_estimate
from fitspeed.machine import environment
from fitspeed.measure.comparison import STATISTICS, interleave, speed
from fitspeed.measure.rounds import Round, Rounds


class OutOfTime(Exception):
    """The --budget is spent: summarise the pairs that finished."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--pairs", type=int, default=10, help="pairs to run (the least, with --until-width)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per window [default: --window seconds]")
    parser.add_argument("--window", type=float, default=1.0, help="seconds per timed window when --steps is not given")
    parser.add_argument("--repeats", type=int, default=3, help="timed windows per trial")
    parser.add_argument("--statistic", choices=STATISTICS, default="mean")
    parser.add_argument("--until-width", type=float, default=None, help="add pairs until the interval is this narrow")
    parser.add_argument("--max-pairs", type=int, default=40)
    parser.add_argument("--cpus", default=None, help="pin the trial processes to these CPUs, such as 1 or 0,1")
    parser.add_argument("--budget", type=float, default=None, help="seconds; start no trial after this")
    parser.add_argument("--set", action="append", default=[], help="knob name=value for both arms")
    parser.add_argument("--sequential", action="store_true", help="A's trial, then B's: no lockstep rounds")
    args = parser.parse_args()

    if args.cpus:
        os.sched_setaffinity(0, {int(cpu) for cpu in args.cpus.split(",")})
    config = TrialConfig.from_assignments(args.set)
    spec = TrialSpec(model=args.model, config=config, steps=args.steps, repeats=args.repeats,
                     target_seconds=args.window)
    started = time.perf_counter()

    def show(arm: str, pair: int, record: TrialRecord) -> None:
        print(f"pair {pair + 1:2d} {arm}: {record.status:7s} mean {speed(record) or 0:8.0f} "
              f"median {speed(record, 'median') or 0:8.0f} "
              f"best {speed(record, 'best') or 0:8.0f} samples/s", flush=True)

    landed: dict[int, dict[str, TrialRecord]] = {}

    def keep(arm: str, record: TrialRecord) -> None:
        show(arm, record.extra["pair"], record)
        landed.setdefault(record.extra["pair"], {})[arm] = record

    class Budgeted(Rounds):
        def round(self, specs: Sequence[TrialSpec], first: int = 0, landed: Any = None) -> Round:
            if args.budget and time.perf_counter() - started > args.budget:
                raise OutOfTime
            return super().round(specs, first, landed)

    run = Budgeted(lockstep=not args.sequential)

    stopped = ""
    try:
        comparison = interleave(spec, spec, args.pairs, run=run, on_trial=keep, statistic=args.statistic,
                                until_width=args.until_width, max_pairs=args.max_pairs)
        pairs = comparison.pairs
    except (OutOfTime, KeyboardInterrupt) as why:
        stopped = "the time budget ran out" if isinstance(why, OutOfTime) else "interrupted"
        pairs = [(p["a"], p["b"]) for _, p in sorted(landed.items()) if len(p) == 2]
    host = environment.host()
    print()
    print(f"machine: {host['cpu']} ({host['cpu_count']} cores, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}), fitspeed {host['fitspeed']}")
    window = f"{args.steps} steps" if args.steps else f"about {args.window:g} s"
    print(f"A = B = {args.model} {config.label()}, {len(pairs)} pairs{f' ({stopped})' if stopped else ''}, {window} x {args.repeats} "
          f"windows per trial, CPUs {args.cpus or 'all'}, "
          f"{'sequential pairs' if run.why else 'lockstep rounds'}{f' ({run.why})' if run.why else ''}"
          + (f", until width {args.until_width:g} by {args.statistic} (cap {args.max_pairs})"
             if args.until_width else ""))
    for statistic in STATISTICS:
        ratios = []
        for a, b in pairs:
            sa, sb = speed(a, statistic), speed(b, statistic)
            if sa and sb:
                ratios.append(sb / sa)
        if len(ratios) < 2:
            print(f"{statistic}: fewer than two pairs finished ok")
            continue
        estimate = ratio_estimate(ratios)
        print(f"{statistic:6s}: ratios B/A " + " ".join(f"{r:.3f}" for r in ratios))
        print(f"{statistic:6s}: median ratio {estimate.median:.4f}, 95% CI {estimate.low:.4f}-{estimate.high:.4f}, "
              f"width {estimate.high - estimate.low:.4f}, contains 1: "
              f"{'yes' if estimate.low <= 1 <= estimate.high else 'NO'}")
    print(f"wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
