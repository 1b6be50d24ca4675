"""`fitspeed.tune`, `fitspeed.measure` and `fitspeed.compare`: the CLI's commands, called from Python.

Each takes what a notebook holds (a compiled model, a function that builds
one, a `.keras` path; numpy arrays or a function that returns the data),
ships it to files (`fitspeed.api.shipping`), and runs the same search,
trials and statistics as `fitspeed tune`, `measure` and `compare`: every
trial in a fresh process, the study in the same storage, the guard and the
verification unchanged. Keyword names are Keras's (`batch_size`,
`validation_data`) and the CLI's (`trials`, `pairs`, `storage`).

A user's mistake raises `fitspeed.UserError` with the sentence the CLI
prints; a trial that fails is a result (its record says why), never an
exception. Interrupting (Ctrl-C, or the notebook's stop button) stops the
running trial, keeps every finished one in the study, and raises
KeyboardInterrupt: the same call resumes it.

The caller's process never imports a backend on fitspeed's behalf, and
its Keras state (global dtype policy, seeds) and environment are as they
were when the call returns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fitspeed.api import progress as progress_kinds
from fitspeed.api.errors import said
from fitspeed.api.shipping import Shipment, ship, ship_environment
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.knobs import check_backend_installed

if TYPE_CHECKING:
    from fitspeed.api.result import TuneResult
    from fitspeed.console.workload import Workload
    from fitspeed.core.record import TrialRecord
    from fitspeed.measure.comparison import Comparison


def _config(config: Mapping[str, Any] | TrialConfig | None, batch_size: int | None) -> TrialConfig:
    """The base configuration: `config`'s knobs (a mapping or a TrialConfig), with `batch_size` on top."""
    if config is None:
        values: dict[str, Any] = {}
    elif isinstance(config, TrialConfig):
        values = config.changed()
    elif isinstance(config, Mapping):
        values = dict(config)
    else:
        raise UserError(f"Expected config= as a dict of knob values, such as {{'steps_per_execution': 8}}. "
                        f"Received: {type(config).__name__}.")
    if batch_size is not None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise UserError(f"Expected batch_size as a positive int, as keras fit() takes it. Received: "
                            f"{batch_size!r}.")
        values["batch_size"] = batch_size
    base = TrialConfig.from_dict(values)
    check_backend_installed(base.backend)
    return base


def _workload(shipment: Shipment, base: TrialConfig, steps: int | None, repeats: int, seed: int, timeout: float,
              memory_limit: str | int | None) -> Workload:
    """What the shipment's trials run, resolved as the CLI resolves its workload options (`console.workload.Workload`)."""
    from fitspeed.console.option_values import parse_memory
    from fitspeed.console.workload import Workload, WorkloadKind, data_ref
    from fitspeed.core.workloads import check_model

    model = check_model(shipment.model)
    return Workload(kind=WorkloadKind.of_model(model), model=model, data=data_ref(shipment.data, False), base=base,
                    steps=steps, repeats=repeats, seed=seed, timeout_s=timeout,
                    memory_limit_mb=memory_limit if isinstance(memory_limit, int) else parse_memory(memory_limit))


@contextmanager
def _trials(shipment: Shipment) -> Iterator[None]:
    """While trials run: the shipment on PYTHONPATH; afterwards the warm-start server stopped, so no process lingers."""
    from fitspeed.measure import warm_start

    try:
        with ship_environment(shipment):
            yield
    finally:
        warm_start.close_all()


def _share(value: Any, name: str) -> float:
    """A share from 0 to 1, as `--guard-margin` takes it; a clear sentence otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise UserError(f"Expected {name} as a share of the baseline's loss from 0 to 1, such as 0.01 for 1%. "
                        f"Received: {value!r}.")
    return float(value)


@said
def tune(
    model: Any,
    x: Any = None,
    y: Any = None,
    *,
    batch_size: int | None = None,
    validation_data: Any = None,
    data: Any = None,
    config: Mapping[str, Any] | TrialConfig | None = None,
    trials: int | None = None,
    time: str | float | None = None,
    study: str | None = None,
    storage: str = "sqlite:///fitspeed.db",
    knobs: str | list[str] | tuple[str, ...] | None = None,
    space: Mapping[str, list[Any]] | None = None,
    pairs: int = 5,
    steps: int | None = None,
    repeats: int = 3,
    seed: int = 0,
    timeout: float = 900.0,
    memory_limit: str | int | None = None,
    batch_sizes: list[int] | tuple[int, ...] | None = None,
    monitor: bool = False,
    allow_shared_host: bool = False,
    best: str | Path | None = None,
    progress: bool = True,
    screen_only: bool = False,
    guard_margin: float = 0.01,
) -> TuneResult:
    """Find the fastest configuration of `model` that trains the same, and verify it: `fitspeed tune` from Python.

    `model` is a compiled Functional or Sequential keras.Model, a function that
    builds and compiles one, a path to a `.keras` file, `module:function`, or a
    built-in model's name. The data is `x` and `y` (numpy arrays, with
    `validation_data=(x_val, y_val)` for the guard's held-out loss), or
    `data=` a function that returns (x, y), a tf.data.Dataset or a
    PyDataset, or a reference such as "npz:data.npz"; neither means the
    model's synthetic data. `config` holds knobs the search starts from
    (`batch_size` is one). `trials`, `time`, `pairs`, `knobs`, `space`,
    `storage`, `study`, `screen_only` and `guard_margin` are `fitspeed tune`'s options
    (`--screen-only`: each knob timed once, nothing decided; a `trials`
    too small to decide is refused without it); `best` writes best.json too
    (`result.save` does it later).

    Returns a `TuneResult`; raises `fitspeed.UserError` for bad input.
    """
    from fitspeed.api.result import TuneResult
    from fitspeed.console.option_values import parse_duration
    from fitspeed.console.tune_lines import tune_events
    from fitspeed.core import best_json
    from fitspeed.machine import host_lock
    from fitspeed.search.summary import study_data, study_summary
    from fitspeed.search.tuner import Tuner, TuneSettings

    base = _config(config, batch_size)
    shipment = ship(model, x, y, validation_data, data)
    knob_names = tuple(knobs.split(",")) if isinstance(knobs, str) else tuple(knobs or ())
    work = _workload(shipment, base, steps, repeats, seed, timeout, memory_limit)
    settings = TuneSettings(
        model=work.model, data=work.data, base=work.base, trials=trials,
        time_s=time if isinstance(time, (int, float)) else parse_duration(time),
        study=study or shipment.name, storage=storage, steps=work.steps, repeats=work.repeats, seed=work.seed,
        timeout_s=work.timeout_s, memory_limit_mb=work.memory_limit_mb, pairs=pairs,
        space=tuple(f"{k}={','.join(str(v) for v in values)}" for k, values in (space or {}).items()),
        knobs=knob_names, batch_sizes=tuple(batch_sizes or ()), monitor=monitor, screen_only=screen_only,
        guard_margin=_share(guard_margin, "guard_margin"),
    )
    shown = progress_kinds.choose(progress)
    with _trials(shipment), host_lock.hold(host_lock.device(), f"study {settings.study_name}", allow_shared_host):
        tuner = Tuner(settings, on_event=tune_events(shown, settings.base))
        shown.start(tuner.ledger.trials, f"tuning {settings.study_name}")
        try:
            tuner.run()
        except KeyboardInterrupt:
            shown.line(f"Interrupted. Every finished trial is saved in study {settings.study_name!r}; call "
                       "fitspeed.tune again with the same arguments to resume.")
            raise
        finally:
            shown.close()
        summary = study_summary(study_data(tuner.study))
    result = TuneResult(summary, storage=storage)
    if best is not None:
        best_json.write(best, summary)
    return result


@said
def measure(
    model: Any,
    x: Any = None,
    y: Any = None,
    *,
    batch_size: int | None = None,
    data: Any = None,
    config: Mapping[str, Any] | TrialConfig | None = None,
    steps: int | None = None,
    repeats: int = 3,
    seed: int = 0,
    timeout: float = 900.0,
    memory_limit: str | int | None = None,
    monitor: bool = False,
) -> TrialRecord:
    """Time one configuration of `model` in a fresh process: `fitspeed measure` from Python.

    Returns the trial's `TrialRecord` whatever happened (`record.status`,
    `record.throughput` in samples/s, `record.reason`); raises
    `fitspeed.UserError` where the model or data is the problem.
    """
    from fitspeed.measure.runner import run_trial

    shipment = ship(model, x, y, None, data)
    work = _workload(shipment, _config(config, batch_size), steps, repeats, seed, timeout, memory_limit)
    spec = dataclasses.replace(work.spec(), monitor=monitor)
    with _trials(shipment):
        record = run_trial(spec)
    if record.user_error:
        raise UserError(record.reason or "")
    return record


@said
def compare(
    model: Any,
    x: Any = None,
    y: Any = None,
    *,
    a: Mapping[str, Any] | None = None,
    b: Mapping[str, Any] | None = None,
    pairs: int = 5,
    confidence: float = 0.95,
    batch_size: int | None = None,
    data: Any = None,
    config: Mapping[str, Any] | TrialConfig | None = None,
    steps: int | None = None,
    repeats: int = 3,
    seed: int = 0,
    timeout: float = 900.0,
    memory_limit: str | int | None = None,
    progress: bool = True,
) -> Comparison:
    """Configurations `a` and `b` (knob dicts on top of `config`) in interleaved pairs: `fitspeed compare` from Python.

    Returns the `Comparison`: `.verdict()` leads with the lower bound of B/A,
    `.estimate()` holds the interval, `.pairs` every trial's record.
    """
    from fitspeed.measure.comparison import interleave

    if pairs < 2:
        raise UserError(f"Expected pairs of at least 2: an interval needs two. Received: {pairs}.")
    base = _config(config, batch_size)
    config_a = TrialConfig.from_dict({**base.to_dict(), **dict(a or {})})
    config_b = TrialConfig.from_dict({**base.to_dict(), **dict(b or {})})
    shipment = ship(model, x, y, None, data)
    work = _workload(shipment, base, steps, repeats, seed, timeout, memory_limit)
    spec_a = dataclasses.replace(work, base=config_a).spec()
    spec_b = dataclasses.replace(work, base=config_b).spec()
    shown = progress_kinds.choose(progress)

    def landed(arm: str, record: TrialRecord) -> None:
        if record.user_error:
            raise UserError(record.reason or "")
        speed = f"{record.throughput:,.0f} samples/s" if record.throughput else f"{record.status}: {record.reason}"
        shown.line(f"pair {record.extra['pair'] + 1}/{pairs}: {arm} {record.spec.config.label()}: {speed}",
                   advance=True)

    with _trials(shipment):
        shown.start(2 * pairs, f"comparing {config_a.label()} with {config_b.label()}")
        try:
            comparison = interleave(spec_a, spec_b, pairs, on_trial=landed, confidence=confidence)
        finally:
            shown.close()
    return comparison
