"""The tuner against the full grid on a small space.

    python benchmarks/tuner_vs_grid.py [--model mlp] [--steps 64] [--repeats 3] [--pairs 3]

1. The grid: every combination of steps_per_execution in {1, 64, 16, 4},
   jit_compile in {auto, true} and intra_op_threads in {0 (default), 1}
   (16 configurations), one trial each.
2. The tuner, in a fresh SQLite study, with a third of the grid's trials.
3. The grid's best and the tuner's best, measured again interleaved in
   `--pairs` pairs, so the two are compared in one run, not across runs.

Prints the tuner's best throughput as a fraction of the grid's best.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialSpec, throughput
from fitspeed.machine import environment
from fitspeed.measure.comparison import interleave
from fitspeed.measure.runner import run_trial
from fitspeed.search.events import TrialFinished, TuneEvent
from fitspeed.search.tuner import Tuner, TuneSettings

GRID = {"steps_per_execution": (1, 64, 16, 4),  # the tuner tries the most promising first
        "jit_compile": ("auto", True), "intra_op_threads": (0, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()

    grid = []
    for values in itertools.product(*GRID.values()):
        config = TrialConfig.from_dict(dict(zip(GRID, values)))
        record = run_trial(TrialSpec(model=args.model, config=config, steps=args.steps, repeats=args.repeats))
        grid.append((config, record))
        print(f"grid  {config.label():55s} {record['status']:7s} {throughput(record) or 0:10.0f}", flush=True)
    grid_best = max(grid, key=lambda item: throughput(item[1]) or 0.0)[0]

    budget = len(grid) // 3
    with tempfile.TemporaryDirectory() as folder:
        settings = TuneSettings(
            model=args.model, trials=budget, storage=f"sqlite:///{Path(folder) / 'study.db'}",
            steps=args.steps, repeats=args.repeats, pairs=2,
            knobs=tuple(GRID), space=tuple(f"{k}={','.join(map(str, v))}" for k, v in GRID.items()),
        )
        def show(event: TuneEvent) -> None:
            if isinstance(event, TrialFinished):
                record = event.record
                print(f"tuner {TrialConfig.from_dict(record['spec']['knobs']).label():55s} "
                      f"{record['status']:7s} {throughput(record) or 0:10.0f}", flush=True)

        tuner = Tuner(settings, on_event=show)
        tuner.run()
        ranked = tuner.candidates()
        tuner_best = ranked[0][0] if ranked else TrialConfig()

    print()
    print(f"grid: {len(grid)} trials, best {grid_best.label()}")
    print(f"tuner: {budget} trials, best {tuner_best.label()}")
    if tuner_best == grid_best:
        fraction, note = 1.0, "same configuration"
    else:
        spec = lambda config: TrialSpec(model=args.model, config=config, steps=args.steps,  # noqa: E731
                                        repeats=args.repeats)
        comparison = interleave(spec(grid_best), spec(tuner_best), args.pairs)
        estimate = comparison.estimate()
        fraction = estimate.median if estimate else float("nan")
        note = (f"interleaved in {args.pairs} pairs, 95% CI {estimate.low:.3f}-{estimate.high:.3f}"
                if estimate else "no pair finished")
    host = environment.host()
    print(f"machine: {host['cpu']} ({host['cpu_count']} cores), fitspeed {host['fitspeed']}")
    print(f"tuner's best throughput as a fraction of the grid's best: {fraction:.3f} ({note})")
    print(f"wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
