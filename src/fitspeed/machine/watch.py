"""Run a command, or follow a running process, while a sampler writes its CSV.

The engine of `fitspeed monitor`: it starts the command (or finds `--pid`),
samples its process tree, the host and the GPUs into the CSV until it ends
(or until Ctrl-C or SIGTERM), and returns the command's exit status with the
samples. Drawing the plot and printing the table are the CLI's.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import psutil

from fitspeed.core.errors import UserError
from fitspeed.machine.nvml import open_gpus
from fitspeed.machine.sampler import DEFAULT_INTERVAL_S, Sample, Sampler, check_interval

STOP_GRACE_S = 5.0  # after Ctrl-C, how long the command gets to finish before it is stopped


@dataclass(frozen=True)
class Watched:
    """What `watch` saw: the exit status to end with, and the samples."""

    exit_code: int
    samples: list[Sample]
    interrupted: bool
    command_code: int | None


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def watch(
    command: Sequence[str],
    *,
    out: Path,
    interval_s: float = DEFAULT_INTERVAL_S,
    pid: int | None = None,
    say: Callable[[str], None] = print,
) -> Watched:
    """Sample while `command` runs (or `pid` lives, or until Ctrl-C) into `out`.

    With a command, the exit status is the command's (130 after Ctrl-C).
    Without one, Ctrl-C (or SIGTERM) ends it cleanly with status 0; the CSV
    keeps every sample taken.
    """
    check_interval(interval_s)
    if command and pid is not None:
        raise UserError("Expected either a command after `--` or --pid, not both. "
                        f"Received: --pid {pid} and {' '.join(command)!r}.")
    if pid is not None and not psutil.pid_exists(pid):
        raise UserError(f"Expected --pid to be a running process. Received: {pid}, which does not exist. "
                        "Check the number with `ps`, or start the command under `fitspeed monitor -- COMMAND`.")
    if pid is not None:
        try:
            psutil.Process(pid)
        except psutil.Error as error:
            raise UserError(f"Expected --pid to be a process fitspeed can read. Received: {pid} ({error}). "
                            "Run fitspeed as the user that owns it.") from None
    gpus, why = open_gpus()
    if gpus is None:
        say(f"No NVIDIA GPU to sample ({why}); sampling the host only.")
    proc: subprocess.Popen[bytes] | None = None
    if command:
        try:
            proc = subprocess.Popen(list(command))
        except (FileNotFoundError, PermissionError) as error:
            if gpus is not None:
                gpus.close()
            raise UserError(f"Expected a command to run after `--`. Received: {command[0]!r}, which "
                            f"could not be started ({error.strerror}). Check the name, or give its path.") from None
        pid = proc.pid
    sampler = Sampler(interval_s, out=out, pid=pid, gpus=gpus)
    try:
        sampler.start()
    except OSError as error:
        sampler.stop()
        if proc is not None:
            proc.kill()
            proc.wait()
        raise UserError(f"Expected --out to be a file that can be written. Received: {str(out)!r} "
                        f"({error.strerror}). Choose another path.") from None
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    interrupted, code = False, None
    try:
        if proc is not None:
            code = proc.wait()
        else:
            while sampler.tree is None or sampler.tree.alive():
                time.sleep(min(0.2, interval_s))
    except KeyboardInterrupt:
        interrupted = True
        if proc is not None:
            code = _end(proc)
    finally:
        sampler.stop()
        signal.signal(signal.SIGTERM, previous)
    if sampler.error is not None:
        say(f"The sampler stopped early: {type(sampler.error).__name__}: {sampler.error}")
    if proc is not None:
        exit_code = 130 if interrupted else (code if code is not None and code >= 0 else 128 - (code or 0))
    else:
        exit_code = 0
    return Watched(exit_code, sampler.samples, interrupted, code)


def _end(proc: subprocess.Popen[bytes]) -> int:
    """After Ctrl-C: give the command time to finish (the terminal sent it SIGINT too), then stop it."""
    for stop in (None, proc.terminate, proc.kill):
        if stop is not None:
            stop()
        try:
            return proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:  # a second Ctrl-C: stop it now
            continue
    return proc.wait()
