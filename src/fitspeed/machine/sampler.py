"""Watch the devices while something trains: a sampler on its own thread.

Article 004 logged GPU load, power and memory to CSV every 5 s and plotted
it; article 002 looked at CPU use per core and at a training process's thread
count. `Sampler` does both, every `interval_s`:

- the host, through psutil: CPU % overall and per core, memory in use;
- a process tree when given a pid (a command it started, or a trial child):
  its CPU % summed over the tree (100 = one core busy), thread count, resident
  memory, and bytes read and written;
- each NVIDIA GPU through `fitspeed.machine.nvml` (utilization, memory used and total,
  power, temperature, SM clock). Without one it samples the host only.

The CSV has a header and one row per sample; each row is written with one
`write`, flushed and fsynced, so a kill loses at most the row being taken.

`fitspeed.machine.usage` turns samples into the figures a record keeps, and
`fitspeed.machine.watch` runs a command under a sampler. This module runs in
the parent and never imports a framework.
"""

from __future__ import annotations

import csv
import io
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TextIO

import psutil

from fitspeed.core.errors import UserError
from fitspeed.machine.nvml import GpuReading, GpuSource, open_gpus

DEFAULT_INTERVAL_S = 1.0
TRIAL_INTERVAL_S = 0.25  # trials last seconds: sample often enough to see the timed fit
GPU_FIELDS = ("util_percent", "memory_used_mb", "memory_total_mb", "power_w", "temperature_c", "sm_clock_mhz")
PROCESS_COLUMNS = ("proc_cpu_percent", "proc_threads", "proc_rss_mb", "proc_read_mb", "proc_write_mb")


def check_interval(interval_s: float) -> None:
    if not interval_s > 0:
        raise UserError(f"Expected --interval to be a positive number of seconds. Received: {interval_s}. "
                        "Use for example --interval 1.")


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

    def members(self) -> list[psutil.Process] | None:
        """The root and its descendants now, or None once the root has exited."""
        try:
            if self.root.status() == psutil.STATUS_ZOMBIE:
                return None
            return [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return None

    def rss_mb(self) -> float:
        """Resident memory summed over the tree, in MiB: the cheap reading a memory limit polls."""
        total = 0
        for member in self.members() or []:
            try:
                total += member.memory_info().rss
            except psutil.Error:
                pass  # it exited between listing and reading
        return total / 2**20

    def read(self) -> TreeReading | None:
        """The tree now, or None once its root has exited."""
        members = self.members()
        if members is None:
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
                try:
                    self._stream.close()
                except OSError as error:  # a full disk: the rows written so far are whole; say why it stopped
                    self.error = self.error or error
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


def start_for_trial(pid: int) -> Sampler | None:
    """A quiet, in-memory sampler on a trial child's process tree (None if it is already gone)."""
    gpus, _ = open_gpus()
    try:
        return Sampler(TRIAL_INTERVAL_S, pid=pid, gpus=gpus).start()
    except psutil.Error:
        if gpus is not None:
            gpus.close()
        return None
