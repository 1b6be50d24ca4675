"""Waiting in tests: on a condition with a deadline, never a fixed sleep that hopes something happened.

`wait_for` polls a condition until it holds, and fails with what was awaited
once its deadline passes (or once the processes it watches have all exited,
when nothing can make the condition true any more). `trial_processes` finds
the trial children that run in a folder, so a test can wait for one to start,
or, with `psutil.wait_procs`, for all of them to be gone.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import psutil

T = TypeVar("T")
POLL_S = 0.05


def wait_for(condition: Callable[[], T], what: str, limit_s: float = 300.0, *,
             alive: Sequence[subprocess.Popen[str] | subprocess.Popen[bytes]] = (), poll_s: float = POLL_S) -> T:
    """`condition()`'s first true value; fails after `limit_s`, or when every process in `alive` has exited."""
    deadline = time.monotonic() + limit_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"no {what} within {limit_s:g} s"
        assert not alive or any(proc.poll() is None for proc in alive), f"every process exited before {what}"
        time.sleep(poll_s)  # the poll's interval: the condition is what is waited on


def trial_processes(folder: Path) -> list[psutil.Process]:
    """The trial children working in `folder`: `python -m fitspeed.trial SPEC`, or one a fork server forked.

    A forked child keeps its server's command line; the server itself (whose
    parent is no server) is not a trial.
    """
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        command = " ".join(proc.info["cmdline"] or [])
        if "fitspeed.trial" not in command or proc.info["cwd"] != str(folder):
            continue
        try:
            parent = proc.parent()
            if "--fork-server" not in command or (parent is not None and "--fork-server" in " ".join(parent.cmdline())):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found
