"""What the script hook costs: the same model timed as a script and as module:function.

    python benchmarks/script_overhead.py [--pairs 10] [--steps 64] [--repeats 3]

Each pair runs the module:function trial (A) and the script trial (B), in
the random order `interleave` gives each pair (AB, BA, AB, ...), each in a
fresh process, on the same model, data, batch size and compile arguments
(`script_overhead_workload.py` is both). Prints every pair's samples/s side
by side, by `--statistic`, once both of its trials ran, then B/A with its 95%
interval: the hook may cost at most 2%, so the interval's low end should be
0.98 or more.
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
from fitspeed.measure.comparison import interleave, speed
from fitspeed.measure.runner import run_trial

HERE = Path(__file__).parent.absolute()
WORKLOAD = HERE / "script_overhead_workload.py"


def pair_line(pair: int, a: TrialRecord, b: TrialRecord, statistic: str) -> str:
    """One pair's row: each arm's samples/s by `statistic` (0 where it has none) and B/A, or why there is no ratio.

    >>> from fitspeed.core.record import Status, new_record
    >>> ok = lambda median: new_record(TrialSpec(model="m"), Status.OK, metrics={"samples_per_s": {"median": median}})
    >>> pair_line(0, ok(1000.0), ok(980.0), "median")
    '   1             1,000         980          0.980'
    >>> pair_line(2, ok(1000.0), new_record(TrialSpec(model="m"), Status.CRASHED, reason="exit -9"), "median")
    '   3             1,000           0     b: exit -9'
    """
    speeds = speed(a, statistic), speed(b, statistic)
    if speeds[0] and speeds[1]:
        ratio = f"{speeds[1] / speeds[0]:.3f}"
    else:
        ratio = "; ".join(f"{arm}: {r.reason or r.status}" for arm, r, figure in zip("ab", (a, b), speeds) if not figure)
    return f"{pair + 1:>4}  {speeds[0] or 0:>16,.0f}  {speeds[1] or 0:>10,.0f}  {ratio:>13}"


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
    if args.pairs < 2:
        parser.error(f"--pairs must be at least 2: one pair gives no interval. Received: {args.pairs}.")

    config = TrialConfig.from_assignments(args.set)
    common = {"config": config, "steps": args.steps, "repeats": args.repeats}
    builder = TrialSpec(model="script_overhead_workload:build", data="script_overhead_workload:data", **common)
    described = training_command.describe([sys.executable, str(WORKLOAD)])
    scripted = TrialSpec(model=training_command.label(described), data=training_command.DATA, script=described, **common)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    started = time.perf_counter()
    print(f"{'pair':>4}  {'module:function':>16}  {'script':>10}  {'script/module':>13}", flush=True)
    landed: dict[int, dict[str, TrialRecord]] = {}

    def show(arm: str, record: TrialRecord) -> None:
        index = record.extra["pair"]
        both = landed.setdefault(index, {})
        both[arm] = record
        if len(both) == 2:
            print(pair_line(index, both["a"], both["b"], args.statistic), flush=True)

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
