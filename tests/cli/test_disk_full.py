"""A full disk: measure, tune and monitor each end with one clear sentence, and every
record written before the fault still reads back.

The disk is a small tmpfs the test mounts (the tests run as root here). Where mounting is
not allowed the tests skip, and say so: RLIMIT_FSIZE was tried as a stand-in, but it
limits every file the command writes (the trial's spec, its captured output), not only
the files on the "disk", so it tests something else.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from conftest import QUICK, child_env

from fitspeed.measure import results

FAST = ["--steps", "8", "--repeats", "1", "--pairs", "2"]


class SmallDisk:
    """A folder on a 4 MiB tmpfs that `fill` fills; `run` runs fitspeed beside it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.filler = folder / "filler"

    def fill(self, leave: int = 0) -> None:
        """Take all the free space but `leave` bytes."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            for step in (1 << 16, 4096, 512, 1):  # unbuffered: each write lands or fails whole
                with contextlib.suppress(OSError):
                    while True:
                        os.write(fd, b"\0" * step)
        finally:
            os.close(fd)
        if leave:
            os.truncate(self.filler, max(0, self.filler.stat().st_size - leave))

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "fitspeed", *args], cwd=self.folder.parent, env=child_env(),
                              capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mounted.stderr.strip()}); run the tests as root")
    try:
        yield SmallDisk(folder)
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def one_sentence(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    text = " ".join(result.stderr.split())
    assert text.count("Error: ") == 1, result.stderr  # one sentence (after `measure`'s word on what it runs)
    text = text[text.index("Error: "):]
    assert all(word in text for word in words), (words, text)


def test_measure_on_a_full_disk_keeps_the_earlier_records(disk: SmallDisk) -> None:
    path = disk.folder / "r.jsonl"
    first = disk.run("measure", "tiny", "--results", str(path), *QUICK)
    assert first.returncode == 0, first.stderr
    disk.fill()
    runs = []
    for _ in range(4):  # the file's last page may still hold a record or two
        runs.append(disk.run("measure", "tiny", "--results", str(path), *QUICK))
        if runs[-1].returncode != 0:
            break
    one_sentence(runs[-1], "Could not write results", "earlier records are intact")
    disk.free()
    records, skipped = results.read(path)
    assert [r["status"] for r in records] == ["ok"] * len(runs) and skipped == []  # all but the last run's


def test_tune_on_a_full_disk_says_so_and_keeps_the_study(disk: SmallDisk) -> None:
    storage = f"sqlite:///{disk.folder / 'study.db'}"
    args = ("tune", "tiny", "--knobs", "steps_per_execution", "--space", "steps_per_execution=8", "--screen-only",
            "--storage", storage, "--study", "s", "--best", str(disk.folder / "best.json"), *FAST)
    first = disk.run(*args, "--trials", "1")
    assert first.returncode == 0, first.stderr
    disk.fill()
    full = disk.run(*args, "--trials", "3")
    assert full.returncode == 2, (full.stdout, full.stderr)
    assert "Traceback" not in full.stderr
    text = " ".join(full.stderr.split())
    assert "is full" in text or "Could not write" in text, text
    disk.free()
    study = optuna.load_study(study_name="s", storage=storage)
    recorded = [t for t in study.get_trials() if "record" in t.user_attrs]
    assert recorded and recorded[0].user_attrs["phase"] == "baseline"
    assert recorded[0].user_attrs["record"]["status"] == "ok"


def test_monitor_on_a_full_disk_keeps_the_commands_status(disk: SmallDisk) -> None:
    out = disk.folder / "m.csv"
    disk.fill(leave=4096)  # one page: the header and some rows fit, then the disk is full
    code = "import time; time.sleep(3); raise SystemExit(4)"  # the watched command: runs while the disk fills
    result = disk.run("monitor", "--interval", "0.02", "--out", str(out), "--", sys.executable, "-c", code)
    assert result.returncode == 4, result.stderr  # the command's status, whatever the disk did
    assert "Traceback" not in result.stderr
    text = " ".join(result.stderr.split())
    assert "stopped early" in text or "could not be drawn" in text or "Expected --out" in text, text
    png = out.with_suffix(".png")
    assert not png.exists() or png.stat().st_size > 0  # no empty PNG left behind
    assert not [p.name for p in disk.folder.iterdir() if p.name.endswith(".tmp")]
    disk.free()
    if out.exists() and out.stat().st_size:
        lines = out.read_text().splitlines()
        width = lines[0].count(",")
        assert all(line.count(",") == width for line in lines[:-1])  # every whole row is whole
