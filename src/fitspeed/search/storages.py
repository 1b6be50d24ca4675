"""Where a study lives, and the one lock its workers take to claim work.

`--storage` names an Optuna storage:
- an RDB URL (`sqlite:///fitspeed.db`, the default; `postgresql://user:pw@host/db`
  for many machines), opened as `RDBStorage` with Optuna's heartbeat: every
  running trial records one each `heartbeat_s` seconds, and a trial whose
  heartbeat is older than twice that is failed by the next worker that looks and
  enqueued again once (`RetryHeartbeatStaleTrialCallback(max_retry=1)`);
- `journal:PATH` (or a plain path ending in `.log`): Optuna's `JournalStorage`
  over one append-only file (`JournalFileBackend`), for a cluster with a shared
  file system and no database. Optuna gives JournalStorage no heartbeat, so
  `HeartbeatJournalStorage` adds one (a trial system attr holding the time),
  through `fitspeed.search.heartbeat`, the one module that uses Optuna's
  private heartbeat API.

`StudyLock` is the lock held while a worker reads the study and claims a piece
of work (a configuration to measure, a decision to make), so that two workers
never claim the same one and the trial budget is never overrun. It is the
database's own: a PostgreSQL advisory lock, a MySQL named lock, or a POSIX
lock on a file: beside a journal (the machines sharing it must see the same
file), in the temporary folder for a SQLite database (named after the
database's real path, so that nothing is left beside the user's files; SQLite
is for one machine). Each is released by the server or the kernel when its
worker dies.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import (
    BaseStorage,
    JournalStorage,
    RDBStorage,
    RetryHeartbeatStaleTrialCallback,
)
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from fitspeed.search.heartbeat import Heartbeat, trial_id

StorageArg = str | BaseStorage
DEFAULT_HEARTBEAT_S = 30
JOURNAL_PREFIX = "journal:"
_HEARTBEAT_ATTR = "fitspeed:heartbeat"
SCHEMA_TRIES = 5  # workers starting together on a new database race to create Optuna's tables; the losers retry


def journal_path(storage: str) -> str | None:
    """The journal file a `--storage` value names, or None for a database URL.

    >>> journal_path("journal:/nfs/s.log"), journal_path("runs/s.log"), journal_path("sqlite:///a.db")
    ('/nfs/s.log', 'runs/s.log', None)
    """
    if storage.startswith(JOURNAL_PREFIX):
        return storage[len(JOURNAL_PREFIX):]
    if "://" not in storage and storage.endswith(".log"):
        return storage
    return None


def shown(storage: StorageArg) -> str:
    """The storage as it may be printed: a URL's password is hidden.

    >>> shown("postgresql://ann:secret@db:5432/runs")
    'postgresql://ann:***@db:5432/runs'
    """
    if not isinstance(storage, str):
        return type(storage).__name__
    if "://" not in storage:
        return storage
    from sqlalchemy.engine import make_url

    try:
        return make_url(storage).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: say nothing of what is after the scheme's user part
        return storage.split("@")[-1] if "@" in storage else storage


def retry_stale_once(study: optuna.Study, trial: FrozenTrial) -> None:
    """Optuna's retry, for measurements only: a worker's own registry entry is not work to redo."""
    if trial.user_attrs.get("config_key"):
        RetryHeartbeatStaleTrialCallback(max_retry=1)(study, trial)


class HeartbeatJournalStorage(JournalStorage, Heartbeat):
    """JournalStorage with Optuna's heartbeat protocol; the heartbeat is the writer's clock.

    The hosts sharing the file must keep their clocks in step (NTP), as they
    would for any cluster; a heartbeat is one journal line per running trial
    per interval.
    """

    def __init__(self, backend: JournalFileBackend, heartbeat_s: int, grace_s: int) -> None:
        super().__init__(backend)
        self._interval, self._grace = heartbeat_s, grace_s

    def record_heartbeat(self, trial_id: int) -> None:
        try:
            self.set_trial_system_attr(trial_id, _HEARTBEAT_ATTR, time.time())
        except UpdateFinishedTrialError:  # failed by another worker in the meantime: nothing to keep alive
            pass

    def stale_trial_ids(self, study_id: int) -> list[int]:
        now = time.time()
        return [trial_id(t) for t in self.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,))
                if _HEARTBEAT_ATTR in t.system_attrs and now - float(t.system_attrs[_HEARTBEAT_ATTR]) > self._grace]

    def get_heartbeat_interval(self) -> int | None:
        return self._interval

    def get_heartbeat_stale_trial_callback(self) -> Callable[[optuna.Study, FrozenTrial], None] | None:
        return retry_stale_once


def open_storage(storage: StorageArg, heartbeat_s: int = DEFAULT_HEARTBEAT_S) -> BaseStorage:
    """The Optuna storage `storage` names, with heartbeats every `heartbeat_s` s (stale after twice that)."""
    if not isinstance(storage, str):
        return storage  # a storage object, as tests pass: used as it is
    grace = 2 * heartbeat_s
    path = journal_path(storage)
    if path is not None:
        return HeartbeatJournalStorage(JournalFileBackend(path), heartbeat_s, grace)
    for attempt in range(SCHEMA_TRIES):
        try:
            with warnings.catch_warnings():  # the heartbeat arguments are marked experimental
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return RDBStorage(storage, heartbeat_interval=heartbeat_s, grace_period=grace,
                                  heartbeat_stale_trial_callback=retry_stale_once)
        except Exception as error:
            if attempt + 1 == SCHEMA_TRIES or not schema_race(error):
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def schema_race(error: BaseException) -> bool:
    """Whether `error` is another worker creating Optuna's tables at the same moment (a fresh database).

    >>> schema_race(Exception('duplicate key value violates unique constraint "pg_type_typname_nsp_index"'))
    True
    >>> schema_race(Exception("UNIQUE constraint failed: alembic_version.version_num"))  # SQLite's words
    True
    """
    text = str(error).lower()
    return "duplicate key" in text or "already exists" in text or "unique constraint failed" in text


def sqlite_lock_path(database: str) -> str:
    """The lock file of a SQLite database: in the temporary folder, one per database file.

    >>> sqlite_lock_path("fitspeed.db") == sqlite_lock_path(os.path.abspath("fitspeed.db"))
    True
    >>> os.path.dirname(sqlite_lock_path("fitspeed.db")) == tempfile.gettempdir()
    True
    """
    real = os.path.realpath(database)
    digest = hashlib.sha256(real.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"fitspeed-study-{os.path.basename(real)}-{digest}.lock")


class StudyLock:
    """The storage-wide lock for one study, re-entrant within a process (see the module docstring)."""

    def __init__(self, storage: BaseStorage, study_name: str, url: StorageArg) -> None:
        self._depth = 0
        self._thread = threading.RLock()
        self._key = int.from_bytes(hashlib.sha1(study_name.encode()).digest()[:8], "big", signed=True)
        self._file: IO[str] | None = None
        self._path: str | None = None
        self._engine: Any = None
        self._connection: Any = None
        if isinstance(storage, RDBStorage):
            dialect = storage.engine.dialect.name
            if dialect == "sqlite":
                database = storage.engine.url.database
                self._path = sqlite_lock_path(database) if database and database != ":memory:" else None
            elif dialect in ("postgresql", "mysql"):
                self._engine = storage.engine
        elif isinstance(storage, JournalStorage) and isinstance(url, str):
            self._path = f"{journal_path(url)}.fitspeed-lock"  # not .lock: Optuna's own journal lock

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._thread:
            if self._depth == 0:
                self._acquire()
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._release()

    def _acquire(self) -> None:
        if self._path is not None:
            self._file = open(self._path, "a")  # noqa: SIM115 (held across calls)
            fcntl.lockf(self._file, fcntl.LOCK_EX)
        elif self._engine is not None:
            if self._connection is None:
                self._connection = self._engine.connect()
            self._sql("SELECT pg_advisory_lock(:k)", "SELECT GET_LOCK(CAST(:k AS CHAR), -1)")

    def _release(self) -> None:
        if self._file is not None:
            fcntl.lockf(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
        elif self._connection is not None:
            self._sql("SELECT pg_advisory_unlock(:k)", "SELECT RELEASE_LOCK(CAST(:k AS CHAR))")

    def _sql(self, postgresql: str, mysql: str) -> None:
        """Run the dialect's lock statement on the held connection, with this study's key."""
        import sqlalchemy

        query = postgresql if self._engine.dialect.name == "postgresql" else mysql
        self._connection.execute(sqlalchemy.text(query), {"k": self._key})
        self._connection.commit()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def pid_alive(pid: int) -> bool:
    """Whether a process of this host with id `pid` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True
