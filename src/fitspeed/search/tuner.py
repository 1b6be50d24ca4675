"""`fitspeed tune`: find the fastest configuration that trains the same.

Every decision is paired and adaptive (`fitspeed.core.stats.paired_step`): a
candidate is measured interleaved with the current incumbent, pair after pair,
until the interval on their ratio clears `min_gain` on one side or `pairs`
pairs are spent; a first pair at 0.7x or less stops at once. The noise of this
machine is pooled over the study (consecutive baseline trials and every
comparison's own pairs), so a large difference is decided in a pair or two.

The search, in order (every trial is one Optuna trial):
1. the screen: the baseline, then each knob's values one at a time, with the
   baseline measured again after every few of them. It only ranks the changes;
   a change that fails, or is at 0.7x of the baseline or less, is dropped there;
2. combination by evidence: starting from the defaults, the most promising
   change is compared with the incumbent on top of it and kept only if the pairs
   say it is faster by `min_gain` (and its loss passes the guard); then the next.
   Two changes that clash are never both kept: the second is compared on top of
   the first;
3. Optuna's sampler (TPE) over the joint space, with the rest of the budget: a
   configuration it finds faster than the incumbent's figure is compared with
   the incumbent in pairs before it replaces it;
4. verification: the final incumbent against the defaults, in pairs (not
   budgeted, at most `pairs`); if it is not confirmed faster, the incumbent
   before it, and so on. "Keep the defaults" only when none is confirmed.

Every decision is stored as a study user attr `decision:ID` with its pairs,
ratio, interval and verdict. Budget: `trials` trial processes in the study, the
pairs included (the verification and guard runs come on top), and/or `time_s`
seconds of this run's search.

Many workers (`fitspeed tune` processes on one study, `fitspeed.search.workers`)
run this same search. Every measurement is claimed by its key, so none is
measured twice and the budget is never overrun; every worker reads the others'
records. The screen's and the sampler's trials are independent, so workers share
them out; a paired decision, a guard check and the verification are each made
by one worker while the others wait for its stored answer and go on from there,
so all reach the same incumbents (a decision's pairs stay on one host).
"""

from __future__ import annotations

import hashlib
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError, UserError
from fitspeed.core.input_kinds import KINDS, data_kind
from fitspeed.core.record import TrialSpec, throughput
from fitspeed.core.stats import (
    EXTEND,
    Noise,
    paired_step,
    pooled_noise,
    promising,
    ratio_estimate,
)
from fitspeed.machine import environment, host_lock
from fitspeed.measure.runner import run_trial
from fitspeed.search import guard, storages, studies
from fitspeed.search.events import (
    DecisionMade,
    GuardChecked,
    Note,
    OnEvent,
    TrialFinished,
    TrialStarted,
    VerificationStarted,
)
from fitspeed.search.space import (
    Dimension,
    choices,
    default_space,
    input_space,
    only,
    override,
)
from fitspeed.search.workers import POLL_S, Busy, Workers

Runner = Callable[[TrialSpec], dict[str, Any]]
MAX_DUPLICATE_ASKS = 25
SCREEN_GROUP = 3  # the screen measures the baseline again after this many candidates
CLEARLY_SLOWER = 0.7  # a first pair at this ratio or below ends a comparison
STOP_SHARE = 0.5  # a candidate's trial stops early below this share of the incumbent's figure
MAX_FALLBACKS = 3  # verification tries at most this many incumbents, newest first
BUDGET_FREE = ("batch_size", "verify")  # phases outside the --trials budget
STEP_CONFIDENCE = 0.90  # a combination step asks one-sided "does it help?"; verification stays at 95%
RESERVE = 4  # the combination's last trials, kept for a comparison on course for a win
BUSY: dict[str, Any] = {"status": "busy"}  # measure(wait=False): another worker measures it now


@dataclass(frozen=True)
class TuneSettings:
    model: str
    data: str | None = None
    base: TrialConfig = field(default_factory=TrialConfig)
    trials: int = 30
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
        host = environment.host(settings.base.backend)
        self.study, storage = studies.open_study(
            settings.study_name,
            settings.storage,
            {"model": settings.model, "data": settings.data, "base": settings.base.to_dict(),
             "tolerance": settings.tolerance, "min_gain": settings.min_gain,
             "skipped": {d.knob: d.skipped for d in self.dims if d.skipped},
             "environment": host, "fitspeed_version": host["fitspeed"],
             "host_kind": {"cpu": host["cpu"], "cpu_count": host["cpu_count"],
                           "gpus": [g.get("name") for g in environment.nvidia_gpus()[0]]}},
            seed=settings.seed,
            heartbeat_s=settings.heartbeat_s,
        )
        self.workers = Workers(self.study, storage, settings.storage)

    # -- budget -------------------------------------------------------------

    def _spent(self, ahead: int = 0) -> bool:
        """The budget is used up, or would be after `ahead` more trials."""
        if self._claimed() + ahead >= self.settings.trials:
            return True
        return self.settings.time_s is not None and time.perf_counter() - self.started > self.settings.time_s

    def _claimed(self) -> int:
        """Budgeted configurations measured, being measured, or waiting to be measured again."""
        live = (TrialState.RUNNING, TrialState.WAITING)
        return len({t.user_attrs["config_key"] for t in self.study.get_trials(deepcopy=False)
                    if t.user_attrs.get("config_key") and t.user_attrs.get("phase") not in BUDGET_FREE
                    and (t.state in live or "record" in t.user_attrs)})

    # -- measuring ----------------------------------------------------------

    def _distributions(self) -> dict[str, BaseDistribution]:
        return {name: CategoricalDistribution(list(values)) for name, values in self.choices.items()}

    def measure(
        self, config: TrialConfig, phase: str, tag: str = "", budgeted: bool = True,
        stop_below: float | None = None, wait: bool = True, ahead: int = 0,
    ) -> dict[str, Any] | None:
        """Measure `config` once (per `tag`), or return its stored record; None when out of budget.

        `ahead`: budgeted trials that must still fit after this one (the other
        half of its pair, a reserve), or it is not started.

        While another worker measures it, wait for its record, or return BUSY
        at once with `wait=False`.
        """
        key = studies.config_key(config) + tag
        done = studies.measured(self.study)
        if key in done:
            return dict(done[key].user_attrs["record"])
        while True:
            claimed = self.workers.claim(key, self._attrs(config, phase, key, stop_below), self._params(config),
                                         self._distributions(), room=lambda: not (budgeted and self._spent(ahead)))
            if not isinstance(claimed, Busy):
                break
            if not wait:
                return BUSY
            time.sleep(POLL_S)
        if claimed is None:
            return None
        if isinstance(claimed, FrozenTrial):
            return dict(claimed.user_attrs["record"])
        return self._run(claimed, config, phase, stop_below)

    def _params(self, config: TrialConfig) -> dict[str, Any]:
        return {name: getattr(config, name) for name in self.choices}

    @staticmethod
    def _attrs(config: TrialConfig, phase: str, key: str, stop_below: float | None) -> dict[str, Any]:
        return {"phase": phase, "config_key": key, "config": config.to_dict(), "stop_below": stop_below}

    def _run(self, trial: optuna.Trial, config: TrialConfig, phase: str,
             stop_below: float | None = None) -> dict[str, Any]:
        """Run `config` as the Optuna trial `trial` (claimed, with its attrs); its record and speed go to the study."""
        self.emit(TrialStarted(phase, config))
        with self.workers.heartbeat(trial):
            record = self.run_trial(self.settings.spec(config, stop_below=stop_below))
        speed = throughput(record)
        try:
            trial.set_user_attr("record", studies.plain(record))
            if speed is None:
                self.study.tell(trial, state=TrialState.FAIL)
            else:
                self.study.tell(trial, speed)
        except UpdateFinishedTrialError:  # its heartbeat lapsed and another worker took it as dead
            self.emit(Note(f"trial {trial.number} was taken for a dead worker's (its heartbeat lapsed); "
                           "another worker measures it again"))
        self.emit(TrialFinished(phase, record))
        return record

    def _run_orphan(self, trial: FrozenTrial) -> None:
        """Measure a dead worker's trial that Optuna enqueued again (once)."""
        attrs = trial.user_attrs
        config = TrialConfig.from_dict(attrs["config"])
        tag = attrs["config_key"][len(studies.config_key(config)):]
        self.emit(Note(f"measuring again trial {attrs.get('retry_of', trial.number)}, left by {attrs.get('worker')} "
                       "when it stopped answering"))
        self.measure(config, attrs.get("phase", "sampler"), tag, budgeted=False, stop_below=attrs.get("stop_below"))

    def _settle(self, phases: tuple[str, ...] | None = None) -> None:
        """Wait until no other worker measures (in `phases`) or holds a unit; run what dead ones left."""
        while True:
            self.workers.recover()
            left = [t for t in self.workers.waiting() if phases is None or t.user_attrs.get("phase") in phases]
            if left:
                self._run_orphan(left[0])
                continue
            running = [t for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                       if t.user_attrs.get("config_key") and t.user_attrs.get("worker") != self.workers.me.id
                       and (phases is None or t.user_attrs.get("phase") in phases)]
            holders = {v for k, v in self.study.user_attrs.items()
                       if k.startswith("claim:") and v and v != self.workers.me.id}
            if not running and not (phases is None and holders & self.workers.alive()):
                return
            time.sleep(POLL_S)

    def _once(self, unit: str, stored: Callable[[], Any], compute: Callable[[], Any]) -> Any:
        """`stored()` once it is there; else `compute()`, by this worker if it takes `unit` first."""
        while True:
            found = stored()
            if found is not None:
                return found
            if self.workers.take(unit):
                try:
                    return compute()
                finally:
                    self.workers.release(unit)
            time.sleep(POLL_S)

    def guarded(self, config: TrialConfig) -> dict[str, Any] | None:
        """The guard verdict for `config` (stored), or None if it changes no numerics.

        A dict: `ok`, `reason`, the first seed's `baseline_curve` and `curve`, `runs` (trial processes,
        baseline and candidate) and `checks` (each measure against the baseline's spread over seeds).
        """
        if not guard.numeric_changes(config, self.base):
            return None
        key = "guard:" + studies.config_key(config)

        def stored() -> dict[str, Any] | None:
            found = self.study.user_attrs.get(key)
            return dict(found) if found else None

        return dict(self._once(key, stored, lambda: self._guard(config, key)))

    def _guard(self, config: TrialConfig, key: str) -> dict[str, Any]:
        """Judge `config`'s guard runs against the baseline's, at the same seeds (`guard.judge`), and store it."""
        baseline = self._guard_curve(self.base)
        candidate = self._guard_curve(config)
        verdict = studies.plain(guard.judge(baseline, candidate, script=self.settings.script is not None).to_dict())
        self.study.set_user_attr(key, verdict)
        self.emit(GuardChecked(config, verdict))
        return dict(verdict)

    def _guard_curve(self, config: TrialConfig) -> list[guard.GuardRun]:
        """`config`'s guard runs at the guard's seeds, stopping at a run that already decides the verdict."""
        runs: list[guard.GuardRun] = []
        for seed in guard.seeds(self.settings.spec(config)):
            runs.append(self._guard_run(config, seed))
            if guard.stop_early(runs):
                break
        return runs

    def _guard_run(self, config: TrialConfig, seed: int) -> guard.GuardRun:
        """The guard's train-mode run of `config` at `seed` (stored): status, loss curve, held-out loss and accuracy."""
        spec = guard.guard_spec(self.settings.spec(config), self.base, seed)
        key = f"guard-run:{studies.config_key(spec.config)}@seed{seed}"
        stored = self.study.user_attrs.get(key)
        if stored is None:
            stored = studies.plain(guard.GuardRun.from_record(self.run_trial(spec)).to_dict())
            self.study.set_user_attr(key, stored)
        return guard.GuardRun.from_dict(stored)

    # -- the search ---------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """The whole search; a full disk under the study storage ends it with one sentence."""
        try:
            self.workers.start(host_lock.device(), self.study.user_attrs.get("fitspeed_version"))
            try:
                return self._search()
            finally:
                self.workers.stop()
        except (optuna.exceptions.StorageInternalError, OSError) as error:  # the storage, not the search
            raise UserError(studies.storage_problem(error, self.settings.storage)) from None
        except Exception as error:
            if studies.disk_full(error):
                raise UserError(studies.storage_problem(error, self.settings.storage)) from None
            raise

    def _search(self) -> dict[str, Any]:
        interrupted = self.workers.recover()
        if interrupted:
            self.emit(Note(f"{interrupted} interrupted trial(s) will be measured again"))
        self.started = time.perf_counter()  # --time counts the search, not opening the study
        baseline = self.measure(self.base, "baseline", budgeted=False)  # nothing can be decided without it
        if baseline is None or throughput(baseline) is None:
            return self.finish()
        self._learn_data_kind(baseline)
        sweep = [d for d in self.dims if d.searched and d.knob != "batch_size"]
        promising = self._screen(sweep)
        self._combine(promising)
        self._costs(sweep)
        self._sample()
        self._batch_sizes()
        self._settle()  # every other worker's measurements and decisions are in: verify the final chain
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

    # -- the screen ---------------------------------------------------------

    def _screen(self, sweep: list[Dimension]) -> list[tuple[TrialConfig, float]]:
        """Each knob's most promising value once, the baseline again after every SCREEN_GROUP of them.

        A knob's next value is screened only when the one before it failed or
        came in at CLEARLY_SLOWER or less (`--space` lists them most promising
        first), except where the values are alternatives (`Dimension.each`:
        both mixed precisions, since a CPU may run either one fast). Returns the single changes worth combining, most promising
        first, with their ratio to the median baseline figure; those that came
        in at CLEARLY_SLOWER or less are decided there ("slower", one pair).
        Knobs measured only for their cost wait until after the combination.
        """
        queue = [(dim, 0, False) for dim in sweep if not dim.cost_only]
        measured: list[tuple[TrialConfig, float | None]] = []
        number = 0
        while queue:
            dim, index, deferred = queue.pop(0)
            config = self._config(knob_values={dim.knob: dim.values[index]})
            if config is None:
                record: dict[str, Any] | None = None
            else:
                if not deferred:
                    if number and number % SCREEN_GROUP == 0 \
                            and self.measure(self.base, "baseline", f"#screen{number}", wait=False) is None:
                        break
                    number += 1
                reference = self._screen_reference()
                record = self.measure(config, "sweep", stop_below=reference and STOP_SHARE * reference,
                                      wait=deferred)
                if record is BUSY:  # another worker measures it: come back to it at the end
                    queue.append((dim, index, True))
                    continue
                if record is None:
                    break
                measured.append((config, throughput(record)))
            speed = throughput(record) if record else None
            reference = self._screen_reference()
            if index + 1 < len(dim.values) and (dim.each or speed is None
                                                or (reference and speed <= CLEARLY_SLOWER * reference)):
                queue.append((dim, index + 1, False))
        if measured:  # close the last group with the baseline
            self.measure(self.base, "baseline", f"#screen{number}")
        self._settle(("baseline", "sweep"))  # every worker ranks the same screen
        reference = self._screen_reference()
        promising = []
        for config, speed in measured:
            if speed is None or reference is None:
                continue  # a failure is shown as such in the table; it is not combined
            ratio = speed / reference
            if ratio <= CLEARLY_SLOWER:
                self._store_decision("screen", self.base, config, [(reference, speed)],
                                     paired_step([ratio], self.settings.min_gain, 1))
                continue
            promising.append((config, ratio))
        return sorted(promising, key=lambda item: item[1], reverse=True)

    def _screen_reference(self) -> float | None:
        speeds = self._screen_baselines()
        return statistics.median(speeds) if speeds else None

    def _costs(self, sweep: list[Dimension]) -> None:
        """Knobs measured alone for their cost (deterministic), never recommended for speed."""
        for dim in sweep:
            if dim.cost_only and dim.values:
                config = self._config(knob_values={dim.knob: dim.values[0]})
                if config is None or self.measure(config, "sweep") is None:
                    return

    def _screen_baselines(self) -> list[float]:
        """The baseline's figures from the screen, in the order measured."""
        out = []
        for key, trial in studies.measured(self.study).items():
            if trial.user_attrs.get("phase") == "baseline" and key.startswith(studies.config_key(self.base)):
                tag = key[len(studies.config_key(self.base)):]
                if tag == "" or tag.startswith("#screen"):
                    speed = throughput(dict(trial.user_attrs["record"]))
                    if speed:
                        out.append((trial.number, speed))
        return [speed for _, speed in sorted(out)]

    # -- decisions ----------------------------------------------------------

    def noise(self) -> Noise | None:
        """This machine's noise on a paired log ratio, pooled over the study so far."""
        # The screen's baseline trials, less the first (a cold start), scaled by sqrt(2): their spread
        # around their mean is that of a paired log ratio. One outlier among them touches one residual.
        speeds = self._screen_baselines()[1:]
        groups = [[math.sqrt(2) * math.log(s) for s in speeds]]
        groups += [[math.log(b / a) for a, b in d["pairs"] if a and b]
                   for d in self.decisions() if d["purpose"] != "screen"]
        return pooled_noise(groups)

    def decisions(self) -> list[dict[str, Any]]:
        """Every stored decision, in the order made."""
        found = [dict(v) for k, v in self.study.user_attrs.items() if k.startswith("decision:")]
        return sorted(found, key=lambda d: d["order"])

    def _store_decision(self, purpose: str, a: TrialConfig, b: TrialConfig, pairs: list[tuple[float, float]],
                        step: Any, why: str | None = None, noise: Noise | None = None) -> dict[str, Any]:
        with self.workers.lock.held():  # one order for all workers
            return self._store_decision_now(purpose, a, b, pairs, step, why, noise)

    def _store_decision_now(self, purpose: str, a: TrialConfig, b: TrialConfig, pairs: list[tuple[float, float]],
                            step: Any, why: str | None, noise: Noise | None) -> dict[str, Any]:
        ident = decision_id(purpose, a, b)
        stored = self.study.user_attrs.get("decision:" + ident)
        order = stored["order"] if stored else len(self.decisions())
        decision = {"id": ident, "order": order, "purpose": purpose, "a": a.to_dict(), "b": b.to_dict(),
                    "a_label": a.label(), "b_label": b.label(), **step.to_dict(),
                    "pairs": [list(p) for p in pairs], "min_gain": self.settings.min_gain, "why": why,
                    "noise": noise.to_dict() if noise else None}
        decision["verdict"] = decision["verdict"] or "not confirmed"
        self.study.set_user_attr("decision:" + ident, studies.plain(decision))
        if not stored or stored != studies.plain(decision):
            self.emit(DecisionMade(decision))
        return decision

    def decide(self, purpose: str, a: TrialConfig, b: TrialConfig, min_gain: float | None = None,
               budgeted: bool = True, probe: bool = False) -> dict[str, Any]:
        """Compare `b` with `a` in interleaved pairs until `paired_step` decides; stored and returned.

        Made once, by one worker; the others take its stored answer. One that
        ran out of budget is taken up again when the budget allows more pairs.
        `probe`: take the first pair only and return where it stands, unstored
        (a later call goes on from the stored trials).
        """
        ident = decision_id(purpose, a, b)

        def stored() -> dict[str, Any] | None:
            found = self.study.user_attrs.get("decision:" + ident)
            if found and (found.get("why") != "the budget ran out" or self._spent()):
                return dict(found)
            return None

        if probe:
            return stored() or self._decide(purpose, a, b, min_gain, budgeted, probe=True)
        return dict(self._once("decision:" + ident, stored, lambda: self._decide(purpose, a, b, min_gain, budgeted)))

    def _decide(self, purpose: str, a: TrialConfig, b: TrialConfig, min_gain: float | None,
                budgeted: bool, probe: bool = False) -> dict[str, Any]:
        gain = self.settings.min_gain if min_gain is None else min_gain
        ident = decision_id(purpose, a, b)
        phase = "verify" if purpose == "verify" else purpose
        why = None
        noise = self.noise()
        screened = self._screen_pair(b) if purpose == "combine" and a == self.base else None
        pairs: list[tuple[float, float]] = [screened] if screened else []
        confidence = STEP_CONFIDENCE if purpose == "combine" else 0.95
        step = paired_step([sb / sa for sa, sb in pairs], gain, self.settings.pairs, noise, confidence,
                           clearly_slower=CLEARLY_SLOWER) if pairs else paired_step([], gain, self.settings.pairs)
        for index in range(len(pairs), self.settings.pairs * EXTEND):
            if step.verdict or (probe and pairs):
                break
            # the candidate first, then the incumbent: a candidate that fails costs one trial, and the
            # incumbent's trial that ends a decision can start the next one (`_reused`)
            record_a = self._reused(ident, a) if index == 0 else None
            figure = self._figure(a)
            # A pair is claimed whole (the incumbent's trial counted ahead). In the combination, only a
            # comparison on course for a win may use the last RESERVE trials: the budget's end finishes
            # the promising comparison under way rather than starting new ones.
            ahead = (record_a is None) + (RESERVE if purpose == "combine" and not promising(step.ratio, gain) else 0)
            record_b = self.measure(b, phase, f"#{ident}:{index}b", budgeted=budgeted,
                                    stop_below=figure and STOP_SHARE * figure, ahead=ahead)
            if record_b is not None and throughput(record_b) is not None and record_a is None:
                record_a = self.measure(a, phase, f"#{ident}:{index}a", budgeted=budgeted)
            elif record_b is not None and record_a is None:
                record_a = {"status": "not run"}
            if record_a is None or record_b is None:
                why = "the budget ran out"
                break
            speed_a, speed_b = throughput(record_a), throughput(record_b)
            if speed_b is None:
                why = f"{record_b['status']}: {record_b.get('reason') or 'no reason given'}"
                step = paired_step([], gain, self.settings.pairs)
                break
            if speed_a is None:
                continue  # the incumbent's trial failed this time: this pair does not count
            pairs.append((speed_a, speed_b))
            step = paired_step([sb / sa for sa, sb in pairs], gain, self.settings.pairs, noise, confidence,
                               clearly_slower=CLEARLY_SLOWER)
        if probe and not step.verdict and why is None:
            return {"id": ident, **step.to_dict()}
        return self._store_decision(purpose, a, b, pairs, step, why, noise)

    def _screen_pair(self, config: TrialConfig) -> tuple[float, float] | None:
        """`config`'s screen trial against the screen's median baseline: a first pair at no cost.

        The median of the screen's baseline trials, not the one next to it: a
        load burst on that one trial would otherwise skew this decision's first
        pair and, through it, the study's noise.
        """
        trial = studies.measured(self.study).get(studies.config_key(config))
        if trial is None or trial.user_attrs.get("phase") != "sweep":
            return None
        speed, reference = throughput(dict(trial.user_attrs["record"])), self._screen_reference()
        return (reference, speed) if speed and reference else None

    def _reused(self, ident: str, a: TrialConfig) -> dict[str, Any] | None:
        """The study's latest trial, when it measured `a`: the first pair of decision `ident` starts from it.

        The incumbent's trial that ended one decision (or the candidate's that
        made it the incumbent) is adjacent in time to the next candidate's, so
        it pairs with it as well as a fresh one would, one trial cheaper. Which
        trial was used is stored, so a resumed search pairs the same ones.
        """
        done = studies.measured(self.study)
        number = self.study.user_attrs.get("reuse:" + ident)
        if number is None:
            if f"{studies.config_key(a)}#{ident}:0a" in done or not done:
                return None
            here = [t for t in done.values() if t.user_attrs.get("host", self.workers.me.host) == self.workers.me.host]
            if not here:
                return None
            latest = max(here, key=lambda t: t.number)  # a pair is measured on one host
            if latest.user_attrs.get("config") != a.to_dict() or throughput(dict(latest.user_attrs["record"])) is None:
                return None
            used = {v for k, v in self.study.user_attrs.items() if k.startswith("reuse:")}
            if latest.number in used:
                return None
            number = latest.number
            self.study.set_user_attr("reuse:" + ident, number)
        trial = next((t for t in done.values() if t.number == number), None)
        return dict(trial.user_attrs["record"]) if trial else None

    def _combine(self, promising: list[tuple[TrialConfig, float]]) -> None:
        """Add the most promising change on top of the incumbent; keep it only if the pairs say so.

        The changes that gained `min_gain` or more in the screen are tried in
        the screen's order. The rest (a change may help only beside another)
        are then raced: one pair each on top of the incumbent, and the
        comparisons are finished in the order of those first pairs, so that the
        budget goes first to the one most likely to help. A change judged
        alone (`Dimension.alone`: turning off oneDNN where TensorFlow turned it
        on) is combined only if its screen trial gained. A change that showed
        no gain is tried once more on top of a later incumbent; one that was
        slower, failed or failed the guard is not.
        """
        incumbent = self.base
        strong = {studies.config_key(c) for c, ratio in promising if ratio >= 1 + self.settings.min_gain}
        alone = {d.knob for d in self.dims if d.alone}
        waiting = [single for single, _ in promising
                   if studies.config_key(single) in strong or not alone & set(single.changed())]
        while waiting and not self._spent():
            passed: list[TrialConfig] = []
            before = incumbent
            first = [s for s in waiting if studies.config_key(s) in strong]
            for single in first + self._race(incumbent, [s for s in waiting if s not in first]):
                config = self._on_top(incumbent, single)
                if config is None or self._spent():
                    continue
                challenger = incumbent
                incumbent = self._challenge(incumbent, config, "combine")
                verdict = self.study.user_attrs["decision:" + decision_id("combine", challenger, config)]["verdict"]
                if incumbent == challenger and verdict in ("no gain", "not confirmed"):
                    passed.append(single)
            waiting = passed if incumbent != before else []
            strong = set()

    def _on_top(self, incumbent: TrialConfig, single: TrialConfig) -> TrialConfig | None:
        """`single`'s change on top of `incumbent`; None when that knob is set already or cannot be."""
        changes = {k: v for k, v in single.to_dict().items() if v != getattr(self.base, k)}
        if any(getattr(incumbent, k) != getattr(self.base, k) for k in changes):
            return None  # that knob is set already, to a value that ranked higher
        return self._config(knob_values={**incumbent.to_dict(), **changes})

    def _race(self, incumbent: TrialConfig, singles: list[TrialConfig]) -> list[TrialConfig]:
        """`singles`, ordered by the first pair of each on top of `incumbent` (best first)."""
        firsts: list[tuple[float, int, TrialConfig]] = []
        for index, single in enumerate(singles):
            config = self._on_top(incumbent, single)
            if config is None or self._spent():
                firsts.append((0.0, index, single))
                continue
            step = self.decide("combine", incumbent, config, probe=True)
            firsts.append((step["ratio"] or 0.0, index, single))
        return [single for _, _, single in sorted(firsts, key=lambda item: (-item[0], item[1]))]

    def _challenge(self, incumbent: TrialConfig, config: TrialConfig, purpose: str) -> TrialConfig:
        """`config` if the pairs find it faster than `incumbent` and its loss passes the guard.

        The incumbent after it: `incumbent` if `config` lost, or another worker's
        winner if one replaced `incumbent` in the meantime.
        """
        unit = "challenge:" + decision_id(purpose, incumbent, config)
        return self._once(unit, lambda: None, lambda: self._challenged(incumbent, config, purpose))  # type: ignore[no-any-return]

    def _challenged(self, incumbent: TrialConfig, config: TrialConfig, purpose: str) -> TrialConfig:
        earlier = self.study.user_attrs.get("decision:" + decision_id("combine", incumbent, config))
        decision = dict(earlier) if earlier and purpose == "sampler" else self.decide(purpose, incumbent, config)
        if decision["verdict"] != "faster":
            return incumbent
        verdict = self.guarded(config)
        if verdict is not None and not verdict["ok"]:
            return incumbent
        if self._chain_add(config, over=incumbent):
            return config
        return (self.incumbents() or [self.base])[-1]

    def _chain_add(self, config: TrialConfig, over: TrialConfig) -> bool:
        """Append `config` to the incumbents if it beat the newest; False if another worker's came first."""
        with self.workers.lock.held():
            chain = list(self.study.user_attrs.get("incumbents") or [])
            if config.to_dict() in chain:
                return True
            if (chain[-1] if chain else self.base.to_dict()) != studies.plain(over.to_dict()):
                return False
            chain.append(config.to_dict())
            self.study.set_user_attr("incumbents", studies.plain(chain))
            return True

    def incumbents(self) -> list[TrialConfig]:
        """The configurations that became the incumbent, in order; the last is the best found."""
        return [TrialConfig.from_dict(c) for c in self.study.user_attrs.get("incumbents") or []]

    def _config(self, knob_values: dict[str, Any]) -> TrialConfig | None:
        try:
            return self.base.replace(**knob_values)
        except KnobError as error:
            self.emit(Note(f"skipped {knob_values}: {error}"))
            return None

    def _sample(self) -> None:
        """Optuna's sampler over the joint space; a configuration it finds faster is confirmed in pairs."""
        duplicates = 0
        while not self._spent() and self.choices and duplicates < MAX_DUPLICATE_ASKS:
            # a joint configuration far slower than the incumbent (a slow precision, say) is cut short
            figure = self._figure((self.incumbents() or [self.base])[-1])
            stop_below = figure and STOP_SHARE * figure
            left = self.workers.waiting()  # a dead worker's trial first: Optuna's ask would take it anyway
            if left:
                self._run_orphan(left[0])
                continue
            with self.workers.lock.held():  # asking and claiming are one step: no two workers take one config
                if self._spent() or self.workers.waiting():
                    continue
                trial = self.workers.ask(self._distributions())
                config = self._config(knob_values=dict(trial.params))
                if config is None:  # a combination the backend cannot do: not measured
                    duplicates += 1
                    self.study.tell(trial, state=TrialState.FAIL)
                    continue
                key = studies.config_key(config)
                done = studies.measured(self.study)
                measured_before = [t for k, t in done.items() if k == key or k.startswith(key + "#")]
                claimed = None if measured_before else self.workers.claim(
                    key, self._attrs(config, "sampler", key, stop_below), self._params(config), self._distributions(),
                    room=lambda: True, asked=trial)
            if claimed is None or isinstance(claimed, (Busy, FrozenTrial)):  # alone, or in a decision's pairs
                duplicates += 1
                if isinstance(claimed, Busy):  # another worker measures it right now: its figure, once in
                    self.measure(config, "sampler")
                value = self._figure(config)
                if value is None:
                    self.study.tell(trial, state=TrialState.FAIL)
                else:
                    self.study.tell(trial, value)
                continue
            duplicates = 0
            speed = throughput(self._run(claimed, config, "sampler", stop_below))
            incumbent = (self.incumbents() or [self.base])[-1]
            while True:  # another worker's winner may have replaced the incumbent meanwhile: beat that one
                figure = self._figure(incumbent)
                if not (speed and figure and speed > figure * (1 + self.settings.min_gain)):
                    break
                after = self._challenge(incumbent, config, "sampler")
                if after in (incumbent, config):
                    break
                incumbent = after

    def _figure(self, config: TrialConfig) -> float | None:
        """The median of `config`'s measured figures in this study."""
        prefix = studies.config_key(config)
        speeds = [throughput(dict(t.user_attrs["record"])) for k, t in studies.measured(self.study).items()
                  if k.startswith(prefix) and (k == prefix or k[len(prefix)] == "#")]
        found = [s for s in speeds if s]
        return statistics.median(found) if found else None

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
        """Verify the best incumbent against the defaults in pairs; fall back to the one before it.

        Once per study and chain of incumbents: one worker verifies, the others read its answer.
        """
        def stored() -> dict[str, Any] | None:
            found = self.study.user_attrs.get("verification")
            chain = studies.plain([c.to_dict() for c in self.incumbents()])
            return dict(found) if found and found.get("chain") == chain else None

        return dict(self._once("verification", stored, self._verify))

    def _verify(self) -> dict[str, Any]:
        chain = self.incumbents()
        tried: list[dict[str, Any]] = []
        for config in list(reversed(chain))[:MAX_FALLBACKS]:
            self.emit(VerificationStarted(config, self.settings.pairs))
            decision = self.decide("verify", self.base, config, min_gain=0.0, budgeted=False)
            tried.append(decision)
            if decision["verdict"] == "faster":
                verification = self._verification(config, decision, tried, claimed=True)
                break
        else:
            why = ("no change was confirmed faster than the baseline in pairs" if not chain
                   else "the speed-up was not confirmed: " + "; ".join(
                       f"{d['b_label']}: {d['verdict']}" for d in tried))
            verification = {"config": self.base.to_dict(), "verdict": "keep the defaults", "claimed": False,
                            "estimate": None, "why": why if self._figure(self.base) else "no baseline", "tried": [d["id"] for d in tried]}
        verification.update(chain=[c.to_dict() for c in chain], by=self.workers.me.id)
        self.study.set_user_attr("verification", studies.plain(verification))
        return verification

    def _verification(self, config: TrialConfig, decision: dict[str, Any], tried: list[dict[str, Any]],
                      claimed: bool) -> dict[str, Any]:
        ratios = [b / a for a, b in decision["pairs"]]
        estimate = ratio_estimate(ratios).to_dict()
        estimate.update(ci_low=decision["low"], ci_high=decision["high"], median=decision["ratio"])
        pooled = f"B is {decision['ratio']:.2f}× faster ({decision['low']:.2f}–{decision['high']:.2f})"
        estimate["verdict"] = pooled
        return {"config": config.to_dict(), "estimate": estimate, "claimed": claimed, "verdict": pooled,
                "why": None, "decision": decision["id"], "tried": [d["id"] for d in tried],
                "fell_back": len(tried) > 1}


def decision_id(purpose: str, a: TrialConfig, b: TrialConfig) -> str:
    """A short name for the comparison of `b` with `a`, the same on a resumed run."""
    text = f"{purpose}|{studies.config_key(a)}|{studies.config_key(b)}"
    return hashlib.sha1(text.encode()).hexdigest()[:8]
