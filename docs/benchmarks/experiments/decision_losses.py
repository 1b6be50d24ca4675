"""Where a change that helps is lost, decision by decision: how the 2026-11-29 (morning) development note was measured.

    PYTHONPATH=$TREE/src python docs/benchmarks/experiments/decision_losses.py --first 3011600 --worlds 1200 \
        --out decisions.json

Runs `benchmarks/search_diagnosis.py`'s studies (the real `Tuner` on drawn
worlds, CV 10%, `--trials 40`), keeps every decision with the true ratio of
its two sides, and prints, by (purpose, verdict, pairs), how many decisions
did not keep a change worth 1.10x or more (with the sum of those changes' log
ratios, the speed at stake), and how many kept one worth under 0.97x, with
the trial processes each purpose took a study. Development seeds only.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import multiprocessing
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

import optuna  # noqa: E402
import search_diagnosis as diagnosis  # noqa: E402
import search_simulation as sim  # noqa: E402

from fitspeed.core.config import TrialConfig  # noqa: E402
from fitspeed.search import tuner as tuner_module  # noqa: E402


def one(seed: int) -> dict[str, Any]:
    """World `seed`'s study, run as `search_diagnosis.trace` runs it: every decision with its truth."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    sim.pretend_cpu_host()
    scenario = sim.draw_world(seed).scenario
    noise, cv = scenario.noise, 0.10
    rng = random.Random(f"{seed}/{scenario.name}/{cv}")
    machine = sim.FakeMachine(scenario, cv, rng, rng.random() < sim._own_or(noise.first_outlier, 0.25, ""),
                              sim._own_or(noise.outliers, 0.02, ""), sim._own_or(noise.slot_bias, 1.04, ""))
    settings = tuner_module.TuneSettings(trials=40, storage=optuna.storages.InMemoryStorage(),  # type: ignore[arg-type]
                                         seed=seed, steps=64, repeats=3, **scenario.settings("tiny"))
    tuner = tuner_module.Tuner(settings, run=machine)
    tuner.run()
    decisions = []
    for d in tuner.decisions():
        a, b = scenario.value(d.a), scenario.value(d.b)
        decisions.append({"purpose": d.purpose.value, "verdict": d.verdict.value, "pairs": len(d.pairs),
                          "ratio": d.ratio, "true": b / a if a else 0.0,
                          "a": diagnosis._changed(d.a), "b": diagnosis._changed(d.b)})
    return {"seed": seed, "decisions": decisions}


def table(rows: list[dict[str, Any]]) -> str:
    lost: collections.Counter[tuple[str, str, int]] = collections.Counter()
    at_stake: collections.Counter[tuple[str, str, int]] = collections.Counter()
    kept_slower: collections.Counter[tuple[str, str, int]] = collections.Counter()
    every: collections.Counter[tuple[str, str, int]] = collections.Counter()
    trials: collections.Counter[str] = collections.Counter()
    for row in rows:
        for d in row["decisions"]:
            key = (d["purpose"], d["verdict"], d["pairs"])
            every[key] += 1
            if d["purpose"] != "screen":  # a screen "decision" is one sweep trial against the baselines' median
                trials[d["purpose"]] += 2 * d["pairs"]
            if d["true"] >= 1.10 and d["verdict"] != "faster":
                lost[key] += 1
                at_stake[key] += math.log(d["true"])
            if d["true"] < 0.97 and d["verdict"] == "faster":
                kept_slower[key] += 1
    lines = ["| purpose, verdict, pairs | changes worth >= 1.10x not kept | sum of their log ratios | decisions |",
             "|---|---|---|---|"]
    for key in sorted(lost, key=lambda k: -at_stake[k])[:12]:
        lines.append(f"| {', '.join(map(str, key))} | {lost[key]} | {at_stake[key]:.2f} | {every[key]} |")
    lines += ["", "| purpose, verdict, pairs | changes worth < 0.97x kept | decisions |", "|---|---|---|"]
    lines += [f"| {', '.join(map(str, k))} | {n} | {every[k]} |" for k, n in kept_slower.most_common(8)]
    lines += ["", "trial processes a study in decisions' pairs: "
              + ", ".join(f"{p} {n / len(rows):.1f}" for p, n in trials.most_common())]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first", type=int, default=3_011_600, help="the first development world's seed")
    parser.add_argument("--worlds", type=int, default=1200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with multiprocessing.Pool(args.jobs) as pool:
        rows = pool.map(one, range(args.first, args.first + args.worlds), chunksize=4)
    if args.out:
        args.out.write_text(json.dumps(rows))
    print(table(rows))


if __name__ == "__main__":
    main()
