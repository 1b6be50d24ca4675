"""The tuner's storage: an Optuna study holding every trial's knobs and record.

SQLite by default (`sqlite:///fitspeed.db`); any URL Optuna takes works, such as
PostgreSQL for many machines. Each Optuna trial's params are the searched
knobs; its user attrs hold the phase, the config key and the full record, so
optuna-dashboard shows everything. Guard runs and the verification are kept as
study user attrs. A parent killed mid-trial leaves that trial RUNNING with no
record; `recover_interrupted` marks it failed, and the tuner measures its
config again: nothing else runs twice.
"""

from __future__ import annotations

import errno
import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.record import to_json


def config_key(config: TrialConfig) -> str:
    return json.dumps(config.to_dict(), sort_keys=True)


def plain(value: Any) -> Any:
    """Strict-JSON form of a record (NaN becomes null) for Optuna's storage."""
    return json.loads(to_json(value))


def open_study(name: str, storage: str, meta: dict[str, Any], seed: int = 0) -> optuna.Study:
    """Create or resume a study; refuse to resume one made for another workload."""
    optuna.logging.set_verbosity(logging.WARNING)
    try:
        study = optuna.create_study(
            study_name=name,
            storage=storage,
            direction="maximize",
            load_if_exists=True,
            sampler=optuna.samplers.TPESampler(seed=seed),
        )
    except Exception as error:  # bad URL, missing driver, unreachable server, full disk
        raise UserError(storage_problem(error, storage)) from None
    attrs = study.user_attrs
    if not attrs.get("fitspeed"):
        study.set_user_attr("fitspeed", True)
        for key, value in meta.items():
            study.set_user_attr(key, plain(value))
    else:
        for key in ("model", "data", "base"):
            if attrs.get(key) != plain(meta.get(key)):
                raise UserError(
                    f"Study {name!r} in {storage} was made for {key} {attrs.get(key)!r}, not "
                    f"{meta.get(key)!r}. Use another --study name, or the same workload and --set."
                )
    return study


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


def storage_problem(error: BaseException, storage: str) -> str:
    """One sentence for a storage error: a full disk is said as such, not as a bad URL."""
    if disk_full(error):
        return (f"The disk that holds the study storage {storage!r} is full. Free some space and run the "
                "same command again: every trial that finished is saved.")
    root: BaseException = error
    while root.__cause__ is not None:  # Optuna's wrapper says little; the driver's error says why
        root = root.__cause__
    why = (str(root) or type(root).__name__).splitlines()[0]
    return (f"Could not use the study storage {storage!r}: {why}. Expected an Optuna storage URL that "
            "can be reached, such as sqlite:///fitspeed.db or postgresql://user@host/db; every trial "
            "that finished is saved.")


def check_exists(storage: str) -> None:
    """Refuse a SQLite storage whose file does not exist, instead of creating an empty one."""
    prefix = "sqlite:///"
    if storage.startswith(prefix) and not Path(storage[len(prefix):]).is_file():
        raise UserError(f"No study database at {storage[len(prefix):]!r}. Expected the SQLite file "
                        "`fitspeed tune` wrote (--storage sqlite:///fitspeed.db by default); check the path.")


def load_study(name: str | None, storage: str) -> optuna.Study:
    """An existing study, or the newest one in `storage` when `name` is None. Creates nothing."""
    check_exists(storage)
    optuna.logging.set_verbosity(logging.WARNING)
    try:
        summaries = optuna.get_all_study_summaries(storage=storage)
    except Exception as error:
        raise UserError(storage_problem(error, storage)) from None
    summaries = [s for s in summaries if s.user_attrs.get("fitspeed")]  # the database may hold others' studies
    # a study with no trial has no start time: it sorts first, so it is never taken for the newest
    started = sorted(summaries, key=lambda s: (s.datetime_start is not None, s.datetime_start or datetime.min))
    names = [s.study_name for s in started]
    if not names:
        raise UserError(f"No study in {storage}. Run `fitspeed tune WORKLOAD` first.")
    if name is None:
        name = names[-1]
    if name not in names:
        raise UserError(
            f"No study named {name!r} in {storage}. Expected one of: {', '.join(names)}. "
            "Pass one of them, or leave the name out for the newest."
        )
    return optuna.load_study(study_name=name, storage=storage)


def recover_interrupted(study: optuna.Study) -> int:
    """Mark trials left RUNNING by a killed parent as failed; return how many."""
    stale = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for trial in stale:
        study.tell(trial.number, state=TrialState.FAIL)
    return len(stale)


def measured(study: optuna.Study) -> dict[str, FrozenTrial]:
    """Trials that ran to a record, by config key (the first, if a config repeats)."""
    out: dict[str, FrozenTrial] = {}
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        key = trial.user_attrs.get("config_key")
        if key and "record" in trial.user_attrs and key not in out:
            out[key] = trial
    return out
