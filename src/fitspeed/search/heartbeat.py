"""Optuna's trial heartbeat, behind fitspeed's own names: the one module that touches Optuna's private API.

Optuna's public API has `optuna.storages.fail_stale_trials` and the
heartbeat arguments of `RDBStorage`, but nothing to keep a trial alive
outside `study.optimize` and no base class for a storage of one's own:
`BaseHeartbeat`, `get_heartbeat_thread` and `is_heartbeat_enabled` live in
the private `optuna.storages._heartbeat` (Optuna 5.0). fitspeed runs its
own ask-and-tell loop and adds a heartbeat to `JournalStorage`, so it needs
all three; they are used here and nowhere else, and
tests/search/test_heartbeat.py fails as soon as Optuna changes what this
module relies on:

- `Heartbeat`, the base class of a storage that records heartbeats: Optuna's
  `BaseHeartbeat`, whose abstract methods such a storage implements
  (`record_heartbeat`, `get_heartbeat_interval`,
  `get_heartbeat_stale_trial_callback`), with `stale_trial_ids` in place of
  the private `_get_stale_trial_ids`, which `fail_stale_trials` calls;
- `beating(trial_id, storage)`: a trial kept alive while the block runs
  (Optuna's heartbeat thread; nothing for a storage without heartbeats);
- `Beating(trial_id, storage)`: the same, for a trial kept alive across
  calls, until `.stop()`;
- `enabled(storage)`: whether `storage` records heartbeats;
- `fail_stale(study)`: fail the trials whose heartbeat lapsed and run the
  storage's callback on each (the public `fail_stale_trials`);
- `trial_id(trial)`: a trial's id in its storage, which the heartbeat and
  every storage call take, read from the private `_trial_id` of a `Trial` or
  a `FrozenTrial` (Optuna has no public name for it).
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.storages import BaseStorage
from optuna.storages._heartbeat import BaseHeartbeat, get_heartbeat_thread, is_heartbeat_enabled
from optuna.trial import FrozenTrial


class Heartbeat(BaseHeartbeat):
    """A storage that records heartbeats; it says which RUNNING trials' heartbeats are stale (`stale_trial_ids`)."""

    @abc.abstractmethod
    def stale_trial_ids(self, study_id: int) -> list[int]:
        """The RUNNING trials of the study `study_id` whose last heartbeat is older than the grace period."""

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:  # the name `fail_stale_trials` calls
        return self.stale_trial_ids(study_id)


class Beating:
    """The trial `trial_id` kept alive by a heartbeat thread (Optuna's) until `stop`; nothing without heartbeats."""

    def __init__(self, trial_id: int, storage: BaseStorage) -> None:
        self._thread = get_heartbeat_thread(trial_id, storage)
        self._thread.start()

    def stop(self) -> None:
        """End the heartbeat, once its thread has sent its last beat."""
        self._thread.join()


@contextmanager
def beating(trial_id: int, storage: BaseStorage) -> Iterator[None]:
    """Keep the trial `trial_id` alive while the block runs."""
    beat = Beating(trial_id, storage)
    try:
        yield
    finally:
        beat.stop()


def enabled(storage: BaseStorage) -> bool:
    """Whether `storage` records heartbeats (it has an interval set)."""
    return is_heartbeat_enabled(storage)


def fail_stale(study: optuna.Study) -> None:
    """Fail `study`'s RUNNING trials whose heartbeat lapsed; the storage's callback runs on each."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def trial_id(trial: optuna.Trial | FrozenTrial) -> int:
    """`trial`'s id in its storage (not its number in the study): what `beating` and the storage's calls take."""
    return trial._trial_id
