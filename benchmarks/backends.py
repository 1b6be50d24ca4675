"""Samples/s of each Keras backend, alone and with its own knobs, against TensorFlow's defaults, in one interleaved run.

    python benchmarks/backends.py                     # tiny, mlp, attention, cnn10, examples/mnist_convnet.py
    python benchmarks/backends.py --rounds 2 --workloads tiny,attention
    python benchmarks/backends.py --rounds 0 --guard-seeds 1 --workloads cnn10   # the guard alone

For each workload it runs rounds: in each round every arm once (TensorFlow's
defaults, then each installed backend alone and with its own knobs, the
values `fitspeed tune`'s screen tries on top of it), each trial a fresh
process, in a random order per round (seeded). Each arm's ratio to the
TensorFlow trial of the same round gives B/A with its 95% interval
(`fitspeed.core.stats.ratio_estimate`, as `fitspeed compare`). Then the
numerics guard (`fitspeed.search.guard`) judges each backend against
TensorFlow as the tuner's guard does: train-mode runs at the first seed, and
at every seed where the first does not settle it. Knobs that do not change
numerics (steps_per_execution, threads) are reset for the guard, so a backend
alone and with its knobs share one verdict. It prints one Markdown row per
arm, as it goes. The figures are ratios measured in one run on a shared,
noisy machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
from pathlib import Path
from typing import Any

from fitspeed.cli.workload import WorkloadOptions
from fitspeed.core.record import Status, TrialSpec
from fitspeed.core.stats import ratio_estimate
from fitspeed.measure.runner import run_trial
from fitspeed.search import guard

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = [sys.executable, str(ROOT / "examples" / "mnist_convnet.py"), "--synthetic", "--epochs", "2"]
WORKLOADS: dict[str, tuple[str, list[str], list[str] | None]] = {  # name: (model, --set, script)
    "tiny": ("tiny", [], None),
    "mlp": ("mlp", [], None),
    "attention": ("attention", [], None),
    "cnn10": ("cnn10", ["batch_size=128"], None),
    "mnist_convnet.py": (SCRIPT[0], [], SCRIPT),
}
# The most guard seeds, where the tuner's 5 to 10 seeds of train-mode runs would take most of the run's ten
# minutes; none for cnn10, whose guard run (4 x 64 steps at batch 128) alone takes minutes on 2 cores
GUARD_SEEDS = {"cnn10": 0, "mnist_convnet.py": 1}
# Each backend's own knobs at the values the screen tries first on top of it (`fitspeed knobs`, second table);
# steps_per_execution at 8, not 64, so that a timed window of cnn10 stays within a few seconds.
OWN_KNOBS = {
    "jax": ["steps_per_execution=8"],
    "torch": ["intra_op_threads=1", "inter_op_threads=1"],
}


def specs(name: str, repeats: int) -> dict[str, TrialSpec]:
    model, settings, script = WORKLOADS[name]
    workload = WorkloadOptions(workload=script[0] if script else model, command=script[1:] if script else None,
                               set_=settings, repeats=repeats).resolve()
    arms = {"tensorflow": []} | {b: [f"backend={b}"] for b in backends()} \
        | {f"{b} + own knobs": [f"backend={b}", *OWN_KNOBS[b]] for b in backends()}
    return {arm: workload.spec(knobs) for arm, knobs in arms.items()}


def backends() -> list[str]:
    return [name for name in ("jax", "torch") if importlib.util.find_spec(name) is not None]


def guard_verdict(base: TrialSpec, candidate: TrialSpec, baseline_runs: dict[int, guard.GuardRun],
                  most: int) -> str:
    """The guard's verdict on `candidate` against `base`, by the tuner's rule (`guard.seeds_needed`, `guard.judge`).

    `most` caps the seeds (the run's time); a verdict on fewer seeds than the rule asks for says so.
    """
    def run(spec: TrialSpec, seed: int) -> guard.GuardRun:
        return guard.GuardRun.from_record(run_trial(guard.guard_spec(spec, base.config, seed)))

    def runs(seeds: tuple[int, ...], found: list[guard.GuardRun]) -> list[guard.GuardRun]:
        for seed in seeds[len(found):]:
            baseline_runs.setdefault(seed, run(base, seed))
            if not guard.stop_early(found):
                found.append(run(candidate, seed))
        return found

    first = guard.seeds(base)[:most]
    candidate_runs = runs(first, [])
    needed = guard.seeds_needed([baseline_runs[s] for s in first], candidate_runs)
    every = guard.seeds(base, min(needed, most))
    candidate_runs = runs(every, candidate_runs)
    verdict = guard.judge([baseline_runs[s] for s in every], candidate_runs, script=candidate.script is not None)
    short = (f" (on {len(every)} seeds of the {needed} the tuner's rule asks for)"
             if len(every) < needed and not guard.stop_early(candidate_runs) else "")
    return ("passed" if verdict.ok else "failed") + short + ": " + verdict.reason


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2, help="timed windows per trial")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--no-guard", action="store_true")
    parser.add_argument("--guard-seeds", type=int, default=None,
                        help="the most guard seeds on every workload (default: GUARD_SEEDS, else the tuner's "
                             f"{guard.MAX_SEEDS}); "
                             "with --rounds 0, the guard alone")
    args = parser.parse_args()
    print("| workload | arm | samples/s (median) | B/A against TensorFlow (95% CI) | guard | ")
    print("|---|---|---|---|---|")
    shuffle = random.Random(0)
    for name in args.workloads.split(","):
        arms = specs(name, args.repeats)
        speeds: dict[str, list[float | None]] = {arm: [] for arm in arms}
        failures: dict[str, str] = {}
        for _ in range(args.rounds):
            order = list(arms)
            shuffle.shuffle(order)
            for arm in order:
                record = run_trial(arms[arm])
                speeds[arm].append(record.throughput)
                if record.status != Status.OK:
                    failures[arm] = f"{record.status}: {record.reason}"
        verdicts: dict[str, str] = {}
        baseline_runs: dict[int, Any] = {}
        seeds = GUARD_SEEDS.get(name, guard.MAX_SEEDS) if args.guard_seeds is None else args.guard_seeds
        for backend in backends():
            if not seeds:
                verdicts[backend] = "not run: its train-mode runs take minutes each on 2 cores"
            elif not args.no_guard:
                verdicts[backend] = guard_verdict(arms["tensorflow"], arms[backend], baseline_runs, seeds)
        for arm, values in speeds.items():
            ok = [v for v in values if v]
            median = f"{statistics.median(ok):,.0f}" if ok else "–"
            ratios = [b / a for a, b in zip(speeds["tensorflow"], values, strict=True) if a and b]
            if arm == "tensorflow":
                shown = "1 (the reference)"
            elif len(ratios) >= 2:
                estimate = ratio_estimate(ratios)
                shown = f"{estimate.median:.2f}× ({estimate.low:.2f}–{estimate.high:.2f})"
            else:
                shown = f"– ({failures.get(arm, 'too few rounds')})"
            verdict = verdicts.get(arm.split(" ")[0], "the reference" if arm == "tensorflow" else "–")
            knobs = arms[arm].config.label()
            print(f"| {name} | {arm}: `{knobs}` | {median} | {shown} | {verdict} |", flush=True)


if __name__ == "__main__":
    main()
