"""benchmarks/jax_cpu_allreduce.py: plain JAX on logical CPU devices, a few steps a run, and XLA's fatal line.

The abort it documents comes after XLA's 40 s rendezvous timeout and not on every run, so no test waits for
one: the fatal line is read from the stderr XLA wrote when it aborted here, and the counts are checked
against the exit statuses the script printed beside them.
"""

from __future__ import annotations

import doctest
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import child_env, load_script, missing

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "jax_cpu_allreduce.py"

# what one asynchronous run of 3000 steps wrote before its SIGABRT (exit -6) on 2 cores, jax 0.10.2, cut short
ABORTED = """\
E1128 23:31:15.501346   23956 rendezvous.cc:116] [id=0] This thread has been waiting for `all reduce \
RendezvousKey{run_id=RunId: 1353511141, global_devices=[0, 1], num_local_participants=2, \
collective_op_kind=cross_module, op_id=1}` for 20 seconds and may be stuck. Expected 2 threads to join the \
rendezvous, but not all of them arrived on time.
E1128 23:31:55.502220   23956 rendezvous.cc:41] All thread stack traces (if supported on this platform):
F1128 23:31:55.502553   23956 rendezvous.cc:161] [id=0] Termination timeout for `all reduce \
RendezvousKey{run_id=RunId: 1353511141, global_devices=[0, 1], num_local_participants=2, \
collective_op_kind=cross_module, op_id=1}` of 40 seconds exceeded. Exiting to ensure a consistent program \
state. Expected 2 threads to join the rendezvous, but only 1 of them arrived on time.
*** Check failure stack trace: ***
    @     0x7fb558840634  absl::lts_20260107::log_internal::LogMessage::SendToLog()
    @     0x7fb55e248090  xla::cpu::InProcessCommunicator::AllReduce()
    @     0x7fb5586c8e04  Eigen::ThreadPoolTempl<>::WorkerLoop()
"""


@pytest.fixture(scope="module")
def allreduce() -> ModuleType:
    if importlib.util.find_spec("jax") is None:
        missing("jax is not installed (pip install 'fitspeed[jax]')")
    return load_script(SCRIPT)


def test_worked_examples(allreduce: ModuleType) -> None:
    result = doctest.testmod(allreduce)
    assert result.attempted > 0 and result.failed == 0


def test_the_fatal_line_is_the_termination_not_the_warning_before_it(allreduce: ModuleType) -> None:
    line = allreduce.fatal_line(ABORTED)
    assert line.startswith("F1128 23:31:55.502553") and "Termination timeout" in line
    assert "only 1 of them arrived on time" in line
    assert allreduce.fatal_line(ABORTED.replace("\nF1128", "\nE1128")) == ""  # warnings alone: no abort line
    assert allreduce.fatal_line("") == ""


def test_a_step_waited_for_finishes_on_two_devices(allreduce: ModuleType) -> None:
    assert allreduce.run(steps=4, devices=2, wait=True) == (0, "")


def test_the_device_count_reaches_the_fresh_process(allreduce: ModuleType) -> None:
    # the batch of 64 rows splits over 4 devices but not over 3: the child really has the devices asked for
    assert allreduce.run(steps=2, devices=4, wait=True) == (0, "")
    code, fatal = allreduce.run(steps=2, devices=3, wait=True)
    assert code not in (0, -6) and fatal == ""  # a Python error in the child, not an abort


def test_the_script_prints_every_run_and_counts_its_aborts(allreduce: ModuleType, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--runs", "2", "--steps", "4"], cwd=tmp_path,
                          env=child_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.match(r"^\d+ CPUs, 2 host devices, 4 steps a run$", out.splitlines()[0]), out
    for mode in ("asynchronous", "each step waited for"):
        runs = re.findall(rf"^{mode} run (\d+): exit (-?\d+) ?(.*)$", out, re.M)
        assert [int(index) for index, _, _ in runs] == [1, 2], out
        counted = re.findall(rf"^{mode}: (\d+) of (\d+) aborted$", out, re.M)
        assert counted == [(str(sum(code == "-6" for _, code, _ in runs)), "2")], out
        for _, code, fatal in runs:  # XLA's line is shown only where the run aborted
            assert code in ("0", "-6") and (fatal == "") == (code == "0"), out
        if mode == "each step waited for":
            assert [code for _, code, _ in runs] == ["0", "0"], out
