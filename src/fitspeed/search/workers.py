"""Many `fitspeed tune` processes sharing one study: who is alive, who measures what.

A worker is one `fitspeed tune` process (`Worker`: host, pid). Every trial it
runs records them as user attrs. It also holds, for its whole life, one RUNNING
trial in the side study `<study>:workers`, kept alive by Optuna's heartbeat
thread: a worker is alive while that trial is. A worker killed on another host
is found dead once its heartbeat is older than the grace period (Optuna's
`fail_stale_trials`); one on this host, at once, by its pid.

Work is claimed under the study's lock (`storages.StudyLock`), by its key:
- a measurement (`claim`): the trial whose user attr `config_key` is the key.
  It is created RUNNING for the claiming worker, or, when the key's earlier
  trial died with its worker, the WAITING copy Optuna's retry callback left
  is taken. A key with a record, or a live RUNNING trial, is never claimed
  again;
- a unit of work that spans trials (a paired decision, a guard check, the
  verification): the study user attr `claim:<unit>` names the worker that
  holds it, until it releases it or is found dead (`take`, `release`).

Only trials of a dead worker are ever failed: never another live worker's.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from fitspeed.core.json_data import JSONObject
from fitspeed.search import heartbeat
from fitspeed.search.ledger import CLAIM
from fitspeed.search.storages import StorageArg, StudyLock, pid_alive

POLL_S = 0.5  # how often a waiting worker looks at the study again


HOST_ENV = "FITSPEED_HOST"  # the host name a worker records, where hostnames are not unique (containers)


@dataclass(frozen=True)
class Worker:
    host: str = field(default_factory=lambda: os.environ.get(HOST_ENV) or socket.gethostname())
    pid: int = field(default_factory=os.getpid)

    @property
    def id(self) -> str:
        return f"{self.host}:{self.pid}"

    def attrs(self) -> JSONObject:
        return {"host": self.host, "pid": self.pid, "worker": self.id}


@dataclass(frozen=True)
class Busy:
    """The key is being measured by another live worker."""

    worker: str


class Workers:
    """This worker's view of the others sharing `study` (see the module docstring)."""

    def __init__(self, study: optuna.Study, storage: BaseStorage, url: StorageArg, me: Worker | None = None) -> None:
        self.study, self.storage = study, storage
        self.me = me or Worker()
        self.lock = StudyLock(storage, study.study_name, url)
        self.registry = optuna.create_study(study_name=f"{study.study_name}:workers", storage=storage,
                                            load_if_exists=True)
        self._entry: optuna.Trial | None = None
        self._beat: Any = None

    # -- this worker ----------------------------------------------------------

    def start(self, device: str, version: str | None) -> None:
        """Enter the registry; its trial's heartbeat says this worker is alive."""
        with self.lock.held(), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "heartbeats are supposed to be used with optimize"
            self._entry = self.registry.ask()
        for key, value in {**self.me.attrs(), "device": device, "fitspeed": version}.items():
            self._entry.set_user_attr(key, value)
        self._beat = heartbeat.Beating(heartbeat.trial_id(self._entry), self.storage)

    def stop(self) -> None:
        if self._entry is None:
            return
        self._beat.stop()
        self.registry.tell(self._entry, 0.0, skip_if_finished=True)
        self._entry = None
        self.lock.close()

    @contextmanager
    def heartbeat(self, trial: optuna.Trial) -> Iterator[None]:
        """Optuna's heartbeat thread for a trial this worker runs."""
        with heartbeat.beating(heartbeat.trial_id(trial), self.storage):
            yield

    # -- the others -------------------------------------------------------------

    def _fail_dead(self, study: optuna.Study) -> list[FrozenTrial]:
        """Fail `study`'s RUNNING trials whose worker died; return them (heartbeat lapsed, or pid gone here)."""
        failed: list[FrozenTrial] = []
        if heartbeat.enabled(self.storage):
            before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
            heartbeat.fail_stale(study)  # runs the retry callback itself
            failed += [t for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,)) if t.number in before]
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            attrs = trial.user_attrs
            if attrs.get("host") != self.me.host or attrs.get("pid") in (None, self.me.pid) or pid_alive(attrs["pid"]):
                continue
            try:
                if self.storage.set_trial_state_values(heartbeat.trial_id(trial), TrialState.FAIL):
                    failed.append(trial)
                    if study is self.study:
                        from fitspeed.search.storages import retry_stale_once

                        retry_stale_once(study, trial)
            except UpdateFinishedTrialError:
                pass
        return failed

    def recover(self) -> int:
        """Fail (and enqueue again, once) the measurements whose worker died; how many."""
        with self.lock.held():
            return len([t for t in self._fail_dead(self.study) if t.user_attrs.get("config_key")])

    def alive(self) -> set[str]:
        """The ids of the workers alive now."""
        self._fail_dead(self.registry)
        return {t.user_attrs.get("worker", "") for t in self.registry.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}

    def take(self, unit: str) -> bool:
        """Hold `unit` (free, or held by a dead worker); False while another live worker holds it."""
        with self.lock.held():
            holder = self.study.user_attrs.get(CLAIM + unit)
            if holder and holder != self.me.id and holder in self.alive():
                return False
            self.study.set_user_attr(CLAIM + unit, self.me.id)
            return True

    def release(self, unit: str) -> None:
        self.study.set_user_attr(CLAIM + unit, None)

    # -- measurements --------------------------------------------------------------

    def claim(self, key: str, attrs: JSONObject, params: JSONObject,
              distributions: dict[str, Any], room: Callable[[], bool],
              asked: optuna.Trial | None = None) -> FrozenTrial | optuna.Trial | Busy | None:
        """Claim the measurement `key` (see the module docstring).

        Returns its finished trial, if it has a record; `Busy` while another
        live worker measures it; None when `room()` says the budget is spent;
        else a RUNNING trial that is this worker's to run (`asked`, when given,
        becomes it: a trial the sampler just asked for).
        """
        with self.lock.held():
            self._fail_dead(self.study)
            mine = [t for t in self.study.get_trials(deepcopy=False) if t.user_attrs.get("config_key") == key]
            done = [t for t in mine if t.state.is_finished() and "record" in t.user_attrs]
            if done:
                return done[0]
            running = [t for t in mine if t.state == TrialState.RUNNING]
            if running:
                return Busy(str(running[0].user_attrs.get("worker", "")))
            waiting = [t for t in mine if t.state == TrialState.WAITING]
            if not waiting and not room():
                return None
            if asked is not None and not waiting:
                trial = asked
            else:
                if asked is not None:  # its config is a dead worker's, enqueued again: run that one instead
                    self.study.tell(asked, state=TrialState.FAIL)
                trial = self._pop(waiting[0] if waiting else self._enqueue(key, attrs, params), distributions)
            # config_key last: a trial is one of the study's measurements (`waiting`, `recover`) only once the rest
            # of its attrs are there
            for name, value in sorted({**attrs, **self.me.attrs()}.items(), key=lambda item: item[0] == "config_key"):
                trial.set_user_attr(name, value)
            return trial

    def busy(self, keys: set[str]) -> dict[str, str]:
        """Of `keys`, those another live worker measures now, with its id (nothing is claimed)."""
        with self.lock.held():
            self._fail_dead(self.study)
            return {t.user_attrs["config_key"]: str(t.user_attrs.get("worker", ""))
                    for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                    if t.user_attrs.get("config_key") in keys and t.user_attrs.get("worker") != self.me.id}

    def _enqueue(self, key: str, attrs: JSONObject, params: JSONObject) -> FrozenTrial:
        """A WAITING trial for `key`, with its attrs whole from the start (`_pop` makes it RUNNING, under the same
        hold of the lock)."""
        self.study.enqueue_trial(params, user_attrs={**attrs, "config_key": key}, skip_if_exists=False)
        return [t for t in self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
                if t.user_attrs.get("config_key") == key][-1]

    def _pop(self, waiting: FrozenTrial, distributions: dict[str, Any]) -> optuna.Trial:
        """The WAITING trial `waiting`, now RUNNING and this worker's (the lock is held: no one else pops it)."""
        self.storage.set_trial_state_values(heartbeat.trial_id(waiting), TrialState.RUNNING)
        trial = optuna.Trial(self.study, heartbeat.trial_id(waiting))
        for name, distribution in distributions.items():
            trial.suggest_categorical(name, list(distribution.choices))
        retried = waiting.system_attrs.get("failed_trial")
        if retried is not None:  # Optuna's retry callback made it: which trial it measures again
            trial.set_user_attr("retry_of", retried)
        return trial

    def ask(self, distributions: dict[str, Any]) -> optuna.Trial:
        """Optuna's sampler's next trial (ask and tell, with heartbeats we keep ourselves)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "heartbeats are supposed to be used with optimize"
            return self.study.ask(distributions)

    def waiting(self) -> list[FrozenTrial]:
        """Measurements a dead worker left, enqueued again and not yet claimed.

        Read under the lock: a live worker's `claim` enqueues and pops its own
        trial under it, so that trial is never seen here between the two.
        """
        with self.lock.held():
            return [t for t in self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
                    if t.user_attrs.get("config_key")]


def wait_for(check: Callable[[], Any], poll_s: float = POLL_S) -> Any:
    """Call `check` until it returns something other than None."""
    while (found := check()) is None:
        time.sleep(poll_s)
    return found
