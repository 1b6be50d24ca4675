"""The numerics guard on real training: a numerics change, and a fault that breaks learning.

    PYTHONPATH=examples python benchmarks/guard_check.py --model bn_cnn:model --batch-size 256 \
        --candidate precision=mixed_bfloat16 --fault lr_x100

Trains the baseline at the guard's MAX_SEEDS seeds (`fitspeed.search.guard.seeds`;
`--seeds N` trains N of them, FIRST_SEEDS to twice MAX_SEEDS, and caps the rule's count at N),
then each candidate at the same seeds, each run a real train-mode trial in its
own process, as `fitspeed tune` does for a configuration that changes
numerics; then judges each with `guard.judge` (and `guard.replicate`, where a
failure on the gap alone is replicated and --seeds holds the fresh seeds) on the seeds the tuner's rule
takes (`guard.seeds_needed` on the first FIRST_SEEDS) and prints every run's held-out
loss and accuracy, the verdict and its reason. `--fault lr_x100` adds a
candidate that is the baseline's configuration with its learning rate
multiplied by 100 (the test-only FITSPEED_TEST_FAULT), which the guard must
reject. Nothing here is timed; it takes a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.knobs import get_knob
from fitspeed.core.record import TrialSpec
from fitspeed.measure.runner import run_trial
from fitspeed.search import guard
from fitspeed.trial import faults


def runs(spec: TrialSpec, config: TrialConfig, fault: str | None, count: int) -> list[guard.GuardRun]:
    env = {k: v for k, v in os.environ.items() if k != faults.ENV} | ({faults.ENV: fault} if fault else {})
    out = []
    for seed in guard.seeds(spec, count):
        record = run_trial(guard.guard_spec(dataclasses.replace(spec, config=config), spec.config, seed), env=env)
        out.append(guard.GuardRun.from_record(record))
    return out


def show(label: str, found: list[guard.GuardRun]) -> None:
    for seed, run in enumerate(found):
        accuracy = "–" if run.val_accuracy is None else f"{run.val_accuracy:.3f}"
        print(f"  {label:32s} seed +{seed}: {run.status:6s} held-out loss {run.val_loss}, accuracy {accuracy}, "
              f"final training loss {run.final}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--candidate", action="append", default=[], help="knob=value; repeat for more candidates")
    parser.add_argument("--fault", default=None, help="a learning-rate fault for a baseline candidate, as lr_x100")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=guard.MAX_SEEDS,
                        help=f"seeds each side trains at, {guard.FIRST_SEEDS} to {2 * guard.MAX_SEEDS}: the most the "
                             "guard's rule may take here")
    args = parser.parse_args()
    if not guard.FIRST_SEEDS <= args.seeds <= 2 * guard.MAX_SEEDS:
        parser.error(f"--seeds must be from {guard.FIRST_SEEDS} (the rule's first stage) to {2 * guard.MAX_SEEDS} "
                     "(the rule's most, and as many fresh seeds to replicate a failure). "
                     f"Received: {args.seeds}.")
    started = time.perf_counter()
    base = TrialConfig() if args.batch_size is None else TrialConfig(batch_size=args.batch_size)
    spec = TrialSpec(model=args.model, config=base, seed=args.seed)
    candidates = []  # read before any training: a typo fails at once, not after the baseline's runs
    for text in args.candidate:
        name, _, value = text.partition("=")
        try:
            candidates.append((text, base.replace(**{name: get_knob(name).parse(value)}), None))
        except UserError as error:
            parser.error(f"--candidate {text}: {error}")
    if args.fault:
        try:
            faults.parse(args.fault)
        except ValueError as error:
            parser.error(f"--fault {args.fault}: {error}")
        candidates.append((f"{base.label()} with {faults.ENV}={args.fault}", base, args.fault))
    baseline = runs(spec, base, None, args.seeds)
    print(f"baseline {base.label()} at seeds {guard.seeds(spec, args.seeds)}:")
    show("baseline", baseline)
    for label, config, fault in candidates:
        found = runs(spec, config, fault, args.seeds)
        show(label, found)
        asked = guard.seeds_needed(baseline[:guard.FIRST_SEEDS], found[:guard.FIRST_SEEDS])
        n = min(asked, args.seeds)
        verdict = guard.judge(baseline[:n], found[:n])
        seeds = f" (the rule asks for {asked}; --seeds {args.seeds})" if asked > n else ""
        if asked <= n and guard.replicates(baseline[:n], found[:n], verdict):  # the tuner replicates it on N more
            if 2 * n <= args.seeds:
                verdict = guard.replicate(verdict, baseline[n:2 * n], found[n:2 * n])
                seeds = f" and {n} fresh seeds"
            else:
                seeds = f" (the tuner replicates this failure on {n} fresh seeds; --seeds {args.seeds})"
        print(f"{label}: {'passes' if verdict.ok else 'REJECTED'} on {n} seeds{seeds}: {verdict.reason}")
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
