"""How often the tuner is right: the real search against a simulated machine.

    python benchmarks/search_simulation.py [--studies 50] [--cv 0.05,0.10,0.20] [--trials 40]
        [--scenarios null,small-wins,...] [--seeds report|dev] [--order-effect 1.04] [--jobs 1] [--json]
    python benchmarks/search_simulation.py --worlds 40 --seeds dev [--cv 0.10] [--jobs 2] [--json]
    python benchmarks/search_simulation.py --noise-models [gaussian,t3,...] --studies 200 --seeds dev [--json]

Each simulated study runs the real `fitspeed.search.tuner.Tuner` (Optuna, the
guard, the verification, all of it) in an in-memory Optuna study, with a fake
trial runner (`FakeMachine`) in place of the child process. The fake draws
samples/s from a known ground truth (`Scenario`): each knob value's own
effect, interactions (two winners that clash, one that only helps beside
another), knobs whose trials fail or whose loss diverges, knobs that are very
slow; or, for a recorded scenario, the samples/s measured for each cell of a
grid on a real machine (`benchmarks/scenarios/*.json`, written by
`benchmarks/tuner_vs_grid.py --save`).

Noise is multiplicative: a slow drift shared by neighbouring trials (a quarter
of the variance, AR(1) with rho 0.9) plus independent noise, at a total CV of
`--cv`. A scenario may make the independent part heavy-tailed (Student t,
fast and slow tails alike) and add starved trials (x0.4-0.6, any trial, the
baseline's and the candidate's alike). The study's first baseline is an
outlier (x0.63, like the 452 against 720 samples/s seen in issue 14) in
`--first-outlier` of the studies, and any trial is a x0.6 outlier with
probability `--outliers`. The order effect: of the timed trials in the order
they run, each one at an odd position (the second, fourth, ...) gains
x`--order-effect` (1.04 by default, 1.0 turns it off), since on the real
machine the second slot of an A/A pair was measured faster (8 of 10 pairs,
median 1.089).

Studies (`--studies` is per scenario) use seeds apart from those used while
developing: `--seeds dev` numbers studies from 0 (offsets 0..9999),
`--seeds report` (the default) from 1_000_000, so figures to report are never
from the seeds a search was tuned on.

The named scenarios are the worlds the search was developed against: keep
them as regression tests. `--worlds N` draws N worlds at random instead
(`draw_world`, one study each): each knob value's effect, the interactions,
failures and divergences, and the study's noise (CV 3-20%, tails, drift,
load bursts, slot bias, knob values whose trials are 2-4x noisier than the
baseline's), from distributions fitted to what was timed by hand on real
CPUs and GPUs; 15% of the worlds are ones where nothing helps. Each world's
noise is its own: `--cv` (one level) replaces only its CV, and
`--outliers`, `--first-outlier` and `--order-effect` are refused.
`--noise-models` runs the `null` scenario under each named noise model
(`NOISE_MODELS`: equal Gaussian CV 10%, t3 tails, drift, load bursts, slot
bias 1.09, a neutral knob value with 3-4x the baseline's spread, and
combinations), `--studies` each (default 200); every claim there is false,
and each model's share of claims is printed with its 95% Wilson interval.
Both ask for `--seeds` by name. Their seed ranges, fixed before any report:

    drawn worlds         dev: 3_000_000..3_099_999   report: 5_000_000..5_000_499 (500 worlds)
    noise-model studies  dev: 6_000_000..6_009_999   report: 7_000_000..7_009_999

and a second report draw, `--seeds report2`, fixed on 2026-11-27 before any run on it (the ninth round
reported on `report`, so the tenth reports on worlds no session has seen):

    drawn worlds         report2: 8_000_000..8_000_499 (500 worlds)
    noise-model studies  report2: 9_000_000..9_009_999

and a third, `--seeds report3`, fixed on 2026-11-27 before any run on it, for the eleventh round:

    drawn worlds         report3: 11_000_000..11_000_499 (500 worlds)
    noise-model studies  report3: 12_000_000..12_009_999

and a fourth, `--seeds report4`, fixed on 2026-11-27 before any run on it, for a rerun of the null world on the
eleventh round's lean change (report3's null studies ran on the tree before it):

    drawn worlds         report4: 14_000_000..14_000_499 (500 worlds)
    noise-model studies  report4: 15_000_000..15_009_999

and a fifth, `--seeds report5`, fixed on 2026-11-27 before any run on it, for the null world at 600 studies a
noise model on the twelfth round's tree (600 fixed before the run, so that a rate near 2% is told from one past
2.5%: 400 left the upper end of the interval at 3.9%):

    drawn worlds         report5: 17_000_000..17_000_499 (500 worlds)
    noise-model studies  report5: 18_000_000..18_009_999

and a sixth, `--seeds report6`, fixed on 2026-11-28 before any run on it, for the thirteenth round (the model
phase and the lean step's fourth-pair rule; 500 worlds, and 400 null studies a noise model, fixed before the run):

    drawn worlds         report6: 20_000_000..20_000_499 (500 worlds)
    noise-model studies  report6: 21_000_000..21_009_999

and a seventh, `--seeds report7`, fixed on 2026-11-28 before any run on it, for the fourteenth round: the null
world at 1,000 studies a noise model (fixed before the run: at 400, a rate of 1.75% cannot show an upper end
under 3.5%; at 1,000 it can, up to about 2.3%) and 500 drawn worlds:

    drawn worlds         report7: 23_000_000..23_000_499 (500 worlds)
    noise-model studies  report7: 24_000_000..24_009_999

and an eighth, `--seeds report8`, fixed on 2026-11-28 (evening) before any run on it, for the fifteenth round
(the lean step's second look at what it took out): 500 drawn worlds, and the null world at 1,000 studies a model:

    drawn worlds         report8: 25_000_000..25_000_499 (500 worlds)
    noise-model studies  report8: 26_000_000..26_009_999

and a ninth, `--seeds report9`, fixed on 2026-11-28 (night) before any run on it, for the sixteenth round
(the lean step looks again at every knob it took out): 500 drawn worlds, and the null world at 1,000 studies a model:

    drawn worlds         report9: 27_000_000..27_000_499 (500 worlds)
    noise-model studies  report9: 28_000_000..28_009_999

report9's worlds were run once, on a second look at every knob the lean step took out (43dc604); a check on
development seeds then found that change kept neutral knobs more often, and it was replaced before any null
study of report9 finished. A tenth, `--seeds report10`, fixed the same night before any run on it, is for the
replacement (the sixteenth round): 500 drawn worlds, and the null world at 1,000 studies a model:

    drawn worlds         report10: 29_000_000..29_000_499 (500 worlds)
    noise-model studies  report10: 30_000_000..30_009_999

An eleventh, `--seeds report11`, fixed on 2026-11-29 before any run on it, is for the seventeenth round (the
guard's replication of a failure on the paired gap):

    drawn worlds         report11: 31_000_000..31_000_499 (500 worlds)
    noise-model studies  report11: 32_000_000..32_009_999

A twelfth, `--seeds report12`, fixed on 2026-11-29 before any run on it, is for the eighteenth round (the
precision choice after the bundle, the verification up to 4 x --pairs pairs): 500 drawn worlds, and the null
world at 1,000 studies a model:

    drawn worlds         report12: 33_000_000..33_000_499 (500 worlds)
    noise-model studies  report12: 34_000_000..34_009_999

A thirteenth, `--seeds report13`, fixed on 2026-11-29 before any run on it, is for the nineteenth round (the
lean step as one pass that measures the incumbent once a round): 500 drawn worlds, and the null world at 1,000
studies a model:

    drawn worlds         report13: 35_000_000..35_000_499 (500 worlds)
    noise-model studies  report13: 36_000_000..36_009_999

A fourteenth, `--seeds report14`, fixed on 2026-12-02 before any run on it, is for lockstep rounds (issue 60:
the report draw at the fitted lockstep noise, `--lockstep`, and its null world under each noise model):

    drawn worlds         report14: 37_000_000..37_000_499 (500 worlds)
    noise-model studies  report14: 38_000_000..38_009_999

A world's seed is its study's seed; `--worlds N` takes the first N of the
range. The report draw is for the final measurement only: develop on
`--seeds dev`. `--jobs N` runs the studies in N forked worker processes;
the figures do not depend on N (each study draws from its own seeded
streams, and the outcomes are gathered in order).

For each noise level, over all scenarios and per scenario, it prints:
- right: the answer (the verified best when a speed-up is claimed, else the
  defaults) is truly within 3% of the true best configuration's speed;
- captured: the answer's true speed over the true best's, averaged;
- null_claims: share of the `null` scenario's studies that claim any speed-up
  (nothing is faster there, so every claim is false);
- false_claims: a speed-up claimed for an answer truly NOT faster than the
  defaults (true ratio <= 1.0), as a share of all studies;
- coverage: over the claims, how often the verified 95% interval
  [ci_low, ci_high] holds the true ratio answer/defaults;
- mean_trials: trial processes started per study (timed trials, guard runs
  and the verification's pairs all count: each is a process and its time);
- mean_minutes: simulated wall time per study (a trial costs 9 s of start-up
  and compile plus 12 s of training at the baseline's speed, scaled by how
  slow it is; a trial cut short costs what it ran).
Counts are printed beside the shares. `--json` prints one object (see `level`).
For drawn worlds, the same figures over every world, over the worlds where
something helps (the true best is faster than the defaults), where nothing
does, by kind of machine and over the worlds with a noisier knob value,
with coverage also read over the claims whose true gain is >= 1.15x
(`worlds`; `--json` adds one row per world).

The tuner measured is whichever `fitspeed` is imported: to measure an older
search, put its source first on PYTHONPATH, for example
`git archive 1d2daee src | tar -x -C /tmp/old && PYTHONPATH=/tmp/old/src python benchmarks/search_simulation.py`.
The fake runner reads only `TrialSpec` fields every version has, and honours
`stop_below` (a trial cut short when it is clearly slower) where the spec has it.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import logging
import math
import multiprocessing
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import optuna

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record
from fitspeed.core.stats import share_interval
from fitspeed.measure.rounds import Round, sequential_round
from fitspeed.machine import environment
from fitspeed.search import tuner as tuner_module

BASE_SPEED = 1000.0
STARTUP_S = 9.0  # process start, import, build, compile
WORK_S = 12.0  # warm-up and timed windows at the baseline's speed
RECORDED = Path(__file__).parent / "scenarios"
SEED_BASES = {"dev": 0, "report": 1_000_000}  # development and reporting seeds never meet
MAX_STUDIES = 10_000  # offsets 0..9999 from the base
RIGHT_WITHIN = 0.97  # an answer within 3% of the true best is right
# The simulated machine has no backend axis: the search runs without it, so that a study never depends on
# which backends happen to be installed where the simulator runs; nor a loss-scaling one (auto_scale_loss, which
# its recorded scenarios never measured): the space of the fifth round and before. Named one by one, so that a knob
# added since (the allocator, XLA auto-clustering) leaves the simulated studies, and their figures, as they were.
SIMULATED_KNOBS = ("batch_size", "devices", "steps_per_execution", "jit_compile", "precision", "data_format", "remat",
                   "deterministic", "onednn", "intra_op_threads", "inter_op_threads", "prefetch", "map_parallelism",
                   "cache", "vectorize", "shuffle_buffer", "interleave", "data_deterministic", "data_autotune",
                   "workers", "use_multiprocessing", "max_queue_size")

Item = tuple[str, Any]  # (knob, value)


@dataclass(frozen=True)
class Noise:
    """A study's noise on top of the ground truth; what it leaves None, the run's flags decide.

    The named scenarios set only `tail_df` and `starved` and take the rest from
    the flags (`--cv`, `--outliers`, `--first-outlier`, `--order-effect`) and
    the defaults here; a drawn world (`draw_noise`) and a named noise model of
    the null world (`NOISE_MODELS`) set every field.

    `cv`: the total coefficient of variation of a baseline trial's speed (None:
    `--cv`). `drift_share`: the share of its variance in a slow drift shared by
    neighbouring trials (AR(1), rho 0.9); the rest is each trial's own.
    `tail_df`: degrees of freedom of a Student t for the trial's own part
    (scaled to the same spread; None: Gaussian). `starved`: the chance that a
    trial is starved of CPU (a load burst) and comes in at a uniform
    `starved_range`. `slot_bias`: the factor gained by each timed trial at an
    odd position, the second of two back-to-back (None: `--order-effect`).
    `outliers`: the chance of a x0.6 outlier (None: `--outliers`).
    `first_outlier`: the chance that the study's first baseline comes in at
    x0.63 (None: `--first-outlier`). `spread`: knob values whose trials are
    noisier than the baseline's, each with its multiplier of the trial-to-trial
    sd: a configuration holding any of them has the largest of their
    multipliers (several contending changes are not noisier than the worst of
    them), the drift unchanged and its own part widened to match.
    """

    tail_df: float | None = None
    starved: float = 0.0
    starved_range: tuple[float, float] = (0.4, 0.6)
    cv: float | None = None
    drift_share: float = 0.25
    slot_bias: float | None = None
    outliers: float | None = None
    first_outlier: float | None = None
    spread: tuple[tuple[Item, float], ...] = ()
    own_share: float | None = None  # lockstep rounds: a trial's own share of its non-drift variance; None: sequential

    def __post_init__(self) -> None:
        if self.cv is not None and not 0 < self.cv < 1:
            raise ValueError(f"Expected a noise cv between 0 and 1. Received: {self.cv}.")
        if not 0 <= self.drift_share < 1:
            raise ValueError(f"Expected a drift_share in [0, 1). Received: {self.drift_share}.")
        if self.tail_df is not None and self.tail_df <= 2:
            raise ValueError(f"Expected tail_df above 2 (a finite variance) or None. Received: {self.tail_df}.")
        for item, multiplier in self.spread:
            if multiplier < 1:
                raise ValueError(f"Expected a spread multiplier >= 1 for {item}. Received: {multiplier}.")
        if self.own_share is not None and not 0 < self.own_share <= 1:
            raise ValueError(f"Expected an own_share in (0, 1] or None. Received: {self.own_share}.")

    def multiplier(self, items: set[Item]) -> float:
        """The trial-to-trial sd of a configuration with changes `items`, over the baseline's.

        >>> Noise(spread=((("jit_compile", True), 3.0), (("inter_op_threads", 1), 2.0))).multiplier(
        ...     {("jit_compile", True), ("inter_op_threads", 1)})
        3.0
        """
        return max((m for item, m in self.spread if item in items), default=1.0)


@functools.cache
def _defaults() -> dict[str, Any]:
    """The defaults' knob values, made once: `true_best` asks for them for every configuration of the space."""
    return TrialConfig().to_dict()


@dataclass(frozen=True)
class Scenario:
    """A machine's ground truth: samples/s of any configuration, with no noise.

    Built from effects (`effects`, `interactions`, `fails`, `diverges`) or from
    a recorded grid (`cells`, keyed by the values of `grid`'s knobs in order;
    the search is then restricted to `grid`). A configuration in `diverges`
    runs at its speed but its loss goes to NaN in the guard's training run, so
    it is no answer (its `value` is 0).
    """

    name: str
    effects: Mapping[Item, float] = field(default_factory=dict)  # (knob, value) -> factor alone; unlisted: 1.0
    interactions: tuple[tuple[frozenset[Item], float], ...] = ()  # all present -> factor
    fails: frozenset[Item] = frozenset()  # any present -> the trial fails
    diverges: frozenset[Item] = frozenset()  # any present -> the guard run's loss is NaN
    noise: Noise = Noise()
    model: str | None = None  # None: --model
    grid: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)  # a recorded grid's knobs and values
    cells: Mapping[tuple[Any, ...], float] = field(default_factory=dict)  # grid values -> samples/s; 0: failed
    source: str = "built in"

    def _changes(self, config: TrialConfig) -> set[Item]:
        return {(k, v) for k, default in _defaults().items() if (v := getattr(config, k)) != default}

    def speed(self, config: TrialConfig) -> float:
        """Samples/s of `config`; 0 when it fails."""
        if self.cells:
            outside = {k for k, _ in self._changes(config)} - set(self.grid)
            if outside:
                raise ValueError(f"Expected a configuration within the grid of {self.name} "
                                 f"({', '.join(self.grid)}). Received changes to {sorted(outside)}.")
            return self.cells[tuple(getattr(config, k) for k in self.grid)]
        items = self._changes(config)
        if items & self.fails:
            return 0.0
        # in a fixed order: a set's order follows string hashes (PYTHONHASHSEED), and so would the last digits
        factor = math.prod(self.effects.get(item, 1.0) for item in sorted(items, key=repr))
        for members, extra in self.interactions:
            if members <= items:
                factor *= extra
        return BASE_SPEED * factor

    def learns(self, config: TrialConfig) -> bool:
        """False when the guard's training run of `config` diverges."""
        return not (self._changes(config) & self.diverges)

    def value(self, config: TrialConfig) -> float:
        """What `config` is worth as an answer: its speed if it runs and learns, else 0."""
        return self.speed(config) if self.learns(config) else 0.0

    def settings(self, model: str) -> dict[str, Any]:
        """TuneSettings fields for this scenario: its model, and a recorded grid's space."""
        if not self.grid:
            return {"model": self.model or model, "knobs": SIMULATED_KNOBS}
        return {"model": self.model or model, "knobs": tuple(self.grid),
                "space": tuple(f"{k}={','.join(map(str, v))}" for k, v in self.grid.items())}


def _spe(four: float, sixteen: float, sixty_four: float) -> dict[Item, float]:
    return {("steps_per_execution", 4): four, ("steps_per_execution", 16): sixteen,
            ("steps_per_execution", 64): sixty_four}


def _with_spe(knob: Item, factor: float) -> tuple[tuple[frozenset[Item], float], ...]:
    """`knob` helps by `factor` only beside steps_per_execution 16 or 64."""
    return tuple((frozenset({knob, ("steps_per_execution", n)}), factor) for n in (16, 64))


# Known slow on a CPU without fast float16: the search should drop these, never claim them.
_SLOW = {("intra_op_threads", 1): 0.6, ("precision", "mixed_float16"): 0.3}

SCENARIOS = (
    # A CPU with fast bfloat16: a 2.2x win that clashes with XLA (together 0.86x), channels_first
    # fails, one intra-op thread is slow, one inter-op thread helps (1.25x) only beside
    # steps_per_execution. Best: steps_per_execution=64 precision=mixed_bfloat16 inter_op_threads=1 (4.2x).
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
    # Best: steps_per_execution=64 jit_compile=True inter_op_threads=1 (2.06x).
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
    # Nothing helps at all: every knob is exactly 1.00x, or slower where it is known slow
    # (bfloat16 without AVX512-BF16, float16 on a CPU, one intra-op thread).
    # Best: the defaults (1.00x, tied with every neutral knob); any claim is false.
    Scenario("null", {**_SLOW, ("precision", "mixed_bfloat16"): 0.5}),
    # Only small wins, each 4-10%, that stack: steps_per_execution 16 and 64 (1.08x, tied),
    # jit_compile 1.06x, one inter-op thread 1.05x, data_autotune off 1.04x.
    # Best: steps_per_execution=16 or 64, jit_compile=True, inter_op_threads=1, data_autotune=False (1.25x).
    Scenario(
        "small-wins",
        {**_SLOW, **_spe(1.05, 1.08, 1.08), ("jit_compile", True): 1.06, ("inter_op_threads", 1): 1.05,
         ("data_autotune", False): 1.04, ("precision", "mixed_bfloat16"): 0.5},
    ),
    # A big precision win (mixed_bfloat16 2.0x) with small knobs on top of it: steps_per_execution
    # 1.05/1.10/1.14x (4/16/64), channels_first 1.07x.
    # Best: steps_per_execution=64 precision=mixed_bfloat16 data_format=channels_first (2.44x).
    Scenario(
        "big-plus-small",
        {**_SLOW, **_spe(1.05, 1.10, 1.14), ("precision", "mixed_bfloat16"): 2.0,
         ("data_format", "channels_first"): 1.07},
    ),
    # Two precisions within 7% of each other: mixed_float16 1.93x, mixed_bfloat16 1.80x (a GPU-like
    # CPU with both); steps_per_execution 1.10/1.18/1.20x. bfloat16's best is 0.934 of the best:
    # not a right answer. Best: steps_per_execution=64 precision=mixed_float16 (2.31x).
    Scenario(
        "near-alternatives",
        {("intra_op_threads", 1): 0.6, **_spe(1.10, 1.18, 1.20), ("precision", "mixed_bfloat16"): 1.80,
         ("precision", "mixed_float16"): 1.80 * 1.07},
    ),
    # A small win that helps only beside another: one inter-op thread is 1.00x alone and 1.08x beside
    # steps_per_execution 16 or 64 (1.30/1.50/1.55x).
    # Best: steps_per_execution=64 inter_op_threads=1 (1.67x).
    Scenario(
        "interaction",
        {**_SLOW, **_spe(1.30, 1.50, 1.55), ("precision", "mixed_bfloat16"): 0.5},
        _with_spe(("inter_op_threads", 1), 1.08),
    ),
    # Failing knobs: jit_compile=True's trials fail outright; mixed_float16 runs 1.5x but its loss
    # goes to NaN in the guard's training run (no answer); channels_first 1.1x, steps_per_execution
    # 1.20/1.35/1.40x, mixed_bfloat16 1.3x.
    # Best: steps_per_execution=64 precision=mixed_bfloat16 data_format=channels_first (2.00x).
    Scenario(
        "failing",
        {("intra_op_threads", 1): 0.6, **_spe(1.20, 1.35, 1.40), ("precision", "mixed_bfloat16"): 1.3,
         ("precision", "mixed_float16"): 1.5, ("data_format", "channels_first"): 1.1},
        fails=frozenset({("jit_compile", True)}),
        diverges=frozenset({("precision", "mixed_float16")}),
    ),
    # Heavy-tailed noise (Student t, 3 degrees of freedom, both tails) and starved trials (x0.4-0.6,
    # 6% of trials, either side of a pair) on a machine with real wins: steps_per_execution
    # 1.25/1.40/1.45x, mixed_bfloat16 1.6x, channels_first 1.05x.
    # Best: steps_per_execution=64 precision=mixed_bfloat16 data_format=channels_first (2.44x).
    Scenario(
        "heavy-tail",
        {**_SLOW, **_spe(1.25, 1.40, 1.45), ("precision", "mixed_bfloat16"): 1.6,
         ("data_format", "channels_first"): 1.05},
        noise=Noise(tail_df=3.0, starved=0.06),
    ),
)


def load_recorded(path: Path) -> Scenario:
    """A scenario from a grid file of `benchmarks/tuner_vs_grid.py --save`.

    The speed of a configuration is the samples/s recorded for its grid cell (a
    failed cell fails); the search is restricted to the grid's knobs and values.
    """
    record = json.loads(path.read_text())
    if record.get("kind") != "fitspeed-grid" or record.get("schema") != 1:
        raise ValueError(f"Expected a grid file of tuner_vs_grid.py --save (schema 1). Received: {path}.")
    grid = {name: tuple(getattr(TrialConfig.from_dict({name: v}), name) for v in values)
            for name, values in record["knobs"].items()}
    cells: dict[tuple[Any, ...], float] = {}
    for cell in record["cells"]:
        config = TrialConfig.from_dict(cell["knobs"])
        speed = cell["samples_per_s"] if cell["status"] == "ok" else None
        cells[tuple(getattr(config, k) for k in grid)] = float(speed or 0.0)
    missing = [values for values in itertools.product(*grid.values()) if values not in cells]
    if missing:
        raise ValueError(f"Expected every cell of the grid in {path}. Missing: {missing[:3]}.")
    if not cells[tuple(getattr(TrialConfig(), k) for k in grid)]:
        raise ValueError(f"Expected the defaults' cell in {path} to have a figure: every ratio is to it.")
    host = record.get("host") or {}
    return Scenario(path.stem, grid=grid, cells=cells, model=record["model"],
                    source=f"recorded on {host.get('cpu', '?')}, {record['model']}, {path.name}")


def recorded_scenarios(folder: Path = RECORDED) -> tuple[Scenario, ...]:
    return tuple(load_recorded(path) for path in sorted(folder.glob("*.json")))


def select(names: str | None, folder: Path = RECORDED) -> list[Scenario]:
    """Scenarios by name (built in or recorded) or by a grid file's path; all when `names` is empty."""
    known = {s.name: s for s in (*SCENARIOS, *recorded_scenarios(folder))}
    if not names:
        return list(known.values())
    out = []
    for name in names.split(","):
        name = name.strip()
        if name in known:
            out.append(known[name])
        elif name.endswith(".json") and Path(name).is_file():
            out.append(load_recorded(Path(name)))
        else:
            raise SystemExit(f"Expected scenario names from {', '.join(known)} or a grid file. "
                             f"Received: {name!r}.")
    return out


# --- Worlds drawn at random -------------------------------------------------------------------------------------
#
# A drawn world is a `Scenario` whose effects, interactions, failures, divergences and noise come from the
# distributions below, fitted to what has been timed by hand on real CPUs and GPUs (issue 35, item 7, and the
# recorded grids in benchmarks/scenarios/). Every draw is a pure function of the world's seed.

# Each disjoint, and apart from the named scenarios' study seeds (SEED_BASES: 0..9999 and 1_000_000..1_009_999).
# The report ranges are fixed before any report was run; they are for the final measurement only.
# report2 was fixed on 2026-11-27, before any run on it, for the tenth round (the ninth used report);
# report3 the same day, before any run on it, for the eleventh; report4 too, for its null world on the lean change;
# report5 too, for the twelfth round's null world at 600 studies a model; report6 on 2026-11-28, for the thirteenth;
# report7 the same day, before any run on it, for the fourteenth (the null world at 1,000 studies a model);
# report8 the same evening, before any run on it, for the fifteenth; report9 that night, for the sixteenth;
# report10 the same night, before any run on it, for the sixteenth round's replacement change; report11 on
# 2026-11-29, before any run on it, for the seventeenth; report12 the same day, before any run on it, for the
# eighteenth; report13 the same day, before any run on it, for the nineteenth; report14 on 2026-12-02, before any
# run on it, for lockstep rounds (issue 60).
WORLD_SEEDS = {"dev": range(3_000_000, 3_100_000), "report": range(5_000_000, 5_000_500),
               "report2": range(8_000_000, 8_000_500), "report3": range(11_000_000, 11_000_500),
               "report4": range(14_000_000, 14_000_500), "report5": range(17_000_000, 17_000_500),
               "report6": range(20_000_000, 20_000_500), "report7": range(23_000_000, 23_000_500),
               "report8": range(25_000_000, 25_000_500), "report9": range(27_000_000, 27_000_500),
               "report10": range(29_000_000, 29_000_500), "report11": range(31_000_000, 31_000_500),
               "report12": range(33_000_000, 33_000_500), "report13": range(35_000_000, 35_000_500),
               "report14": range(37_000_000, 37_000_500)}
NULL_SEEDS = {"dev": range(6_000_000, 6_010_000), "report": range(7_000_000, 7_010_000),
              "report2": range(9_000_000, 9_010_000), "report3": range(12_000_000, 12_010_000),
              "report4": range(15_000_000, 15_010_000), "report5": range(18_000_000, 18_010_000),
              "report6": range(21_000_000, 21_010_000), "report7": range(24_000_000, 24_010_000),
              "report8": range(26_000_000, 26_010_000), "report9": range(28_000_000, 28_010_000),
              "report10": range(30_000_000, 30_010_000), "report11": range(32_000_000, 32_010_000),
              "report12": range(34_000_000, 34_010_000), "report13": range(36_000_000, 36_010_000),
              "report14": range(38_000_000, 38_010_000)}

MACHINES = (  # the kind of machine a world is, and how often it is drawn
    ("cpu", 0.45),  # no fast half precision: bfloat16 and float16 both slow
    ("cpu-bf16", 0.35),  # AVX512-BF16 or AMX: bfloat16 fast, float16 slow
    ("gpu-like", 0.20),  # both half precisions fast, within about 10% of each other
)
NULL_SHARE = 0.15  # worlds where nothing helps: every effect and interaction clipped to <= 1.0
PIPELINE = (("data_autotune", False), ("prefetch", "autotune"), ("prefetch", 2), ("map_parallelism", "autotune"),
            ("cache", "memory"), ("vectorize", True), ("data_deterministic", False))
FAILS = {  # a knob value's trials fail, with this chance per world
    ("data_format", "channels_first"): 0.15, ("jit_compile", True): 0.05, ("precision", "mixed_float16"): 0.03,
    ("precision", "mixed_bfloat16"): 0.02, ("onednn", False): 0.02,
}
DIVERGES = {("precision", "mixed_float16"): 0.08, ("precision", "mixed_bfloat16"): 0.03}  # the loss goes NaN
SPREAD_SHARE = 0.30  # worlds with one or two knob values whose trials are noisier than the baseline's
# lockstep rounds (`--lockstep`): a trial's own share of its non-drift variance (the rest the round's trials share),
# drawn uniform in this range per world, and the null world's noise models at LOCKSTEP_OWN_NULL, the top of it.
# Fitted to A/A rounds, (lockstep sd / sequential sd)^2 per condition: 0.18-0.55 on an Emerald Rapids
# (benchmarks/lockstep.py, docs/benchmarks/lockstep.md: tiny and cnn-low, quiet and bursty) and 0.11-0.49 on a
# Zen 4 when the lockstep issue was filed
LOCKSTEP_OWN = (0.1, 0.55)
LOCKSTEP_OWN_NULL = 0.55
SPREAD_ITEMS = (  # the searched changes such a knob value is drawn from
    ("steps_per_execution", 64), ("jit_compile", True), ("precision", "mixed_bfloat16"),
    ("precision", "mixed_float16"), ("onednn", False), ("data_format", "channels_first"),
    ("intra_op_threads", 1), ("inter_op_threads", 1), ("data_autotune", False),
)
MAX_SPACE = 20_000  # configurations `true_best` enumerates at most (the `tiny` space has 768)


@dataclass(frozen=True)
class World:
    """A drawn ground truth: its seed, the kind of machine, whether nothing helps, and the scenario."""

    seed: int
    machine: str
    null: bool
    scenario: Scenario


def _log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def spe_curve(gain: float, scale: float) -> dict[Item, float]:
    """steps_per_execution 4, 16 and 64: rising from 1.0 at 1 to `gain` at 64, saturating after ~`scale` steps.

    >>> {n: round(f, 3) for (_, n), f in spe_curve(1.5, 4.0).items()}
    {4: 1.239, 16: 1.486, 64: 1.5}
    """
    def share(n: int) -> float:
        return (1 - math.exp(-(n - 1) / scale)) / (1 - math.exp(-63 / scale))
    return {("steps_per_execution", n): gain ** share(n) for n in (4, 16, 64)}


def draw_noise(rng: random.Random) -> Noise:
    """A study's noise, drawn: CV log-uniform 3-20%; Student t tails (df log-uniform 3-30) in half the studies,
    Gaussian in the rest; drift share uniform 0-40%; load bursts (x0.4-0.6) at a uniform 0-5% of trials; the
    second of two back-to-back trials gaining a uniform x1.00-1.09; a cold first baseline (x0.63) in a quarter of
    studies, no other outliers; and in 30% of studies one knob value (two in a third of those) whose trials have
    a uniform 2-4x the baseline's trial-to-trial sd.
    """
    cv = _log_uniform(rng, 0.03, 0.20)
    tail_df = _log_uniform(rng, 3.0, 30.0) if rng.random() < 0.5 else None
    drift_share = rng.uniform(0.0, 0.4)
    starved = rng.uniform(0.0, 0.05)
    slot_bias = rng.uniform(1.0, 1.09)
    spread: tuple[tuple[Item, float], ...] = ()
    if rng.random() < SPREAD_SHARE:
        items = rng.sample(SPREAD_ITEMS, 2 if rng.random() < 1 / 3 else 1)
        spread = tuple((item, rng.uniform(2.0, 4.0)) for item in items)
    return Noise(tail_df=tail_df, starved=starved, cv=cv, drift_share=drift_share, slot_bias=slot_bias,
                 outliers=0.0, first_outlier=0.25, spread=spread)


def draw_world(seed: int) -> World:
    """The world of `seed`: each knob value's effect, interactions, failures, divergences, and its study's noise.

    Effects (a factor on samples/s; log-uniform unless said):
    - precision, mixed_bfloat16 and mixed_float16 drawn jointly by the kind of machine (`MACHINES`): on a `cpu`
      both 0.05-0.6x; on a `cpu-bf16` bfloat16 1.2-2.5x and float16 0.05-0.6x; on a `gpu-like` float16 1.5-3x
      and bfloat16 within 10% of it (kept within 1.5-3x);
    - steps_per_execution: 1-1.6x at 64, rising through 4 and 16 (`spe_curve`, scale log-uniform 2-30 steps);
    - intra_op_threads=1: 0.4-0.95x in 80% of worlds, else 0.95-1.3x; inter_op_threads=1: 0.95-1.3x;
    - data_format=channels_first 0.4-1.3x; jit_compile=True 0.7-1.5x; onednn=False 0.8-1.3x;
    - data_autotune=False and the other pipeline knobs (`PIPELINE`) 0.95-1.05x; deterministic=True uniform 0.7-1.0x.
    Interactions: XLA with bfloat16 0.3-1.0x in half the worlds, with float16 in a quarter; XLA with
    channels_first 0.4-1.0x in a fifth; in a third, one of inter_op_threads=1, jit_compile=True,
    data_autotune=False, onednn=False gains a further 1.03-1.3x beside steps_per_execution 16 or 64.
    Failures and divergences: each value of `FAILS` fails with its chance, each of `DIVERGES` diverges with its
    chance (where it does not fail). In `NULL_SHARE` of the worlds nothing helps: every effect and interaction is
    clipped to at most 1.0. The noise: `draw_noise`, from a stream of its own.
    """
    rng = random.Random(f"world/{seed}")
    machine = rng.choices([m for m, _ in MACHINES], weights=[w for _, w in MACHINES])[0]
    if machine == "cpu":
        bf16, fp16 = _log_uniform(rng, 0.05, 0.6), _log_uniform(rng, 0.05, 0.6)
    elif machine == "cpu-bf16":
        bf16, fp16 = _log_uniform(rng, 1.2, 2.5), _log_uniform(rng, 0.05, 0.6)
    else:
        fp16 = _log_uniform(rng, 1.5, 3.0)
        bf16 = min(3.0, max(1.5, fp16 * _log_uniform(rng, 1 / 1.1, 1.1)))
    effects: dict[Item, float] = {
        ("precision", "mixed_bfloat16"): bf16, ("precision", "mixed_float16"): fp16,
        **spe_curve(_log_uniform(rng, 1.0, 1.6), _log_uniform(rng, 2.0, 30.0)),
        ("intra_op_threads", 1): (_log_uniform(rng, 0.4, 0.95) if rng.random() < 0.8
                                  else _log_uniform(rng, 0.95, 1.3)),
        ("inter_op_threads", 1): _log_uniform(rng, 0.95, 1.3),
        ("data_format", "channels_first"): _log_uniform(rng, 0.4, 1.3),
        ("jit_compile", True): _log_uniform(rng, 0.7, 1.5),
        ("onednn", False): _log_uniform(rng, 0.8, 1.3),
        **{item: _log_uniform(rng, 0.95, 1.05) for item in PIPELINE},
        ("deterministic", True): rng.uniform(0.7, 1.0),
    }
    interactions: list[tuple[frozenset[Item], float]] = []
    jit = ("jit_compile", True)
    for partner, chance, low in ((("precision", "mixed_bfloat16"), 0.5, 0.3), (("precision", "mixed_float16"), 0.25, 0.3),
                                 (("data_format", "channels_first"), 0.2, 0.4)):
        if rng.random() < chance:
            interactions.append((frozenset({jit, partner}), _log_uniform(rng, low, 1.0)))
    if rng.random() < 1 / 3:
        helper = rng.choice((("inter_op_threads", 1), jit, ("data_autotune", False), ("onednn", False)))
        interactions.extend(_with_spe(helper, _log_uniform(rng, 1.03, 1.3)))
    fails = frozenset(item for item, chance in FAILS.items() if rng.random() < chance)
    diverges = frozenset(item for item, chance in DIVERGES.items() if rng.random() < chance and item not in fails)
    null = rng.random() < NULL_SHARE
    if null:
        effects = {item: min(1.0, factor) for item, factor in effects.items()}
        interactions = [(members, min(1.0, factor)) for members, factor in interactions]
    noise = draw_noise(random.Random(f"noise/{seed}"))
    scenario = Scenario(f"world-{seed}", effects, tuple(interactions), fails, diverges, noise=noise,
                        source=f"drawn: seed {seed}, {machine}{', nothing helps' if null else ''}")
    return World(seed, machine, null, scenario)


def _null_noise(**fields: Any) -> Noise:
    """A noise model of the null world: CV 10%, every other source off unless named."""
    return Noise(**{"cv": 0.10, "drift_share": 0.0, "slot_bias": 1.0, "outliers": 0.0, "first_outlier": 0.0,
                    **fields})


_NOISIER = ((("inter_op_threads", 1), 4.0),)  # a change of effect exactly 1.0 in `null`, with 4x the baseline's sd
NOISE_MODELS: dict[str, Noise] = {  # the null world is run under each; every claim there is false
    "gaussian": _null_noise(),
    "t3": _null_noise(tail_df=3.0),
    "drift": _null_noise(drift_share=0.4),
    "bursts": _null_noise(starved=0.03, starved_range=(0.6, 0.6)),
    "slot-bias": _null_noise(slot_bias=1.09),
    "noisier-4x": _null_noise(spread=_NOISIER),
    "noisier-3x-jit": _null_noise(spread=((("jit_compile", True), 3.0),)),
    "simulator": _null_noise(drift_share=0.25, outliers=0.02, first_outlier=0.25, slot_bias=1.04),
    "t3-drift-slot": _null_noise(tail_df=3.0, drift_share=0.4, slot_bias=1.09),
    "everything": _null_noise(tail_df=3.0, drift_share=0.4, starved=0.03, starved_range=(0.6, 0.6),
                              slot_bias=1.09, first_outlier=0.25, spread=_NOISIER),
}


def null_world(model: str) -> Scenario:
    """The `null` scenario (nothing is faster than the defaults) under the noise model `model`."""
    null = next(s for s in SCENARIOS if s.name == "null")
    return replace(null, name=f"null/{model}", noise=NOISE_MODELS[model], source=f"null world, noise {model}")


@dataclass
class FakeMachine:
    """A trial runner: the scenario's speed times noise, recorded as a child would.

    `order_effect`: the factor gained by each timed trial at an odd position
    in the sequence of timed trials (the second of two consecutive ones).
    `cv`, `first_outlier`, `outliers` and `order_effect` are the study's own,
    resolved by `one_study` from the scenario's `Noise` and the flags; the
    rest of the noise (drift share, tails, load bursts, per-configuration
    spread) the machine reads from the scenario's `Noise`.
    """

    scenario: Scenario
    cv: float
    rng: random.Random
    first_outlier: bool
    outliers: float
    order_effect: float = 1.04
    calls: int = 0
    seconds: float = 0.0
    drift: float = 0.0
    timed: int = 0
    log: list[tuple[str, float]] = field(default_factory=list)

    def _own(self, sd: float) -> float:
        df = self.scenario.noise.tail_df
        if df is None:
            return self.rng.gauss(0.0, sd)
        chi2 = self.rng.gammavariate(df / 2, 2.0)
        t = self.rng.gauss(0.0, 1.0) / math.sqrt(chi2 / df)
        return t * sd * math.sqrt((df - 2) / df)

    def _noise(self, config: TrialConfig) -> float:
        """One timed trial's multiplicative noise.

        The configuration's own part has the sd that makes its total spread
        `multiplier` times the baseline's: sqrt(m^2 - drift_share) * cv, the
        drift shared. With no `spread` this is sqrt(1 - drift_share) * cv, the
        same arithmetic to the last bit, so a scenario without one draws what
        it drew before `spread` existed.
        """
        noise = self.scenario.noise
        rho, drift_share = 0.9, noise.drift_share
        multiplier = noise.multiplier(self.scenario._changes(config)) if noise.spread else 1.0
        drift_sd = self.cv * math.sqrt(drift_share)
        self.drift = rho * self.drift + self.rng.gauss(0.0, drift_sd * math.sqrt(1 - rho * rho))
        factor = math.exp(self.drift + self._own(self.cv * math.sqrt(multiplier * multiplier - drift_share)))
        if self.rng.random() < self.outliers:
            factor *= 0.6
        if self.rng.random() < noise.starved:
            factor *= self.rng.uniform(*noise.starved_range)
        return factor

    def __call__(self, spec: TrialSpec) -> TrialRecord:
        """The trial's record, typed as `run_trial` returns it."""
        return self._record(spec)

    def round(self, specs: Sequence[TrialSpec], first: int = 0, landed: Any = None) -> Round:
        """A round of trials, as `fitspeed.measure.rounds.Rounds.round` runs it.

        Without `Noise.own_share`, the trials one after another (sequential
        pairs, as every round before lockstep). With it, in lockstep: the
        trials share one draw of the drift, of the rest of the machine's load
        of the moment (the non-drift variance less the trials' own share) and
        of a load burst; each draws its own part (process and windows: the
        own share of the non-drift variance, widened by its configuration's
        `spread` to the total the configuration has alone) and its own x0.6
        outlier. The slot bias goes to the trial whose turn is first. The
        round costs one start-up and every trial's work.
        """
        noise = self.scenario.noise
        timed = [spec for spec in specs if spec.mode != "train"]
        if noise.own_share is None or len(timed) < 2:
            return sequential_round(specs, first, self, landed=landed)
        rho, drift_share = 0.9, noise.drift_share
        drift_sd = self.cv * math.sqrt(drift_share)
        self.drift = rho * self.drift + self.rng.gauss(0.0, drift_sd * math.sqrt(1 - rho * rho))
        shared_var = self.cv * self.cv * (1 - drift_share) * (1 - noise.own_share)
        common = self.drift + self.rng.gauss(0.0, math.sqrt(shared_var))
        if self.rng.random() < noise.starved:
            common += math.log(self.rng.uniform(*noise.starved_range))
        records = []
        for index, spec in enumerate(specs):
            multiplier = noise.multiplier(self.scenario._changes(spec.config)) if noise.spread else 1.0
            own_var = self.cv * self.cv * (multiplier * multiplier - drift_share) - shared_var
            factor = math.exp(common + self._own(math.sqrt(max(own_var, 0.0))))
            if self.rng.random() < self.outliers:
                factor *= 0.6
            if index == first:
                factor *= self.order_effect
            record = self._record(spec, factor=factor, startup=index == 0)
            records.append(replace(record, extra={**record.extra, "round": {"design": "lockstep"}}))
        if landed is not None:
            for index, record in enumerate(records):
                landed(index, record)
        return Round(tuple(records), "lockstep", None, "")

    def _record(self, spec: TrialSpec, factor: float | None = None, startup: bool = True) -> TrialRecord:
        """One trial's record; `factor` its noise where a lockstep round drew it, `startup` whether it pays one."""
        start_s = STARTUP_S if startup else 0.0
        self.calls += 1
        true = self.scenario.speed(spec.config)
        base = self.scenario.speed(TrialConfig()) or BASE_SPEED
        if spec.mode == "train":  # the numerics guard
            self.seconds += STARTUP_S + WORK_S
            if true == 0.0:
                return new_record(spec, Status.FAILED, reason="InvalidArgumentError: the simulated knob fails")
            if not self.scenario.learns(spec.config):
                return new_record(spec, Status.OK, metrics={"loss_curve": [2.3, 5.1, float("nan")]})
            # held-out figures: a seed's init and data order move them (sd 0.03); a numerics change that
            # learns as well moves them a little more at that seed (sd 0.01), either way
            held_out = 1.0 + random.Random(f"guard/{spec.seed}").gauss(0.0, 0.03)
            if spec.config != TrialConfig():
                held_out += self.rng.gauss(0.0, 0.01)
            return new_record(spec, Status.OK, metrics={"loss_curve": [2.3, 1.6, 1.2, 1.0], "val_loss": held_out,
                                                   "val_accuracy": 0.6 - 0.5 * (held_out - 1.0)})
        if true == 0.0:
            self.seconds += start_s
            return new_record(spec, Status.FAILED, reason="InvalidArgumentError: the simulated knob fails")
        speed = true * (self._noise(spec.config) if factor is None else factor)
        if self.timed == 0 and self.first_outlier:
            speed *= 0.63
        if self.timed % 2 == 1 and factor is None:
            speed *= self.order_effect
        self.timed += 1
        stop_below = getattr(spec, "stop_below", None)
        if stop_below and speed < stop_below:  # the child stops after its first window
            self.seconds += start_s + WORK_S * base / true * 0.2
            metrics = {"samples_per_s": {"median": speed, "min": speed, "max": speed, "cv": 0.0, "n": 1},
                       "stopped_early": {"after": "its first timed window", "stop_below": stop_below}}  # as a child says
            self.log.append((spec.config.label(), speed))
            return new_record(spec, Status.OK, metrics=metrics, notes=["stopped early: clearly slower"])
        self.seconds += start_s + WORK_S * base / true
        self.log.append((spec.config.label(), speed))
        metrics = {"samples_per_s": {"median": speed, "min": speed, "max": speed, "cv": 0.0, "n": spec.repeats},
                   "loss_curve": [2.3, 1.6, 1.2, 1.0]}
        return new_record(spec, Status.OK, metrics=metrics)


@dataclass(frozen=True)
class Outcome:
    scenario: str
    right: bool
    captured: float  # the answer's true value over the true best's
    claimed: bool
    false_claim: bool  # claimed, and the answer is truly not faster than the defaults
    covered: bool | None  # the verified interval holds the true ratio; None without a claim
    trials: int
    minutes: float
    answer: str
    gain: float = 1.0  # the answer's true value over the defaults' speed
    best_gain: float = 1.0  # the true best's over the defaults' speed


@functools.lru_cache(maxsize=8)
def _space(choices: tuple[tuple[str, tuple[Any, ...]], ...]) -> tuple[TrialConfig, ...]:
    """Every valid configuration of the searched space, in itertools.product's order (made once a process)."""
    names = [name for name, _ in choices]
    configs = []
    for values in itertools.product(*(values for _, values in choices)):
        try:
            configs.append(TrialConfig().replace(**dict(zip(names, values))))
        except KnobError:
            continue
    return tuple(configs)


def true_best(scenario: Scenario, choices: Mapping[str, Iterable[Any]]) -> tuple[TrialConfig, float]:
    """The configuration of the searched space worth most as an answer, and its speed.

    Among ties (within float rounding: a product of factors in another order)
    the one with the fewest changes.
    """
    best, best_value = TrialConfig(), scenario.value(TrialConfig())
    for config in _space(tuple((name, tuple(values)) for name, values in choices.items())):
        value = scenario.value(config)
        if value > best_value * (1 + 1e-9) or (value >= best_value * (1 - 1e-9)
                                               and len(config.changed()) < len(best.changed())):
            best, best_value = config, max(value, best_value)
    return best, best_value


def _own_or(value: float | None, flag: float | None, what: str) -> float:
    """The scenario's own figure where it sets one, else the flag's."""
    chosen = value if value is not None else flag
    if chosen is None:
        raise ValueError(f"Expected {what} from the scenario's noise or from its flag. Received neither.")
    return chosen


def one_study(scenario: Scenario, cv: float | None, seed: int, trials: int, first_outlier: float | None = 0.25,
              outliers: float | None = 0.02, model: str = "tiny", order_effect: float | None = 1.04) -> Outcome:
    """One simulated study of `scenario`, scored against its ground truth.

    `cv` given overrides the scenario's own (None: the scenario's); the other
    three are taken from the scenario's `Noise` where it sets them.
    """
    noise = scenario.noise
    cv = cv if cv is not None else _own_or(noise.cv, None, "a noise cv")
    first_outlier = _own_or(noise.first_outlier, first_outlier, "a first-outlier share")
    outliers = _own_or(noise.outliers, outliers, "an outlier share")
    order_effect = _own_or(noise.slot_bias, order_effect, "a slot bias")
    rng = random.Random(f"{seed}/{scenario.name}/{cv}")
    machine = FakeMachine(scenario, cv, rng, rng.random() < first_outlier, outliers, order_effect)
    settings = tuner_module.TuneSettings(
        trials=trials, storage=optuna.storages.InMemoryStorage(),  # type: ignore[arg-type]
        seed=seed, steps=64, repeats=3, **scenario.settings(model),
    )
    tuner = tuner_module.Tuner(settings, run=machine)
    verification = tuner.run()
    base = TrialConfig()
    claimed = bool(verification.get("claimed"))
    answer = TrialConfig.from_dict(verification["config"]) if claimed else base
    size = math.prod(len(tuple(values)) for values in tuner.choices.values())
    if size > MAX_SPACE:
        raise ValueError(f"Expected a searched space of at most {MAX_SPACE} configurations, which true_best "
                         f"enumerates. Received {size} for --model {settings.model}: restrict it with a scenario's grid.")
    _, best = true_best(scenario, tuner.choices)
    got = scenario.value(answer)
    ratio = got / scenario.speed(base)
    estimate = verification.get("estimate") or {}
    covered = None
    if claimed and "ci_low" in estimate:
        covered = estimate["ci_low"] <= ratio <= estimate["ci_high"]
    return Outcome(
        scenario=scenario.name,
        right=got >= RIGHT_WITHIN * best,
        captured=got / best,
        claimed=claimed,
        false_claim=claimed and ratio <= 1.0,
        covered=covered,
        trials=machine.calls,
        minutes=machine.seconds / 60,
        answer=answer.label(),
        gain=ratio,
        best_gain=best / scenario.speed(base),
    )


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    """The figures of a set of studies, each share with its count."""
    claims = [o for o in outcomes if o.claimed]
    judged = [o.covered for o in claims if o.covered is not None]
    return {
        "studies": len(outcomes),
        "right": statistics.fmean(o.right for o in outcomes),
        "right_n": sum(o.right for o in outcomes),
        "captured": statistics.fmean(o.captured for o in outcomes),
        "claims": statistics.fmean(o.claimed for o in outcomes),
        "claims_n": len(claims),
        "false_claims": statistics.fmean(o.false_claim for o in outcomes),
        "false_claims_n": sum(o.false_claim for o in outcomes),
        "coverage": statistics.fmean(judged) if judged else None,
        "coverage_n": sum(judged),
        "coverage_of": len(judged),
        "mean_trials": statistics.fmean(o.trials for o in outcomes),
        "mean_minutes": statistics.fmean(o.minutes for o in outcomes),
    }


@dataclass(frozen=True)
class Study:
    """One study to run: its scenario and the figures `one_study` takes (picklable, for a worker process)."""

    scenario: Scenario
    cv: float | None
    seed: int
    trials: int
    first_outlier: float | None = 0.25
    outliers: float | None = 0.02
    model: str = "tiny"
    order_effect: float | None = 1.04


def _run(study: Study) -> Outcome:
    return one_study(study.scenario, study.cv, study.seed, study.trials, study.first_outlier, study.outliers,
                     study.model, study.order_effect)


def run_studies(studies: list[Study], jobs: int = 1, progress: Callable[[str], None] = lambda _: None,
                what: str = "") -> list[Outcome]:
    """Every study's outcome, in the order of `studies`, over `jobs` worker processes.

    Each study draws from its own seeded streams, so the outcomes are the same
    whatever `jobs` is. The workers are forked: they inherit this process's
    stand-ins for the host (`pretend_cpu_host`).
    """
    if jobs < 1:
        raise SystemExit(f"Expected --jobs of at least 1. Received: {jobs}.")
    started = time.perf_counter()
    out: list[Outcome] = []

    def done(outcome: Outcome) -> None:
        out.append(outcome)
        if len(out) % 25 == 0:
            progress(f"  {what}{len(out)}/{len(studies)} studies, {time.perf_counter() - started:.0f} s")

    if jobs == 1 or len(studies) == 1:
        for study in studies:
            done(_run(study))
        return out
    with multiprocessing.get_context("fork").Pool(min(jobs, len(studies))) as pool:
        for outcome in pool.imap(_run, studies, chunksize=1):
            done(outcome)
    return out


def level(cv: float, scenarios: list[Scenario], studies: int, trials: int, seeds: str = "report",
          first_outlier: float = 0.25, outliers: float = 0.02, model: str = "tiny",
          order_effect: float = 1.04, progress: Callable[[str], None] = lambda _: None,
          jobs: int = 1) -> dict[str, Any]:
    """`studies` studies of each scenario at noise `cv`: the figures overall and per scenario."""
    if not 1 <= studies <= MAX_STUDIES:
        raise SystemExit(f"Expected --studies between 1 and {MAX_STUDIES} (the seeds' range). Received: {studies}.")
    plan = [Study(scenario, cv, SEED_BASES[seeds] + index, trials, first_outlier, outliers, model, order_effect)
            for index in range(studies) for scenario in scenarios]
    outcomes: dict[str, list[Outcome]] = {s.name: [] for s in scenarios}
    for outcome in run_studies(plan, jobs, progress, f"cv {cv:.0%}: "):
        outcomes[outcome.scenario].append(outcome)
    every = [o for name in outcomes for o in outcomes[name]]
    null = outcomes.get("null")
    return {
        "noise_cv": cv,
        **summary(every),
        "null_claims": statistics.fmean(o.claimed for o in null) if null else None,
        "null_claims_n": sum(o.claimed for o in null) if null else None,
        "null_studies": len(null) if null else 0,
        "by_scenario": {name: summary(found) for name, found in outcomes.items()},
    }


BIG_GAIN = 1.15  # coverage is also read over the claims whose true gain is at least this


def world_summary(outcomes: list[Outcome]) -> dict[str, Any]:
    """`summary`, and the coverage over claims whose true gain is at least `BIG_GAIN`."""
    big = [o.covered for o in outcomes if o.claimed and o.covered is not None and o.gain >= BIG_GAIN]
    return {**summary(outcomes), "coverage_big": statistics.fmean(big) if big else None,
            "coverage_big_n": sum(big), "coverage_big_of": len(big)}


def _seeds_of(ranges: Mapping[str, range], seeds: str, count: int, what: str) -> range:
    available = ranges[seeds]
    if not 1 <= count <= len(available):
        raise SystemExit(f"Expected {what} between 1 and {len(available)} (the {seeds} seeds, "
                         f"{available[0]}..{available[-1]}). Received: {count}.")
    return available[:count]


def in_lockstep(world: World) -> World:
    """`world` measured in lockstep rounds: its noise's own share drawn from LOCKSTEP_OWN, on a stream of its own
    (the world's effects and the rest of its noise are what `draw_world` drew)."""
    own = random.Random(f"lockstep/{world.seed}").uniform(*LOCKSTEP_OWN)
    noise = replace(world.scenario.noise, own_share=own)
    return replace(world, scenario=replace(world.scenario, noise=noise))


def worlds(count: int, trials: int, seeds: str, cv: float | None = None, model: str = "tiny", jobs: int = 1,
           progress: Callable[[str], None] = lambda _: None, lockstep: bool = False) -> dict[str, Any]:
    """One study of each of the first `count` worlds of the `seeds` draw: the figures overall and by kind.

    `cv` None: each world's drawn CV; else that CV for every world, the rest of its noise as drawn. With
    `lockstep`, every pair and round is measured in lockstep (`in_lockstep`).
    """
    drawn = [draw_world(seed) for seed in _seeds_of(WORLD_SEEDS, seeds, count, "--worlds")]
    if lockstep:
        drawn = [in_lockstep(world) for world in drawn]
    outcomes = run_studies([Study(w.scenario, cv, w.seed, trials, None, None, model, None) for w in drawn],
                           jobs, progress, "worlds: ")
    helps = [o for o in outcomes if o.best_gain > 1.0]
    by_machine = {m: [o for w, o in zip(drawn, outcomes) if w.machine == m] for m, _ in MACHINES}
    spread = [o for w, o in zip(drawn, outcomes) if w.scenario.noise.spread]
    return {
        "noise_cv": cv if cv is not None else "drawn",
        **world_summary(outcomes),
        "helps": world_summary(helps) if helps else None,
        "nothing_helps": world_summary([o for o in outcomes if o.best_gain <= 1.0]) if len(helps) < len(outcomes)
        else None,
        "by_machine": {m: world_summary(found) for m, found in by_machine.items() if found},
        "with_spread": world_summary(spread) if spread else None,
        "worlds": [{"seed": w.seed, "machine": w.machine, "null": w.null,
                    "cv": round(cv if cv is not None else w.scenario.noise.cv or 0, 4),  # the CV the study ran at
                    **({"own_share": round(w.scenario.noise.own_share, 4)} if w.scenario.noise.own_share else {}),
                    "best_gain": round(o.best_gain, 4), "gain": round(o.gain, 4), "right": o.right,
                    "claimed": o.claimed, "covered": o.covered, "answer": o.answer, "trials": o.trials}
                   for w, o in zip(drawn, outcomes)],
    }


def noise_models(models: list[str], studies: int, trials: int, seeds: str, cv: float | None = None,
                 model: str = "tiny", jobs: int = 1,
                 progress: Callable[[str], None] = lambda _: None, lockstep: bool = False) -> dict[str, Any]:
    """`studies` studies of the null world under each noise model: its claims (all false) with a 95% interval.

    With `lockstep`, each model's rounds are measured in lockstep with the own share LOCKSTEP_OWN_NULL.
    """
    chosen = _seeds_of(NULL_SEEDS, seeds, studies, "--studies")
    worlds_of = {name: null_world(name) for name in models}
    if lockstep:
        worlds_of = {name: replace(w, noise=replace(w.noise, own_share=LOCKSTEP_OWN_NULL))
                     for name, w in worlds_of.items()}
    plan = [Study(worlds_of[name], cv, seed, trials, None, None, model, None) for name in models for seed in chosen]
    outcomes = run_studies(plan, jobs, progress, "noise models: ")
    out: dict[str, Any] = {}
    for index, name in enumerate(models):
        found = outcomes[index * studies:(index + 1) * studies]
        claims = sum(o.claimed for o in found)
        low, high = share_interval(claims, studies)
        out[name] = {"studies": studies, "claims": claims / studies, "claims_n": claims,
                     "claims_ci95": [low, high], "mean_trials": statistics.fmean(o.trials for o in found),
                     "answers": sorted({o.answer for o in found if o.claimed})}
    return {"noise_cv": cv if cv is not None else "the model's", "models": out}


def pretend_cpu_host() -> None:
    """The simulated machine is a CPU with no GPU, whatever runs this script."""
    environment.nvidia_gpus = lambda: ([], None)  # type: ignore[assignment]
    host = environment.host()
    environment.host = lambda backend=None: {**host, "backend": backend}  # type: ignore[assignment]
    optuna.logging.set_verbosity(logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def _share(value: float | None, n: int | None = None, of: int | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" + (f" ({n}/{of})" if n is not None and of is not None else "")


def render(levels: list[dict[str, Any]], header: str) -> str:
    lines = [header]
    columns = f"{'':>20}  {'right':>14}  {'captured':>8}  {'false claims':>13}  {'coverage':>14}  " \
              f"{'claims':>6}  {'trials':>6}  {'minutes':>7}"
    for lv in levels:
        lines += ["", f"noise CV {lv['noise_cv']:.0%}: null_claims "
                      f"{_share(lv['null_claims'], lv['null_claims_n'], lv['null_studies'])}", columns]
        for name, figures in [("all", lv), *lv["by_scenario"].items()]:
            lines.append(
                f"{name:>20}  {_share(figures['right'], figures['right_n'], figures['studies']):>14}  "
                f"{figures['captured']:>8.3f}  "
                f"{_share(figures['false_claims'], figures['false_claims_n'], figures['studies']):>13}  "
                f"{_share(figures['coverage'], figures['coverage_n'], figures['coverage_of']):>14}  "
                f"{figures['claims']:>6.0%}  {figures['mean_trials']:>6.1f}  {figures['mean_minutes']:>7.1f}")
    return "\n".join(lines)


def render_worlds(result: dict[str, Any]) -> str:
    """The drawn worlds' table: every world, those where something helps, where nothing does, and by kind."""
    lines = [f"{'':>14}  {'right':>15}  {'captured':>8}  {'claims':>14}  {'false claims':>12}  "
             f"{'coverage':>15}  {f'cov >= {BIG_GAIN}x':>15}  {'trials':>6}"]
    rows = [("all", result), ("helps", result["helps"]), ("nothing helps", result["nothing_helps"]),
            *result["by_machine"].items(), ("with spread", result["with_spread"])]
    for name, f in rows:
        if f is None:
            continue
        lines.append(
            f"{name:>14}  {_share(f['right'], f['right_n'], f['studies']):>15}  {f['captured']:>8.3f}  "
            f"{_share(f['claims'], f['claims_n'], f['studies']):>14}  "
            f"{_share(f['false_claims'], f['false_claims_n'], f['studies']):>12}  "
            f"{_share(f['coverage'], f['coverage_n'], f['coverage_of']):>15}  "
            f"{_share(f['coverage_big'], f['coverage_big_n'], f['coverage_big_of']):>15}  {f['mean_trials']:>6.1f}")
    return "\n".join(lines)


def render_noise_models(result: dict[str, Any]) -> str:
    """The null world's claims under each noise model, each with its 95% Wilson interval."""
    lines = [f"{'noise model':>16}  {'claims':>16}  {'95% interval':>13}  {'trials':>6}"]
    for name, f in result["models"].items():
        low, high = f["claims_ci95"]
        lines.append(f"{name:>16}  {_share(f['claims'], f['claims_n'], f['studies']):>16}  "
                     f"{f'{low:.1%}-{high:.1%}':>13}  {f['mean_trials']:>6.1f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=None,
                        help="simulated studies per scenario per noise level (default 50), or per noise model "
                             "with --noise-models (default 200)")
    parser.add_argument("--cv", default=None,
                        help="noise levels (coefficient of variation; default 0.05,0.10,0.20); with --worlds or "
                             "--noise-models one level, in place of the drawn or the model's CV")
    parser.add_argument("--trials", type=int, default=40, help="the tuner's --trials budget")
    parser.add_argument("--scenarios", help="comma-separated scenario names or grid files (default: all, "
                                            "the recorded grids in benchmarks/scenarios/ included)")
    parser.add_argument("--worlds", type=int, help="draw this many worlds at random and run one study of each")
    parser.add_argument("--noise-models", nargs="?", const=",".join(NOISE_MODELS),
                        help=f"run the null world under these noise models (default: all, {', '.join(NOISE_MODELS)})")
    parser.add_argument("--seeds", choices=sorted({*SEED_BASES, *WORLD_SEEDS, *NULL_SEEDS}), default=None,
                        help="dev: for tuning the search; report: for figures (the named scenarios' default; "
                             "--worlds and --noise-models ask for it by name); report2 to report12: "
                             "further report draws, drawn worlds and noise models only. The ranges are in the docstring")
    parser.add_argument("--first-outlier", type=float, default=None,
                        help="share of studies whose first baseline trial comes in at x0.63 (default 0.25; "
                             "named scenarios only)")
    parser.add_argument("--outliers", type=float, default=None,
                        help="chance that any trial is a x0.6 outlier (default 0.02; named scenarios only)")
    parser.add_argument("--order-effect", type=float, default=None,
                        help="factor on each timed trial at an odd position (default 1.04, 1.0: off; "
                             "named scenarios only)")
    parser.add_argument("--model", default="tiny", help="a built-in model: it decides the search space")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes; the figures do not depend on it")
    parser.add_argument("--lockstep", action="store_true",
                        help="measure every pair and round in lockstep: a trial's own share of its noise drawn from "
                             "the fitted range (drawn worlds and noise models only)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    drawn = args.worlds is not None or args.noise_models is not None
    if drawn:
        scenario_flags = [f"--{name.replace('_', '-')}" for name in ("scenarios", "first_outlier", "outliers",
                                                                     "order_effect") if getattr(args, name) is not None]
        if scenario_flags:
            raise SystemExit(f"Expected {', '.join(scenario_flags)} without --worlds or --noise-models: a drawn "
                             "world and a noise model carry their own noise. Run the named scenarios apart.")
        if args.seeds is None:
            raise SystemExit("Expected --seeds dev or --seeds report with --worlds or --noise-models: the report "
                             "draw is reserved for the final measurement, so it is never run by default.")
        cvs = [float(cv) for cv in (args.cv or "").split(",") if cv]
        if len(cvs) > 1:
            raise SystemExit(f"Expected one --cv with --worlds or --noise-models. Received: {args.cv}.")
        cv = cvs[0] if cvs else None
        models = [name.strip() for name in (args.noise_models or "").split(",") if name.strip()]
        unknown = [name for name in models if name not in NOISE_MODELS]
        if unknown:
            raise SystemExit(f"Expected noise models from {', '.join(NOISE_MODELS)}. Received: {', '.join(unknown)}.")
        pretend_cpu_host()
        out: dict[str, Any] = {"seeds": args.seeds, "trials_budget": args.trials, "model": args.model,
                               **({"lockstep": {"own_share": LOCKSTEP_OWN, "null_own_share": LOCKSTEP_OWN_NULL}}
                                  if args.lockstep else {})}
        text = []
        if args.worlds is not None:
            chosen = _seeds_of(WORLD_SEEDS, args.seeds, args.worlds, "--worlds")
            out["worlds"] = {"seed_range": [chosen[0], chosen[-1]],
                             **worlds(args.worlds, args.trials, args.seeds, cv, args.model, args.jobs, progress,
                                      args.lockstep)}
            text += [f"{args.worlds} drawn worlds, one study each, --trials {args.trials}, seeds {args.seeds} "
                     f"({chosen[0]}..{chosen[-1]}), noise CV {'drawn' if cv is None else f'{cv:.0%}'}",
                     render_worlds(out["worlds"]), ""]
        if models:
            studies = args.studies or 200
            chosen = _seeds_of(NULL_SEEDS, args.seeds, studies, "--studies")
            out["noise_models"] = {"seed_range": [chosen[0], chosen[-1]], "studies_per_model": studies,
                                   **noise_models(models, studies, args.trials, args.seeds, cv, args.model,
                                                  args.jobs, progress, args.lockstep)}
            text += [f"the null world, {studies} studies per noise model, --trials {args.trials}, seeds "
                     f"{args.seeds} ({chosen[0]}..{chosen[-1]}), noise CV "
                     f"{'the model' + chr(39) + 's' if cv is None else f'{cv:.0%}'}",
                     render_noise_models(out["noise_models"])]
        print(json.dumps(out) if args.json else "\n".join(text).rstrip())
        return

    seeds = args.seeds or "report"
    if seeds not in SEED_BASES:
        raise SystemExit(f"Expected --seeds {' or '.join(sorted(SEED_BASES))} for the named scenarios. Received: "
                         f"{seeds} (a draw of worlds and noise-model studies only).")
    studies = args.studies or 50
    first_outlier = 0.25 if args.first_outlier is None else args.first_outlier
    outliers = 0.02 if args.outliers is None else args.outliers
    order_effect = 1.04 if args.order_effect is None else args.order_effect
    pretend_cpu_host()
    scenarios = select(args.scenarios)
    levels = [level(float(cv), scenarios, studies, args.trials, seeds, first_outlier, outliers, args.model,
                    order_effect, progress, args.jobs)
              for cv in (args.cv or "0.05,0.10,0.20").split(",")]
    first = SEED_BASES[seeds]
    if args.json:
        print(json.dumps({"seeds": seeds, "seed_range": [first, first + studies - 1],
                          "studies_per_scenario": studies, "trials_budget": args.trials,
                          "order_effect": order_effect, "scenarios": [s.name for s in scenarios],
                          "levels": levels}))
        return
    print(render(levels, f"{studies} simulated studies per scenario per noise level, --trials {args.trials}, "
                         f"--order-effect {order_effect}, seeds {seeds} ({first}..{first + studies - 1})\n"
                         f"scenarios: {', '.join(s.name for s in scenarios)}"))


if __name__ == "__main__":
    main()
