"""The ten most expensive ops of a profiler trace, without opening a UI.

Article 001 read "Top 10 TensorFlow operations" off TensorBoard's profile
overview. This module gives the same answer in the terminal, from the files
the profilers write:

- `*.xplane.pb` (tf.profiler and jax.profiler): an XSpace protobuf. It is
  decoded with the `xplane_pb2` module that ships inside TensorFlow, loaded
  from its file so that TensorFlow itself is not imported.
- `*.pt.trace.json[.gz]` (torch.profiler): Chrome trace JSON.

Times are *self* times: an event's duration less that of the events nested in
it on the same thread (TensorFlow's executor and PyTorch's `aten::linear`
wrap the ops that do the work). On a GPU the device's kernels are ranked
(by the op that launched them where the trace says); otherwise the host's ops.
Ops that run on several threads at once can add up to more than the window.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

_TF_OP = re.compile(r"^(?P<name>[^:]+):(?P<type>[A-Za-z_]\w*)$")  # "dense/MatMul:MatMul"
_WRAPPER_TYPES = {"StatefulPartitionedCall", "PartitionedCall"}  # function calls: their ops run on other threads
_DEVICE_PLANE = re.compile(r"^/device:(GPU|TPU)")
TRACE_PATTERNS = ("*.xplane.pb", "*.pt.trace.json", "*.pt.trace.json.gz")


class TraceError(Exception):
    """A trace file that cannot be read."""


@dataclass(frozen=True)
class TraceEvent:
    lane: str  # a thread or stream; nesting is computed within a lane
    start_us: float
    duration_us: float
    name: str
    op: str | None = None  # the op this event is, None for framework bookkeeping
    op_type: str | None = None
    device: bool = False  # ran on an accelerator


@dataclass(frozen=True)
class OpTime:
    op: str
    op_type: str | None
    device: bool
    count: int
    self_ms: float
    share: float  # of all ops' self time in the same place (device or host)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def op_name(event_name: str) -> tuple[str, str] | None:
    """A TensorFlow op's (name, type) from its trace event name, or None for other events.

    >>> op_name("StatefulPartitionedCall/sequential/dense/MatMul:_MklMatMul")
    ('sequential/dense/MatMul', '_MklMatMul')
    >>> op_name("ExecutorState::Process") is None, op_name("$threading.py:988 _bootstrap") is None
    (True, True)
    """
    match = _TF_OP.match(event_name)
    if not match:
        return None
    name = match.group("name")
    while name.startswith("StatefulPartitionedCall/"):
        name = name[len("StatefulPartitionedCall/"):]
    return name, match.group("type")


# -- reading ------------------------------------------------------------------------


def _xplane_pb2() -> ModuleType:
    if "tensorflow" in sys.modules:  # already paid for: use its own module
        from tensorflow.tsl.profiler.protobuf import xplane_pb2  # type: ignore[import-not-found]

        return xplane_pb2  # type: ignore[no-any-return]
    cached = sys.modules.get("_fitspeed_xplane_pb2")
    if cached is not None:
        return cached
    spec = importlib.util.find_spec("tensorflow")  # finds the package without importing it
    if spec is None or spec.origin is None:
        raise TraceError("reading .xplane.pb needs TensorFlow installed (its xplane_pb2 module)")
    path = Path(spec.origin).parent / "tsl" / "profiler" / "protobuf" / "xplane_pb2.py"
    module_spec = importlib.util.spec_from_file_location("_fitspeed_xplane_pb2", path)
    if module_spec is None or module_spec.loader is None or not path.exists():
        raise TraceError(f"TensorFlow's xplane_pb2 module is not where expected ({path})")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    sys.modules["_fitspeed_xplane_pb2"] = module
    return module


def read_xplane(path: Path) -> list[TraceEvent]:
    """The events of an XSpace file (tf.profiler, jax.profiler)."""
    space = _xplane_pb2().XSpace()
    try:
        space.ParseFromString(path.read_bytes())
    except Exception as error:  # google.protobuf.message.DecodeError
        raise TraceError(f"{path} is not an XSpace protobuf: {error}") from error
    events: list[TraceEvent] = []
    for plane in space.planes:
        device = bool(_DEVICE_PLANE.match(plane.name))
        if not device and not plane.name.startswith("/host:"):
            continue
        stat_names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        line_names = {line.name for line in plane.lines}
        derived = "TensorFlow Ops" if "TensorFlow Ops" in line_names else "XLA Ops" if "XLA Ops" in line_names else None
        for line in plane.lines:
            if device and derived and line.name != derived:
                continue
            if device and not derived and not line.name.startswith("Stream"):
                continue
            xla_lane = not device and "XLA" in line.name
            lane = f"{plane.name}/{line.id}"
            base_ps = line.timestamp_ns * 1000
            for event in line.events:
                meta = plane.event_metadata[event.metadata_id]
                name = meta.name or meta.display_name
                op, op_type = _classify(name, device, xla_lane, event, stat_names, plane)
                events.append(TraceEvent(lane, (base_ps + event.offset_ps) / 1e6, event.duration_ps / 1e6,
                                         name, op, op_type, device))
    return events


def _classify(name: str, device: bool, xla_lane: bool, event: Any, stat_names: dict[int, str],
              plane: Any) -> tuple[str | None, str | None]:
    if device:  # a kernel or a derived op line: everything on it is work
        for stat in event.stats:
            if stat_names.get(stat.metadata_id) in ("tf_op", "hlo_op"):
                value = stat.str_value or (stat_names.get(stat.ref_value) if stat.ref_value else "")
                parsed = op_name(value) if value else None
                if parsed:
                    return parsed
                if value:
                    return value, None
        return (op_name(name) or (name, None))
    parsed = op_name(name)
    if parsed and parsed[1] not in _WRAPPER_TYPES:
        return parsed
    if xla_lane and "::" not in name and not name.startswith("$"):
        return name, "XLA"  # a thunk of an XLA CPU executable (JAX, jit_compile)
    return None, None


def read_chrome_trace(path: Path) -> list[TraceEvent]:
    """The events of a Chrome trace JSON file (torch.profiler)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as stream:  # type: ignore[operator]
            data = json.load(stream)
    except (OSError, ValueError) as error:
        raise TraceError(f"{path} is not a JSON trace: {error}") from error
    raw = data.get("traceEvents", []) if isinstance(data, dict) else data
    events = []
    for item in raw:
        if not isinstance(item, dict) or item.get("ph") != "X" or "dur" not in item:
            continue
        category = str(item.get("cat", "")).lower()
        device = category in ("kernel", "gpu_op", "gpu_memcpy", "gpu_memset")
        is_op = device or category == "cpu_op"
        name = str(item.get("name", ""))
        events.append(TraceEvent(f"{item.get('pid')}/{item.get('tid')}", float(item.get("ts", 0.0)),
                                 float(item["dur"]), name, name if is_op else None, None, device))
    return events


def read(path: Path) -> list[TraceEvent]:
    """The events of one trace file, by its kind."""
    if path.name.endswith(".xplane.pb"):
        return read_xplane(path)
    if path.name.endswith((".json", ".json.gz")):
        return read_chrome_trace(path)
    raise TraceError(f"{path.name} is not a trace fitspeed reads (.xplane.pb or .pt.trace.json)")


def find_traces(logdir: Path) -> list[Path]:
    """The trace files under `logdir`, oldest first."""
    found = {p for pattern in TRACE_PATTERNS for p in logdir.rglob(pattern)}
    return sorted(found, key=lambda p: (p.stat().st_mtime, str(p)))


# -- ranking ------------------------------------------------------------------------


def self_times(events: list[TraceEvent]) -> list[tuple[TraceEvent, float]]:
    """Each event with its self time in µs: its duration less its direct children's.

    >>> outer = TraceEvent("t", 0, 10, "outer", "outer")
    >>> inner = TraceEvent("t", 2, 6, "inner", "inner")
    >>> [(e.name, t) for e, t in self_times([outer, inner])]
    [('outer', 4.0), ('inner', 6.0)]
    """
    by_lane: dict[str, list[TraceEvent]] = defaultdict(list)
    for event in events:
        by_lane[event.lane].append(event)
    result: list[tuple[TraceEvent, float]] = []
    for lane_events in by_lane.values():
        lane_events.sort(key=lambda e: (e.start_us, -e.duration_us))
        own = [e.duration_us for e in lane_events]
        stack: list[int] = []
        for index, event in enumerate(lane_events):
            while stack and lane_events[stack[-1]].start_us + lane_events[stack[-1]].duration_us <= event.start_us:
                stack.pop()
            if stack:
                parent = lane_events[stack[-1]]
                overlap = min(event.start_us + event.duration_us, parent.start_us + parent.duration_us) - event.start_us
                own[stack[-1]] -= max(0.0, overlap)
            stack.append(index)
        result.extend((event, max(0.0, float(t))) for event, t in zip(lane_events, own))
    return result


def top_ops(events: list[TraceEvent], n: int = 10) -> list[OpTime]:
    """The `n` ops with the most self time, device ops if there are any, else host ops."""
    timed = [(e, t) for e, t in self_times(events) if e.op is not None]
    if any(e.device for e, _ in timed):
        timed = [(e, t) for e, t in timed if e.device]
    totals: dict[tuple[str, str | None, bool], list[float]] = defaultdict(lambda: [0, 0.0])
    for event, spent in timed:
        entry = totals[(event.op or event.name, event.op_type, event.device)]
        entry[0] += 1
        entry[1] += spent
    whole = sum(entry[1] for entry in totals.values()) or 1.0
    ranked = sorted(totals.items(), key=lambda item: -item[1][1])[:n]
    return [OpTime(op, op_type, device, int(count), spent / 1000, spent / whole)
            for (op, op_type, device), (count, spent) in ranked]


def read_profile(logdir: Path, n: int = 10) -> dict[str, Any]:
    """The trace files under `logdir` and the top `n` ops of the newest profile in it."""
    files = find_traces(logdir)
    if not files:
        raise TraceError(f"no trace file (.xplane.pb or .pt.trace.json) under {logdir}")
    newest = files[-1].parent
    events = [event for path in files if path.parent == newest for event in read(path)]
    ops = top_ops(events, n)
    return {
        "trace_files": [str(p) for p in files if p.parent == newest],
        "events": len(events),
        "where": "device" if ops and ops[0].device else "host",
        "top_ops": [op.to_dict() for op in ops],
    }
