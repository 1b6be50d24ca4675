"""The tuner against the full grid on a small space.

    python benchmarks/tuner_vs_grid.py [--model mlp] [--steps 64] [--repeats 3] [--pairs 3]
        [--grid steps_per_execution=1,16,64 --grid precision=float32,mixed_bfloat16]
        [--save benchmarks/scenarios/NAME.json] [--grid-only]

1. The grid: every combination of steps_per_execution in {1, 64, 16, 4},
   jit_compile in {auto, true} and intra_op_threads in {0 (default), 1}
   (16 configurations), one trial each; `--grid knob=v1,v2,...` (repeated)
   measures those knobs and values instead. Each knob's first value should be
   its default, so that the grid holds the defaults.
2. The tuner, in a fresh SQLite study, with a third of the grid's trials.
3. The grid's best and the tuner's answer (its verified configuration, or the defaults
   when it claims nothing), measured again interleaved in
   `--pairs` pairs, so the two are compared in one run, not across runs.

Prints the tuner's best throughput as a fraction of the grid's best.

`--save PATH` writes the grid as a scenario file for
`benchmarks/search_simulation.py` (schema below); `--grid-only` stops after
the grid, skipping steps 2 and 3. The file is one JSON object:
`{"schema": 1, "kind": "fitspeed-grid", "model", "steps", "repeats",
"knobs": {knob: [values...]}, "cells": [{"knobs": {knob: value}, "status",
"samples_per_s"}], "host": environment.host(), "recorded": ISO time,
"load_average": {"before", "after"}}` (the 1-minute load average as the grid
started and ended: a figure measured beside other work is slower).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialRecord, TrialSpec
from fitspeed.machine import environment
from fitspeed.measure.comparison import interleave
from fitspeed.measure.runner import run_trial
from fitspeed.search.budget import budget_plan
from fitspeed.search.events import TrialFinished, TuneEvent
from fitspeed.search.tuner import Tuner, TuneSettings

GRID = {"steps_per_execution": (1, 64, 16, 4),  # the tuner tries the most promising first
        "jit_compile": ("auto", True), "intra_op_threads": (0, 1)}


def parse_grid(texts: list[str]) -> dict[str, tuple[object, ...]]:
    """`knob=v1,v2,...` strings as a grid, each value parsed by its knob.

    >>> parse_grid(["steps_per_execution=1,16", "jit_compile=auto,true"])
    {'steps_per_execution': (1, 16), 'jit_compile': ('auto', True)}
    """
    grid: dict[str, tuple[object, ...]] = {}
    for text in texts:
        name, _, values = text.partition("=")
        if not values:
            raise SystemExit(f"Expected --grid knob=v1,v2,... Received: {text!r}. "
                             "Use for example --grid steps_per_execution=1,16,64.")
        grid[name.strip()] = tuple(getattr(TrialConfig.from_dict({name.strip(): v}), name.strip())
                                   for v in values.split(","))
    return grid


def save_grid(path: Path, model: str, steps: int, repeats: int, grid: Mapping[str, tuple[object, ...]],
              cells: list[tuple[TrialConfig, TrialRecord]], load_before: float) -> None:
    """Write the measured grid as a scenario file (see the module docstring)."""
    record = {
        "schema": 1,
        "kind": "fitspeed-grid",
        "model": model,
        "steps": steps,
        "repeats": repeats,
        "knobs": {name: list(values) for name, values in grid.items()},
        "cells": [{"knobs": {name: getattr(config, name) for name in grid},
                   "status": result.status,
                   "samples_per_s": result.throughput}
                  for config, result in cells],
        "host": environment.host(),
        "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_average": {"before": load_before, "after": os.getloadavg()[0]},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--grid", action="append", default=[], metavar="KNOB=V1,V2",
                        help="a knob and its values to measure (repeat it); default: the grid above")
    parser.add_argument("--save", type=Path, help="write the grid as a scenario file for search_simulation.py")
    parser.add_argument("--grid-only", action="store_true", help="measure the grid and stop (no tuner)")
    args = parser.parse_args()
    started = time.perf_counter()
    space = parse_grid(args.grid) if args.grid else GRID
    load_before = os.getloadavg()[0]

    def spec(config: TrialConfig) -> TrialSpec:  # --steps rounded to whole executions, as the tuner rounds it
        steps = TuneSettings(model=args.model, steps=args.steps).steps_for(config)
        return TrialSpec(model=args.model, config=config, steps=steps, repeats=args.repeats)

    grid = []
    for values in itertools.product(*space.values()):
        config = TrialConfig.from_dict(dict(zip(space, values)))
        record = run_trial(spec(config))
        grid.append((config, record))
        print(f"grid  {config.label():55s} {record.status:7s} {record.throughput or 0:10.0f}", flush=True)
    grid_best = max(grid, key=lambda item: item[1].throughput or 0.0)[0]
    if args.save:
        save_grid(args.save, args.model, args.steps, args.repeats, space, grid, load_before)
        print(f"saved {len(grid)} cells to {args.save}")
    if args.grid_only:
        host = environment.host()
        print(f"grid: {len(grid)} trials, best {grid_best.label()}")
        print(f"machine: {host['cpu']} ({host['cpu_count']} cores), fitspeed {host['fitspeed']}")
        print(f"wall time {time.perf_counter() - started:.0f} s")
        return

    budget = len(grid) // 3
    with tempfile.TemporaryDirectory() as folder:
        settings = TuneSettings(
            model=args.model, trials=budget, storage=f"sqlite:///{Path(folder) / 'study.db'}",
            steps=args.steps, repeats=args.repeats, pairs=2,
            knobs=tuple(space), space=tuple(f"{k}={','.join(map(str, v))}" for k, v in space.items()),
        )
        # a third of a small grid may not pay for an answer, which the tuner refuses: it gets the least that does
        probe = Tuner(replace(settings, screen_only=True, storage=f"sqlite:///{Path(folder) / 'probe.db'}"))
        smallest = budget_plan(probe.dims, budget, settings.pairs)["smallest"]
        if budget < smallest:
            print(f"tuner: a third of the grid, {budget} trials, cannot pay for an answer: {smallest}, the least that can")
            budget = smallest
            settings = replace(settings, trials=budget)
        def show(event: TuneEvent) -> None:
            if isinstance(event, TrialFinished):
                record = event.record
                print(f"tuner {record.spec.config.label():55s} {record.status:7s} {record.throughput or 0:10.0f}",
                      flush=True)

        answer = Tuner(settings, on_event=show).run()  # the study's answer: the verified one, or the defaults
        tuner_best = TrialConfig.from_dict(answer["config"]) if answer.get("claimed") else TrialConfig()

    print()
    print(f"grid: {len(grid)} trials, best {grid_best.label()}")
    print(f"tuner: {budget} trials, best {tuner_best.label()}")
    if tuner_best == grid_best:
        fraction, note = 1.0, "same configuration"
    else:
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
