"""A study in a real PostgreSQL server, the storage for many machines sharing one search.

The test starts a throwaway server of its own (initdb + pg_ctl on a free
loopback port, in a temp folder) and stops it afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import fitspeed, json_out, postgres_server


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


def test_tune_and_show_on_postgresql(workdir: Path, postgres_url: str) -> None:
    args = ["tune", "mlp", "--knobs", "steps_per_execution", "--space", "steps_per_execution=1",
            "--storage", postgres_url, "--study", "shared", "--steps", "8", "--repeats", "2"]
    first = fitspeed(*args, cwd=workdir)
    assert first.returncode == 0, first.stderr
    again = fitspeed(*args, cwd=workdir)  # a second machine, or a rerun: nothing left to measure
    assert again.returncode == 0, again.stderr
    assert "ok," not in again.stderr  # no trial ran
    summary = json_out(fitspeed("show", "shared", "--storage", postgres_url, "--json", cwd=workdir))
    assert [row["phase"] for row in summary["trials"]] == ["baseline"]
    assert summary["baseline"]["samples_per_s"] > 0
