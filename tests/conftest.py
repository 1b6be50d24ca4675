"""Shared helpers: run the real CLI and real trial children in a temp folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
QUICK = ["--steps", "8", "--repeats", "2"]  # a short timed run: the protocol, not the figures


def sigint_default() -> None:
    """Popen's preexec_fn: Ctrl-C's default, as in a terminal's foreground process.

    A shell starts background jobs with SIGINT ignored, and children inherit
    that; a test that sends SIGINT must not depend on how pytest was started.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FIXTURES), env.get("PYTHONPATH")]))
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    # the suite runs tests side by side (pytest -n 2): tuning workers share this host on purpose
    env["FITSPEED_ALLOW_SHARED_HOST"] = "1"
    return env


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", child_env()["PYTHONPATH"])
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    return tmp_path


def fitspeed(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the `fitspeed` command as a user would, in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "fitspeed", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def json_out(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.stdout, result.stderr
    return json.loads(result.stdout)
