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
    with heartbeat.beating(trial._trial_id, storage):
        pass  # one beat, at the start
    assert _HEARTBEAT_ATTR in study.trials[0].system_attrs
    heartbeat.fail_stale(study)
    assert study.trials[0].state == TrialState.RUNNING  # beat within the grace period (2 s)
    storage.set_trial_system_attr(trial._trial_id, _HEARTBEAT_ATTR, time.time() - 60)  # as if it died a minute ago
    heartbeat.fail_stale(study)
    states = [t.state for t in study.trials]
    assert states == [TrialState.FAIL, TrialState.WAITING], states


def test_a_storage_without_a_heartbeat_gets_none(tmp_path: Path) -> None:
    storage = JournalStorage(optuna.storages.journal.JournalFileBackend(str(tmp_path / "plain.log")))
    study = optuna.create_study(study_name="s", storage=storage)
    trial = study.ask()
    assert not heartbeat.enabled(storage)
    beat = heartbeat.Beating(trial._trial_id, storage)
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
