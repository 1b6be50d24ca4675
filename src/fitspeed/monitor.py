"""Watch the devices while something trains: a sampler on its own thread.

Article 004 logged GPU load, power and memory to CSV every 5 s and plotted
it; article 002 looked at CPU use per core and at a training process's thread
count. `Sampler` does both, every `interval_s`:

- the host, through psutil: CPU % overall and per core, memory in use;
- a process tree when given a pid (a command it started, or a trial child):
  its CPU % summed over the tree (100 = one core busy), thread count, resident
  memory, and bytes read and written;
- each NVIDIA GPU through `fitspeed.nvml` (utilization, memory used and total,
  power, temperature, SM clock). Without one it samples the host only.

The CSV has a header and one row per sample; each row is written with one
`write`, flushed and fsynced, so a kill loses at most the row being taken.

`summarize` turns samples into the few figures a trial record keeps. This
module runs in the parent and never imports a framework.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import psutil

from fitspeed.errors import UserError
from fitspeed.nvml import GpuReading, GpuSource, open_gpus

DEFAULT_INTERVAL_S = 1.0
TRIAL_INTERVAL_S = 0.25  # trials last seconds: sample often enough to see the timed fit
GPU_FIELDS = ("util_percent", "memory_used_mb", "memory_total_mb", "power_w", "temperature_c", "sm_clock_mhz")
PROCESS_COLUMNS = ("proc_cpu_percent", "proc_threads", "proc_rss_mb", "proc_read_mb", "proc_write_mb")
STOP_GRACE_S = 5.0


def check_interval(interval_s: float) -> None:
    if not interval_s > 0:
        raise UserError(f"Expected --interval to be a positive number of seconds. Received: {interval_s}.")


@dataclass(frozen=True)
class TreeReading:
    """A process and all its descendants at one moment."""

    processes: int
    cpu_percent: float  # summed over the tree since the last reading; 100 = one core
    threads: int
    rss_mb: float
    read_mb: float | None  # bytes the tree's live processes have read from storage, cumulative
    write_mb: float | None


@dataclass(frozen=True)
class Sample:
    time: float  # Unix seconds
    elapsed_s: float
    cpu_percent: float  # the host, all cores (0-100)
    per_core: tuple[float, ...]
    memory_used_mb: float  # the host
    tree: TreeReading | None  # None without a pid, or once the process is gone
    gpus: tuple[GpuReading, ...]


class ProcessTree:
    """CPU, threads, memory and I/O of a process and its descendants.

    psutil's per-process CPU % counts from the previous call on the same
    `Process` object, so the objects are kept between readings; a process
    first seen in a reading counts 0 % in it.
    """

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self._known: dict[int, psutil.Process] = {}

    def alive(self) -> bool:
        try:
            return self.root.is_running() and self.root.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def read(self) -> TreeReading | None:
        """The tree now, or None once its root has exited."""
        try:
            if self.root.status() == psutil.STATUS_ZOMBIE:
                return None
            members = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return None
        known: dict[int, psutil.Process] = {}
        cpu, threads, rss, read, write = 0.0, 0, 0, 0, 0
        io_seen = False
        for member in members:
            process = self._known.get(member.pid, member)
            try:
                with process.oneshot():
                    cpu += process.cpu_percent(None)
                    threads += process.num_threads()
                    rss += process.memory_info().rss
                    try:
                        counters = process.io_counters()
                        read += counters.read_bytes
                        write += counters.write_bytes
                        io_seen = True
                    except (psutil.AccessDenied, AttributeError):
                        pass
            except psutil.Error:
                continue  # it exited between listing and reading
            known[process.pid] = process
        self._known = known
        if not known:
            return None
        return TreeReading(
            processes=len(known),
            cpu_percent=cpu,
            threads=threads,
            rss_mb=rss / 2**20,
            read_mb=read / 2**20 if io_seen else None,
            write_mb=write / 2**20 if io_seen else None,
        )


def columns(cores: int, gpus: int, process: bool) -> list[str]:
    """The CSV header.

    >>> columns(2, 1, process=False)  # doctest: +NORMALIZE_WHITESPACE
    ['time', 'elapsed_s', 'cpu_percent', 'cpu0_percent', 'cpu1_percent', 'mem_used_mb',
     'gpu0_util_percent', 'gpu0_memory_used_mb', 'gpu0_memory_total_mb', 'gpu0_power_w',
     'gpu0_temperature_c', 'gpu0_sm_clock_mhz']
    """
    names = ["time", "elapsed_s", "cpu_percent", *(f"cpu{i}_percent" for i in range(cores)), "mem_used_mb"]
    if process:
        names += PROCESS_COLUMNS
    for index in range(gpus):
        names += [f"gpu{index}_{field}" for field in GPU_FIELDS]
    return names


def _cell(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def row(sample: Sample, gpus: int, process: bool) -> list[str]:
    """One CSV row, in the order of `columns`; a missing reading is an empty cell."""
    stamp = datetime.fromtimestamp(sample.time).isoformat(timespec="milliseconds")
    cells = [stamp, _cell(sample.elapsed_s, 3), _cell(sample.cpu_percent),
             *(_cell(core) for core in sample.per_core), _cell(sample.memory_used_mb, 0)]
    if process:
        tree = sample.tree
        cells += ([_cell(tree.cpu_percent), _cell(tree.threads), _cell(tree.rss_mb),
                   _cell(tree.read_mb, 2), _cell(tree.write_mb, 2)] if tree else [""] * len(PROCESS_COLUMNS))
    by_index = {reading.index: reading for reading in sample.gpus}
    for index in range(gpus):
        reading = by_index.get(index)
        cells += [_cell(getattr(reading, field) if reading else None) for field in GPU_FIELDS]
    return cells


class Sampler:
    """Samples every `interval_s` on a daemon thread until `stop()`.

    Args:
        interval_s: seconds between samples.
        out: CSV path (written as it goes), or None to keep the samples in memory only.
        pid: a process whose tree to follow, or None for the host only.
        gpus: where GPU readings come from (`nvml.open_gpus()` or a fake);
            the sampler closes it when it stops.
    """

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        *,
        out: Path | None = None,
        pid: int | None = None,
        gpus: GpuSource | None = None,
    ) -> None:
        check_interval(interval_s)
        self.interval_s = interval_s
        self.out = out
        self.gpus = gpus
        self.gpu_names = gpus.names if gpus else []
        self.tree = ProcessTree(pid) if pid is not None else None
        self.cores = len(psutil.cpu_percent(percpu=True))
        self.columns = columns(self.cores, len(self.gpu_names), self.tree is not None)
        self.samples: list[Sample] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: TextIO | None = None
        self._started = time.time()
        self._lock = threading.Lock()

    # -- life cycle ------------------------------------------------------------

    def start(self) -> Sampler:
        if self.out is not None:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            self._stream = self.out.open("w", newline="", encoding="utf-8")
            self._write(self.columns)
        self._started = time.time()
        if self.tree is not None:
            self.tree.read()  # prime the per-process CPU counters
        self._thread = threading.Thread(target=self._run, name="fitspeed-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling, close the CSV and the GPU source; safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._stream is not None:
                self._stream.close()
                self._stream = None
        if self.gpus is not None:
            self.gpus.close()
            self.gpus = None

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- sampling --------------------------------------------------------------

    def _run(self) -> None:
        psutil.cpu_percent(percpu=True)  # prime: psutil keeps the previous reading per thread
        deadline = time.monotonic() + self.interval_s
        while not self._stop.wait(max(0.0, deadline - time.monotonic())):
            try:
                sample = self.sample()
                self.samples.append(sample)
                self._write(row(sample, len(self.gpu_names), self.tree is not None))
            except BaseException as error:  # never take the parent down; report it at the end
                self.error = error
                return
            deadline += self.interval_s
            now = time.monotonic()
            if deadline < now:  # fell behind (a stalled machine): skip, don't burst
                deadline = now + self.interval_s

    def sample(self) -> Sample:
        """Read everything once, now."""
        now = time.time()
        per_core = tuple(psutil.cpu_percent(percpu=True))
        memory = psutil.virtual_memory()
        return Sample(
            time=now,
            elapsed_s=now - self._started,
            cpu_percent=sum(per_core) / max(1, len(per_core)),
            per_core=per_core,
            memory_used_mb=(memory.total - memory.available) / 2**20,
            tree=self.tree.read() if self.tree is not None else None,
            gpus=tuple(self.gpus.read()) if self.gpus is not None else (),
        )

    def _write(self, cells: Sequence[str]) -> None:
        with self._lock:
            if self._stream is None:
                return
            buffer = io.StringIO()
            csv.writer(buffer, lineterminator="\n").writerow(cells)
            self._stream.write(buffer.getvalue())  # one write per row
            self._stream.flush()
            os.fsync(self._stream.fileno())


# -- summaries ------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _peak(values: Sequence[float]) -> float | None:
    return max(values) if values else None


def summarize(samples: Sequence[Sample], interval_s: float | None = None) -> dict[str, Any]:
    """Mean and peak figures over `samples`; a figure with no readings is None.

    `cpu_percent_*` is the process tree's when one was followed (100 = one
    core), else the host's (0-100); `host_cpu_percent_mean` is always the
    host's. Device figures: utilization averaged over devices per sample,
    memory and power summed over devices per sample.
    """
    trees = [s.tree for s in samples if s.tree is not None]
    cpu = [t.cpu_percent for t in trees] if trees else [s.cpu_percent for s in samples]
    gpu_samples = [s.gpus for s in samples if s.gpus]
    util = [[g.util_percent for g in gpus if g.util_percent is not None] for gpus in gpu_samples]
    memory = [[g.memory_used_mb for g in gpus if g.memory_used_mb is not None] for gpus in gpu_samples]
    power = [[g.power_w for g in gpus if g.power_w is not None] for gpus in gpu_samples]
    return {
        "samples": len(samples),
        "interval_s": interval_s,
        "cpu_percent_mean": _mean(cpu),
        "cpu_percent_peak": _peak(cpu),
        "host_cpu_percent_mean": _mean([s.cpu_percent for s in samples]),
        "threads_peak": _peak([t.threads for t in trees]),
        "rss_peak_mb": _peak([t.rss_mb for t in trees]),
        "device_util_mean": _mean([sum(u) / len(u) for u in util if u]),
        "device_util_peak": _peak([max(u) for u in util if u]),
        "device_memory_peak_mb": _peak([sum(m) for m in memory if m]),
        "power_mean_w": _mean([sum(p) for p in power if p]),
    }


def trial_summary(sampler: Sampler, record: dict[str, Any]) -> dict[str, Any]:
    """The `monitor` field of a trial record: the samples taken during the timed fit.

    The child stores the wall-clock span of its timed `fit()` as the record's
    `timed_wall`; import, build, warm-up and compilation fall outside it. A
    trial without one (failed early), or a timed fit shorter than one
    interval, is summarized over the whole trial, and `scope` says so.
    """
    span = record.get("timed_wall") or None
    chosen: list[Sample] = []
    if span:
        start, end = span
        # a sample at t covers (t - interval, t]: keep those that end inside the span
        chosen = [s for s in sampler.samples if start < s.time <= end + sampler.interval_s / 2]
    scope = "timed fit" if chosen else "whole trial"
    summary = summarize(chosen or sampler.samples, sampler.interval_s)
    return {"scope": scope, **summary, "gpus": sampler.gpu_names}


def start_for_trial(pid: int) -> Sampler | None:
    """A quiet, in-memory sampler on a trial child's process tree (None if it is already gone)."""
    gpus, _ = open_gpus()
    try:
        return Sampler(TRIAL_INTERVAL_S, pid=pid, gpus=gpus).start()
    except psutil.Error:
        if gpus is not None:
            gpus.close()
        return None


# -- `fitspeed monitor` -------------------------------------------------------------


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
        raise UserError(f"Expected --pid to be a running process. Received: {pid}, which does not exist.")
    if pid is not None:
        try:
            psutil.Process(pid)
        except psutil.Error as error:
            raise UserError(f"Expected --pid to be a process fitspeed can read. Received: {pid} ({error}).") from None
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
