"""One trial as N processes on this host: Keras's multi-process data parallel (`keras.distribution`).

`ProcessGroup` starts N fresh interpreters of the same trial, each told its
place by Keras's own variables: `KERAS_DISTRIBUTION_JOB_ADDRESSES` (this host
and a free port: the coordinator, process 0), `KERAS_DISTRIBUTION_NUM_PROCESSES`
and `KERAS_DISTRIBUTION_PROCESS_ID`, which `keras.distribution.initialize()`
reads in each (the `processes` knob, `fitspeed.trial.distribute.join`). JAX
then runs its collectives across them, over gloo on CPUs. Where a launcher set
those variables already (a cluster: the same command on each host, each with
its own process id), this command starts that one process only, with them as
they are, and its record is that process's (`refusal` checks they agree with
the processes asked).

Every step all-reduces the gradients, so the processes step together, and
process 0's record is the trial's: its figures count the global batch (each
process feeds its own share, `batch_size` × its devices). Every process's own
figure is kept beside it (the record's `processes`), so a straggler shows.

A process that ends takes the others down: one that failed at once (its exit
status is not 0), one that sent its record after `PEER_GRACE_S`. A peer left
waiting in a collective would otherwise wait for XLA's rendezvous timeout.
The trial's record is then the first process's to end, its reason naming the
process, with its own stderr tail. Every process is killed by its group when
the trial ends: none is left behind.

The processes are never forked from a fork server: the multi-process runtime
must start before the backend has run anything. Runs in the parent and never
imports a framework; the one process's machinery is the runner's, handed in
(`Process`).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from fitspeed.core.knobs.processes import ADDRESSES as ADDRESSES
from fitspeed.core.knobs.processes import COUNT as COUNT
from fitspeed.core.knobs.processes import INDEX as INDEX
from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure.warm_start import SWITCH as WARM_START  # "0": every process starts cold

SCRIPT_REASON = (
    "a training script's trials run as one process: fitspeed shares out by process the data of a built-in or "
    "builder model's trial (fitspeed measure MODEL --set backend=jax --set processes=N), and a script's data is its "
    "own. To train your script over N processes, run it so: fitspeed run best.json --processes N -- python train.py "
    "(it starts the script once per process, each joined by keras.distribution)"
)
PEER_GRACE_S = 10.0  # how long the other processes may take to end after one sent its record


class Process(Protocol):
    """One process of the group: the runner's `TrialProcess`."""

    tree: Any  # its process tree's memory (`fitspeed.machine.sampler.ProcessTree`), or None
    proc: Any  # the started process (`poll()`), or None before `start`

    def start(self) -> None: ...

    def running(self) -> bool: ...

    def limits(self, elapsed: float) -> tuple[Status, str] | None: ...

    def end(self, killed: tuple[Status, str] | None) -> bool: ...

    def record(self, killed: tuple[Status, str] | None) -> TrialRecord: ...


MakeProcess = Callable[..., Process]  # (spec, folder, *, python, env, cwd) -> Process


def free_port() -> int:
    """A TCP port nothing on this host listens on now, for the group's coordinator."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# One task of a SLURM step (`srun -n N`): JAX's cluster detection (jax/_src/clusters/slurm_cluster.py) reads these
# when keras.distribution.initialize() finds no Keras variable: the first node of the step is the coordinator, on a
# port drawn from the job id; SLURM_NTASKS the processes, SLURM_PROCID this one's id
SLURM_VARIABLES = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")


def launched(environ: Mapping[str, str]) -> int | None:
    """This command's process id where a launcher started it as one process of a multi-process run, by Keras's
    variables or as a task of a SLURM step of several tasks (`SLURM_VARIABLES`); None where this command starts
    every process itself (a SLURM step of one task too: `fitspeed` is then the launcher on that node).

    >>> launched({}), launched({ADDRESSES: "h:1", COUNT: "2", INDEX: "1"})
    (None, 1)
    >>> slurm = {**dict.fromkeys(SLURM_VARIABLES, "0"), "SLURM_NTASKS": "2", "SLURM_PROCID": "1"}
    >>> launched(slurm), launched({**slurm, "SLURM_NTASKS": "1"})
    (1, None)
    """
    if environ.get(ADDRESSES):
        index = environ.get(INDEX, "0")
        return int(index) if index.isdigit() else 0
    if all(environ.get(name, "").strip() for name in SLURM_VARIABLES) and environ["SLURM_NTASKS"].isdigit() \
            and int(environ["SLURM_NTASKS"]) > 1 and environ["SLURM_PROCID"].isdigit():
        return int(environ["SLURM_PROCID"])
    return None


def environments(count: int, address: str, environ: Mapping[str, str]) -> list[dict[str, str]]:
    """Each process's environment: `environ` with Keras's three variables, and no fork server.

    >>> [e[INDEX] for e in environments(2, "127.0.0.1:1234", {})], environments(2, "h:1", {})[1][ADDRESSES]
    (['0', '1'], 'h:1')
    """
    return [{**environ, ADDRESSES: address, COUNT: str(count), INDEX: str(index), WARM_START: "0"}
            for index in range(count)]


def refusal(spec: TrialSpec, environ: Mapping[str, str]) -> str | None:
    """Why a trial of several processes cannot run as asked, in a sentence; None where it can.

    >>> from fitspeed.core.config import TrialConfig
    >>> spec = TrialSpec(model="tiny", config=TrialConfig(backend="jax", processes=2))
    >>> refusal(spec, {}) is None, refusal(spec, {ADDRESSES: "h:1", COUNT: "2", INDEX: "1"}) is None
    (True, True)
    >>> refusal(spec, {ADDRESSES: "h:1", COUNT: "4", INDEX: "1"})
    'Expected KERAS_DISTRIBUTION_NUM_PROCESSES to be the processes asked, 2. Received: 4. Set it to 2 on every host, or ask --set processes=4.'
    >>> script = TrialSpec(model="script:train.py", config=TrialConfig(backend="jax", processes=2), script={})
    >>> print(refusal(script, {}))  # doctest: +NORMALIZE_WHITESPACE
    a training script's trials run as one process: fitspeed shares out by process the data of a built-in or builder
    model's trial (fitspeed measure MODEL --set backend=jax --set processes=N), and a script's data is its own. To
    train your script over N processes, run it so: fitspeed run best.json --processes N -- python train.py (it starts
    the script once per process, each joined by keras.distribution)
    """
    if spec.script is not None:
        return SCRIPT_REASON
    return launcher_refusal(spec.config.processes, environ)


def launcher_refusal(processes: int, environ: Mapping[str, str], ask: str = "--set processes=") -> str | None:
    """Why a launcher's Keras variables in `environ` disagree with the `processes` asked (`ask` is the option that
    asks it, up to its value), in a sentence; None where they agree, or where none is set.

    >>> launcher_refusal(2, {}) is None, launcher_refusal(2, {ADDRESSES: "h:1", COUNT: "2", INDEX: "0"}) is None
    (True, True)
    >>> print(launcher_refusal(2, {ADDRESSES: "h:1", COUNT: "2", INDEX: "2"}, ask="--processes "))
    Expected KERAS_DISTRIBUTION_PROCESS_ID to be this process's id, 0 to 1. Received: 2. Set it on each host: 0 on the coordinator (h:1).
    >>> print(launcher_refusal(2, {ADDRESSES: "h:1", INDEX: "0"}, ask="--processes "))
    Expected KERAS_DISTRIBUTION_NUM_PROCESSES to be the processes asked, 2. Received: nothing. Set it to 2 on every host, or ask --processes N.
    >>> print(launcher_refusal(2, {**dict.fromkeys(SLURM_VARIABLES, "0"), "SLURM_NTASKS": "4"}))
    Expected SLURM_NTASKS to be the processes asked, 2. Received: 4. Start 2 tasks (srun -n 2 ...), or ask --set processes=4.
    """
    if launched(environ) is None:
        return None
    if not environ.get(ADDRESSES):  # a SLURM step: its tasks are the processes
        tasks = environ["SLURM_NTASKS"]
        if tasks != str(processes):
            return (f"Expected SLURM_NTASKS to be the processes asked, {processes}. Received: {tasks}. Start "
                    f"{processes} tasks (srun -n {processes} ...), or ask {ask}{tasks}.")
        return None
    count, index = environ.get(COUNT, ""), environ.get(INDEX, "")
    if count != str(processes):
        return (f"Expected {COUNT} to be the processes asked, {processes}. Received: {count or 'nothing'}. Set it "
                f"to {processes} on every host, or ask {ask}{count or 'N'}.")
    if not index.isdigit() or int(index) >= processes:
        return (f"Expected {INDEX} to be this process's id, 0 to {processes - 1}. Received: {index or 'nothing'}. "
                f"Set it on each host: 0 on the coordinator ({environ[ADDRESSES]}).")
    return None


class ProcessGroup:
    """The N processes of one trial, watched as one: `start`, `running`, `limits`, `end` and `record`, as the
    runner watches one process (`fitspeed.measure.runner.run_trial`)."""

    def __init__(self, spec: TrialSpec, folder: Path, make: MakeProcess, *, python: str,
                 env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> None:
        self.spec = spec
        self.count = int(spec.config.processes)
        given = os.environ if env is None else env
        index = launched(given)
        if index is not None:  # a launcher's run (checked by `refusal`): this command is one of its processes
            self.indices, environs = [index], [{**given, WARM_START: "0"}]
        else:  # this host's run: every process started here, on a free local port
            self.indices = list(range(self.count))
            environs = environments(self.count, f"127.0.0.1:{free_port()}", given)
        self.members: list[Process] = []
        # no early stop: a process that stopped on its own clock would leave its peers waiting in a collective
        each = dataclasses.replace(spec, stop_below=None)
        for index, environ in zip(self.indices, environs, strict=True):
            own = folder / f"process-{index}"
            own.mkdir()
            self.members.append(make(each, own, python=python, env=environ, cwd=cwd))
        self.first_end: tuple[int, float] | None = None  # the first process to end, and when
        self.peak_mb = 0.0
        self.started = time.perf_counter()

    def start(self) -> None:
        self.started = time.perf_counter()
        for member in self.members:
            member.start()

    def running(self) -> bool:
        """Whether any process still runs."""
        return any(member.running() for member in self.members)

    def limits(self, elapsed: float) -> tuple[Status, str] | None:
        """Why the group must be stopped now, or None: a process's time, the group's memory (summed over its
        processes' trees), or one process over while the others still run (`PEER_GRACE_S`)."""
        for member in self.members:
            over = member.limits(elapsed) if member.running() else None
            if over and over[0] != Status.OOM:  # the memory limit is the group's, summed below
                return over
        if self.spec.memory_limit_mb is not None:
            self.peak_mb = max(self.peak_mb, sum(m.tree.rss_mb() for m in self.members
                                                 if m.tree is not None and m.running()))
            if self.peak_mb > self.spec.memory_limit_mb:
                return (Status.OOM, f"the trial's {self.count} processes used {self.peak_mb:.0f} MiB together, over "
                                    f"the memory limit of {self.spec.memory_limit_mb} MiB")
        now = time.perf_counter()
        if self.first_end is None:
            ended = next((i for i, member in enumerate(self.members) if not member.running()), None)
            if ended is None:
                return None
            self.first_end = (ended, now)
        index, when = self.first_end
        status = self._exit_status(index)
        if status != 0 or now - when > PEER_GRACE_S:
            return (Status.CRASHED, self._stopped_because(index, status))
        return None

    def _exit_status(self, index: int) -> int:
        code = self.members[index].proc.poll()
        return 0 if code is None else int(code)

    def _stopped_because(self, index: int, status: int) -> str:
        if status != 0:
            return (f"process {self.indices[index]} of {self.count} ended first (exit status {status}): the others "
                    "were stopped")
        return (f"process {self.indices[index]} of {self.count} ended, and the others had not ended "
                f"{PEER_GRACE_S:g} s later: they were stopped")

    def end(self, killed: tuple[Status, str] | None) -> bool:
        """Kill every process's group; never run again (no process is a warm script's)."""
        for member in self.members:
            member.end(None if self._ended_itself(member) else killed)
        return False

    def _ended_itself(self, member: Process) -> bool:
        return self.first_end is not None and member is self.members[self.first_end[0]]

    def record(self, killed: tuple[Status, str] | None) -> TrialRecord:
        """Process 0's record with every process's own figure; where a process's end stopped the group, that
        process's record, its reason naming it; where a process failed, the first one's."""
        records = [member.record(None if self._ended_itself(member) else killed) for member in self.members]
        own = [{"process": i, "status": r.status.value, "samples_per_s": r.throughput,
                **({"reason": r.reason} if r.reason else {})} for i, r in zip(self.indices, records, strict=True)]
        if killed is not None and killed[0] == Status.CRASHED and self.first_end is not None:
            index = self.first_end[0]
            first = records[index]
            chosen = (dataclasses.replace(first, reason=f"process {self.indices[index]} of {self.count}: {first.reason}")
                      if first.status != Status.OK else
                      dataclasses.replace(first, status=Status.CRASHED, metrics=None, reason=killed[1]))
        else:
            failed = next((i for i, r in enumerate(records) if r.status != Status.OK), None)
            chosen = records[0] if failed is None else dataclasses.replace(
                records[failed], reason=f"process {self.indices[failed]} of {self.count}: {records[failed].reason}")
        wall = [r.wall_s for r in records if r.wall_s is not None]
        return dataclasses.replace(chosen, extra={**chosen.extra, "processes": own},
                                   wall_s=max(wall) if wall else chosen.wall_s)
