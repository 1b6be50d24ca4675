"""`fitspeed tune`'s settings: one frozen record of what the user asked for."""

from __future__ import annotations

from dataclasses import dataclass, field

from fitspeed.core.config import TrialConfig
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import TrialSpec
from fitspeed.search import storages
from fitspeed.search.guard_stats import MARGIN


@dataclass(frozen=True)
class TuneSettings:
    model: str
    data: str | None = None
    base: TrialConfig = field(default_factory=TrialConfig)
    trials: int | None = None  # None: what the search space needs (`tuner.budget_plan`)
    time_s: float | None = None
    study: str | None = None
    storage: str = "sqlite:///fitspeed.db"
    heartbeat_s: int = storages.DEFAULT_HEARTBEAT_S  # a worker silent for twice this is taken as dead
    steps: int | None = None
    repeats: int = 3
    seed: int = 0
    timeout_s: float | None = 900.0
    memory_limit_mb: int | None = None
    pairs: int = 5
    min_gain: float = 0.05
    space: tuple[str, ...] = ()
    knobs: tuple[str, ...] = ()  # search only these (empty: all)
    batch_sizes: tuple[int, ...] = ()
    monitor: bool = False  # each trial record gains a `monitor` summary (fitspeed.machine.sampler)
    allow_batch_callbacks: bool = False  # a script's per-batch callbacks do not cap steps_per_execution
    script: JSONObject | None = None  # a user's training command (fitspeed.measure.training_command); model and data name it
    guard_margin: float = MARGIN  # the numerics guard rejects a loss shown worse by more than this share (`guard_stats`)
    screen_only: bool = False  # time each knob once beside the baseline and stop: a budget that decides nothing
    lockstep: bool = True  # a pair's trials alive together, timed in turns (fitspeed.measure.rounds); False: sequential

    @property
    def study_name(self) -> str:
        return self.study or f"{self.model}-{self.data or 'synthetic'}"

    def spec(self, config: TrialConfig, steps: int | None = None, stop_below: float | None = None) -> TrialSpec:
        return TrialSpec(
            model=self.model, data=self.data, config=config, steps=steps or self.steps_for(config),
            repeats=self.repeats, seed=self.seed, timeout_s=self.timeout_s,
            memory_limit_mb=self.memory_limit_mb, monitor=self.monitor, script=self.script,
            stop_below=stop_below,
        )

    def steps_for(self, config: TrialConfig) -> int | None:
        """--steps rounded up to whole executions of this config."""
        if self.steps is None:
            return None
        n = config.steps_per_execution
        return max(n, -(-self.steps // n) * n)


def next_batch_probe(fits: int, fails: int) -> int | None:
    """The next batch size to try between one that fit and one that ran out of memory.

    Midpoints rounded down to a multiple of 8 (article 001), until the gap is
    within 1/8 of the size that fit (or one step of 8):

    >>> next_batch_probe(256, 512), next_batch_probe(256, 384), next_batch_probe(256, 288)
    (384, 320, None)
    """
    if fails - fits <= max(8, fits // 8):
        return None
    middle = (fits + fails) // 2 // 8 * 8
    return middle if fits < middle < fails else None

