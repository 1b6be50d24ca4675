"""What the script hook costs: the same model timed as a script and as module:function.

    python benchmarks/script_overhead.py [--pairs 10] [--steps 64] [--repeats 3]

Each pair runs the module:function trial (A) and then the script trial (B),
each in a fresh process, on the same model, data, batch size and compile
arguments (`script_overhead_workload.py` is both). Prints every pair's
samples/s side by side, then B/A with its 95% interval: the hook may cost at
most 2%, so the interval's low end should be 0.98 or more.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialRecord, TrialSpec
from fitspeed.machine import environment
from fitspeed.measure import training_command
from fitspeed.measure.comparison import interleave
from fitspeed.measure.runner import run_trial

HERE = Path(__file__).parent.absolute()
WORKLOAD = HERE / "script_overhead_workload.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], help="knob name=value for both arms")
    parser.add_argument("--statistic", choices=("median", "best"), default="median",
                        help="each trial's median window, or its fastest (steadier on a loaded machine)")
    parser.add_argument("--until-width", type=float, default=None, help="add pairs until the interval is this narrow")
    parser.add_argument("--max-pairs", type=int, default=40)
    args = parser.parse_args()

    config = TrialConfig.from_assignments(args.set)
    common = {"config": config, "steps": args.steps, "repeats": args.repeats}
    builder = TrialSpec(model="script_overhead_workload:build", data="script_overhead_workload:data", **common)
    described = training_command.describe([sys.executable, str(WORKLOAD)])
    scripted = TrialSpec(model=training_command.label(described), data=training_command.DATA, script=described, **common)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    started = time.perf_counter()
    print(f"{'pair':>4}  {'module:function':>16}  {'script':>10}  {'script/module':>13}", flush=True)
    seen: dict[int, float] = {}

    def show(arm: str, record: TrialRecord) -> None:
        pair, speed = record.extra["pair"], record.throughput
        if arm == "a":
            seen[pair] = speed or 0.0
            return
        a = seen.get(pair) or 0.0
        ratio = f"{speed / a:.3f}" if speed and a else record.reason
        print(f"{pair + 1:>4}  {a:>16,.0f}  {speed or 0:>10,.0f}  {ratio:>13}", flush=True)

    comparison = interleave(builder, scripted, args.pairs, run=lambda spec: run_trial(spec, env=env), on_trial=show,
                            statistic=args.statistic, until_width=args.until_width, max_pairs=args.max_pairs)
    estimate = comparison.estimate()
    host = environment.host()
    print()
    print(f"machine: {host['cpu']} ({host['cpu_count']} cores), fitspeed {host['fitspeed']}")
    print(f"{len(comparison.pairs)} interleaved pairs, {args.steps} steps x {args.repeats} repeats per trial, "
          f"{config.label()}, by each trial's {args.statistic} window")
    if estimate is None:
        print("no pair finished ok")
        return
    print(f"script / module:function: median {estimate.median:.4f}, 95% CI {estimate.low:.4f}-{estimate.high:.4f}")
    print(f"hook cost {100 * (1 - estimate.median):.1f}% at the median; a cost over 2% is ruled out: "
          f"{'yes' if estimate.low >= 0.98 else 'NO'} (the interval's low end is {estimate.low:.4f})")
    print(f"wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
