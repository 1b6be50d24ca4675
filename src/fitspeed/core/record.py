"""The trial specification the parent sends, and the record the child sends back.

Parent and child talk through one JSON record. The child prints it on the line
after `MARKER`; anything else a workload prints is ignored. The record carries
`schema` (bumped on any incompatible change) and a `status`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.stats import Spread

SCHEMA_VERSION = 1
MARKER = "--fitspeed-record--"
# a trial process that gave up inside a native call it cannot leave (a multi-process join) exits with this status,
# its last line on stderr the sentence after GAVE_UP_WORDS; the parent makes that a user's failure, not a crash
GAVE_UP = 71
GAVE_UP_WORDS = "fitspeed: gave up: "
# where a built-in trial puts its temporary files: its own folder (`measure.runner`), removed when it ends
TRIAL_TMP = "FITSPEED_TRIAL_TMP"


class Status(StrEnum):
    """How a trial ended; only an "ok" record has a figure."""

    OK = "ok"
    FAILED = "failed"  # an error the trial caught (a user's mistake when `user_error`)
    OOM = "oom"  # out of memory, the device's or the `--memory-limit`
    NAN = "nan"  # the loss went NaN or infinite
    TIMEOUT = "timeout"  # past `--timeout`, killed by the parent
    CRASHED = "crashed"  # the process ended without sending a record


class Mode(StrEnum):
    """What a trial process does (`TrialSpec.mode`)."""

    TIME = "time"  # the measurement protocol (`fitspeed.trial.measurement`)
    TRAIN = "train"  # `repeats` epochs of `steps` steps from the seed: the guard's loss curve
    INPUT = "input"  # doctor: the input alone
    COMPUTE = "compute"  # doctor: the step on one cached batch
    EPOCHS = "epochs"  # doctor: whole epochs, for the time lost at their edges
    MODEL = "model"  # doctor --model: timed, then a traced window and the model check
    PREDICT = "predict"  # predict() on one sample against batches


STATUSES = tuple(Status)


@dataclass(frozen=True)
class TrialSpec:
    """Everything a child needs to run one trial.

    `steps` is the number of timed steps per repeat (a multiple of
    steps_per_execution), or None to size each repeat to `target_seconds`.
    `mode` "time" runs the measurement protocol; "train" trains `repeats`
    epochs of `steps` steps from the seed with no warm-up, for the numerics
    guard's loss curve (and, for `fitspeed reproduce`, each epoch's time: the
    first epoch holds compilation, the later ones are the article-style timing).
    "input", "compute" and "epochs" are `fitspeed doctor`'s measurements
    (`fitspeed.trial.doctor`); "model" is `fitspeed doctor --model`: the
    "time" protocol, then a traced window (`profile_dir`) and the model check
    (`fitspeed.trial.model_check`); "predict" times `predict()` on one sample
    against batches (`fitspeed.trial.predict_latency`, article 002).

    With `validate`, the child holds data out of training (the data set's own
    test split where it has one) and, once training is done, records the
    loss and accuracy on it and a digest of the weights (`fitspeed.trial.validation`).
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
    mode: Mode = Mode.TIME
    monitor: bool = False  # the parent samples the child's process tree and the GPUs (fitspeed.machine.sampler)
    profile_dir: str | None = None  # trace one extra timed window into this folder (fitspeed.trial.profiling)
    script: dict[str, Any] | None = field(default=None, compare=False)  # a user's command (fitspeed.measure.training_command)
    # samples/s below which a "time" trial stops after its warm-up or its first timed window: the
    # tuner sets it where the trial could not win anyway; the record says `metrics.stopped_early`
    stop_below: float | None = None
    validate: bool = False  # accuracy on held-out data after training, and the weights' digest
    # the seed of the data itself (synthetic draws, a loader's samples), None: `seed`. The guard's runs over
    # seeds keep one data set and vary the weights' init and the data order (`fitspeed.search.guard`)
    data_seed: int | None = None
    # a train-mode trial builds the model's training state before fit(), so the train step is traced once,
    # not twice (`fitspeed.trial.keras_build`): the guard's runs, whose time nobody reads
    build_first: bool = False

    def __post_init__(self) -> None:
        if self.mode not in tuple(Mode):
            raise ValueError(f"unknown trial mode {self.mode!r}")
        object.__setattr__(self, "mode", Mode(self.mode))  # a mode given as its text, as a record holds it
        if self.mode == Mode.TRAIN and self.steps is None:
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
        if self.timeout_s is not None and not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise UserError(
                f"Expected --timeout to be a positive, finite number of seconds. Received: {self.timeout_s}. "
                "Use --timeout 900."
            )
        if self.memory_limit_mb is not None and self.memory_limit_mb <= 0:
            raise UserError(
                f"Expected --memory-limit to be a positive number of MiB. Received: {self.memory_limit_mb}. "
                "Use for example --memory-limit 4GiB."
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
            **({"stop_below": self.stop_below} if self.stop_below else {}),
            **({"validate": True} if self.validate else {}),
            **({"data_seed": self.data_seed} if self.data_seed is not None else {}),
            **({"build_first": True} if self.build_first else {}),
        }

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrialSpec:
        values = dict(values)
        config = TrialConfig.from_dict(values.pop("knobs"))
        return cls(config=config, **values)


def _spread(figure: Mapping[str, Any]) -> Spread:
    """A record's figure as a `Spread`; a figure given as its median alone spreads nowhere.

    >>> _spread({"median": 812.5})
    Spread(median=812.5, min=812.5, max=812.5, cv=0.0, n=1, geomean=None)
    """
    median = float(figure["median"])
    geomean = figure.get("geomean")
    return Spread(median, float(figure.get("min", median)), float(figure.get("max", median)),
                  float(figure.get("cv") or 0.0), int(figure.get("n", 1)),
                  float(geomean) if geomean is not None else None)


_METRIC_FIELDS = ("ms_per_step", "batch_size", "final_loss", "val_loss", "val_accuracy")


@dataclass(frozen=True)
class Metrics:
    """What a trial measured, typed. Each mode measures its own figures, so each is optional;
    those without a field of their own (doctor's, predict's, the compile time) stay in `other`."""

    samples_per_s: Spread | None = None  # the timed windows' samples/s: median, min, max, CV, n
    ms_per_step: float | None = None
    batch_size: int | None = None
    loss_curve: tuple[float | None, ...] = ()  # the loss at each epoch's end (a train-mode run's curve)
    final_loss: float | None = None
    val_loss: float | None = None  # on held-out data after training (`TrialSpec.validate`)
    val_accuracy: float | None = None
    stopped_early: Mapping[str, Any] | None = None  # where a trial below `stop_below` stopped
    other: Mapping[str, Any] = field(default_factory=dict)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)  # the keys the dict read had, in its order
    # the keys of `samples_per_s` as a child measured it, where it measured fewer than a `Spread` has (doctor's
    # "epochs": the median alone), so the child writes the figure it measured (`new_record`); (): all of them.
    # The parent reads such a figure as a `Spread` (`_spread`) and stores it whole.
    figure: tuple[str, ...] = field(default=(), compare=False, repr=False)

    _NULLABLE = ("samples_per_s", "loss_curve", "stopped_early", *_METRIC_FIELDS)  # a None left out unless read

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Metrics:
        rest = dict(values)
        figure = rest.pop("samples_per_s", None)
        known = {name: rest.pop(name) for name in _METRIC_FIELDS if name in rest}
        return cls(samples_per_s=_spread(figure) if figure else None,
                   loss_curve=tuple(rest.pop("loss_curve", None) or ()),
                   stopped_early=rest.pop("stopped_early", None), other=rest, order=tuple(values), **known)

    def to_dict(self) -> dict[str, Any]:
        """The metrics as the child sent them: the keys it had, in its order (a null it sent stays null)."""
        values: dict[str, Any] = dict(self.other)
        spread = self.samples_per_s.to_dict() if self.samples_per_s is not None else None
        values["samples_per_s"] = {key: spread[key] for key in self.figure} if spread and self.figure else spread
        values.update({name: getattr(self, name) for name in _METRIC_FIELDS})
        values["loss_curve"] = list(self.loss_curve) if self.loss_curve or "loss_curve" in self.order else None
        values["stopped_early"] = self.stopped_early
        kept = {key: value for key, value in values.items()
                if value is not None or key in self.order or key not in self._NULLABLE}
        ordered = [key for key in self.order if key in kept] + [key for key in kept if key not in self.order]
        return {key: kept[key] for key in ordered}


_RECORD_FIELDS = ("schema", "kind", "id", "created", "status", "reason", "user_error", "spec", "metrics", "notes",
                  "environment", "stderr_tail")


_PARENT_FIELDS = ("log_tail", "wall_s", "warm_start", "monitor")  # in the order `run_trial` adds them


def _parents(key: str, value: Any) -> bool:
    """Whether a record's `key` goes to a parent's field of its own: a None stays in `extra`, so it comes back."""
    return key in _PARENT_FIELDS and value is not None


@dataclass(frozen=True)
class TrialRecord:
    """A trial's record, typed: what the child sent back, as the parent reads it.

    The record crosses the process boundary and lands in the study as JSON
    (`encode`, `decode`, `to_json`); `from_dict` and `to_dict` are the one
    way between that text and this type. What the parent adds to the child's
    record (`fitspeed.measure.runner.run_trial`: the wall time, the warm
    start, a script's log, the monitor's summary) has a field of its own,
    absent from the dict when None, so the stored shape stays what it was.
    What a command adds beside those (a model rewrite, a determinism check,
    a reproduction's row) is kept in `extra`, so nothing is lost on the way.

    >>> record = TrialRecord.from_dict(decode(encode(new_record(
    ...     TrialSpec(model="tiny"), Status.OK, metrics={"samples_per_s": {"median": 812.5, "min": 800.0,
    ...     "max": 830.0, "cv": 0.01, "n": 5}, "compile_s": 1.2}, monitor={"cpu_percent_mean": 180.0},
    ...     rewrite={"changes": []}, wall_s=2.5, warm_start=True).to_dict())))
    >>> record.status, record.throughput, record.spec.model, record.monitor["cpu_percent_mean"]
    (<Status.OK: 'ok'>, 812.5, 'tiny', 180.0)
    >>> record.wall_s, record.warm_start, record.log_tail, dict(record.extra)
    (2.5, True, None, {'rewrite': {'changes': []}})
    >>> TrialRecord.from_dict(record.to_dict()) == record
    True
    >>> list(record.to_dict())[-4:]  # in the order the dict had them
    ['monitor', 'rewrite', 'wall_s', 'warm_start']
    >>> import dataclasses
    >>> added = dataclasses.replace(record, extra={**record.extra, "arm": "a"}, log_tail="")
    >>> list(added.to_dict())[-2:]  # the parent's fields, then what was added since, after those the dict had
    ['log_tail', 'arm']
    """

    id: str
    status: Status
    spec: TrialSpec
    created: str = ""
    reason: str | None = None
    user_error: bool = False
    metrics: Metrics | None = None
    notes: tuple[str, ...] = ()
    environment: Mapping[str, Any] | None = None
    stderr_tail: str | None = None
    schema: int = SCHEMA_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)
    log_tail: str | None = None  # a script trial's own output, stdout and stderr together
    wall_s: float | None = None  # the trial's time in the parent, start to record
    warm_start: bool | None = None  # a built-in trial forked from a fork server (`fitspeed.measure.warm_start`)
    monitor: Mapping[str, Any] | None = None  # the sampler's summary with `TrialSpec.monitor` (`fitspeed.machine.usage`)
    # the order the dict read had its keys in beyond the core's: `to_dict` writes them back in it, then the
    # parent's fields, then what was added since (a comparison's arm and pair), as `run_trial` and its callers did
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrialRecord:
        if values.get("status") not in STATUSES:
            raise ValueError(f"unknown status {values.get('status')!r}")
        metrics = values.get("metrics")
        return cls(id=str(values.get("id", "")), status=Status(values["status"]),
                   spec=TrialSpec.from_dict(values["spec"]), created=str(values.get("created", "")),
                   reason=values.get("reason"), user_error=bool(values.get("user_error")),
                   metrics=Metrics.from_dict(metrics) if metrics else None,
                   notes=tuple(values.get("notes") or ()), environment=values.get("environment"),
                   stderr_tail=values.get("stderr_tail"), schema=int(values.get("schema", SCHEMA_VERSION)),
                   extra={k: v for k, v in values.items() if k not in _RECORD_FIELDS and not _parents(k, v)},
                   order=tuple(k for k in values if k not in _RECORD_FIELDS),
                   **{k: v for k, v in values.items() if _parents(k, v)})

    def to_dict(self) -> dict[str, Any]:
        parents = {name: getattr(self, name) for name in _PARENT_FIELDS if getattr(self, name) is not None}
        rest = {**self.extra, **parents}
        later = [key for key in (*_PARENT_FIELDS, *self.extra) if key in rest and key not in self.order]
        return {"schema": self.schema, "kind": "trial", "id": self.id, "created": self.created,
                "status": self.status, "reason": self.reason, "user_error": self.user_error,
                "spec": self.spec.to_dict(), "metrics": self.metrics.to_dict() if self.metrics else None,
                "notes": list(self.notes), "environment": dict(self.environment) if self.environment else None,
                "stderr_tail": self.stderr_tail, **{key: rest[key] for key in (*self.order, *later) if key in rest}}

    def measured(self, name: str) -> Any:
        """A figure without a field of its own (`Metrics.other`: doctor's, predict's, a script's), or None."""
        return self.metrics.other.get(name) if self.metrics is not None else None

    @property
    def throughput(self) -> float | None:
        """An ok record's samples/s: the geometric mean of its timed windows (their median in a record made
        before the geometric mean was kept), else None.

        In a lockstep round the windows' own spread is most of the noise left
        on a pair's ratio, and it is nearly independent from window to window:
        their geometric mean gave A/A ratios 5-35% quieter than their median,
        on every workload and load measured (docs/benchmarks/lockstep.md).

        >>> new_record(TrialSpec(model="tiny"), Status.OOM).throughput is None
        True
        >>> new_record(TrialSpec(model="tiny"), Status.OK, metrics={"samples_per_s": {"median": 900.0}}).throughput
        900.0
        """
        if self.status != Status.OK or self.metrics is None or self.metrics.samples_per_s is None:
            return None
        return self.metrics.samples_per_s.center


TrialRunner = Callable[[TrialSpec], TrialRecord]
"""Runs one trial and always returns its record: `fitspeed.measure.runner.run_trial`, or a test's fake."""

OnTrial = Callable[[str, TrialRecord], None]
"""Progress: called as each trial lands, with what the trial was for ("a", "input", "guard, 2 device(s)") and its record."""


def new_record(spec: TrialSpec, status: Status, *, reason: str | None = None, user_error: bool = False,
               metrics: Mapping[str, Any] | None = None, notes: Sequence[str] = (),
               environment: Mapping[str, Any] | None = None, stderr_tail: str | None = None,
               **extra: Any) -> TrialRecord:
    """A new trial's record: the fields every record has, and `extra` (a model rewrite, a script, the timed wall).

    `metrics` are the figures as the child measured them, by name; `to_dict`
    writes the record the child prints, its keys in the order they were given
    here, after those every record has:

    >>> record = new_record(TrialSpec(model="tiny"), Status.OK, metrics={"samples_per_s": {"median": 90.0},
    ...                     "lost_s": 0.2}, notes=["a note"], timed_wall=[1.0, 2.0])
    >>> record.throughput, record.measured("lost_s"), record.notes, dict(record.extra)
    (90.0, 0.2, ('a note',), {'timed_wall': [1.0, 2.0]})
    >>> sent = record.to_dict()
    >>> list(sent)[-2:], sent["metrics"]
    (['stderr_tail', 'timed_wall'], {'samples_per_s': {'median': 90.0}, 'lost_s': 0.2})
    >>> new_record(TrialSpec(model="tiny"), "ok")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    TypeError: Expected `status` to be a Status, such as Status.OK. Received: 'ok' (a str). ...
    """
    if not isinstance(status, Status):
        raise TypeError(f"Expected `status` to be a Status, such as Status.OK. Received: {status!r} "
                        f"(a {type(status).__name__}). Pass the member, or Status(text) for a status read as text.")
    return TrialRecord(
        id=uuid.uuid4().hex[:12], status=status, spec=spec, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        reason=reason, user_error=user_error, metrics=_measured(metrics) if metrics is not None else None,
        notes=tuple(notes), environment=environment, stderr_tail=stderr_tail,
        extra={key: value for key, value in extra.items() if not _parents(key, value)}, order=tuple(extra),
        **{key: value for key, value in extra.items() if _parents(key, value)})


def _measured(values: Mapping[str, Any]) -> Metrics:
    """A child's metrics, typed, with its figure kept as it measured it (`Metrics.figure`)."""
    metrics = Metrics.from_dict(values)
    figure = values.get("samples_per_s")
    if isinstance(figure, Mapping) and figure and tuple(figure) != _SPREAD_KEYS:
        return dataclasses.replace(metrics, figure=tuple(figure))
    return metrics


_SPREAD_KEYS = ("median", "min", "max", "cv", "n")  # `Spread.to_dict`'s


REASON_LIMIT = 4000  # characters of a failure's text a record keeps


def clip_reason(text: str, limit: int = REASON_LIMIT) -> str:
    """A failure's text in about `limit` characters: a quarter from its head, the rest from its tail,
    where TensorFlow puts the cause.

    >>> clip_reason("Error: " + "x" * 40 + " the cause", limit=20)
    'Error … [37 characters cut] … xxxxx the cause'
    """
    if len(text) <= limit:
        return text
    head, tail = limit // 4, limit - limit // 4
    return f"{text[:head]} … [{len(text) - limit} characters cut] … {text[-tail:]}"


def brief_reason(reason: str | None) -> str:
    """One line for a progress line: the error's type and its last line of substance.

    TensorFlow puts the cause at the end, after the traceback of the graph and
    before a `[[{{node ...}}]]` annotation:

    >>> brief_reason("InvalidArgumentError: Graph execution error:\\n\\nDetected at node x\\n"
    ...              "Conv2DCustomBackpropInputOp only supports NHWC.\\n\\t [[{{node x}}]] [Op:__inference_f]")
    'InvalidArgumentError: Conv2DCustomBackpropInputOp only supports NHWC.'
    >>> brief_reason("the trial ran past its timeout of 60 s")
    'the trial ran past its timeout of 60 s'
    """
    lines = [line.strip() for line in (reason or "").splitlines() if line.strip()]
    if not lines:
        return "no reason given"
    kind, sep, rest = lines[0].partition(": ")
    kind = kind if sep and kind.isidentifier() and kind[:1].isupper() else ""
    substance = [line for line in lines if not line.startswith("[[")]
    last = substance[-1] if substance else lines[-1]
    if len(lines) == 1:
        return lines[0] if len(lines[0]) <= 300 else f"{lines[0][:80]} … {lines[0][-200:]}"
    if kind and not last.startswith(kind):
        last = f"{kind}: {last}"
    return last if len(last) <= 300 else f"{last[:80]} … {last[-200:]}"  # the cause is at the end


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


def write_record(record: dict[str, Any]) -> None:
    """Print `record` as a child's answer (`encode`), after whatever the child printed before it."""
    import sys

    sys.stdout.flush()
    sys.stdout.write(encode(record))
    sys.stdout.flush()


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
