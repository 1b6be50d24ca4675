"""fitspeed.search.heartbeat: what it takes from Optuna's private heartbeat API is still there and still works.

These fail as soon as Optuna renames, moves or changes what the module relies
on; a failure here means fitspeed.search.heartbeat must follow Optuna, and
nothing else in fitspeed needs to.
"""

from __future__ import annotations

import ast
import inspect
import time
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage, RDBStorage
from optuna.trial import TrialState

from fitspeed.search import heartbeat
from fitspeed.search.storages import _HEARTBEAT_ATTR, HeartbeatJournalStorage, open_storage

SRC = Path(heartbeat.__file__).parents[1]  # src/fitspeed


def test_optunas_private_heartbeat_api_has_the_names_and_signatures_relied_on(tmp_path: Path) -> None:
    from optuna.storages import _heartbeat

    assert set(_heartbeat.BaseHeartbeat.__abstractmethods__) == {
        "record_heartbeat", "_get_stale_trial_ids", "get_heartbeat_interval", "get_heartbeat_stale_trial_callback"}
    assert list(inspect.signature(_heartbeat.BaseHeartbeat._get_stale_trial_ids).parameters) == ["self", "study_id"]
    assert list(inspect.signature(_heartbeat.get_heartbeat_thread).parameters) == ["trial_id", "storage"]
    assert list(inspect.signature(_heartbeat.is_heartbeat_enabled).parameters) == ["storage"]
    thread = _heartbeat.get_heartbeat_thread(0, JournalStorage(optuna.storages.journal.JournalFileBackend(str(tmp_path / "j.log"))))
    assert callable(thread.start) and callable(thread.join)
    assert issubclass(RDBStorage, _heartbeat.BaseHeartbeat)  # `enabled` knows a database's heartbeat by it


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_a_lapsed_journal_heartbeat_fails_the_trial_and_enqueues_it_again(tmp_path: Path) -> None:
    storage = open_storage(f"journal:{tmp_path / 'study.log'}", heartbeat_s=1)
    assert isinstance(storage, HeartbeatJournalStorage) and heartbeat.enabled(storage)
    study = optuna.create_study(study_name="s", storage=storage)
    trial = study.ask()
    trial.set_user_attr("config_key", "k")  # a measurement: the retry callback enqueues it again
    with heartbeat.beating(heartbeat.trial_id(trial), storage):
        pass  # one beat, at the start
    assert _HEARTBEAT_ATTR in study.trials[0].system_attrs
    heartbeat.fail_stale(study)
    assert study.trials[0].state == TrialState.RUNNING  # beat within the grace period (2 s)
    storage.set_trial_system_attr(heartbeat.trial_id(trial), _HEARTBEAT_ATTR, time.time() - 60)  # as if it died a minute ago
    heartbeat.fail_stale(study)
    states = [t.state for t in study.trials]
    assert states == [TrialState.FAIL, TrialState.WAITING], states


def test_a_trials_storage_id_is_read_from_a_trial_and_from_a_frozen_trial(tmp_path: Path) -> None:
    # two studies in one database: the second's trial ids are not its trial numbers
    storage = RDBStorage(f"sqlite:///{tmp_path / 'ids.db'}")
    first = optuna.create_study(study_name="first", storage=storage)
    for _ in range(3):
        first.tell(first.ask(), 1.0)
    study = optuna.create_study(study_name="second", storage=storage)
    done, running = study.ask(), study.ask()
    study.tell(done, 2.0)
    study_id = storage.get_study_id_from_name("second")
    for trial in (running, *study.get_trials(deepcopy=False)):  # an `optuna.Trial`, then `FrozenTrial`s
        found = heartbeat.trial_id(trial)
        assert isinstance(found, int) and found == storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)
        assert storage.get_trial(found).number == trial.number
    assert [heartbeat.trial_id(t) for t in study.trials] != [0, 1]  # ids count over the whole database, not the study
    storage.set_trial_state_values(heartbeat.trial_id(running), TrialState.FAIL)  # the id a storage call takes
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.FAIL]


def test_a_storage_without_a_heartbeat_gets_none(tmp_path: Path) -> None:
    storage = JournalStorage(optuna.storages.journal.JournalFileBackend(str(tmp_path / "plain.log")))
    study = optuna.create_study(study_name="s", storage=storage)
    trial = study.ask()
    assert not heartbeat.enabled(storage)
    beat = heartbeat.Beating(heartbeat.trial_id(trial), storage)
    beat.stop()
    heartbeat.fail_stale(study)
    assert study.trials[0].state == TrialState.RUNNING


def test_only_the_seam_imports_optunas_private_modules() -> None:
    importers = set()
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            if any(name.startswith("optuna") and any(part.startswith("_") for part in name.split(".")) for name in names):
                importers.add(path.relative_to(SRC).as_posix())
    assert importers == {"search/heartbeat.py"}


OPTUNA_PRIVATE = {"_trial_id", "_study_id", "_storage", "_cached_frozen_trial", "_get_stale_trial_ids"}


def test_only_the_seam_reads_optunas_private_members() -> None:
    readers = {}
    for path in sorted(SRC.rglob("*.py")):
        found = [node.lineno for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Attribute) and node.attr in OPTUNA_PRIVATE
                 and not (isinstance(node.value, ast.Name) and node.value.id == "self")]  # a class's own member
        if found:
            readers[path.relative_to(SRC).as_posix()] = found
    assert list(readers) == ["search/heartbeat.py"], readers
