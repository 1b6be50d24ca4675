"""How often the tuner is right: the real search against a simulated machine.

    python benchmarks/search_simulation.py [--studies 200] [--cv 0.05,0.10,0.20] [--trials 30] [--json]

Each simulated study runs the real `fitspeed.search.tuner.Tuner` (Optuna, the
guard, the verification, all of it) in an in-memory Optuna study, with a fake
trial runner in place of the child process. The fake draws samples/s from a
known ground truth (`SCENARIOS`): each knob value's own effect, interactions
(two winners that clash, one that only helps beside another), a knob whose
trials fail, and a knob that is very slow. Noise is multiplicative: a slow
drift shared by neighbouring trials (a quarter of the variance, AR(1) with
rho 0.9) plus independent noise, at a total CV of `--cv`. The study's first
baseline is an outlier (x0.63, like the 452 against 720 samples/s seen in
issue 14) in `--first-outlier` of the studies, and any trial is a x0.6
outlier with probability `--outliers`.

For each noise level it prints:
- right: the answer (the verified best when a speed-up is claimed, else the
  defaults) is truly within 3% of the true best configuration's speed;
- false_claims: a speed-up is claimed for a configuration that is truly
  slower than the defaults (share of all studies);
- mean_trials: trial processes started per study (timed trials, guard runs
  and the verification's pairs all count: each is a process and its time);
- mean_minutes: simulated wall time per study (a trial costs 9 s of start-up
  and compile plus 12 s of training at the baseline's speed, scaled by how
  slow it is; a trial cut short costs what it ran).

`--json` prints one object whose keys `noise_cv`, `right`, `false_claims`,
`mean_trials` (and `mean_minutes`, `claims`, `studies`) each hold one value per
noise level, in the order of `--cv`.

The tuner measured is whichever `fitspeed` is imported: to measure an older
search, put its source first on PYTHONPATH, for example
`git archive 1d2daee src | tar -x -C /tmp/old && PYTHONPATH=/tmp/old/src python benchmarks/search_simulation.py`.
The fake runner reads only `TrialSpec` fields every version has, and honours
`stop_below` (a trial cut short when it is clearly slower) where the spec has it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import optuna

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.record import TrialSpec, new_record
from fitspeed.machine import environment
from fitspeed.search import tuner as tuner_module

BASE_SPEED = 1000.0
STARTUP_S = 9.0  # process start, import, build, compile
WORK_S = 12.0  # warm-up and timed windows at the baseline's speed


@dataclass(frozen=True)
class Scenario:
    """A machine's ground truth: samples/s of any configuration, with no noise."""

    name: str
    effects: dict[tuple[str, Any], float]  # (knob, value) -> factor on its own; unlisted: 1.0
    interactions: tuple[tuple[frozenset[tuple[str, Any]], float], ...] = ()  # all present -> factor
    fails: frozenset[tuple[str, Any]] = frozenset()  # any present -> the trial fails

    def speed(self, config: TrialConfig) -> float:
        """Samples/s of `config`; 0 when it fails."""
        items = {(k, v) for k, v in config.to_dict().items() if v != getattr(TrialConfig(), k)}
        if items & self.fails:
            return 0.0
        factor = math.prod(self.effects.get(item, 1.0) for item in items)
        for members, extra in self.interactions:
            if members <= items:
                factor *= extra
        return BASE_SPEED * factor


def _spe(four: float, sixteen: float, sixty_four: float) -> dict[tuple[str, Any], float]:
    return {("steps_per_execution", 4): four, ("steps_per_execution", 16): sixteen,
            ("steps_per_execution", 64): sixty_four}


def _with_spe(knob: tuple[str, Any], factor: float) -> tuple[tuple[frozenset[tuple[str, Any]], float], ...]:
    """`knob` helps by `factor` only beside steps_per_execution 16 or 64."""
    return tuple((frozenset({knob, ("steps_per_execution", n)}), factor) for n in (16, 64))


SCENARIOS = (
    # A CPU with fast bfloat16: a 2.2x win that clashes with XLA (together 0.86x), channels_first
    # fails, one intra-op thread is slow, one inter-op thread helps (1.25x) only beside
    # steps_per_execution. Best: steps_per_execution=64 precision=mixed_bfloat16 inter_op_threads=1.
    Scenario(
        "bf16-fast",
        {**_spe(1.30, 1.50, 1.53), ("jit_compile", True): 1.12, ("precision", "mixed_bfloat16"): 2.2,
         ("intra_op_threads", 1): 0.55, ("data_autotune", False): 0.98, ("deterministic", True): 0.8,
         ("precision", "mixed_float16"): 0.3},
        ((frozenset({("jit_compile", True), ("precision", "mixed_bfloat16")}), 0.35),
         *_with_spe(("inter_op_threads", 1), 1.25)),
        frozenset({("data_format", "channels_first")}),
    ),
    # An AVX2-only CPU: bfloat16 is 12x slower (its trials are the slow ones); jit_compile
    # (1.3x) and channels_first (1.28x: within 2%, so either is a right answer) each win alone
    # and clash together (0.4x); one inter-op thread helps (1.25x) only beside steps_per_execution.
    # Best: steps_per_execution=64 jit_compile=True inter_op_threads=1.
    Scenario(
        "bf16-slow",
        {**_spe(1.15, 1.25, 1.27), ("jit_compile", True): 1.3, ("precision", "mixed_bfloat16"): 0.085,
         ("data_format", "channels_first"): 1.28, ("intra_op_threads", 1): 0.6, ("deterministic", True): 0.85,
         ("precision", "mixed_float16"): 0.07},
        ((frozenset({("jit_compile", True), ("data_format", "channels_first")}), 0.4),
         *_with_spe(("inter_op_threads", 1), 1.25)),
    ),
    # Nothing worth having: the best is 3% up, so keeping the defaults is right,
    # and any claimed speed-up is noise.
    Scenario(
        "flat",
        {**_spe(1.01, 1.02, 1.03), ("jit_compile", True): 0.97, ("precision", "mixed_bfloat16"): 0.5,
         ("intra_op_threads", 1): 0.9, ("deterministic", True): 0.9, ("precision", "mixed_float16"): 0.4},
        (),
        frozenset({("data_format", "channels_first")}),
    ),
)


@dataclass
class FakeMachine:
    """A trial runner: the scenario's speed times noise, recorded as a child would."""

    scenario: Scenario
    cv: float
    rng: random.Random
    first_outlier: bool
    outliers: float
    calls: int = 0
    seconds: float = 0.0
    drift: float = 0.0
    timed: int = 0
    log: list[tuple[str, float]] = field(default_factory=list)

    def _noise(self) -> float:
        rho, drift_share = 0.9, 0.25
        drift_sd = self.cv * math.sqrt(drift_share)
        self.drift = rho * self.drift + self.rng.gauss(0.0, drift_sd * math.sqrt(1 - rho * rho))
        own = self.rng.gauss(0.0, self.cv * math.sqrt(1 - drift_share))
        factor = math.exp(self.drift + own)
        if self.rng.random() < self.outliers:
            factor *= 0.6
        return factor

    def __call__(self, spec: TrialSpec) -> dict[str, Any]:
        self.calls += 1
        true = self.scenario.speed(spec.config)
        if spec.mode == "train":  # the numerics guard: every configuration here learns alike
            self.seconds += STARTUP_S + WORK_S
            if true == 0.0:
                return new_record(spec, "failed", reason="InvalidArgumentError: the simulated knob fails")
            return new_record(spec, "ok", metrics={"loss_curve": [2.3, 1.6, 1.2, 1.0]})
        if true == 0.0:
            self.seconds += STARTUP_S
            return new_record(spec, "failed", reason="InvalidArgumentError: the simulated knob fails")
        speed = true * self._noise()
        if self.timed == 0 and self.first_outlier:
            speed *= 0.63
        self.timed += 1
        stop_below = getattr(spec, "stop_below", None)
        if stop_below and speed < stop_below:  # the child stops after its first window
            self.seconds += STARTUP_S + WORK_S * BASE_SPEED / true * 0.2
            metrics = {"samples_per_s": {"median": speed, "min": speed, "max": speed, "cv": 0.0, "n": 1},
                       "stopped_early": True}
            self.log.append((spec.config.label(), speed))
            return new_record(spec, "ok", metrics=metrics, notes=["stopped early: clearly slower"])
        self.seconds += STARTUP_S + WORK_S * BASE_SPEED / true
        self.log.append((spec.config.label(), speed))
        metrics = {"samples_per_s": {"median": speed, "min": speed, "max": speed, "cv": 0.0, "n": spec.repeats},
                   "loss_curve": [2.3, 1.6, 1.2, 1.0]}
        return new_record(spec, "ok", metrics=metrics)


@dataclass(frozen=True)
class Outcome:
    right: bool
    false_claim: bool
    claimed: bool
    trials: int
    minutes: float


def true_best(scenario: Scenario, choices: dict[str, tuple[Any, ...]]) -> float:
    best = 0.0
    names = list(choices)
    for values in itertools.product(*(choices[n] for n in names)):
        try:
            config = TrialConfig().replace(**dict(zip(names, values)))
        except KnobError:
            continue
        best = max(best, scenario.speed(config))
    return best


def one_study(scenario: Scenario, cv: float, seed: int, trials: int, first_outlier: float,
              outliers: float, model: str) -> Outcome:
    rng = random.Random(seed)
    machine = FakeMachine(scenario, cv, rng, rng.random() < first_outlier, outliers)
    settings = tuner_module.TuneSettings(
        model=model, trials=trials, storage=optuna.storages.InMemoryStorage(),  # type: ignore[arg-type]
        seed=seed, steps=64, repeats=3,
    )
    tuner = tuner_module.Tuner(settings, run=machine)
    verification = tuner.run()
    base = TrialConfig()
    answer = TrialConfig.from_dict(verification["config"]) if verification.get("claimed") else base
    best = true_best(scenario, tuner.choices)
    got = scenario.speed(answer)
    return Outcome(
        right=got >= 0.97 * best,
        false_claim=bool(verification.get("claimed")) and got < scenario.speed(base),
        claimed=bool(verification.get("claimed")),
        trials=machine.calls,
        minutes=machine.seconds / 60,
    )


def level(cv: float, studies: int, trials: int, first_outlier: float, outliers: float, model: str,
          progress: Callable[[str], None]) -> dict[str, Any]:
    outcomes = []
    started = time.perf_counter()
    for index in range(studies):
        scenario = SCENARIOS[index % len(SCENARIOS)]
        outcomes.append(one_study(scenario, cv, 1000 * round(cv * 100) + index, trials, first_outlier,
                                  outliers, model))
        if (index + 1) % 50 == 0:
            progress(f"  cv {cv:.0%}: {index + 1}/{studies} studies, {time.perf_counter() - started:.0f} s")
    by_scenario = {s.name: round(statistics.fmean(o.right for o in outcomes[i::len(SCENARIOS)]), 3)
                   for i, s in enumerate(SCENARIOS) if outcomes[i::len(SCENARIOS)]}
    return {
        "noise_cv": cv,
        "right": statistics.fmean(o.right for o in outcomes),
        "false_claims": statistics.fmean(o.false_claim for o in outcomes),
        "mean_trials": statistics.fmean(o.trials for o in outcomes),
        "mean_minutes": statistics.fmean(o.minutes for o in outcomes),
        "claims": statistics.fmean(o.claimed for o in outcomes),
        "right_by_scenario": by_scenario,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=200, help="simulated studies per noise level")
    parser.add_argument("--cv", default="0.05,0.10,0.20", help="noise levels (coefficient of variation)")
    parser.add_argument("--trials", type=int, default=30, help="the tuner's --trials budget")
    parser.add_argument("--first-outlier", type=float, default=0.25,
                        help="share of studies whose first baseline trial comes in at x0.63")
    parser.add_argument("--outliers", type=float, default=0.02, help="chance that any trial is a x0.6 outlier")
    parser.add_argument("--model", default="tiny", help="a built-in model: it decides the search space")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    optuna.logging.set_verbosity(logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # the simulated machine is a CPU with no GPU, whatever runs this script
    environment.nvidia_gpus = lambda: ([], None)  # type: ignore[assignment]
    host = environment.host()
    environment.host = lambda backend=None: {**host, "backend": backend}  # type: ignore[assignment]

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    levels = [level(float(cv), args.studies, args.trials, args.first_outlier, args.outliers, args.model, progress)
              for cv in args.cv.split(",")]
    if args.json:
        keys = ("noise_cv", "right", "false_claims", "mean_trials", "mean_minutes", "claims")
        out: dict[str, Any] = {key: [round(lv[key], 4) for lv in levels] for key in keys}
        out["right_by_scenario"] = [lv["right_by_scenario"] for lv in levels]
        out["studies"] = args.studies
        out["trials_budget"] = args.trials
        print(json.dumps(out))
        return
    print(f"{args.studies} simulated studies per noise level, --trials {args.trials}, "
          f"scenarios {', '.join(s.name for s in SCENARIOS)}")
    print(f"{'noise CV':>8}  {'right':>6}  {'false claims':>12}  {'mean trials':>11}  {'mean minutes':>12}  "
          f"{'claims':>6}  right by scenario")
    for lv in levels:
        print(f"{lv['noise_cv']:>8.0%}  {lv['right']:>6.1%}  {lv['false_claims']:>12.1%}  "
              f"{lv['mean_trials']:>11.1f}  {lv['mean_minutes']:>12.1f}  {lv['claims']:>6.0%}  "
              f"{lv['right_by_scenario']}")


if __name__ == "__main__":
    main()
