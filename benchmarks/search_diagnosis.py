"""Why the tuner's answer missed the best: drawn worlds, one study each, every miss put under its cause.

    python benchmarks/search_diagnosis.py --worlds 200 --seeds dev [--cv 0.10] [--trials 40] [--jobs 2] [--json]

Runs the same studies as `search_simulation.py --worlds N` (the real `Tuner`,
the `FakeMachine`, the world's seed as the study's), and keeps what the score
alone does not show: the incumbent the lean step was handed, the screen's
list, every decision, and where the trial processes went. Each world where
something helps and the answer is not within 3% of the best is put under
the first cause that applies (`cause`):

- "no claim": the verification did not claim, and the answer is the defaults;
- "lean": the incumbent handed to the lean step was right, and the lean
  step took out a knob that helped;
- "decided and lost": a knob of the best, worth more than 1.0x on top of
  that incumbent, was in a step that did not keep it;
- "never decided": such a knob was measured (the screen, the sampler) but
  in no step;
- "hurt or wrong value": the incumbent misses nothing that would help on top
  of it: it holds a knob that hurts, or another value of one.

It also splits the captured speed lost (1 - captured) into what the
incumbent handed to the lean step had lost already, what the lean step took
out, and what a verification that did not claim lost. Develop on `--seeds
dev` only; the figures of the tenth round (docs/benchmarks/search_simulation.md)
came from `--worlds 200 --seeds dev --cv 0.10 --trials 40`.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import random
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import optuna

sys.path.insert(0, str(Path(__file__).parent))
import search_simulation as sim  # noqa: E402

from fitspeed.core.config import TrialConfig  # noqa: E402
from fitspeed.search import lean as lean_module  # noqa: E402
from fitspeed.search import tuner as tuner_module  # noqa: E402
from fitspeed.search.decision import Decision  # noqa: E402
from fitspeed.search.ledger import BUDGET_FREE  # noqa: E402
from fitspeed.search.phase import Phase  # noqa: E402

NOT_EVIDENCE = (Phase.SCREEN, Phase.VERIFY, Phase.LEAN)  # decisions that are no step of the search


@dataclass(frozen=True)
class Traced:
    """One world's study, as the diagnosis reads it."""

    seed: int
    best_gain: float
    gain: float  # the answer's true speed over the defaults'
    handed_gain: float  # the incumbent handed to the lean step
    leaned_gain: float  # the incumbent the lean step left
    claimed: bool
    cause: str | None  # None: right, or nothing helps
    trials: dict[str, float] = field(default_factory=dict)  # trial processes by where they went


def _changed(config: TrialConfig) -> dict[str, Any]:
    base = TrialConfig().to_dict()
    return {k: v for k, v in config.to_dict().items() if v != base.get(k)}


def cause(scenario: sim.Scenario, best: TrialConfig, handed: TrialConfig, leaned: TrialConfig, claimed: bool,
          decisions: list[Decision], measured: list[dict[str, Any]]) -> str:
    """The first cause that applies to a miss (see the module's docstring)."""
    value, best_value = scenario.value, scenario.value(best)
    if not claimed:
        return "no claim"
    if value(handed) >= sim.RIGHT_WITHIN * best_value and value(leaned) < sim.RIGHT_WITHIN * best_value:
        return "lean"
    have = _changed(handed)
    helping = []
    for knob, wanted in _changed(best).items():
        if have.get(knob) == wanted:
            continue
        try:
            with_it = TrialConfig().replace(**{**have, knob: wanted})
        except Exception:  # another knob of the incumbent refuses it
            continue
        if value(handed) and value(with_it) > value(handed):
            helping.append((knob, wanted))
    if not helping:
        return "hurt or wrong value"
    for knob, wanted in helping:
        if any(d.purpose not in NOT_EVIDENCE and getattr(d.b, knob) == wanted and getattr(d.a, knob) != wanted
               for d in decisions):
            return "decided and lost"
    return "never decided" if any(c.get(k) == v for c in measured for k, v in helping) else "never measured"


def trace(seed: int, trials: int = 40, cv: float | None = 0.10) -> Traced:
    """One study of world `seed`, run as `search_simulation.one_study` runs it, and read."""
    scenario = sim.draw_world(seed).scenario
    noise = scenario.noise
    cv = cv if cv is not None else sim._own_or(noise.cv, None, "a noise cv")
    rng = random.Random(f"{seed}/{scenario.name}/{cv}")
    machine = sim.FakeMachine(scenario, cv, rng, rng.random() < sim._own_or(noise.first_outlier, 0.25, ""),
                              sim._own_or(noise.outliers, 0.02, ""), sim._own_or(noise.slot_bias, 1.04, ""))
    settings = tuner_module.TuneSettings(trials=trials, storage=optuna.storages.InMemoryStorage(),  # type: ignore[arg-type]
                                         seed=seed, steps=64, repeats=3, **scenario.settings("tiny"))
    tuner = tuner_module.Tuner(settings, run=machine)
    handed: list[TrialConfig] = []
    lean_run = lean_module.Lean.run

    def run(self: lean_module.Lean) -> TrialConfig:
        handed.append(self.tuner.ledger.incumbent())
        return lean_run(self)

    lean_module.Lean.run = run  # type: ignore[method-assign]
    try:
        verification = tuner.run()
    finally:
        lean_module.Lean.run = lean_run  # type: ignore[method-assign]
    base = TrialConfig()
    claimed = bool(verification.get("claimed"))
    answer = TrialConfig.from_dict(verification["config"]) if claimed else base
    leaned = tuner.ledger.incumbent()
    given = handed[0] if handed else leaned
    best, best_value = sim.true_best(scenario, tuner.choices)
    value, speed = scenario.value, scenario.speed(base)
    every = [t for t in tuner.study.get_trials(deepcopy=False) if "record" in t.user_attrs]  # each one run
    phases = collections.Counter(str(t.user_attrs.get("phase", "other")) for t in every)
    budget_free = sum(phases[p] for p in BUDGET_FREE)
    spent = {"search": float(sum(phases.values()) - budget_free), "lean": float(phases[Phase.LEAN]),
             "verify": float(phases[Phase.VERIFY]), "guard runs": float(machine.calls - len(every)),
             "budgeted": float(tuner.ledger.claimed()), "every": float(machine.calls)}
    missed = best_value > speed * (1 + 1e-9) and value(answer) < sim.RIGHT_WITHIN * best_value
    why = cause(scenario, best, given, leaned, claimed, tuner.decisions(),
                [t.user_attrs.get("config", {}) for t in every]) if missed else None
    return Traced(seed, best_value / speed, value(answer) / speed, value(given) / speed, value(leaned) / speed,
                  claimed, why, spent)


def _trace(args: tuple[int, int, float | None]) -> Traced:
    return trace(*args)


def diagnose(seeds: range, trials: int, cv: float | None, jobs: int = 1) -> dict[str, Any]:
    """The causes of the misses, the captured speed lost by where, and the trial processes by where they went."""
    sim.pretend_cpu_host()
    plan = [(seed, trials, cv) for seed in seeds]
    if jobs > 1:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            traced = pool.map(_trace, plan, chunksize=1)
    else:
        traced = [_trace(p) for p in plan]
    helps = [t for t in traced if t.best_gain > 1.0 + 1e-9]
    n = max(1, len(helps))
    return {
        "worlds": len(traced), "helps": len(helps),
        "right": sum(t.cause is None for t in helps),
        "handed_right": sum(t.handed_gain >= sim.RIGHT_WITHIN * t.best_gain for t in helps),
        "causes": dict(collections.Counter(t.cause for t in helps if t.cause).most_common()),
        "captured": statistics.fmean(t.gain / t.best_gain for t in helps) if helps else None,
        "lost": {"before the lean step": sum(1 - t.handed_gain / t.best_gain for t in helps) / n,
                 "in the lean step": sum((t.handed_gain - t.leaned_gain) / t.best_gain for t in helps) / n,
                 "no claim": sum((t.leaned_gain - t.gain) / t.best_gain for t in helps) / n},
        "trials": {k: statistics.fmean(t.trials[k] for t in traced) for k in traced[0].trials} if traced else {},
        "rows": [asdict(t) for t in traced],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=40)
    parser.add_argument("--seeds", choices=["dev"], default="dev", help="development seeds only")
    parser.add_argument("--cv", type=float, default=0.10, help="every world's CV (the rest of its noise as drawn)")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    seeds = sim._seeds_of(sim.WORLD_SEEDS, args.seeds, args.worlds, "--worlds")
    out = diagnose(seeds, args.trials, args.cv, args.jobs)
    if args.json:
        print(json.dumps(out))
        return
    print(f"{out['worlds']} worlds ({seeds[0]}..{seeds[-1]}), {out['helps']} where something helps: right "
          f"{out['right']}, the incumbent handed to the lean step right {out['handed_right']}, "
          f"captured {out['captured']:.3f}")
    for why, count in out["causes"].items():
        print(f"  {count:4d}  {why}")
    print("captured lost: " + ", ".join(f"{k} {v:.3f}" for k, v in out["lost"].items()))
    print("trial processes a study: " + ", ".join(f"{k} {v:.1f}" for k, v in out["trials"].items()))


if __name__ == "__main__":
    main()
