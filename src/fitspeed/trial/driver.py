"""The one trial driver: a subject, one function per mode, and one mapping from a failure to its status.

A trial measures a `Subject`: a model, its data, the batch, how to call its
`fit()`, and what every record of it carries. Two variants build one, as
pyperf's `WorkerTask` and `WorkerProcessTask` are two variants of one worker:

- a built-in model or a user's builder, in the trial child
  (`fitspeed.trial.protocol.subject`): `model.fit` on the data fitspeed loaded;
- a user's training script, inside its own process
  (`fitspeed.trial.script_hook`): the script's real `fit` on the model, data,
  batch size and callbacks its chosen `fit()` call was given.

`MODES` maps each `Mode` to the one function that runs it on a subject, so a
built-in trial and a script's trial run every mode the same way; `failure`
maps any exception to the record's status; `run` puts the two together.

Who owns what in a trial: `fitspeed.trial.apply` sets the process-wide knobs
(the dtype policy, `data_format`, the thread pools) before the subject is
built; the subject's builder compiles with `steps_per_execution` and
`jit_compile` and applies the input knobs (prefetch among them) through
`Data.with_knobs`; the functions here only measure.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from fitspeed.core.data_ref import DataRef, SourceKind
from fitspeed.core.errors import UserError
from fitspeed.core.record import Mode, Status, TrialRecord, TrialSpec, clip_reason, new_record
from fitspeed.trial import measurement
from fitspeed.trial.hooks import NO_HOOKS, TrialHooks
from fitspeed.trial.transform import Refused

if TYPE_CHECKING:  # imports keras: the knobs must be set first
    from fitspeed.machine.environment import Environment
    from fitspeed.trial.data.kinds import Data
    from fitspeed.trial.transform.rewrite import RewriteRecord

class FitKwargs(TypedDict, total=False):
    """What a subject's fit() call takes beside the data, the steps, the epochs and the callbacks."""

    verbose: int | str
    class_weight: Any  # a script's, as its fit() was given it


class ScriptInfo(TypedDict):
    """The user's script a trial measured, as the record's `script` holds it (`fitspeed.trial.script_hook`)."""

    path: str | None
    argv: list[str]
    command: Any  # the command line as the user gave it (`TrialSpec.script`)
    sha256: NotRequired[str | None]


class Sections(TypedDict, total=False):
    """The sections every record of a subject carries beside its figures."""

    script: ScriptInfo  # a script's variant
    rewrite: RewriteRecord  # what the trial changed in the model (`fitspeed.trial.transform.rewrite`)


class ScriptFigures(TypedDict, total=False):
    """What a script's variant adds to a timed record's metrics."""

    steps_per_execution_resolved: int
    dtype_policy: str
    fit_call: int  # which of the script's fit() calls was measured, from 1
    epoch_steps: int | None  # the script's own epoch
    batch_callbacks: list[str]  # its callbacks that act per batch
    epochs: int  # the epochs its fit() runs (less initial_epoch): one run of the script


@dataclass
class Subject:
    """What one trial measures, however it was built."""

    model: Any
    data: Data
    batch: int  # the batch this process feeds fit(): the global batch, where one process trains (`processes`)
    env: Environment  # the record's environment
    build_s: float  # seconds to build the model and data
    steps_per_execution: int
    real_fit: Callable[..., Any] = lambda model, **kwargs: model.fit(**kwargs)  # how to call fit(model, ...)
    fit_kwargs: FitKwargs = field(default_factory=lambda: FitKwargs(verbose=0))  # a script's verbose, class_weight
    callbacks: list[Any] = field(default_factory=list)  # a script's own, run beside the trial's timer
    notes: list[str] = field(default_factory=list)  # for the record: what the build decided
    fields: Sections = field(default_factory=lambda: Sections())  # sections every record of it carries
    metrics: ScriptFigures = field(default_factory=lambda: ScriptFigures())  # what a variant adds to a timed record
    hooks: TrialHooks = NO_HOOKS  # a test's faults and holds (`fitspeed.trial.hooks`)
    end: measurement.End | None = None  # the cut-off timer's last act where the process must end with the record
    validates: bool = True  # with `spec.validate`, held-out figures follow training (a script brings no held-out data)
    processes: int = 1  # the processes that step together, each feeding its own `batch` (the `processes` knob)

    @property
    def global_batch(self) -> int:
        """The batch one step trains on, what samples/s counts: `batch` × `processes`."""
        return self.batch * self.processes

    def fit(self, steps: int, epochs: int, timer: Any) -> None:
        """One call of the real fit(): `epochs` epochs of `steps` steps of this subject's data, `timer` watching."""
        self.real_fit(self.model, **self.data.fit_args(steps, self.batch), epochs=epochs, steps_per_epoch=steps,
                      callbacks=[*self.callbacks, timer], **self.fit_kwargs)


def run(spec: TrialSpec, subject: Callable[[], Subject], **fields: Any) -> TrialRecord:
    """Build the subject and run the spec's mode on it; any exception becomes a record with `fields`."""
    try:
        return MODES[spec.mode](subject(), spec)
    except BaseException as error:  # a failure is data: record it, whatever it is
        status, reason, user_error = failure(spec, error)
        return new_record(spec, status, reason=reason, user_error=user_error, environment=_environment(spec),
                          **fields)


def failure(spec: TrialSpec, error: BaseException) -> tuple[Status, str, bool]:
    """The status a trial that raised `error` ends with, the reason, and whether it is the user's to fix.

    >>> failure(TrialSpec(model="tiny"), UserError("Expected x."))
    (<Status.FAILED: 'failed'>, 'Expected x.', True)
    >>> failure(TrialSpec(model="tiny"), Refused("remat cannot apply."))[::2]
    (<Status.FAILED: 'failed'>, False)
    """
    if isinstance(error, (UserError, Refused)):  # Refused: a knob that cannot apply here, a result, not a crash
        return Status.FAILED, str(error), isinstance(error, UserError)
    named = _unreadable_images(spec, error)
    if named:
        return Status.FAILED, named, True
    traceback.print_exception(error)
    return (Status.OOM if is_oom(error) else Status.FAILED), clip_reason(f"{type(error).__name__}: {error}".strip()), False


def is_oom(error: BaseException) -> bool:
    """Whether `error` is running out of memory.

    >>> is_oom(MemoryError()), is_oom(RuntimeError("CUDA out of memory")), is_oom(ValueError("bad shape"))
    (True, True, False)
    """
    if isinstance(error, MemoryError):
        return True
    text = str(error).lower()
    return type(error).__name__ == "ResourceExhaustedError" or "out of memory" in text or "oom" in text.split()


def _unreadable_images(spec: TrialSpec, error: BaseException) -> str | None:
    """After a decode failure on an images: folder, a sentence naming the broken files, or None."""
    text = str(error).lower()
    if "decode" not in text and "image" not in text and "jpeg" not in text:
        return None
    try:
        ref = DataRef.parse(spec.data, check_paths=False)
    except UserError:
        return None
    if ref.kind != SourceKind.IMAGES:
        return None
    from fitspeed.trial.data.image_folder import unreadable

    bad = unreadable(ref.name)
    if not bad:
        return None
    return (f"Expected every file in {ref.name!r} to be a readable JPEG or PNG image. These are not: "
            f"{', '.join(repr(b) for b in bad)}. Delete or replace them, and run again.")


def _environment(spec: TrialSpec) -> Environment | None:
    """A failed trial's environment: the host, and oneDNN's state where TensorFlow got imported."""
    try:
        from fitspeed.machine import environment

        env = environment.host(spec.config.backend)
        if "tensorflow" in sys.modules:
            env["onednn"] = environment.onednn_enabled()
        return env
    except Exception:  # the record of a failure must not fail
        return None


# -- the modes ------------------------------------------------------------------


def timed(s: Subject, spec: TrialSpec) -> TrialRecord:
    """Modes "time" and "model": the measurement protocol (`fitspeed.trial.measurement`), then `after_timing`."""
    from fitspeed.machine import environment
    from fitspeed.trial.transform.rewrite import output_dtype

    s.hooks.before_timing()
    n = s.steps_per_execution
    cap = (s.data.max_steps(s.batch) - n) // n * n
    result = measurement.timed_windows(spec, s.fit, n, s.global_batch, cap, s.build_s, s.env, end=s.end, **s.fields)
    if not isinstance(result, measurement.Timed):
        return result  # cut short, or the loss went to NaN
    notes = list(s.notes)
    if spec.config.jit_compile is True and not getattr(s.model, "jit_compile", False):
        notes.append(
            "Keras ran without XLA although jit_compile=true was asked for: the model has a "
            "layer that does not support it, or op determinism is on (Keras turns XLA off then)."
        )
    metrics = measurement.window_metrics(
        timed=result, steps_per_execution=n, batch=s.global_batch, build_s=s.build_s,
        jit_compile=bool(getattr(s.model, "jit_compile", False)),
        device_mb=environment.peak_device_memory_mb(spec.config.backend), params=int(s.model.count_params()),
        data_kind=s.data.label, output_dtype=output_dtype(s.model),
    )
    metrics.update(s.metrics)
    finite = bool(result.losses) and math.isfinite(result.losses[-1])
    checks = after_timing(spec, s.model, s.data, s.batch, result.steps, n, metrics, s.env) if finite else {}
    held, held_notes = _held_out(spec, s) if finite else ({}, [])
    return new_record(spec, Status.OK if finite else Status.NAN,
                      reason=None if finite else "the final loss is not finite", environment=s.env,
                      metrics={**metrics, **held}, notes=[*notes, *held_notes], timed_wall=result.wall, **s.fields,
                      **checks)


def compute(s: Subject, spec: TrialSpec) -> TrialRecord:
    """Doctor's "compute": the measurement protocol on batches copied into memory (`doctor.in_memory`)."""
    from fitspeed.trial import doctor

    return timed(dataclasses.replace(s, data=doctor.in_memory(s.data, s.batch)), spec)


def train(s: Subject, spec: TrialSpec) -> TrialRecord:
    """Mode "train": from the seed, `spec.repeats` epochs of `spec.steps` with no warm-up, for the guard's loss curve.

    The first epoch holds tracing and compilation, so the later ones give the
    speed (`fitspeed reproduce`'s article-style timing). With `spec.build_first`
    (the guard's runs), the training state is built before fit(), so the train
    step is traced once (`fitspeed.trial.keras_build`). With `spec.validate`,
    the held-out figures follow (`_held_out`).
    """
    from fitspeed.core.stats import describe
    from fitspeed.trial import keras_build
    from fitspeed.trial.timing import StepTimer
    from fitspeed.trial.transform.rewrite import output_dtype

    steps = spec.steps or 0
    notes = [*s.notes, *s.hooks.compiled_for_training(s.model)]
    timer = StepTimer(marks=())
    started, wall = time.perf_counter(), time.time()
    if spec.build_first:
        keras_build.before_fit(s.model, s.data.fit_args(1, s.batch))
    s.fit(steps, spec.repeats, timer)
    fit_s = time.perf_counter() - started
    losses = timer.epoch_losses
    metrics: dict[str, Any] = {"loss_curve": losses, "final_loss": losses[-1] if losses else None,
                               "steps_per_repeat": steps, "batch_size": s.global_batch, "epoch_s": timer.epoch_s,
                               "fit_s": fit_s, "params": int(s.model.count_params()), "data_kind": s.data.label,
                               "output_dtype": output_dtype(s.model)}
    if len(timer.epoch_s) > 1:  # the first epoch holds tracing and compilation: the later ones are the speed
        metrics["samples_per_s"] = describe([steps * s.global_batch / e for e in timer.epoch_s[1:]]).to_dict()
    bad = timer.nonfinite or (None if losses and math.isfinite(losses[-1]) else "the final loss is not finite")
    if bad:
        return new_record(spec, Status.NAN, reason=bad, environment=s.env, metrics=metrics, notes=notes, **s.fields)
    timed_wall = [wall, time.time()]
    held, held_notes = _held_out(spec, s)
    return new_record(spec, Status.OK, environment=s.env, metrics={**metrics, **held}, timed_wall=timed_wall,
                      notes=[*notes, *held_notes], **s.fields)


def input_rate(s: Subject, spec: TrialSpec) -> TrialRecord:
    """Doctor's "input": the pipeline alone (`fitspeed.trial.doctor.input_rate`)."""
    from fitspeed.trial import doctor

    return doctor.input_rate(spec, s.data, s.batch, s.env, **s.fields)


def epochs(s: Subject, spec: TrialSpec) -> TrialRecord:
    """Doctor's "epochs": the time lost at epoch edges (`fitspeed.trial.doctor.epochs`)."""
    from fitspeed.trial import doctor

    return doctor.epochs(spec, s.model, s.data, s.batch, s.env, **s.fields)


def predict(s: Subject, spec: TrialSpec) -> TrialRecord:
    """Mode "predict": one sample at a time against batches (`fitspeed.trial.predict_latency`)."""
    from fitspeed.trial import predict_latency

    return predict_latency.measure(spec, s.model, s.data, s.batch, s.env, **s.fields)


MODES: dict[Mode, Callable[[Subject, TrialSpec], TrialRecord]] = {
    Mode.TIME: timed, Mode.MODEL: timed, Mode.COMPUTE: compute, Mode.TRAIN: train,
    Mode.INPUT: input_rate, Mode.EPOCHS: epochs, Mode.PREDICT: predict,
}


def _held_out(spec: TrialSpec, s: Subject) -> tuple[dict[str, Any], list[str]]:
    """With `spec.validate`, what an ok record adds: the held-out accuracy and the weights' digest, and notes."""
    if not (spec.validate and s.validates):
        return {}, []
    from fitspeed.trial.validation import held_out_metrics

    return held_out_metrics(s.model, s.data)


def after_timing(spec: TrialSpec, model: Any, data: Data, batch: int, steps: int, n: int,
                 metrics: dict[str, Any], env: Environment) -> dict[str, Any]:
    """What runs after the timed windows, each outside the figures: the record's extra sections.

    `profile`: one more window like the timed ones, traced (`spec.profile_dir`:
    `measure --profile`, `doctor --model`); `model_check`: `doctor --model`'s
    findings, FLOPs and roofline; `determinism`: whether a `deterministic=true`
    configuration trains to bit-identical weights twice.
    """
    extra: dict[str, Any] = {}
    config = spec.config
    if spec.profile_dir:
        from fitspeed.trial import profiling

        extra["profile"] = profiling.capture(config.backend, Path(spec.profile_dir), model, data, batch, steps, n)
    try:  # the measurement stands whatever happens here: a section that fails carries its error
        if spec.mode == Mode.MODEL:
            from fitspeed.trial import model_check

            extra["model_check"] = model_check.examine(model, config, data, batch, metrics, extra.get("profile"), env)
        if config.deterministic:
            from fitspeed.trial import determinism

            extra["determinism"] = determinism.check(model, data, batch, spec.seed, n)
    except Exception as error:
        traceback.print_exc()
        section = "model_check" if spec.mode == Mode.MODEL and "model_check" not in extra else "determinism"
        extra[section] = {"error": clip_reason(f"{type(error).__name__}: {error}", 1000)}
    return extra
