"""A study in a real PostgreSQL server, the storage for many machines sharing one search.

The test starts a throwaway server of its own (initdb + pg_ctl on a free
loopback port, in a temp folder) and stops it afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import fitspeed, json_out


def _as_postgres(args: list[str]) -> list[str]:
    # initdb refuses to run as root; run the server as the postgres user then
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


@pytest.fixture
def postgres_url() -> Iterator[str]:
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if not (initdb and pg_ctl) or importlib.util.find_spec("psycopg") is None:
        pytest.skip("needs PostgreSQL's initdb and pg_ctl, and pip install 'fitspeed[postgres]'")
    # a folder the postgres user can reach (pytest's own temp folders are private to root)
    folder = Path(tempfile.mkdtemp(prefix="fitspeed-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = folder / "data"
    subprocess.run(_as_postgres([initdb, "-D", str(data), "-A", "trust", "-U", "postgres"]),
                   check=True, capture_output=True)
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
    subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start"]),
                   check=True, capture_output=True)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def test_tune_and_show_on_postgresql(workdir: Path, postgres_url: str) -> None:
    args = ["tune", "tiny", "--knobs", "steps_per_execution", "--space", "steps_per_execution=1",
            "--storage", postgres_url, "--study", "shared", "--steps", "8", "--repeats", "2"]
    first = fitspeed(*args, cwd=workdir)
    assert first.returncode == 0, first.stderr
    again = fitspeed(*args, cwd=workdir)  # a second machine, or a rerun: nothing left to measure
    assert again.returncode == 0, again.stderr
    assert "ok," not in again.stderr  # no trial ran
    summary = json_out(fitspeed("show", "shared", "--storage", postgres_url, "--json", cwd=workdir))
    assert [row["phase"] for row in summary["trials"]] == ["baseline"]
    assert summary["baseline"]["samples_per_s"] > 0
