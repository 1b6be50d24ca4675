"""A guard run built before fit() against a plain fit(): time, and the same training, in interleaved pairs.

    python benchmarks/guard_build_first.py --models tiny,cnn10-s --pairs 3 --json

Each pair is the guard's train-mode run of a model (`guard.guard_spec`, the
defaults at the guard's first seed), once as the guard runs it now
(`build_first`: the training state built from one batch's shapes, so the
train step is traced once, `fitspeed.trial.keras_build`) and once as a plain
fit() (built in the step's first trace, so traced twice), each in its own
trial process as the tuner starts them (`measure.runner.run_trial`), in a
random order per pair. It prints per model the median over pairs of the
built run's fit() time (the build included) over the plain one's, with the
range, the same for the trial process's wall time, and whether every pair
trained to the same loss curve and held-out loss. The ratios are measured
in one run, pair by pair: the machine's load moves absolute figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure.runner import run_trial
from fitspeed.search import guard


def pair(model: str, rng: random.Random) -> dict[str, TrialRecord]:
    built = guard.guard_spec(TrialSpec(model=model), TrialConfig())
    arms = {"built": built, "plain": dataclasses.replace(built, build_first=False)}
    order = list(arms)
    rng.shuffle(order)
    return {arm: run_trial(arms[arm]) for arm in order}


def summary(model: str, pairs: list[dict[str, TrialRecord]]) -> dict[str, object]:
    for done in pairs:
        for arm, record in done.items():
            if record.status != Status.OK:
                raise SystemExit(f"{model} {arm}: {record.status} {record.reason}")

    def ratios(figure: str) -> list[float]:
        def of(record: TrialRecord) -> float:
            return float(record.measured("fit_s") if figure == "fit_s" else record.wall_s or 0.0)
        return [of(p["built"]) / of(p["plain"]) for p in pairs]

    def same(p: dict[str, TrialRecord]) -> bool:
        built, plain = (guard.GuardRun.from_record(p[arm]) for arm in ("built", "plain"))
        return (built.curve, built.val_loss, built.val_accuracy) == (plain.curve, plain.val_loss, plain.val_accuracy)

    out: dict[str, object] = {"model": model, "pairs": len(pairs), "same_training": all(same(p) for p in pairs)}
    for figure in ("fit_s", "wall_s"):
        values = ratios(figure)
        out[f"{figure}_ratio_median"] = round(statistics.median(values), 3)
        out[f"{figure}_ratio_range"] = [round(min(values), 3), round(max(values), 3)]
    out["plain_fit_s_median"] = round(statistics.median(float(p["plain"].measured("fit_s")) for p in pairs), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="tiny,cnn10-s")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="the order of each pair's two runs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows = [summary(model, [pair(model, rng) for _ in range(args.pairs)]) for model in args.models.split(",")]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    for row in rows:
        print(f"{row['model']}: built/plain fit() {row['fit_s_ratio_median']} (range {row['fit_s_ratio_range']}), "
              f"trial wall {row['wall_s_ratio_median']} (range {row['wall_s_ratio_range']}) over {row['pairs']} "
              f"pairs; plain fit() {row['plain_fit_s_median']} s; same training: {row['same_training']}")


if __name__ == "__main__":
    main()
