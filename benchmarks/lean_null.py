"""The lean step where nothing helps: how often its answer still carries a neutral knob, and what it costs.

    python benchmarks/lean_null.py [--studies 300] [--seed-base 0] [--jobs 2] [--json]

The real lean step (`fitspeed.search.lean.Lean`) on the simulator's fake
machine, handed an answer whose knobs do nothing (each an effect of exactly
1.0: the answer is no faster than the defaults), under each noise setting:

- `sequential 10%`: pairs of trials one after another, a 10% trial-to-trial CV;
- `lockstep`: the same machine measured in lockstep rounds, a trial's own share
  of its noise at the simulator's null-world figure (`LOCKSTEP_OWN_NULL`);
- `lockstep with one knob 4x noisier`: as `lockstep`, with every trial of a
  configuration that holds the first knob 4x noisier (unequal spread).

Each answer holds 2, 3 or 4 neutral knobs (a third of the studies each).
Before each lean step the answer and the defaults are measured three times
each, as the step that made the answer the incumbent would have.

Printed per setting: the share of lean steps whose answer still holds a
neutral knob (the bar: at most 5%), holds two or more, with 95% binomial
intervals, and the lean trials a step took. Every knob left in such an answer
is a false share: nothing it carries is faster.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
from pathlib import Path
from typing import Any

import optuna

from fitspeed.core.config import TrialConfig
from fitspeed.core.stats import share_interval
from fitspeed.search.lean import Lean, changed_knobs
from fitspeed.search.phase import Phase
from fitspeed.search.tuner import Tuner, TuneSettings

sys.path.insert(0, str(Path(__file__).parent))
import search_simulation as sim  # noqa: E402

NEUTRAL = ({"inter_op_threads": 1}, {"data_autotune": False}, {"jit_compile": True}, {"onednn": False})
SETTINGS = {
    "sequential 10%": {"own_share": None, "spread": ()},
    "lockstep": {"own_share": sim.LOCKSTEP_OWN_NULL, "spread": ()},
    "lockstep with one knob 4x noisier": {"own_share": sim.LOCKSTEP_OWN_NULL, "spread": ((("inter_op_threads", 1), 4.0),)},
}


def one(job: tuple[str, int]) -> dict[str, Any]:
    """One lean step under setting `name` at `seed`: the knobs its answer kept, and the lean trials it ran."""
    name, seed = job
    setting = SETTINGS[name]
    rng = random.Random(f"lean-null/{seed}")
    knobs = rng.choice((2, 3, 4))
    answer: dict[str, Any] = {}
    for change in NEUTRAL[:knobs]:
        answer.update(change)
    noise = sim.Noise(cv=0.10, drift_share=0.0, slot_bias=1.0, outliers=0.0, first_outlier=0.0,
                      spread=setting["spread"], own_share=setting["own_share"])
    scenario = sim.Scenario(f"lean null, {name}", effects={}, noise=noise)
    machine = sim.FakeMachine(scenario, 0.10, random.Random(seed), False, 0.0, 1.0)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    tuner = Tuner(TuneSettings(trials=40, storage=optuna.storages.InMemoryStorage(), seed=seed, steps=64, repeats=3,
                               **scenario.settings("tiny")), run=machine)
    config = TrialConfig(**answer)
    tuner.ledger.chain_add(config, over=tuner.base)
    for index in range(3):
        tuner.measure_round([sim_ask(tuner.base, f"#before:{index}a"), sim_ask(config, f"#before:{index}b")],
                            budgeted=False)
    before = machine.calls
    leaned = Lean(tuner).run()
    kept = sorted(changed_knobs(leaned, tuner.base))
    return {"setting": name, "seed": seed, "knobs": knobs, "kept": kept, "lean_trials": machine.calls - before}


def sim_ask(config: TrialConfig, tag: str) -> Any:
    from fitspeed.search.decider import Ask

    return Ask(config, Phase.COMBINE, tag)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--studies", type=int, default=300, help="lean steps per setting")
    parser.add_argument("--seed-base", type=int, default=0, help="the first seed (development: 0; report: 9,000,000)")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sim.pretend_cpu_host()
    names = [n for n in args.settings.split(",") if n]
    jobs = [(name, args.seed_base + index) for name in names for index in range(args.studies)]
    if args.jobs > 1:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            results = list(pool.imap(one, jobs, chunksize=4))
    else:
        results = [one(job) for job in jobs]
    rows = []
    for name in names:
        found = [r for r in results if r["setting"] == name]
        any_kept = sum(bool(r["kept"]) for r in found)
        two = sum(len(r["kept"]) >= 2 for r in found)
        rows.append({"setting": name, "studies": len(found),
                     "any_neutral": any_kept / len(found), "any_neutral_ci95": share_interval(any_kept, len(found)),
                     "two_or_more": two / len(found), "two_or_more_ci95": share_interval(two, len(found)),
                     "lean_trials_mean": statistics.fmean(r["lean_trials"] for r in found),
                     "lean_trials_max": max(r["lean_trials"] for r in found)})
    if args.json:
        print(json.dumps({"studies": args.studies, "seed_base": args.seed_base, "rows": rows}, indent=2))
        return
    print(f"{args.studies} lean steps per setting, seeds from {args.seed_base}; every answer's knobs do nothing")
    print("| setting | answers with a neutral knob (95% CI) | with two or more | lean trials a step (max) |")
    print("|---|---|---|---|")
    for row in rows:
        low, high = row["any_neutral_ci95"]
        low2, high2 = row["two_or_more_ci95"]
        print(f"| {row['setting']} | {100 * row['any_neutral']:.1f}% ({100 * low:.1f}–{100 * high:.1f}) | "
              f"{100 * row['two_or_more']:.1f}% ({100 * low2:.1f}–{100 * high2:.1f}) | "
              f"{row['lean_trials_mean']:.1f} ({row['lean_trials_max']}) |")


if __name__ == "__main__":
    main()
