"""Workers that open one new SQLite study at the same moment all get it (the tables are created once)."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from fitspeed.search.storages import open_storage


def _open_at(url: str, start: float, answers: multiprocessing.Queue) -> None:
    while time.time() < start:  # the processes reach RDBStorage's table creation within milliseconds
        pass
    try:
        open_storage(url)
        answers.put("ok")
    except Exception as error:  # the answer the test asserts on
        answers.put(f"{type(error).__name__}: {error}"[:300])


def test_workers_opening_one_new_sqlite_database_together_all_open_it(tmp_path: Path) -> None:
    # Before SQLite's "UNIQUE constraint failed" counted as the race, 4 of 10 rounds of this lost a worker.
    context = multiprocessing.get_context("fork")
    for round_ in range(8):
        url = f"sqlite:///{tmp_path / f'study{round_}.db'}"
        answers = context.Queue()
        start = time.time() + 1.0
        workers = [context.Process(target=_open_at, args=(url, start + 0.01 * i, answers)) for i in range(4)]
        for worker in workers:
            worker.start()
        got = [answers.get(timeout=60) for _ in workers]
        for worker in workers:
            worker.join(timeout=60)
        assert got == ["ok"] * 4, got
