"""The tuner's storage: an Optuna study holding every trial's knobs and record.

SQLite by default (`sqlite:///fitspeed.db`); PostgreSQL for many machines, or a
journal file on a shared file system (`fitspeed.search.storages`). Each Optuna
trial's params are the searched knobs; its user attrs hold the phase, the config
key, the host and worker that ran it, and the full record, so optuna-dashboard
shows everything. Guard runs and the verification are kept as study user attrs.
A worker killed mid-trial leaves that trial RUNNING with no record; it is
failed and measured again once its worker is known dead
(`fitspeed.search.workers`): nothing else runs twice.

A study is for one fitspeed version and one kind of host: its speeds are
compared with each other, so a worker of another version or on other hardware
is refused with a sentence, not mixed in.
"""

from __future__ import annotations

import errno
import json
import logging
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import to_json
from fitspeed.search import storages
from fitspeed.search.storages import StorageArg


def plain(value: Any) -> Any:
    """Strict-JSON form of a record (NaN becomes null) for Optuna's storage."""
    return json.loads(to_json(value))


def open_study(name: str, storage: StorageArg, meta: JSONObject, seed: int = 0,
               heartbeat_s: int = storages.DEFAULT_HEARTBEAT_S) -> tuple[optuna.Study, BaseStorage]:
    """Create or resume a study; refuse one made for another workload, fitspeed version or kind of host."""
    optuna.logging.set_verbosity(logging.WARNING)
    try:
        opened = storages.open_storage(storage, heartbeat_s)
        study = optuna.create_study(
            study_name=name,
            storage=opened,
            direction="maximize",
            load_if_exists=True,
            sampler=optuna.samplers.TPESampler(seed=seed),
        )
    except Exception as error:  # bad URL, missing driver, unreachable server, wrong password, full disk
        raise UserError(storage_problem(error, storage)) from None
    where = storages.shown(storage)
    attrs = study.user_attrs
    if not attrs.get("fitspeed"):  # a new study; the meta's marker is written last
        lock = storages.StudyLock(opened, name, storage)
        with lock.held():  # workers starting together: one writes the study's meta, the others read it whole
            attrs = study.user_attrs
            if not attrs.get("fitspeed"):
                for key, value in meta.items():
                    study.set_user_attr(key, plain(value))
                study.set_user_attr("fitspeed", True)
        lock.close()
        if not attrs.get("fitspeed"):
            return study, opened
    for key in ("model", "data", "base"):
        if attrs.get(key) != plain(meta.get(key)):
            raise UserError(
                f"Study {name!r} in {where} was made for {key} {attrs.get(key)!r}, not "
                f"{meta.get(key)!r}. Use another --study name, or the same workload and --set."
            )
    made_by = attrs.get("fitspeed_version") or (attrs.get("environment") or {}).get("fitspeed")
    if made_by != meta.get("fitspeed_version"):
        raise UserError(
            f"Study {name!r} in {where} was made by fitspeed {made_by or 'of an unknown version'}; this is "
            f"fitspeed {meta.get('fitspeed_version')}. Its records may not compare with this version's. Use "
            f"another --study name, or run fitspeed {made_by} to resume it."
        )
    kind = attrs.get("host_kind")
    if kind is not None and meta.get("host_kind") is not None and kind != plain(meta["host_kind"]):
        raise UserError(
            f"Study {name!r} in {where} is measured on {host_label(kind)}; this worker runs on "
            f"{host_label(meta['host_kind'])}. Speeds on different hardware are not compared in one study: "
            f"give the workers of each kind of host a --study of their own (each measures its own baseline)."
        )
    return study, opened


def host_label(kind: JSONObject) -> str:
    """
    >>> host_label({"cpu": "AMD EPYC 7B13", "cpu_count": 2, "gpus": []})
    '2 × AMD EPYC 7B13'
    """
    gpus = ", ".join(kind.get("gpus") or [])
    return f"{kind.get('cpu_count')} × {kind.get('cpu')}" + (f" with {gpus}" if gpus else "")


def disk_full(error: BaseException | None) -> bool:
    """Whether `error`, or an error it was raised from, says the disk is full.

    Optuna wraps SQLAlchemy's error, which wraps SQLite's, so the words can be
    two causes down.
    """
    seen = 0
    while error is not None and seen < 10:
        text = str(error).lower()
        if ("disk is full" in text or "no space left" in text or "file too large" in text
                or getattr(error, "errno", None) in (errno.ENOSPC, errno.EFBIG)):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def storage_problem(error: BaseException, storage: StorageArg) -> str:
    """One sentence for a storage error: a full disk is said as such, not as a bad URL."""
    if disk_full(error):
        return (f"The disk that holds the study storage {storage!r} is full. Free some space and run the "
                "same command again: every trial that finished is saved.")
    root: BaseException = error
    while root.__cause__ is not None:  # Optuna's wrapper says little; the driver's error says why
        root = root.__cause__
    why = (str(root) or type(root).__name__).strip()
    where = storages.shown(storage)
    if "password authentication failed" in why or "access denied" in why.lower():
        return (f"The database at {where} refused the user name or password. Expected the credentials "
                "of a database user in --storage, as postgresql://USER:PASSWORD@HOST/DB; check them.")
    if "connection refused" in why.lower() or "could not translate host name" in why.lower() \
            or "timeout expired" in why.lower() or "no route to host" in why.lower():
        return (f"No database server answered at {where}. Expected a server that this machine can reach: "
                "check the host and port in --storage, and that the server is running.")
    return (f"Could not use the study storage {where!r}: {why.splitlines()[0]}. Expected an Optuna storage URL "
            "that can be reached, such as sqlite:///fitspeed.db, postgresql://user@host/db or "
            "journal:/shared/fitspeed.log; every trial that finished is saved.")


def check_exists(storage: str) -> None:
    """Refuse a SQLite or journal storage whose file does not exist, instead of creating an empty one."""
    journal = storages.journal_path(storage)
    if journal is not None and not Path(journal).is_file():
        raise UserError(f"No study journal at {journal!r}. Expected the file `fitspeed tune --storage "
                        f"{storage}` wrote; check the path.")
    prefix = "sqlite:///"
    if storage.startswith(prefix) and not Path(storage[len(prefix):]).is_file():
        raise UserError(f"No study database at {storage[len(prefix):]!r}. Expected the SQLite file "
                        "`fitspeed tune` wrote (--storage sqlite:///fitspeed.db by default); check the path.")


LAST_USED = "last_used"  # a study attribute: when a tune last ran on it, in seconds since the epoch


def last_used(summary: optuna.study.StudySummary) -> float:
    """When a study was last used: its LAST_USED stamp, else its first trial's start, else never (0)."""
    stamp = summary.user_attrs.get(LAST_USED)
    if isinstance(stamp, (int, float)):
        return float(stamp)
    return summary.datetime_start.timestamp() if summary.datetime_start is not None else 0.0


def load_study(name: str | None, storage: str) -> optuna.Study:
    """An existing study, or the newest one in `storage` when `name` is None. Creates nothing."""
    check_exists(storage)
    optuna.logging.set_verbosity(logging.WARNING)
    try:
        opened = storages.open_storage(storage)
        summaries = optuna.get_all_study_summaries(storage=opened)
    except Exception as error:
        raise UserError(storage_problem(error, storage)) from None
    summaries = [s for s in summaries if s.user_attrs.get("fitspeed")]  # the database may hold others' studies
    # the newest is the one a tune ran on last (LAST_USED), else the one whose first trial started last;
    # a study with neither sorts first, so it is never taken for the newest
    started = sorted(summaries, key=last_used)
    names = [s.study_name for s in started]
    if not names:
        raise UserError(f"No study in {storages.shown(storage)}. Run `fitspeed tune WORKLOAD` first.")
    if name is None:
        name = names[-1]
    if name not in names:
        raise UserError(
            f"No study named {name!r} in {storages.shown(storage)}. Expected one of: {', '.join(names)}. "
            "Pass one of them, or leave the name out for the newest."
        )
    return optuna.load_study(study_name=name, storage=opened)


def measured(study: optuna.Study) -> dict[str, FrozenTrial]:
    """Trials that ran to a record, by config key (the first, if a config repeats)."""
    out: dict[str, FrozenTrial] = {}
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        key = trial.user_attrs.get("config_key")
        if key and "record" in trial.user_attrs and key not in out:
            out[key] = trial
    return out
