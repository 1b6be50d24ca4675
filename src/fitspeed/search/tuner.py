"""`fitspeed tune`: find the fastest configuration that trains the same.

The search, in order (every measured configuration is one Optuna trial):
1. the baseline: Keras's defaults at the user's batch size and `--set`;
2. a sweep of one knob at a time from the baseline, as the articles do;
3. the combination of every knob value that beat the baseline by `min_gain`;
4. Optuna's sampler (TPE) over the joint space, with the rest of the budget.

A configuration counts only if its trial is ok and, when it changes numerics,
its loss matches the baseline's (`fitspeed.search.guard`). The best one is then run
again against the baseline, interleaved (`fitspeed.measure.comparison`); a speed-up is
claimed only when the interval's lower bound exceeds 1.

Trials run one at a time, each in its own process. Budget: `trials` measured
configurations in the study (a rerun continues towards the same total), and/or
`time_s` seconds of this run's search.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import TrialState

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError, UserError
from fitspeed.core.input_kinds import KINDS, data_kind
from fitspeed.core.record import TrialSpec, throughput
from fitspeed.machine import environment
from fitspeed.measure.comparison import interleave
from fitspeed.measure.runner import run_trial
from fitspeed.search import guard, studies
from fitspeed.search.events import (
    GuardChecked,
    Note,
    OnEvent,
    TrialFinished,
    TrialStarted,
    VerificationStarted,
    VerificationTrial,
)
from fitspeed.search.space import (
    Dimension,
    choices,
    default_space,
    input_space,
    only,
    override,
)

Runner = Callable[[TrialSpec], dict[str, Any]]
MAX_DUPLICATE_ASKS = 25


@dataclass(frozen=True)
class TuneSettings:
    model: str
    data: str | None = None
    base: TrialConfig = field(default_factory=TrialConfig)
    trials: int = 30
    time_s: float | None = None
    study: str | None = None
    storage: str = "sqlite:///fitspeed.db"
    steps: int | None = None
    repeats: int = 3
    seed: int = 0
    timeout_s: float | None = 900.0
    memory_limit_mb: int | None = None
    pairs: int = 5
    tolerance: float = guard.DEFAULT_TOLERANCE
    min_gain: float = 0.05
    space: tuple[str, ...] = ()
    knobs: tuple[str, ...] = ()  # search only these (empty: all)
    batch_sizes: tuple[int, ...] = ()
    monitor: bool = False  # each trial record gains a `monitor` summary (fitspeed.machine.sampler)
    script: dict[str, Any] | None = None  # a user's training command (fitspeed.measure.training_command); model and data name it

    @property
    def study_name(self) -> str:
        return self.study or f"{self.model}-{self.data or 'synthetic'}"

    def spec(self, config: TrialConfig, steps: int | None = None) -> TrialSpec:
        return TrialSpec(
            model=self.model, data=self.data, config=config, steps=steps or self.steps_for(config),
            repeats=self.repeats, seed=self.seed, timeout_s=self.timeout_s,
            memory_limit_mb=self.memory_limit_mb, monitor=self.monitor, script=self.script,
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


class Tuner:
    def __init__(self, settings: TuneSettings, run: Runner = run_trial, on_event: OnEvent | None = None) -> None:
        self.settings = settings
        self.run_trial = run
        self.emit: OnEvent = on_event or (lambda event: None)
        self.started = time.perf_counter()
        self.base = settings.base
        self.dims: list[Dimension] = only(
            override(
                default_space(settings.model, settings.base, has_gpu=bool(environment.nvidia_gpus()[0]),
                              data=settings.data),
                settings.space,
                settings.base,
            ),
            settings.knobs,
        )
        self.choices = choices(self.dims, self.base)
        self.study = studies.open_study(
            settings.study_name,
            settings.storage,
            {"model": settings.model, "data": settings.data, "base": settings.base.to_dict(),
             "tolerance": settings.tolerance, "min_gain": settings.min_gain,
             "skipped": {d.knob: d.skipped for d in self.dims if d.skipped},
             "environment": environment.host(settings.base.backend)},
            seed=settings.seed,
        )

    # -- budget -------------------------------------------------------------

    def _spent(self) -> bool:
        done = sum(1 for t in studies.measured(self.study).values() if t.user_attrs.get("phase") != "batch_size")
        if done >= self.settings.trials:
            return True
        return self.settings.time_s is not None and time.perf_counter() - self.started > self.settings.time_s

    # -- measuring ----------------------------------------------------------

    def _distributions(self) -> dict[str, BaseDistribution]:
        return {name: CategoricalDistribution(list(values)) for name, values in self.choices.items()}

    def measure(
        self, config: TrialConfig, phase: str, tag: str = "", budgeted: bool = True
    ) -> dict[str, Any] | None:
        """Measure `config` once (per `tag`), or return its stored record; None when out of budget."""
        key = studies.config_key(config) + tag
        done = studies.measured(self.study)
        if key in done:
            return dict(done[key].user_attrs["record"])
        if budgeted and self._spent():
            return None
        params = {name: getattr(config, name) for name in self.choices}
        self.study.enqueue_trial(params, skip_if_exists=False)
        return self._run(self.study.ask(self._distributions()), config, key, phase)

    def _run(self, trial: optuna.Trial, config: TrialConfig, key: str, phase: str) -> dict[str, Any]:
        """Run `config` as the Optuna trial `trial`; its record and speed go to the study."""
        trial.set_user_attr("phase", phase)
        trial.set_user_attr("config_key", key)
        trial.set_user_attr("config", config.to_dict())
        self.emit(TrialStarted(phase, config))
        record = self.run_trial(self.settings.spec(config))
        trial.set_user_attr("record", studies.plain(record))
        speed = throughput(record)
        if speed is None:
            self.study.tell(trial, state=TrialState.FAIL)
        else:
            self.study.tell(trial, speed)
        self.emit(TrialFinished(phase, record))
        return record

    def guarded(self, config: TrialConfig) -> dict[str, Any] | None:
        """The guard verdict for `config` (stored), or None if it changes no numerics."""
        if not guard.numeric_changes(config, self.base):
            return None
        key = "guard:" + studies.config_key(config)
        stored = self.study.user_attrs.get(key)
        if stored:
            return dict(stored)
        baseline = self._guard_curve(self.base)
        candidate = self._guard_curve(config)
        verdict = guard.check(baseline, candidate, self.settings.tolerance).to_dict()
        if self.settings.script is not None:  # a script seeds its own training: is its baseline reproducible?
            unsteady = guard.unreproducible(baseline, self._guard_curve(self.base, again=True), self.settings.tolerance)
            if unsteady:
                verdict = {**verdict, "ok": False, "reason": unsteady}
        self.study.set_user_attr(key, verdict)
        self.emit(GuardChecked(config, verdict))
        return verdict

    def _guard_curve(self, config: TrialConfig, again: bool = False) -> list[float | None]:
        spec = guard.guard_spec(self.settings.spec(config), self.base)
        key = "guard-run:" + studies.config_key(spec.config) + ("#again" if again else "")
        stored = self.study.user_attrs.get(key)
        if stored is None:
            record = self.run_trial(spec)
            metrics = record.get("metrics") or {}
            stored = {"status": record["status"], "reason": record.get("reason"),
                      "curve": metrics.get("loss_curve") or []}
            self.study.set_user_attr(key, studies.plain(stored))
        return list(stored["curve"]) if stored["status"] == "ok" else [None]

    def accepted(self, config: TrialConfig, record: dict[str, Any] | None) -> bool:
        if record is None or throughput(record) is None:
            return False
        verdict = self.guarded(config)
        return verdict is None or bool(verdict["ok"])

    # -- the search ---------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """The whole search; a full disk under the study storage ends it with one sentence."""
        try:
            return self._search()
        except (optuna.exceptions.StorageInternalError, OSError) as error:  # the storage, not the search
            raise UserError(studies.storage_problem(error, self.settings.storage)) from None
        except Exception as error:
            if studies.disk_full(error):
                raise UserError(studies.storage_problem(error, self.settings.storage)) from None
            raise

    def _search(self) -> dict[str, Any]:
        interrupted = studies.recover_interrupted(self.study)
        if interrupted:
            self.emit(Note(f"{interrupted} interrupted trial(s) will be measured again"))
        baseline = self.measure(self.base, "baseline", budgeted=False)  # every budget buys the baseline
        if baseline is None or throughput(baseline) is None:
            return self.finish()
        self._learn_data_kind(baseline)
        sweep = [d for d in self.dims if d.searched and d.knob != "batch_size"]
        # Breadth first: every knob's most promising value, then the winners
        # combined, then the knobs' other values. A small budget still tries
        # every knob once and their combination.
        rounds = max((len(d.values) for d in sweep), default=0)
        base_speed = throughput(baseline) or 0.0
        for index in range(rounds):
            for dim in sweep:
                if index < len(dim.values):
                    config = self._config(knob_values={dim.knob: dim.values[index]})
                    if config:
                        self.measure(config, "sweep")
            if index == 0:
                self._combine(self._winners(sweep, base_speed))
        # The baseline again, after the sweep: a knob must beat the faster of the two.
        again = self.measure(self.base, "baseline", tag="#again")
        base_speed = max(throughput(r) or 0.0 for r in (baseline, again) if r)
        self._combine(self._winners(sweep, base_speed))
        self._sample(base_speed)
        self._batch_sizes()
        return self.finish()

    def _learn_data_kind(self, baseline: dict[str, Any]) -> None:
        """A user's data function: add the input knobs for the kind the baseline trial loaded."""
        kind = (baseline.get("metrics") or {}).get("data_kind")
        if data_kind(self.settings.data) is not None or kind not in KINDS:
            return
        learned = input_space(kind, self.base, os.cpu_count() or 1)
        names = {d.knob for d in learned}
        self.dims = only(override([d for d in self.dims if d.knob not in names] + learned,
                                  self.settings.space, self.base), self.settings.knobs)
        self.choices = choices(self.dims, self.base)
        self.study.set_user_attr("skipped", {d.knob: d.skipped for d in self.dims if d.skipped})
        self.emit(Note(f"the data is {kind}: its input knobs join the search"))

    def _winners(self, sweep: list[Dimension], base_speed: float) -> dict[str, Any]:
        """Each knob's fastest value among those measured that beat `base_speed` by min_gain."""
        done = {studies.config_key(TrialConfig.from_dict(t.user_attrs["config"])): t
                for t in studies.measured(self.study).values()}
        winners: dict[str, Any] = {}
        for dim in sweep:
            if dim.cost_only:
                continue
            best: tuple[float, Any] | None = None
            for value in dim.values:
                config = self._config(knob_values={dim.knob: value})
                trial = done.get(studies.config_key(config)) if config else None
                record = dict(trial.user_attrs["record"]) if trial else None
                speed = throughput(record) if record else None
                if speed and speed > base_speed * (1 + self.settings.min_gain) and (best is None or speed > best[0]):
                    if self.accepted(config, record):  # type: ignore[arg-type]
                        best = (speed, value)
            if best:
                winners[dim.knob] = best[1]
        return winners

    def _combine(self, winners: dict[str, Any]) -> None:
        if len(winners) > 1:
            combined = self._config(knob_values=winners)
            if combined:
                self.accepted(combined, self.measure(combined, "combine"))

    def _config(self, knob_values: dict[str, Any]) -> TrialConfig | None:
        try:
            return self.base.replace(**knob_values)
        except KnobError as error:
            self.emit(Note(f"skipped {knob_values}: {error}"))
            return None

    def _sample(self, base_speed: float) -> None:
        """Optuna's sampler over the joint space; configurations measured before are not run again."""
        duplicates = 0
        while not self._spent() and self.choices and duplicates < MAX_DUPLICATE_ASKS:
            trial = self.study.ask(self._distributions())
            config = self._config(knob_values=dict(trial.params))
            if config is None:  # a combination the backend cannot do: not measured
                duplicates += 1
                self.study.tell(trial, state=TrialState.FAIL)
                continue
            key = studies.config_key(config)
            done = studies.measured(self.study)
            if key in done:
                duplicates += 1
                previous = done[key]
                value = previous.value if previous.state == TrialState.COMPLETE else None
                if value is None:
                    self.study.tell(trial, state=TrialState.FAIL)
                else:
                    self.study.tell(trial, value)
                continue
            duplicates = 0
            record = self._run(trial, config, key, "sampler")
            speed = throughput(record)
            if speed and speed > base_speed * (1 + self.settings.min_gain):
                self.accepted(config, record)

    def _batch_sizes(self) -> None:
        """Throughput against batch size, up to the first that runs out of memory.

        Asked for explicitly, so outside the --trials budget. After an
        out-of-memory, sizes between the last that fit and the first that did
        not are bisected (multiples of 8) to find the largest that fits.
        """
        fits: list[int] = []
        for size in sorted(self.settings.batch_sizes):
            status = self._batch_size_status(size)
            if status == "oom":
                low, high = max(fits, default=0), size
                while True:
                    middle = next_batch_probe(low, high)
                    if middle is None:
                        break
                    if self._batch_size_status(middle) == "oom":
                        high = middle
                    else:
                        low = middle
                break  # larger batches will not fit either
            if status == "ok":
                fits.append(size)

    def _batch_size_status(self, size: int) -> str | None:
        config = self._config(knob_values={"batch_size": size})
        record = self.measure(config, "batch_size", budgeted=False) if config else None
        return record["status"] if record else None

    # -- the answer ---------------------------------------------------------

    def candidates(self) -> list[tuple[TrialConfig, dict[str, Any]]]:
        """Accepted configurations (batch size kept at the baseline's), fastest first."""
        out = []
        for trial in studies.measured(self.study).values():
            config = TrialConfig.from_dict(trial.user_attrs["config"])
            record = dict(trial.user_attrs["record"])
            if config.batch_size != self.base.batch_size or throughput(record) is None:
                continue
            verdict = self.study.user_attrs.get("guard:" + studies.config_key(config))
            if guard.numeric_changes(config, self.base) and not (verdict and verdict["ok"]):
                continue
            out.append((config, record))
        return sorted(out, key=lambda item: throughput(item[1]) or 0.0, reverse=True)

    def finish(self) -> dict[str, Any]:
        ranked = self.candidates()
        if not ranked or ranked[0][0] == self.base:
            verification = {"config": self.base.to_dict(), "verdict": "keep the defaults",
                            "claimed": False, "estimate": None,
                            "why": "no configuration beat the baseline" if ranked else "no baseline"}
            self.study.set_user_attr("verification", verification)
            return verification
        best = ranked[0][0]
        stored = self.study.user_attrs.get("verification")
        if stored and stored.get("config") == best.to_dict():
            return dict(stored)
        self.emit(VerificationStarted(best, self.settings.pairs))
        comparison = interleave(self.settings.spec(self.base), self.settings.spec(best), self.settings.pairs,
                             run=self.run_trial,
                             on_trial=lambda arm, pair, record: self.emit(VerificationTrial(arm, pair, record)))
        estimate = comparison.estimate()
        claimed = bool(estimate and len(estimate.ratios) >= 2 and estimate.low > 1.0)
        verification = {
            "config": best.to_dict(),
            "estimate": estimate.to_dict() if estimate else None,
            "claimed": claimed,
            "verdict": comparison.verdict() if claimed else "keep the defaults",
            "why": None if claimed else f"the speed-up was not confirmed: {comparison.verdict()}",
            "trials": studies.plain([r for pair in comparison.pairs for r in pair]),
        }
        self.study.set_user_attr("verification", verification)
        return verification
