"""`fitspeed tune`: find the fastest configuration that trains the same, and prove it.

The search, in order (every trial is one Optuna trial, one child process):
1. the screen: the baseline, then each knob's values one at a time, with the
   baseline measured again after every few of them. It only ranks the changes;
   a change that fails, or is at 0.7x of the baseline or less, is dropped there.
   A screen trial selects; it is never evidence in a decision;
2. combination by evidence (`fitspeed.search.combination`): starting from
   the defaults, each change the screen found big (1.25x or more, most
   promising first) is compared with the incumbent on top of it, in fresh
   pairs (`fitspeed.search.decider`), and
   kept only if the pairs say it helps (and it passes the numerics guard).
   Two values of one knob that both screened well (two mixed precisions) are
   compared head to head. Then every other change that did not screen slower
   goes on top of the new incumbent as one bundle, decided the same way:
   small wins stack on a big one, and four 5% wins together are a step that
   three pairs can see. A bundle that loses is taken apart by a joint
   estimate of its members on top of the incumbent (a two-level fractional
   factorial, `fitspeed.search.factorial`): those estimated to help are
   decided again, together. What no bundle judged is raced and decided one
   at a time, on top of a later incumbent;
3. Optuna's sampler (TPE) over the joint space, with the rest of the search's
   budget but POLISH_RESERVE trials (the race too leaves them): a configuration
   it finds faster than the incumbent's figure meets it in fresh pairs first;
4. the model (`fitspeed.search.model`): one fit of log samples/s over every
   timed trial so far (each change's main effect and each pairwise
   interaction, Huber-weighted); its argmax meets the incumbent in fresh
   pairs, as a polish step, when the fit puts it 3% ahead;
5. the polish (`fitspeed.search.polish`): the screen's changes that the final
   incumbent leaves out, on top of it together, kept if 3 fresh pairs lean
   their way, then one under 0.9x that nothing tried (a choice: the claim is the verification's);
6. verification (`fitspeed.search.verification`): the final incumbent against
   the defaults in fresh pairs, each in a random order, one-sided at 2.5%.
   Its verdict is the study's one claim; "keep the defaults" when not confirmed.

Budget: `--trials` trial processes in the study, the verification's included:
the search stops VERIFY_RESERVE trials short of it, what a verification
takes on average (the guard runs and a verification that needs more pairs come
on top), and/or `time_s` seconds of this run's search. A budget too small to
screen, decide once and verify goes to the search whole. `budget_plan` names,
before the first trial, what a budget buys and the smallest that would do.

Many workers (`fitspeed tune` processes on one study, `fitspeed.search.workers`)
run this same search. Every measurement is claimed by its key, so none is
measured twice and the budget is never overrun; every worker reads the others'
records. The screen's and the sampler's trials are independent, so workers share
them out; a paired decision, a guard check and the verification are each made
by one worker while the others wait for its stored answer and go on from there,
so all reach the same incumbents (a decision's pairs stay on one host).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from fitspeed.core.config import TrialConfig, config_key
from fitspeed.core.errors import KnobError, UserError
from fitspeed.core.input_kinds import KINDS, data_kind
from fitspeed.core.input_kinds import check as check_input_knobs
from fitspeed.core.json_data import JSONObject
from fitspeed.core.knobs import get_knob
from fitspeed.core.record import TrialRecord, TrialRunner
from fitspeed.machine import environment, host_lock
from fitspeed.measure.rounds import RoundRunner, Rounds, as_rounds
from fitspeed.search import cost, guard, script_caps, studies
from fitspeed.search.batch_sizes import BatchSizes
from fitspeed.search.budget import SCREEN_ONLY, VERIFY_RESERVE, budget_plan, refusal
from fitspeed.search.combination import Combination
from fitspeed.search.lean import Lean, changed_knobs
from fitspeed.search.decision import Decision
from fitspeed.search.decider import (
    CHOOSE_MORE_PAIRS,
    Ask,
    Decider,
    choose_design,
    combine_design,
    decision_id,
)
from fitspeed.search.events import GuardChecked, Note, OnEvent, TrialFinished, TrialStarted
from fitspeed.search.ledger import (
    BUDGET,
    CHALLENGE,
    CLAIM,
    TUNE_S,
    VERIFICATION,
    Ledger,
    guard_key,
    guard_run_key,
)
from fitspeed.search.model import Model
from fitspeed.search.phase import Phase
from fitspeed.search.polish import Polish, polish_design, polish_room
from fitspeed.search.sampler import Sampler
from fitspeed.search.screen import Screen
from fitspeed.search.settings import TuneSettings, next_batch_probe
from fitspeed.search.space import (
    Dimension,
    choices,
    default_space,
    input_space,
    narrowed,
    override,
    skipped,
)
from fitspeed.search.verification import verify
from fitspeed.search.workers import POLL_S, Busy, Workers

__all__ = ["Tuner", "TuneSettings", "budget_plan", "decision_id", "next_batch_probe"]


class Tuner:
    def __init__(self, settings: TuneSettings, run: TrialRunner | RoundRunner | None = None,
                 on_event: OnEvent | None = None) -> None:
        self.settings = settings
        # a pair (and a lean round) is one round: lockstep where its trials fit together (`fitspeed.measure.rounds`)
        self.runner: RoundRunner = as_rounds(run if run is not None else Rounds(lockstep=settings.lockstep))
        self.run_trial: TrialRunner = self.runner
        self.emit: OnEvent = on_event or (lambda event: None)
        self.base = settings.base
        self.dims: list[Dimension] = narrowed(
            override(
                default_space(settings.model, settings.base, has_gpu=bool(environment.nvidia_gpus()[0]),
                              data=settings.data, script=(settings.script or {}).get("file")),
                settings.space,
                settings.base,
            ),
            settings.knobs,
            settings.base,
        )
        self.choices = choices(self.dims, self.base)
        plan = budget_plan(self.dims, settings.trials or 0, settings.pairs)
        if settings.screen_only:  # the screen alone: no decision, no verification to keep room for
            trials, reserve = settings.trials or plan["screen"], 0
        else:  # refused before the study is opened and before any trial: it would run and answer nothing
            trials, reserve = settings.trials or plan["suggested"], VERIFY_RESERVE
            refused = refusal(plan, trials)
            if refused:
                raise UserError(refused)
        self.most_steps_per_execution: int | None = None  # a script's cap, once its baseline said (`_fit_epoch`)
        self.refused: set[str] = set()  # why a combination cannot run, each said once (`config_of`)
        self.data_kind: str | None = data_kind(settings.data)  # what fit() is given; a data function's, once loaded
        host = environment.host(settings.base.backend)
        self.study, storage = studies.open_study(
            settings.study_name,
            settings.storage,
            {"model": settings.model, "data": settings.data, "base": settings.base.to_dict(),
             "script": {"file": Path(settings.script["file"]).name if settings.script.get("file") else None,
                        "sha256": settings.script.get("sha256")} if settings.script else None,
             "min_gain": settings.min_gain,
             "skipped": skipped(self.dims),
             "environment": host, "fitspeed_version": host["fitspeed"],
             "host_kind": {"cpu": host["cpu"], "cpu_count": host["cpu_count"],
                           "gpus": [g.get("name") for g in environment.nvidia_gpus()[0]]}},
            seed=settings.seed,
            heartbeat_s=settings.heartbeat_s,
        )
        self.workers = Workers(self.study, storage, settings.storage)
        self.ledger = Ledger(self.study, self.base, trials, settings.time_s, reserve)
        self.decider = Decider(self.ledger, self.measure, self.once, self.workers.lock, self.emit, settings.seed,
                               self.measure_round)

    # -- budget -------------------------------------------------------------

    def spent(self, ahead: int = 0) -> bool:
        """The search's budget is used up, or would be after `ahead` more trials (`Ledger.spent`)."""
        return self.ledger.spent(ahead)

    def decisions(self) -> list[Decision]:
        """Every stored decision, in the order made."""
        return self.ledger.decisions()

    def incumbents(self) -> list[TrialConfig]:
        """The configurations that became the incumbent, in order; the last is the best found."""
        return self.ledger.incumbents()

    # -- measuring ----------------------------------------------------------

    def _distributions(self) -> dict[str, BaseDistribution]:
        return {name: CategoricalDistribution(list(values)) for name, values in self.choices.items()}

    def measure(self, config: TrialConfig, phase: Phase, tag: str = "", budgeted: bool = True,
                stop_below: float | None = None, ahead: int = 0) -> TrialRecord | None:
        """Measure `config` once (per `tag`), or return its stored record; None when out of budget.

        `ahead`: budgeted trials that must still fit after this one (the other
        half of its pair, a reserve), or it is not started. While another
        worker measures it, wait for its record.
        """
        record = self._measure(config, phase, tag, budgeted, stop_below, ahead, wait=True)
        return None if isinstance(record, Busy) else record  # waiting, it is never Busy

    def measure_or_busy(self, config: TrialConfig, phase: Phase, tag: str = "",
                        stop_below: float | None = None) -> TrialRecord | Busy | None:
        """As `measure`, but while another worker measures `config`, its `Busy` at once."""
        return self._measure(config, phase, tag, True, stop_below, 0, wait=False)

    def _measure(self, config: TrialConfig, phase: Phase, tag: str, budgeted: bool, stop_below: float | None,
                 ahead: int, wait: bool) -> TrialRecord | Busy | None:
        key = config_key(config) + tag
        done = studies.measured(self.study)
        if key in done:
            return TrialRecord.from_dict(done[key].user_attrs["record"])
        while True:
            claimed = self._claim(key, config, phase, stop_below, room=lambda: not (budgeted and self.spent(ahead)))
            if not isinstance(claimed, Busy):
                break
            if not wait:
                return claimed
            time.sleep(POLL_S)
        if claimed is None:
            return None
        if isinstance(claimed, FrozenTrial):
            return TrialRecord.from_dict(claimed.user_attrs["record"])
        return self.run_claimed(claimed, config, phase, stop_below)

    def measure_round(self, asks: Sequence[Ask], first: int = 0, budgeted: bool = True,
                      ahead: int = 0) -> list[TrialRecord | None]:
        """Measure `asks` as one round (`fitspeed.measure.rounds`: lockstep where the trials fit together), the
        `first`'s turn first; a record per ask, stored ones as they are, None for one the budget has no room for.

        `ahead`: budgeted trials that must still fit after the round. Each trial is claimed as `measure`
        claims one; while another worker measures one, its record is waited for.
        """
        return [None if isinstance(r, Busy) else r for r in self._measure_round(asks, first, budgeted, ahead, True)]

    def measure_round_or_busy(self, asks: Sequence[Ask], first: int = 0) -> list[TrialRecord | Busy | None]:
        """As `measure_round`, but where another worker measures an ask, nothing is claimed: each such ask comes
        back as its `Busy`, the rest stored or None (the screen comes back to such a round at its end)."""
        return self._measure_round(asks, first, True, 0, wait=False)

    def _measure_round(self, asks: Sequence[Ask], first: int, budgeted: bool, ahead: int,
                       wait: bool) -> list[TrialRecord | Busy | None]:
        records: list[TrialRecord | Busy | None] = [None] * len(asks)
        claimed: dict[int, optuna.Trial] = {}
        done = studies.measured(self.study)
        fresh = [i for i, ask in enumerate(asks) if config_key(ask.config) + ask.tag not in done]
        if not wait:
            busy = self.workers.busy({config_key(asks[i].config) + asks[i].tag for i in fresh})
            if busy:
                for i, ask in enumerate(asks):
                    key = config_key(ask.config) + ask.tag
                    records[i] = (TrialRecord.from_dict(done[key].user_attrs["record"]) if key in done
                                  else Busy(busy[key]) if key in busy else None)
                return records
        for i, ask in enumerate(asks):
            key = config_key(ask.config) + ask.tag
            if key in done:
                records[i] = TrialRecord.from_dict(done[key].user_attrs["record"])
                continue
            after = ahead + len(fresh) - 1 - fresh.index(i)  # the rest of the round must fit too
            while True:
                found = self._claim(key, ask.config, ask.phase, ask.stop_below,
                                    room=lambda: not (budgeted and self.spent(after)))
                if not isinstance(found, Busy):
                    break
                time.sleep(POLL_S)
            if isinstance(found, FrozenTrial):
                records[i] = TrialRecord.from_dict(found.user_attrs["record"])
            elif found is not None:
                claimed[i] = found
        if len(claimed) == 1:
            (i, trial), = claimed.items()
            records[i] = self.run_claimed(trial, asks[i].config, asks[i].phase, asks[i].stop_below)
        elif claimed:
            slots = sorted(claimed)
            for i in slots:
                self.emit(TrialStarted(asks[i].phase, asks[i].config))
            specs = [self.settings.spec(asks[i].config, stop_below=asks[i].stop_below) for i in slots]

            def landed(index: int, record: TrialRecord) -> None:  # stored as it lands
                records[slots[index]] = self._tell(claimed[slots[index]], asks[slots[index]].phase, record)

            try:
                with contextlib.ExitStack() as beats:
                    for i in slots:
                        beats.enter_context(self.workers.heartbeat(claimed[i]))
                    measured = self.runner.round(specs, first=slots.index(first) if first in slots else 0,
                                                 landed=landed)
            except BaseException:  # stopped mid-round: what did not land is claimed again on the next run
                for i in slots:
                    if records[i] is None:
                        with contextlib.suppress(Exception):
                            self.study.tell(claimed[i], state=TrialState.FAIL)
                raise
            said = measured.why or measured.design
            if said and said not in self.refused:  # each said once
                self.refused.add(said)
                self.emit(Note(f"sequential trials, not lockstep rounds: {measured.why}" if measured.why else
                               f"each pair is a {measured.design} round: its trials alive together, timed window "
                               "by window in turns" if measured.design == "lockstep" else "each pair is sequential"))
        return records

    def ask(self) -> optuna.Trial:
        """Optuna's sampler's next trial over the joint space (`choices`), not yet claimed (`claim_asked`)."""
        return self.workers.ask(self._distributions())

    def claim_asked(self, trial: optuna.Trial, config: TrialConfig, phase: Phase,
                    stop_below: float | None = None) -> FrozenTrial | optuna.Trial | Busy | None:
        """Claim `config`'s measurement as `trial`, a trial `ask` gave, whatever the budget (`Workers.claim`).

        Its finished trial where it has a record, `Busy` while another worker
        measures it, else `trial` itself, this worker's to run (`run_claimed`).
        """
        return self._claim(config_key(config), config, phase, stop_below, room=lambda: True, asked=trial)

    def _claim(self, key: str, config: TrialConfig, phase: Phase, stop_below: float | None,
               room: Callable[[], bool], asked: optuna.Trial | None = None) -> FrozenTrial | optuna.Trial | Busy | None:
        return self.workers.claim(key, self._attrs(config, phase, key, stop_below), self._params(config),
                                  self._distributions(), room=room, asked=asked)

    def _params(self, config: TrialConfig) -> JSONObject:
        return {name: getattr(config, name) for name in self.choices}

    @staticmethod
    def _attrs(config: TrialConfig, phase: Phase, key: str, stop_below: float | None) -> JSONObject:
        return {"phase": phase, "config_key": key, "config": config.to_dict(), "stop_below": stop_below}

    def run_claimed(self, trial: optuna.Trial, config: TrialConfig, phase: Phase,
                    stop_below: float | None = None) -> TrialRecord:
        """Run `config` as the Optuna trial `trial` (claimed, with its attrs: `claim_asked`); its record and speed go
        to the study, and its record comes back."""
        self.emit(TrialStarted(phase, config))
        with self.workers.heartbeat(trial):
            record = self.run_trial(self.settings.spec(config, stop_below=stop_below))
        return self._tell(trial, phase, record)

    def _tell(self, trial: optuna.Trial, phase: Phase, record: TrialRecord) -> TrialRecord:
        """Store `record` as `trial`'s, and its speed as its value (a failure as FAIL)."""
        speed = record.throughput
        try:
            trial.set_user_attr("record", studies.plain(record.to_dict()))
            if speed is None:
                self.study.tell(trial, state=TrialState.FAIL)
            else:
                self.study.tell(trial, speed)
        except UpdateFinishedTrialError:  # its heartbeat lapsed and another worker took it as dead
            self.emit(Note(f"trial {trial.number} was taken for a dead worker's (its heartbeat lapsed); "
                           "another worker measures it again"))
        self.emit(TrialFinished(phase, record))
        return record

    def run_orphan(self, trial: FrozenTrial) -> None:
        """Measure a dead worker's trial that Optuna enqueued again (once)."""
        attrs = trial.user_attrs
        config = TrialConfig.from_dict(attrs["config"])
        tag = attrs["config_key"][len(config_key(config)):]
        self.emit(Note(f"measuring again trial {attrs.get('retry_of', trial.number)}, left by {attrs.get('worker')} "
                       "when it stopped answering"))
        self.measure(config, Phase(attrs.get("phase", Phase.SAMPLER)), tag, budgeted=False, stop_below=attrs.get("stop_below"))

    def settle(self, phases: tuple[Phase, ...] | None = None) -> None:
        """Wait until no other worker measures (in `phases`) or holds a unit; run what dead ones left."""
        while True:
            self.workers.recover()
            left = [t for t in self.workers.waiting() if phases is None or t.user_attrs.get("phase") in phases]
            if left:
                self.run_orphan(left[0])
                continue
            running = [t for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                       if t.user_attrs.get("config_key") and t.user_attrs.get("worker") != self.workers.me.id
                       and (phases is None or t.user_attrs.get("phase") in phases)]
            holders = {v for k, v in self.study.user_attrs.items()
                       if k.startswith(CLAIM) and v and v != self.workers.me.id}
            if not running and not (phases is None and holders & self.workers.alive()):
                return
            time.sleep(POLL_S)

    def once(self, unit: str, stored: Callable[[], Any], compute: Callable[[], Any]) -> Any:
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

    def guarded(self, config: TrialConfig) -> guard.GuardVerdict | None:
        """The guard verdict for `config` (stored in the study, `guard.GuardVerdict.to_dict`), or None if it
        changes no numerics."""
        if not guard.numeric_changes(config, self.base):
            return None
        key = guard_key(config)
        stored = self.once(key, lambda: self.study.user_attrs.get(key) or None, lambda: self._guard(config, key))
        return guard.GuardVerdict.from_dict(stored)

    def _guard(self, config: TrialConfig, key: str) -> JSONObject:
        """Judge `config`'s guard runs against the baseline's, paired seed by seed (`guard.paired`: the rule), each
        run stored in the study (`_guard_run`), and store the verdict."""
        judged = guard.paired(self._guard_run, self.settings.spec(config), self.base, config,
                              script=self.settings.script is not None, margin=self.settings.guard_margin)
        verdict = studies.plain(judged.to_dict())
        self.study.set_user_attr(key, verdict)
        self.emit(GuardChecked(config, judged))
        return verdict

    def _guard_run(self, config: TrialConfig, seed: int) -> guard.GuardRun:
        """The guard's train-mode run of `config` at `seed` (stored): status, loss curve, held-out loss and accuracy."""
        spec = guard.guard_spec(self.settings.spec(config), self.base, seed)
        key = guard_run_key(spec.config, seed)
        stored = self.study.user_attrs.get(key)
        if stored is None:
            stored = studies.plain(guard.GuardRun.from_record(self.run_trial(spec)).to_dict())
            self.study.set_user_attr(key, stored)
        return guard.GuardRun.from_dict(stored)

    # -- the search ---------------------------------------------------------

    def run(self) -> JSONObject:
        """The whole search; a full disk under the study storage ends it with one sentence."""
        started = time.perf_counter()
        try:
            self.workers.start(host_lock.device(), self.study.user_attrs.get("fitspeed_version"))
            try:
                answer = self._search()
                # the study's wall time over every run of it, for the saving line (`fitspeed.search.cost`)
                spent = float(self.study.user_attrs.get(TUNE_S) or 0.0) + time.perf_counter() - started
                self.study.set_user_attr(TUNE_S, round(spent, 1))
                return answer
            finally:
                self.workers.stop()
        except (optuna.exceptions.StorageInternalError, OSError) as error:  # the storage, not the search
            raise UserError(studies.storage_problem(error, self.settings.storage)) from None
        except Exception as error:
            if studies.disk_full(error):
                raise UserError(studies.storage_problem(error, self.settings.storage)) from None
            raise

    def _search(self) -> JSONObject:
        interrupted = self.workers.recover()
        if interrupted:
            self.emit(Note(f"{interrupted} interrupted trial(s) will be measured again"))
        self._name_budget()
        self.study.set_user_attr(studies.LAST_USED, time.time())  # `fitspeed show` opens the study used last
        self.ledger.started = time.perf_counter()  # --time counts the search, not opening the study
        baseline = self._baseline()  # nothing can be decided without it
        if baseline is None or baseline.throughput is None:
            return self.finish()
        self._learn_data_kind(baseline)
        self._fit_epoch(baseline)
        self._name_cost(baseline)
        if self.ledger.searched_to_its_end():
            self.emit(Note(f"this study was searched to its end with --trials {self.ledger.trials} in an earlier "
                           "run: its answer stands (a larger --trials searches on)"))
        elif self.settings.screen_only:
            sweep = [d for d in self.dims if d.searched and d.knob != "batch_size"]
            Screen(self).run(sweep)
            Screen(self).costs(sweep)
            BatchSizes(self).run()  # which batch sizes fit: measured, never decided
            return self.finish()  # not marked searched: a later run without --screen-only decides on these trials
        else:
            sweep = [d for d in self.dims if d.searched and d.knob != "batch_size"]
            promising = Screen(self).run(sweep)
            hold = polish_room(budget_plan(self.dims, self.ledger.trials, self.settings.pairs))
            Combination(self).combine(promising, hold)
            with self.ledger.held_back(hold):  # room for the polish
                Screen(self).costs(sweep)
                Sampler(self).run()
            Model(self).run()
            Polish(self).run(promising)
            BatchSizes(self).run()
            self.settle()  # every other worker's measurements and decisions are in: verify the final chain
            self.ledger.mark_searched()
        Lean(self).once()
        return self.finish()

    def _baseline(self) -> TrialRecord | None:
        """The study's first baseline trial; one that failed in an earlier run is measured again, and said so.

        A baseline that crashed (the wrong Python, a full disk, a killed
        process) would otherwise answer every later run of the same study with
        "no baseline" in seconds. A failed measurement is kept as a result;
        the new one is a trial of its own (`#again<n>`), and the answer the
        study stored without a baseline is dropped.
        """
        done = studies.measured(self.study)
        key, tag, again = config_key(self.base), "", 0
        while key + tag in done and (failed := TrialRecord.from_dict(done[key + tag].user_attrs["record"])).throughput is None:
            again += 1
            tag = f"#again{again}"
            if key + tag not in done:
                self.emit(Note(f"the baseline failed in an earlier run of this study "
                               f"({failed.status}: {failed.reason or 'no reason recorded'}); "
                               "measuring it again"))
                if self.ledger.verification():
                    self.ledger.put_verification({})
        return self.measure(self.base, Phase.BASELINE, tag, budgeted=False)

    def _name_budget(self) -> None:
        """Store what --trials buys (the study's `budget`), before the first trial; say so where it screens only."""
        trials = self.ledger.trials
        plan = budget_plan(self.dims, trials, self.settings.pairs)
        self.study.set_user_attr(BUDGET, {**plan, "trials": trials, "screen_only": self.settings.screen_only})
        if self.settings.screen_only:
            self.emit(Note(SCREEN_ONLY))

    def _name_cost(self, baseline: TrialRecord) -> None:
        """Say, once the baseline's own trial is timed, what the budget should take (`fitspeed.search.cost`)."""
        if self.settings.screen_only or self.ledger.searched_to_its_end():
            return
        speed, batch = baseline.throughput, baseline.metrics.batch_size if baseline.metrics else None
        steps_per_s = speed / batch if speed and batch else None
        timed = (baseline.measured("steps_per_repeat") or 0) * self.settings.repeats / steps_per_s \
            if steps_per_s else None
        numerics = any(d.knob == "precision" and d.searched for d in self.dims)
        run_s = cost.guard_run_s(baseline.wall_s, timed, steps_per_s, guard.GUARD_STEPS * guard.GUARD_EPOCHS) \
            if numerics else None
        self.emit(Note(cost.estimate(self.ledger.trials, baseline.wall_s, run_s)))

    def _learn_data_kind(self, baseline: TrialRecord) -> None:
        """A user's data function: add the input knobs for the kind the baseline trial loaded."""
        kind = baseline.measured("data_kind")
        if self.data_kind is not None or kind not in KINDS:  # known from the start (`data_kind(settings.data)`)
            return
        self.data_kind = kind
        learned = input_space(kind, self.base, os.cpu_count() or 1)
        names = {d.knob for d in learned}
        self.dims = narrowed(override([d for d in self.dims if d.knob not in names] + learned,
                                      self.settings.space, self.base), self.settings.knobs, self.base)
        self.choices = choices(self.dims, self.base)
        self.study.set_user_attr("skipped", skipped(self.dims))
        self.emit(Note(f"the data is {kind}: its input knobs join the search"))

    def _fit_epoch(self, baseline: TrialRecord) -> None:
        """A script's caps on steps_per_execution (`fitspeed.search.script_caps`): its epoch, its batch callbacks."""
        for limit in script_caps.from_baseline(baseline.measured("epoch_steps"), baseline.measured("batch_callbacks"),
                                               allowed=self.settings.allow_batch_callbacks):
            self.dims, note = script_caps.cap(self.dims, limit)
            if note:
                self.emit(Note(note))
            # the sampler's choices stay (Optuna keeps a parameter's distribution): `config_of` refuses
            self.most_steps_per_execution = min(self.most_steps_per_execution or limit.most, limit.most)
        self.study.set_user_attr("skipped", skipped(self.dims))

    # -- the screen ---------------------------------------------------------

    def challenge(self, incumbent: TrialConfig, config: TrialConfig, purpose: Phase) -> TrialConfig:
        """`config` if fresh pairs find it faster than `incumbent` and its loss passes the guard.

        The incumbent after it: `incumbent` if `config` lost, or another worker's
        winner if one replaced `incumbent` in the meantime.
        """
        unit = CHALLENGE + decision_id(purpose, incumbent, config)
        return self.once(unit, lambda: None, lambda: self._challenged(incumbent, config, purpose))  # type: ignore[no-any-return]

    def _challenged(self, incumbent: TrialConfig, config: TrialConfig, purpose: Phase) -> TrialConfig:
        earlier = self.ledger.decision(decision_id(Phase.COMBINE, incumbent, config))
        # two alternatives 7% apart are told apart better in 5 pairs than in 3, where the budget allows
        design = (choose_design(self.settings.pairs, room=not self.spent(2 * CHOOSE_MORE_PAIRS + 2 * 2 - self.ledger.held))
                  if purpose == Phase.CHOOSE else polish_design(self.settings.pairs, self.ledger.left())
                  if purpose in (Phase.POLISH, Phase.MODEL)
                  else combine_design(self.settings.pairs, self.settings.min_gain))
        decision = earlier if earlier and purpose == Phase.SAMPLER else self.decider.decide(purpose, incumbent, config,
                                                                                          design)
        if not decision.verdict.is_faster():
            return incumbent
        verdict = self.guarded(config)
        if verdict is not None and not verdict.ok:
            return incumbent
        with self.workers.lock.held():
            added = self.ledger.chain_add(config, over=incumbent)
        return config if added else self.ledger.incumbent()

    def config_of(self, knob_values: dict[str, Any], quiet: bool = False) -> TrialConfig | None:
        """`knob_values` as a configuration this search can measure, or None; the reason a combination is refused
        is said once (the sampler proposes such combinations again and again), unless `quiet`."""
        try:
            config = self.base.replace(**knob_values)
            # an input knob the search joined to another backend that feeds this data differently (data_autotune
            # beside backend=jax on numpy arrays): refused here, never measured as a trial the user's data fails
            check_input_knobs(config.changed(), self.data_kind, config.backend)
        except KnobError as error:
            if quiet:
                return None
            if str(error) not in self.refused:  # each reason once, with the changes only
                self.refused.add(str(error))
                label = " ".join(f"{k}={v}" for k, v in knob_values.items() if getattr(self.base, k, v) != v)
                self.ledger.put_refusal(label or "the defaults", str(error))  # `fitspeed show` lists it too
                self.emit(Note(f"not measured: {label or 'the defaults'}. {error}"))
            return None
        if self.most_steps_per_execution and config.steps_per_execution > self.most_steps_per_execution:
            return None  # past the script's epoch, or past its batch callbacks' rhythm (`_fit_epoch`): never measured
        if any(get_knob(name).idle_in(config) for name in changed_knobs(config, self.base)):
            return None  # auto_scale_loss=False beside bfloat16: the same training with one more knob to justify
        return config

    # -- the answer ---------------------------------------------------------

    def finish(self) -> JSONObject:
        """Verify the best incumbent against the defaults in fresh pairs; fall back to the one before it.

        Once per study and chain of incumbents: one worker verifies, the others read its answer.
        """
        def stored() -> JSONObject | None:
            found = self.ledger.verification()
            chain = studies.plain([c.to_dict() for c in self.incumbents()])
            return found if found and found.get("chain") == chain else None

        def compute() -> JSONObject:
            verification = verify(self.ledger, self.decider, self.emit, self.settings.pairs, self.settings.min_gain,
                                  has_baseline=self.ledger.figure(self.base) is not None)
            verification["by"] = self.workers.me.id
            self.ledger.put_verification(verification)
            return verification

        return dict(self.once(VERIFICATION, stored, compute))
