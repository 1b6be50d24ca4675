"""Run one trial in a fresh process and always come back with a record.

The parent writes the spec to a file, starts `python -m fitspeed.trial` in a
new process group (a built-in trial is forked from a server that imported
keras once for its environment, `fitspeed.measure.warm_start`, and so is a
user's `python FILE ARGS...`, `fitspeed.trial.warm_script`, which starts cold
again where a fresh interpreter would differ; the record's `warm_start` says
which), and watches it: past `timeout_s` the group is killed
(`timeout`); over `memory_limit_mb` of resident memory, summed over the
child's process tree, it is killed too (`oom`). A child that dies without a
record is `crashed`, with its signal or exit code in the reason.

Every record that is not `ok` keeps `stderr_tail`: the last `TAIL_LINES`
lines (at most `STDERR_TAIL` characters) of the child's stderr, which goes
to a file so that no amount of it can block the child or fill the parent's
memory. Every trial process runs with the fault handler on (`python -m
fitspeed.trial`, the fork server's children, a script's start-up hook), so
a trial killed by a signal leaves the native abort message, each thread's
Python stack and, last, the line the parent adds: which signal killed it.
Where the dump of many threads is longer than the tail, the native message
and the fault handler's first line still lead it (`last_lines`), and the
native message ends the crash's reason (`native_cause`).
With `spec.monitor`, a `fitspeed.machine.sampler` sampler follows the child's process
tree and the GPUs meanwhile, and the record gains a `monitor` summary.

This module runs in the parent and never imports a framework.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil

from fitspeed.core.import_environment import import_environment, start_environment
from fitspeed.core.record import GAVE_UP, GAVE_UP_WORDS, TRIAL_TMP, Status, TrialRecord, TrialSpec, decode, new_record
from fitspeed.machine import environment
from fitspeed.machine.sampler import ProcessTree, start_for_trial
from fitspeed.machine.usage import trial_usage
from fitspeed.measure import processes, warm_start
from fitspeed.measure.processes import ProcessGroup

POLL_S = 0.05
COLD = "cold"  # fitspeed.trial.warm_script.COLD: a warm script trial's word that it must start cold, and why
STDERR_TAIL = 4000  # characters of a child's stderr a record keeps, at most
TAIL_LINES = 40  # its last lines, at most
READ_BACK = 64_000  # bytes read back from the end of the file, to find the cause above the last lines


def _kill_group(proc: subprocess.Popen[bytes] | warm_start.WarmChild) -> int:
    """Kill the child's process group; its exit status.

    A warm child makes its own group first thing after the fork server forks
    it; one stopped before that (a timeout the server's start used up) has no
    group yet, and is killed by its pid, or the wait would last as long as it.
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # no group of that id (yet): the child alone, if it still runs
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    except PermissionError:
        pass
    return proc.wait()


def _tail(path: Path) -> str:
    """The end of a child's stderr file as the record keeps it (`last_lines`); '' if it cannot be read."""
    try:
        with path.open("rb") as stream:
            stream.seek(0, os.SEEK_END)
            stream.seek(max(0, stream.tell() - READ_BACK))
            return last_lines(stream.read().decode("utf-8", "replace"))
    except OSError:
        return ""


# A native library's last word before it aborts (absl's LOG(FATAL), a failed CHECK or assert, C++'s terminate),
# and the fault handler's first line: a dump of many threads can push them above the last lines.
CAUSE = re.compile(r"^F\d{4} \d\d:\d\d:\d\d|Check failed|terminate called|Assertion .* failed|^Fatal Python error")


def last_lines(text: str, lines: int = TAIL_LINES, limit: int = STDERR_TAIL) -> str:
    """The last `lines` lines of `text`, at most `limit` characters, led by the lines that name the cause.

    The fault handler's list of loaded extension modules (one line of about
    2,000 characters) keeps its count only, so the stacks above it fit:

    >>> last_lines("a\\nb\\nc\\n", 2)
    'b\\nc\\n'
    >>> last_lines("Fatal Python error: Aborted\\nExtension modules: numpy.core, h5py.h5 (total: 2)\\n", 5)
    'Fatal Python error: Aborted\\nExtension modules: … (total: 2)\\n'

    A native abort message and the fault handler's first line stay when the
    dump of every thread's stack is longer than the tail:

    >>> print(last_lines("F1127 10:42:34.501 rendezvous.cc:161] Termination timeout\\n*** Check failure stack trace ***\\n"
    ...                  "    @ 0x7f8e AllReduce()\\nFatal Python error: Aborted\\n\\nThread 0x01:\\n  File a.py\\n"
    ...                  "Thread 0x02:\\n  File b.py\\n", 4), end="")
    F1127 10:42:34.501 rendezvous.cc:161] Termination timeout
    Fatal Python error: Aborted
    … [3 lines cut] …
    Thread 0x01:
      File a.py
    Thread 0x02:
      File b.py
    """
    every = [f"Extension modules: … ({line.rpartition('(')[2].strip()}\n" if line.startswith("Extension modules: ")
             and line.rstrip().endswith(")") else line for line in text.splitlines(keepends=True)]
    kept, above = every[-lines:], every[:-lines] if len(every) > lines else []
    native = [line for line in above if CAUSE.search(line) and not line.startswith("Fatal Python error")][-1:]
    fault = [line for line in above if line.startswith("Fatal Python error")][-1:]
    causes = [line if line.endswith("\n") else line + "\n" for line in above if line in native + fault]
    if causes:
        cut = len(above) - len(causes)
        head = "".join(line[:1000] for line in causes) + (f"… [{cut} lines cut] …\n" if cut else "")
    else:
        head = ""
    tail = "".join(kept)
    room = max(0, limit - len(head))
    if len(tail) > room:
        tail = tail[-room:].partition("\n")[2] or tail[-room:]  # from a line's start, unless one line is longer
    return head + tail


def native_cause(tail: str) -> str:
    """A crash's cause as a native library wrote it before it aborted, to end the crash's reason ('' if none).

    >>> native_cause("F1127 10:55:59.462144   15045 rendezvous.cc:161] [id=0] Termination timeout for `all reduce` "
    ...              "of 40 seconds exceeded.\\nFatal Python error: Aborted\\n")
    ': rendezvous.cc:161] [id=0] Termination timeout for `all reduce` of 40 seconds exceeded.'
    >>> native_cause("Fatal Python error: Segmentation fault\\n")
    ''
    """
    found = [line for line in tail.splitlines() if CAUSE.search(line) and not line.startswith("Fatal Python error")]
    if not found:
        return ""
    line = re.sub(r"^F\d{4} [\d:.]+\s+\d+\s+", "", found[-1].strip())  # absl's prefix: day, time, thread
    return f": {line if len(line) <= 500 else line[:500] + ' …'}"


def with_signal(tail: str, returncode: int) -> str:
    """A killed child's stderr tail, and last the signal that killed it (the tail as it is otherwise).

    >>> with_signal("Fatal Python error: Aborted\\n", -6)
    'Fatal Python error: Aborted\\n[fitspeed: the trial process was killed by SIGABRT]\\n'
    >>> with_signal("Traceback ...\\n", 1)
    'Traceback ...\\n'
    """
    if returncode >= 0:
        return tail
    if tail and not tail.endswith("\n"):
        tail += "\n"
    return f"{tail}[fitspeed: the trial process was killed by {_signal_name(returncode)}]\n"


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


HOOK_FAILED = 70  # the status `trial/script_site/sitecustomize.py` exits with when fitspeed cannot start in the script's Python
HOOK_FAILED_WORDS = "fitspeed: the script hook could not start"


def _hook_failure(log_tail: str | None) -> str | None:
    """The hook's own sentence, from a script's log, when fitspeed could not start in the script's Python.

    >>> _hook_failure("noise\\nfitspeed: the script hook could not start in /usr/bin/python3: "
    ...               "ModuleNotFoundError: No module named 'psutil'. Run the command with a Python that has "
    ...               "fitspeed and its dependencies installed.\\n")
    "the script hook could not start in /usr/bin/python3: ModuleNotFoundError: No module named 'psutil'. Run the command with a Python that has fitspeed and its dependencies installed."
    """
    for line in reversed((log_tail or "").splitlines()):
        if line.startswith(HOOK_FAILED_WORDS):
            return line.removeprefix("fitspeed: ").strip()
    return None


def _gave_up(log_tail: str | None) -> str | None:
    """The sentence a trial process wrote before it gave up where it could not send a record (`GAVE_UP`).

    >>> _gave_up("F1207 …\\nfitspeed: gave up: Expected all 2 processes to join.\\n")
    'Expected all 2 processes to join.'
    """
    for line in reversed((log_tail or "").splitlines()):
        if line.startswith(GAVE_UP_WORDS):
            return line.removeprefix(GAVE_UP_WORDS).strip()
    return None


class TrialProcess:
    """One trial's child process in `folder`, from its start to its record (`run_trial`, `fitspeed.measure.rounds`).

    `start` starts it (forked from a fork server where one serves it, else a
    fresh interpreter), `limits` says whether it must be killed for its
    memory or its time, `end` kills its group once it is over and tells
    whether it must run again cold (a warm script that found what only a
    fresh interpreter does), and `record` reads what it left.
    """

    def __init__(self, spec: TrialSpec, folder: Path, *, python: str = sys.executable,
                 env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> None:
        self.spec, self.folder, self.python = spec, folder, python
        self.started = time.perf_counter()
        spec_path = folder / "spec.json"
        spec_path.write_text(json.dumps(spec.to_dict()))
        self.stdout_path, self.stderr_path = folder / "stdout", folder / "stderr"
        child_env = start_environment(spec.config, os.environ if env is None else env)  # a knob the loader reads
        child_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        child_env["PYTHONUNBUFFERED"] = "1"
        if spec.script is None:  # a built-in trial's temporary files are the trial's; a user's command keeps its TMPDIR
            child_env[TRIAL_TMP] = str(folder)
        # -P: the working folder shadows no package
        self.argv: list[str] = [python, "-P", "-m", "fitspeed.trial", str(spec_path)]
        self.record_path: Path | None = None
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | warm_start.WarmChild | None = None
        if spec.script is not None:  # a user's own command, hooked (fitspeed.measure.training_command); its output is one log
            from fitspeed.measure import training_command

            self.argv, child_env, self.record_path = training_command.prepare(spec, folder, child_env)
            self.cwd = spec.script["cwd"]
            if training_command.forkable(self.argv, self.cwd, python, child_env.get("PATH")):  # `python FILE ARGS...`
                order = {training_command.ENV: child_env[training_command.ENV]}
                without = {k: v for k, v in child_env.items() if k != training_command.ENV}
                env_at_import = import_environment(spec.config, spec.seed, without) | order
                self.proc = warm_start.start(python, env_at_import, spec_path, self.stdout_path, self.stdout_path,
                                             self.cwd, script=self.argv)
        else:  # a built-in trial: forked from a server that imported keras once, where one can serve it
            env_at_import = import_environment(spec.config, spec.seed, child_env)
            self.proc = warm_start.start(python, env_at_import, spec_path, self.stdout_path, self.stderr_path, self.cwd)
        self.env = child_env
        self.warm = False
        self.sampler: Any = None
        self.peak_mb = 0.0
        self.tree: ProcessTree | None = None
        self.returncode = 0
        self.ended = self.started

    def start(self) -> None:
        """Start the child (a warm one forked in `__init__` runs already)."""
        self.warm = self.proc is not None
        if self.proc is None:
            with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
                self.proc = subprocess.Popen(
                    self.argv,
                    stdout=out,
                    stderr=err if self.record_path is None else subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.cwd,
                    env=self.env,
                    start_new_session=True,
                    preexec_fn=warm_start.die_with_parent if sys.platform == "linux" else None,
                )
        try:
            self.tree = ProcessTree(self.proc.pid)
        except psutil.NoSuchProcess:  # a forked child can be done, and reaped by its server, before this line
            self.tree = None
        self.peak_mb = 0.0
        self.sampler = start_for_trial(self.proc.pid) if self.spec.monitor else None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def limits(self, elapsed: float) -> tuple[Status, str] | None:
        """(status, reason) if the child must be killed for its memory or for `elapsed` seconds of its time."""
        spec = self.spec
        if spec.memory_limit_mb is not None and self.tree is not None:
            self.peak_mb = max(self.peak_mb, self.tree.rss_mb())
            if self.peak_mb > spec.memory_limit_mb:
                return (
                    Status.OOM,
                    f"the trial used {self.peak_mb:.0f} MiB, over the memory limit of "
                    f"{spec.memory_limit_mb} MiB",
                )
        if spec.timeout_s is not None and elapsed > spec.timeout_s:
            return (Status.TIMEOUT, f"the trial ran past its timeout of {spec.timeout_s:g} s")
        return None

    def end(self, killed: tuple[Status, str] | None) -> bool:
        """Kill the child's group (limits, Ctrl-C, a normal exit: it stops the child and any workers it left
        behind); True where it must run again, cold: a warm script that found what only a fresh interpreter
        does as `python FILE` does (`fitspeed.trial.warm_script`) left COLD."""
        assert self.proc is not None
        try:
            if self.sampler is not None:
                self.sampler.stop()
        finally:
            self.returncode = _kill_group(self.proc)
            self.ended = time.perf_counter()
        if killed or not self.warm or self.record_path is None or not (self.folder / COLD).exists():
            return False
        (self.folder / COLD).unlink()
        self.record_path.unlink(missing_ok=True)
        self.proc, self.started = None, time.perf_counter()
        return True

    def record(self, killed: tuple[Status, str] | None) -> TrialRecord:
        """The trial's record, whatever happened: the child's own, or the parent's account of its end."""
        spec, returncode = self.spec, self.returncode
        # a warm child opens its own output files: one stopped before it did (a timeout of a fraction of a
        # second, a loaded machine) left none, and its record is the kill's, not a crash of the parent
        stdout = self.stdout_path.read_text("utf-8", "replace") if self.stdout_path.exists() else ""
        log_tail = _tail(self.stderr_path if self.record_path is None else self.stdout_path)
        scripted = None
        if spec.script is not None and self.record_path is not None:
            from fitspeed.measure import training_command

            scripted = training_command.read_record(self.record_path)
        wall_s = self.ended - self.started
        if killed:
            status, reason = killed
            record = new_record(spec, status, reason=reason, environment=environment.host(spec.config.backend))
        else:
            decoded = decode(stdout) if spec.script is None else scripted
            hook_failed = _hook_failure(log_tail) if spec.script is not None and returncode == HOOK_FAILED else None
            gave_up = _gave_up(log_tail) if returncode == GAVE_UP else None
            if hook_failed or gave_up:  # the script's Python lacks fitspeed, or the other processes never joined
                record = new_record(spec, Status.FAILED, reason=hook_failed or gave_up, user_error=True,
                                    environment=environment.host(spec.config.backend))
            elif decoded is None:
                code = returncode
                how = (
                    f"was killed by {_signal_name(code)}" if code < 0 else f"exited with status {code}"
                )
                hint = " (the kernel's out-of-memory killer sends SIGKILL)" if code == -9 else ""
                record = new_record(
                    spec,
                    Status.CRASHED,
                    reason=f"the trial process {how} before it sent a record{hint}{native_cause(log_tail)}",
                    environment=environment.host(spec.config.backend),
                )
            else:
                record = TrialRecord.from_dict(decoded)  # the one decoding of the child's answer; attributes from here on
        return dataclasses.replace(
            record,
            # the child's own tail, with the signal that ended it when it was killed (by the parent's limits too)
            stderr_tail=with_signal(log_tail, returncode) if record.status != Status.OK else None,
            log_tail=log_tail if spec.script is not None else None,  # the script's own output, stdout and stderr together
            wall_s=wall_s,
            warm_start=self.warm,  # forked from a fork server, or a fresh interpreter
            monitor=trial_usage(self.sampler, record) if self.sampler is not None else None,
        )


def run_trial(
    spec: TrialSpec,
    *,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> TrialRecord:
    """Run `spec` in a child process (N processes with `processes=N`: `fitspeed.measure.processes`) and return its
    record, whatever happened."""
    refused = processes.refusal(spec, os.environ if env is None else env) if spec.config.processes > 1 else None
    if refused:
        return new_record(spec, Status.FAILED, reason=refused, user_error=True,
                          environment=environment.host(spec.config.backend))
    with tempfile.TemporaryDirectory(prefix="fitspeed-trial-") as tmp:
        trial: TrialProcess | ProcessGroup = (
            TrialProcess(spec, Path(tmp), python=python, env=env, cwd=cwd) if spec.config.processes == 1
            else ProcessGroup(spec, Path(tmp), TrialProcess, python=python, env=env, cwd=cwd))
        while True:
            trial.start()
            killed = None
            try:
                while trial.running():
                    killed = trial.limits(time.perf_counter() - trial.started)
                    if killed:
                        break
                    time.sleep(POLL_S)
            finally:
                again = trial.end(killed)
            if not again:
                break
        return trial.record(killed)
