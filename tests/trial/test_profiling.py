"""`measure --profile`: a real trace of one timed window, parsed into its top ops."""

from __future__ import annotations

import doctest
import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_env, fitspeed, missing

from fitspeed.trial import profiling, trace_ops
from fitspeed.trial.trace_ops import TraceEvent


@pytest.mark.parametrize("module", [trace_ops, profiling])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.attempted > 0 and result.failed == 0


def _records(workdir: Path) -> list[dict]:
    return [json.loads(line) for line in (workdir / "fitspeed-results.jsonl").read_text().splitlines()]


def test_measure_tiny_profile_traces_a_window_and_names_its_ops(workdir: Path) -> None:
    result = fitspeed("measure", "tiny", "--steps", "8", "--repeats", "2", "--profile", cwd=workdir)
    assert result.returncode == 0, result.stderr
    record = _records(workdir)[-1]
    profile = record["profile"]
    assert "error" not in profile, profile.get("error")
    # the trace file exists, under the log dir the command prints, and parses
    logdir = Path(profile["logdir"])
    assert logdir.is_relative_to(workdir / "fitspeed-profiles")
    files = [Path(p) for p in profile["trace_files"]]
    assert files and all(p.exists() and p.name.endswith(".xplane.pb") for p in files)
    events = trace_ops.read(files[0])
    assert any(e.op_type for e in events)  # TensorFlow ops, as "name:Type"
    ops = trace_ops.top_ops(events)
    assert 1 <= len(ops) <= 10 and ops[0].self_ms > 0
    assert ops == sorted(ops, key=lambda op: -op.self_ms)
    assert profile["top_ops"][0]["op"] == ops[0].op
    assert profile["steps"] == 8 and profile["window_s"] > 0
    # the traced window is extra: the speed figures keep their own windows
    assert len(record["metrics"]["window_s"]) == 2
    # printed: the op table, the log dir and the command that opens it
    assert "top " in result.stdout and ops[0].op[:20] in result.stdout.replace("\n", "")
    assert f"tensorboard --logdir {logdir}" in result.stdout
    assert "xprof" in result.stdout  # what the command needs installed
    # parsing did not need TensorFlow in this process
    code = (f"import sys; from pathlib import Path; from fitspeed.trial import trace_ops; "
            f"s = trace_ops.read_profile(Path({str(logdir)!r})); "
            f"print(len(s['top_ops']), 'tensorflow' in sys.modules)")
    light = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=60)
    assert light.stdout.split() == [str(len(profile["top_ops"])), "False"], light.stderr


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_profile_on_the_other_backends(workdir: Path, backend: str) -> None:
    if importlib.util.find_spec(backend) is None:
        missing(f"{backend} is not installed")
    result = fitspeed("measure", "tiny", "--steps", "8", "--repeats", "1", "--profile",
                      "--set", f"backend={backend}", cwd=workdir)
    assert result.returncode == 0, result.stderr
    profile = _records(workdir)[-1]["profile"]
    assert "error" not in profile, profile.get("error")
    assert profile["backend"] == backend and profile["top_ops"]
    suffix = ".pt.trace.json" if backend == "torch" else ".xplane.pb"
    assert all(Path(p).exists() and p.endswith(suffix) for p in profile["trace_files"])
    assert "tensorboard --logdir" in result.stdout


def test_self_time_ranks_the_op_doing_the_work() -> None:
    """torch-style nesting: aten::linear wraps aten::addmm, which does the work."""
    events = [
        TraceEvent("1/1", 0, 100, "aten::linear", "aten::linear"),
        TraceEvent("1/1", 5, 90, "aten::addmm", "aten::addmm"),
        TraceEvent("1/1", 100, 30, "aten::relu", "aten::relu"),
        TraceEvent("1/2", 0, 500, "ProfilerStep#1", None),  # bookkeeping on another thread
    ]
    ops = trace_ops.top_ops(events)
    assert [(op.op, round(op.self_ms * 1000)) for op in ops] == [("aten::addmm", 90), ("aten::relu", 30),
                                                                 ("aten::linear", 10)]
    assert abs(sum(op.share for op in ops) - 1.0) < 1e-9


def test_device_ops_outrank_host_ops() -> None:
    events = [
        TraceEvent("host/1", 0, 1000, "dense/MatMul:MatMul", "dense/MatMul", "MatMul"),
        TraceEvent("gpu/stream", 0, 40, "ampere_sgemm", "dense/MatMul", "MatMul", device=True),
        TraceEvent("gpu/stream", 50, 10, "relu_kernel", "dense/Relu", "Relu", device=True),
    ]
    ops = trace_ops.top_ops(events)
    assert [op.op for op in ops] == ["dense/MatMul", "dense/Relu"] and all(op.device for op in ops)


def test_xplane_device_plane_kernels_are_named_by_their_op(tmp_path: Path) -> None:
    """A GPU plane as tf.profiler writes it: kernels on a stream line, each with a tf_op stat."""
    xplane = trace_ops._xplane_pb2()
    space = xplane.XSpace()
    plane = space.planes.add(id=1, name="/device:GPU:0")
    plane.stat_metadata[1].id, plane.stat_metadata[1].name = 1, "tf_op"
    for key, name in ((1, "volta_sgemm_128x64_nn"), (2, "redzone_checker")):
        plane.event_metadata[key].id, plane.event_metadata[key].name = key, name
    line = plane.lines.add(id=7, name="Stream #14(Compute)", timestamp_ns=1000)
    for offset, meta, op in ((0, 1, "model/dense/MatMul:MatMul"), (5_000_000, 1, "model/dense/MatMul:MatMul"),
                             (9_000_000, 2, "")):
        event = line.events.add(metadata_id=meta, offset_ps=offset, duration_ps=2_000_000)
        if op:
            event.stats.add(metadata_id=1, str_value=op)
    host = space.planes.add(id=2, name="/host:CPU")
    host.event_metadata[1].id, host.event_metadata[1].name = 1, "ExecutorState::Process"
    host.lines.add(id=1, name="tf_Compute", timestamp_ns=0).events.add(metadata_id=1, duration_ps=10**9)
    path = tmp_path / "plugins" / "profile" / "run" / "host.xplane.pb"
    path.parent.mkdir(parents=True)
    path.write_bytes(space.SerializeToString())

    summary = trace_ops.read_profile(tmp_path)
    assert summary["where"] == "device"
    top = summary["top_ops"]
    assert (top[0]["op"], top[0]["op_type"], top[0]["count"]) == ("model/dense/MatMul", "MatMul", 2)
    assert top[0]["self_ms"] == pytest.approx(0.004)
    assert top[1]["op"] == "redzone_checker"  # a kernel with no op keeps its own name


def test_chrome_trace_json_gz(tmp_path: Path) -> None:
    trace = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 12.5},
        {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 3, "dur": 4.0},
        {"ph": "s", "cat": "fwdbwd", "name": "flow", "pid": 1, "tid": 1, "ts": 1},
    ]}
    path = tmp_path / "w.pt.trace.json.gz"
    with gzip.open(path, "wt") as stream:
        json.dump(trace, stream)
    events = trace_ops.read(path)
    assert len(events) == 2
    assert [op.op for op in trace_ops.top_ops(events)] == ["sgemm"]  # the device's kernels


def test_unreadable_trace_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.xplane.pb"
    bad.write_bytes(b"\xff\xff\xff not a protobuf")
    with pytest.raises(trace_ops.TraceError, match="not an XSpace"):
        trace_ops.read(bad)
    with pytest.raises(trace_ops.TraceError, match="no trace file"):
        trace_ops.read_profile(tmp_path / "empty")
