"""`fitspeed monitor` and `measure --monitor`: real processes, real psutil; NVML through a fake.

The host sampler is tested for real (a busy subprocess must show up in the
CSV). NVML needs an NVIDIA driver, which the CI machine lacks, so the GPU path
is tested through `GpuSource` with a fake: everything above that boundary is
the real code. On a machine with a GPU, the real NVML path runs too.
"""

from __future__ import annotations

import csv
import dataclasses
import doctest
import importlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import QUICK, child_env, fitspeed, json_out, sigint_default
from waiting import wait_for
from rich.console import Console

from fitspeed.console import tables
from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialSpec, new_record
from fitspeed.machine import nvml
from fitspeed.machine.nvml import GpuReading
from fitspeed.machine.sampler import (
    GPU_FIELDS,
    TRIAL_INTERVAL_S,
    ProcessTree,
    Sample,
    Sampler,
    TreeReading,
    columns,
    row,
)
from fitspeed.machine.usage import trial_usage, usage_figures
from fitspeed.machine.watch import watch
from fitspeed.report import monitor_plot

# Spins on one core for SECONDS while five more threads sleep: 6 threads in all.
BUSY = """
import sys, threading, time
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
for _ in range(5):
    threading.Thread(target=time.sleep, args=(seconds,), daemon=True).start()
end = time.time() + seconds
while time.time() < end:
    pass
"""


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as stream:
        rows = list(csv.reader(stream))
    header = rows[0]
    return header, [dict(zip(header, row)) for row in rows[1:]]


def numbers(rows: list[dict[str, str]], column: str) -> list[float]:
    return [float(row[column]) for row in rows if row.get(column)]


def test_docstring_examples() -> None:
    result = doctest.testmod(importlib.import_module("fitspeed.machine.sampler"))
    assert result.attempted > 0 and result.failed == 0


# -- the host, for real ---------------------------------------------------------------


def test_host_sampler_sees_a_busy_subprocess(tmp_path: Path) -> None:
    busy = subprocess.Popen([sys.executable, "-c", BUSY, "3"])
    out = tmp_path / "host.csv"
    try:
        with Sampler(0.2, out=out, pid=busy.pid, gpus=None) as sampler:
            busy.wait(timeout=60)
    finally:
        busy.kill()
    header, rows = read_csv(out)
    assert header == columns(sampler.cores, 0, process=True)
    assert len(rows) >= 5
    assert all(len(row) == len(header) for row in rows)
    # its CPU shows up: one spinning core (idle would read ~0), on a shared machine where others take a share
    assert max(numbers(rows, "proc_cpu_percent")) >= 5  # busy, though a loaded machine may give it little
    assert max(numbers(rows, "cpu_percent")) >= 30
    # its threads show up: the main thread and five sleepers
    assert max(numbers(rows, "proc_threads")) >= 6
    assert max(numbers(rows, "proc_rss_mb")) > 1
    assert len([c for c in header if c.startswith("cpu") and c[3:4].isdigit()]) == os.cpu_count()
    summary = usage_figures(sampler.samples, 0.2)
    assert summary["threads_peak"] >= 6
    assert summary["cpu_percent_peak"] >= 20
    assert summary["device_util_mean"] is None  # no GPU source given


def test_process_tree_counts_children(tmp_path: Path) -> None:
    """A parent that starts two sleeping children: the tree has three processes."""
    code = ("import subprocess, sys, time; "  # the tree to count: it sleeps while it is counted
            "ps = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(20)']) for _ in range(2)]; "
            "time.sleep(20)")
    parent = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        tree = ProcessTree(parent.pid)

        def three() -> TreeReading | None:
            reading = tree.read()
            return reading if reading is not None and reading.processes >= 3 else None

        reading = wait_for(three, "three processes in the tree", 20)
        assert reading.processes == 3
        assert reading.threads >= 3
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    assert tree.read() is None  # the root is gone


# -- NVIDIA GPUs, through the boundary ----------------------------------------------------


class FakeGpus:
    """Two devices; device 1 does not report power (as some boards don't)."""

    names = ["Fake A100", "Fake T4"]

    def __init__(self) -> None:
        self.reads = 0
        self.closed = False

    def read(self) -> list[GpuReading]:
        self.reads += 1
        util = [50.0 + 10 * (self.reads % 2), 20.0]
        return [
            GpuReading(0, util[0], 1000.0 + self.reads, 40960.0, 250.0, 60.0, 1410.0),
            GpuReading(1, util[1], 500.0, 15360.0, None, 45.0, 1590.0),
        ]

    def close(self) -> None:
        self.closed = True


def test_gpu_readings_land_in_per_device_columns(tmp_path: Path) -> None:
    fake = FakeGpus()
    out = tmp_path / "gpu.csv"
    with Sampler(0.05, out=out, gpus=fake) as sampler:
        wait_for(lambda: len(sampler.samples) >= 3, "three samples", 60)
    assert fake.closed  # the sampler owns the source
    header, rows = read_csv(out)
    assert header == columns(sampler.cores, 2, process=False)
    for index in (0, 1):
        for field in GPU_FIELDS:
            assert f"gpu{index}_{field}" in header
    assert len(rows) >= 3 and len(rows) == len(sampler.samples)
    first = rows[0]
    assert float(first["gpu0_memory_total_mb"]) == 40960.0
    assert float(first["gpu0_power_w"]) == 250.0
    assert first["gpu1_power_w"] == ""  # not supported: an empty cell, not 0
    assert float(first["gpu1_sm_clock_mhz"]) == 1590.0
    assert {float(r["gpu0_util_percent"]) for r in rows} == {50.0, 60.0}
    summary = usage_figures(sampler.samples, 0.05)
    assert 35.0 <= summary["device_util_mean"] <= 40.0  # mean over devices, then over samples
    assert summary["device_util_peak"] == 60.0
    assert fake.reads == len(sampler.samples)  # one reading per sample
    assert summary["device_memory_peak_mb"] == 1500.0 + fake.reads  # summed over devices, at the last sample
    assert summary["power_mean_w"] == 250.0  # device 1 has no power reading


def sample(at: float, cpu: float, threads: int, gpus: tuple[GpuReading, ...] = ()) -> Sample:
    tree = TreeReading(processes=1, cpu_percent=cpu, threads=threads, rss_mb=100.0, read_mb=0.0, write_mb=0.0)
    return Sample(time=at, elapsed_s=at, cpu_percent=cpu / 2, per_core=(cpu / 2, cpu / 2),
                  memory_used_mb=1.0, tree=tree, gpus=gpus)


def test_summary_figures() -> None:
    samples = [
        sample(1.0, 100.0, 10, (GpuReading(0, 80.0, 1000.0, 2000.0, 100.0), GpuReading(1, 40.0, 500.0, 2000.0, 50.0))),
        sample(2.0, 200.0, 30, (GpuReading(0, 100.0, 1500.0, 2000.0, 300.0), GpuReading(1, 60.0, 700.0, 2000.0, 150.0))),
    ]
    summary = usage_figures(samples, 1.0)
    assert summary["cpu_percent_mean"] == 150.0 and summary["cpu_percent_peak"] == 200.0
    assert summary["host_cpu_percent_mean"] == 75.0
    assert summary["threads_peak"] == 30
    assert summary["device_util_mean"] == 70.0  # (60 + 80) / 2
    assert summary["device_util_peak"] == 100.0
    assert summary["device_memory_peak_mb"] == 2200.0  # summed over devices
    assert summary["power_mean_w"] == 300.0  # (150 + 450) / 2


def test_trial_summary_keeps_the_timed_fit() -> None:
    sampler = Sampler(0.25, gpus=None)
    sampler.samples.extend([sample(10.0, 50.0, 5), sample(11.0, 150.0, 40), sample(12.0, 170.0, 42),
                            sample(13.0, 20.0, 50)])
    inside = trial_usage(sampler, new_record(TrialSpec(model="tiny"), Status.OK, timed_wall=[10.5, 12.0]))
    assert inside["scope"] == "timed fit" and inside["samples"] == 2
    assert inside["cpu_percent_mean"] == 160.0 and inside["threads_peak"] == 42
    failed = trial_usage(sampler, new_record(TrialSpec(model="tiny"), Status.FAILED))
    assert failed["scope"] == "whole trial" and failed["samples"] == 4


def test_a_sample_taken_after_the_trial_exited_is_left_out() -> None:
    # A forked trial can end within the grace after its timed fit: the sampler then reads no process tree.
    # The figures come from the readings of the trial, not from that empty one.
    sampler = Sampler(0.25, pid=os.getpid(), gpus=None)
    gone = dataclasses.replace(sample(12.1, 0.0, 0), tree=None)
    sampler.samples.extend([sample(10.0, 50.0, 5), sample(11.0, 150.0, 40), gone])
    inside = trial_usage(sampler, new_record(TrialSpec(model="tiny"), Status.OK, timed_wall=[10.5, 12.0]))
    assert inside["scope"] == "timed fit" and inside["samples"] == 1 and inside["threads_peak"] == 40
    short = trial_usage(sampler, new_record(TrialSpec(model="tiny"), Status.OK, timed_wall=[11.5, 12.0]))
    assert short["scope"] == "whole trial" and short["samples"] == 2 and short["threads_peak"] == 40


def test_no_nvidia_gpu_is_said_once(tmp_path: Path) -> None:
    if nvml.open_gpus()[0] is not None:
        pytest.skip("this machine has an NVIDIA GPU")
    said: list[str] = []
    # the watched command's work is to last half a second, long enough to be sampled
    watched = watch([sys.executable, "-c", "import time; time.sleep(0.5)"], out=tmp_path / "m.csv",
                            interval_s=0.1, say=said.append)
    assert watched.exit_code == 0 and watched.samples
    assert len(said) == 1 and said[0].startswith("No NVIDIA GPU to sample")
    header, _ = read_csv(tmp_path / "m.csv")
    assert not any(c.startswith("gpu") for c in header)


@pytest.mark.skipif(nvml.open_gpus()[0] is None, reason="needs an NVIDIA GPU and driver")
def test_real_nvml_readings() -> None:
    source, why = nvml.open_gpus()
    assert source is not None, why
    try:
        readings = source.read()
        assert len(readings) == len(source.names) >= 1
        assert readings[0].memory_total_mb and readings[0].memory_total_mb > 0
        assert readings[0].util_percent is not None and 0 <= readings[0].util_percent <= 100
    finally:
        source.close()


# -- the plot: data first --------------------------------------------------------------


def test_plot_series_overlays_devices_and_skips_a_torn_row(tmp_path: Path) -> None:
    header = columns(2, 2, process=True)
    fake = FakeGpus()
    lines = [",".join(header)]
    for i in range(4):
        s = sample(float(i), 100.0 + i, 10 + i, tuple(fake.read()))
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow(row(s, 2, process=True))
        lines.append(buffer.getvalue().rstrip("\n"))
    path = tmp_path / "m.csv"
    path.write_text("\n".join(lines) + "\n" + lines[-1][:12])  # a half-written last row
    data = monitor_plot.series(path)
    assert len(data.elapsed_s) == 4
    panels = {p.title: p for p in data.panels}
    assert list(panels["CPU per core"].lines) == ["core 0", "core 1"]
    assert list(panels["GPU utilization"].lines) == ["GPU 0", "GPU 1"]
    assert panels["process tree threads"].lines["tree"] == [10.0, 11.0, 12.0, 13.0]
    assert list(panels["GPU power"].lines) == ["GPU 0"]  # device 1 never reported power
    png = monitor_plot.draw(data, tmp_path / "m.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- the command line --------------------------------------------------------------------


def test_cli_monitor_runs_a_busy_command(workdir: Path) -> None:
    result = fitspeed("monitor", "--interval", "0.2", "--out", "busy.csv", "--",
                      sys.executable, "-c", BUSY, "3", cwd=workdir, timeout=120)
    assert result.returncode == 0, result.stderr
    header, rows = read_csv(workdir / "busy.csv")
    assert len(rows) >= 5
    assert max(numbers(rows, "proc_cpu_percent")) >= 5  # busy, though a loaded machine may give it little
    assert max(numbers(rows, "proc_threads")) >= 6
    assert (workdir / "busy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "threads peak" in result.stdout
    assert f"{len(rows)} samples in busy.csv, plot in busy.png" in result.stderr
    if nvml.open_gpus()[0] is None:
        assert result.stderr.count("No NVIDIA GPU to sample") == 1


def test_cli_monitor_passes_on_the_exit_status_and_rejects_a_missing_command(workdir: Path) -> None:
    failed = fitspeed("monitor", "--interval", "0.1", "--", sys.executable, "-c", "import sys; sys.exit(3)",
                      cwd=workdir)
    assert failed.returncode == 3, failed.stderr
    missing = fitspeed("monitor", "--out", "missing.csv", "--", "no-such-command-fitspeed", cwd=workdir)
    assert missing.returncode == 2
    assert "Expected a command to run after `--`" in missing.stderr and "Traceback" not in missing.stderr


def test_ctrl_c_in_a_terminal_stops_command_and_monitor(workdir: Path) -> None:
    """Ctrl-C signals the terminal's whole process group: the command and the monitor."""
    # the watched command runs until Ctrl-C stops it (at most a minute)
    proc = subprocess.Popen([sys.executable, "-m", "fitspeed", "monitor", "--interval", "0.1", "--out", "cmd.csv",
                             "--", sys.executable, "-c", "import time; time.sleep(60)"],
                            cwd=workdir, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=sigint_default)
    try:
        _wait_for_rows(workdir / "cmd.csv", 3)
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert "Traceback (most recent call last)" not in stderr.split("KeyboardInterrupt")[-1]
    _, rows = read_csv(workdir / "cmd.csv")
    assert len(rows) >= 3 and (workdir / "cmd.png").exists()


def test_unwritable_out_is_one_sentence(workdir: Path) -> None:
    (workdir / "taken").write_text("a file, not a folder")
    result = fitspeed("monitor", "--out", "taken/m.csv", "--", sys.executable, "-c", "pass", cwd=workdir)
    assert result.returncode == 2
    assert "Expected --out to be a file that can be written" in result.stderr and "Traceback" not in result.stderr


def _start_monitor(workdir: Path, out: str, interval: float) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "fitspeed", "monitor", "--interval", str(interval), "--out", out],
                            cwd=workdir, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)


def _wait_for_rows(path: Path, rows: int, timeout: float = 60) -> None:
    wait_for(lambda: path.exists() and path.read_text().count("\n") > rows, f"{rows} rows in {path}", timeout)


def test_ctrl_c_ends_the_monitor_cleanly(workdir: Path) -> None:
    proc = _start_monitor(workdir, "host.csv", 0.1)
    _wait_for_rows(workdir / "host.csv", 4)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    header, rows = read_csv(workdir / "host.csv")
    assert len(rows) >= 4 and "proc_threads" not in header  # the host only
    assert (workdir / "host.png").exists()


def test_the_csv_survives_a_kill(workdir: Path) -> None:
    interval = 0.1
    proc = _start_monitor(workdir, "killed.csv", interval)
    _wait_for_rows(workdir / "killed.csv", 5)
    _wait_for_rows(workdir / "killed.csv", 8)  # three rows more: killed while it writes at its steady pace
    killed_at = time.time()
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    text = (workdir / "killed.csv").read_text()
    lines = text.split("\n")
    header = lines[0].split(",")
    assert header[:3] == ["time", "elapsed_s", "cpu_percent"]
    whole = lines[1:-1]  # text ends with a newline: every row was written whole
    assert lines[-1] == "" and len(whole) >= 5
    assert all(len(line.split(",")) == len(header) for line in whole)
    # At most one row lost: the last one on disk was taken within about two intervals of the kill.
    last = time.mktime(time.strptime(whole[-1].split(",")[0][:19], "%Y-%m-%dT%H:%M:%S"))
    last += float("0." + whole[-1].split(",")[0][20:])
    assert killed_at - last < 2 * interval + 0.5, (killed_at - last)


# -- measure --monitor -------------------------------------------------------------------


def test_measure_monitor_adds_a_summary_to_the_record(workdir: Path) -> None:
    result = fitspeed("measure", "tiny", *QUICK, "--monitor", "--json", cwd=workdir)
    record = json_out(result)
    assert record["status"] == "ok", record.get("reason")
    assert record["spec"]["monitor"] is True
    watched = record["monitor"]
    assert watched["samples"] >= 1
    assert watched["threads_peak"] >= 2  # TensorFlow's thread pools
    assert watched["cpu_percent_mean"] is not None and watched["cpu_percent_mean"] > 0
    assert watched["interval_s"] == TRIAL_INTERVAL_S
    start, end = record["timed_wall"]
    assert end > start
    if not watched["gpus"]:
        assert watched["device_util_mean"] is None and watched["power_mean_w"] is None
    stored = [json.loads(line) for line in (workdir / "fitspeed-results.jsonl").read_text().splitlines()]
    assert stored[-1]["monitor"] == watched


def test_trials_table_shows_monitor_columns() -> None:
    spec = TrialSpec(model="tiny", config=TrialConfig(steps_per_execution=4), monitor=True)
    metrics = {"samples_per_s": {"median": 1000.0, "min": 900.0, "max": 1100.0, "cv": 0.05},
               "ms_per_step": 32.0, "compile_s": 1.0, "final_loss": 0.5, "steps_per_repeat": 64, "window_s": [1.0]}
    summary = {"samples": 8, "scope": "timed fit", "cpu_percent_mean": 183.0, "cpu_percent_peak": 199.0,
               "threads_peak": 37, "device_util_mean": 71.0, "device_util_peak": 98.0,
               "device_memory_peak_mb": 10240.0, "power_mean_w": 212.0, "gpus": ["Fake"]}
    records = [new_record(spec, Status.OK, metrics=metrics, monitor=summary), new_record(TrialSpec(model="tiny"), Status.OOM)]
    console = Console(file=io.StringIO(), width=140, color_system=None)
    tables.print_trials(console, records)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    for expected in ("CPU %", "threads", "GPU % (peak)", "183", "37", "71 (98)", "10,240", "212"):
        assert expected in text, expected
    console = Console(file=io.StringIO(), width=100, color_system=None)
    tables.print_trials(console, records[:1])
    text = console.file.getvalue()  # type: ignore[attr-defined]
    for expected in ("8 over the timed fit", "183 (199)", "GPU power mean W"):
        assert expected in text, expected


def test_tune_passes_monitor_to_every_trial() -> None:
    from fitspeed.search.tuner import TuneSettings

    assert TuneSettings(model="tiny", monitor=True).spec(TrialConfig()).monitor is True
    assert TuneSettings(model="tiny").spec(TrialConfig()).monitor is False
    brief = tables.monitor_brief({"cpu_percent_mean": 183.4, "threads_peak": 37, "device_util_mean": 71.0,
                                  "device_memory_peak_mb": 10240.0})
    assert brief == "; CPU 183%, 37 threads, GPU 71% (10,240 MiB)"
    assert tables.monitor_brief(None) == ""
