"""The trial specification the parent sends, and the record the child sends back.

Parent and child talk through one JSON record. The child prints it on the line
after `MARKER`; anything else a workload prints is ignored. The record carries
`schema` (bumped on any incompatible change) and a `status`.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from fitspeed.config import TrialConfig
from fitspeed.errors import UserError

SCHEMA_VERSION = 1
MARKER = "--fitspeed-record--"
STATUSES = ("ok", "failed", "oom", "nan", "timeout", "crashed")


@dataclass(frozen=True)
class TrialSpec:
    """Everything a child needs to run one trial.

    `steps` is the number of timed steps per repeat (a multiple of
    steps_per_execution), or None to size each repeat to `target_seconds`.
    `mode` "time" runs the measurement protocol; "train" trains `repeats`
    epochs of `steps` steps from the seed with no warm-up, for the numerics
    guard's loss curve. "input", "compute" and "epochs" are `fitspeed doctor`'s
    measurements (`fitspeed.input_probe`).
    """

    model: str
    data: str | None = None
    config: TrialConfig = field(default_factory=TrialConfig)
    steps: int | None = None
    repeats: int = 5
    seed: int = 0
    target_seconds: float = 1.0
    timeout_s: float | None = 900.0
    memory_limit_mb: int | None = None
    mode: str = "time"
    monitor: bool = False  # the parent samples the child's process tree and the GPUs (fitspeed.monitor)
    profile_dir: str | None = None  # trace one extra timed window into this folder (fitspeed.profiling)
    script: dict[str, Any] | None = field(default=None, compare=False)  # a user's command (fitspeed.script)

    def __post_init__(self) -> None:
        if self.mode not in ("time", "train", "input", "compute", "epochs"):
            raise ValueError(f"unknown trial mode {self.mode!r}")
        if self.mode == "train" and self.steps is None:
            raise ValueError("a train-mode trial needs a fixed number of steps")
        n = self.config.steps_per_execution
        if self.steps is not None and (self.steps < 1 or self.steps % n):
            suggestion = max(n, (self.steps // n) * n)
            raise UserError(
                f"Expected --steps to be a positive multiple of steps_per_execution ({n}), "
                f"so every timed window holds whole executions. Received: {self.steps}. "
                f"Use --steps {suggestion}."
            )
        if self.repeats < 1:
            raise UserError(
                f"Expected --repeats to be at least 1. Received: {self.repeats}. Use --repeats 5."
            )
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise UserError(
                f"Expected --timeout to be a positive number of seconds. Received: {self.timeout_s}."
            )
        if self.memory_limit_mb is not None and self.memory_limit_mb <= 0:
            raise UserError(
                f"Expected --memory-limit to be a positive number of MiB. Received: {self.memory_limit_mb}."
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "data": self.data,
            "knobs": self.config.to_dict(),
            "steps": self.steps,
            "repeats": self.repeats,
            "seed": self.seed,
            "target_seconds": self.target_seconds,
            "timeout_s": self.timeout_s,
            "memory_limit_mb": self.memory_limit_mb,
            "mode": self.mode,
            # optional: absent when off, so records without them read the same
            **({"monitor": True} if self.monitor else {}),
            **({"profile_dir": self.profile_dir} if self.profile_dir else {}),
            **({"script": self.script} if self.script else {}),
        }

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrialSpec:
        values = dict(values)
        config = TrialConfig.from_dict(values.pop("knobs"))
        return cls(config=config, **values)


def new_record(spec: TrialSpec, status: str, **fields: Any) -> dict[str, Any]:
    """A trial record with the fields every record has."""
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}")
    record: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "kind": "trial",
        "id": uuid.uuid4().hex[:12],
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "status": status,
        "reason": None,
        "user_error": False,
        "spec": spec.to_dict(),
        "metrics": None,
        "notes": [],
        "environment": None,
        "stderr_tail": None,
    }
    record.update(fields)
    return record


def to_json(record: dict[str, Any]) -> str:
    """One line of strict JSON; NaN and infinities become null (the reason says which)."""
    return json.dumps(_finite(record), allow_nan=False, default=str)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def encode(record: dict[str, Any]) -> str:
    """The text the child prints: the marker line, then the record on one line."""
    return f"{MARKER}\n{to_json(record)}\n"


def decode(stdout: str) -> dict[str, Any] | None:
    """The record after the last marker in `stdout`, or None if there is none whole."""
    _, found, rest = stdout.rpartition(MARKER + "\n")
    if not found:
        return None
    line = rest.split("\n", 1)[0]
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None
