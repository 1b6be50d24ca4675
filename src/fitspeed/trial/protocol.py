"""One trial, in its own process: `python -m fitspeed.trial SPEC.json`.

The child applies the knobs (see `fitspeed.trial.apply` for who owns which), builds
the model and data, measures, and prints one record after `record.MARKER`.
Any failure becomes a record too: a user's mistake as `failed` with
`user_error`, running out of memory as `oom`, a non-finite loss as `nan`.

The measurement protocol (steps 1, 2 and 4 are `fitspeed.trial.measurement`,
the one loop a user's script is timed by too):
1. Warm-up: one `fit()` of two executions. Tracing and compilation happen
   here; `compile_s` is the first execution's time less a steady one.
2. Timed: one `fit()` of `repeats` epochs, each of one lead-in execution and
   then `steps` timed steps. An epoch's window runs from the end of its
   lead-in execution to the end of its last step, so iterator creation,
   epoch-boundary work and `fit()` set-up and teardown stay outside it.
3. Samples/s per window = steps * the global batch (batch_size × devices,
   `fitspeed.trial.distribute`) / window seconds; the record
   keeps every window, the median with its min, max and coefficient of
   variation, and the loss of every epoch.
4. With `spec.stop_below` (set by the tuner), a trial already slower than
   that after its warm-up, or after its first timed window, stops there: an
   `ok` record with the figure it reached and `metrics.stopped_early`. A
   warm-up still running when it would have ended at `stop_below` (plus a
   grace for compiling) is cut short from a timer (`fitspeed.trial.cutoff`).
5. After the timed windows, outside the figures (`after_timing`): with
   `spec.profile_dir` (`measure --profile`, `doctor --model`), one more window
   like the timed ones runs under the backend's profiler
   (`fitspeed.trial.profiling`), reported as the record's `profile`; in mode
   "model" (`doctor --model`), `fitspeed.trial.model_check` adds `model_check`;
   with `deterministic=true`, `fitspeed.trial.determinism` trains twice from
   one snapshot and seed and adds `determinism`: bit-identical weights or not.
"""

from __future__ import annotations

import json
import math
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from fitspeed.core.data_ref import DataRef
from fitspeed.core.errors import DataError, UserError
from fitspeed.core.input_kinds import INPUT_KNOBS
from fitspeed.core.record import Mode, Status, TrialSpec, clip_reason, new_record, write_record
from fitspeed.trial import apply, measurement, remat
from fitspeed.trial.hooks import NO_HOOKS, TrialHooks, from_environment
from fitspeed.trial.keras_import import import_keras
from fitspeed.trial.transform import Refused


def measure(spec: TrialSpec, hooks: TrialHooks = NO_HOOKS) -> dict[str, Any]:
    """Run the protocol and return an `ok` or `nan` record; `hooks` are a test's (`fitspeed.trial.hooks`)."""
    config = spec.config
    apply.before_import(config, spec.seed)
    import_keras(config.backend)  # after the environment is set

    from fitspeed.machine import environment
    from fitspeed.trial import doctor, models
    from fitspeed.trial.data import layout, sources
    from fitspeed.trial.data.fit_input import fit_input, max_steps
    from fitspeed.trial.transform import rewrite

    placement = apply.after_import(config, spec.seed)
    env = {**environment.collect(config.backend), "devices": placement.to_dict()}
    started = time.perf_counter()
    with remat.scope(config):  # layers created inside it are rematerialized (fitspeed.trial.remat)
        model = models.build(spec.model)
        rewritten = rewrite.for_trial(model, config, spec.seed)  # data_format, float32 outputs: checked, or Refused
    model = rewritten.model if rewritten else model
    remat_note = remat.check(model, config)
    models.compile_model(model, apply.compile_kwargs(config))
    data_ref = DataRef.parse(spec.data)
    shape = layout.channels_last_shape(model)
    if shape is None and data_ref.kind == "synthetic":
        raise DataError(
            f"Cannot make synthetic data for {spec.model!r}: its input shape is not fully "
            "known. Give the model a fixed keras.Input shape, or pass --data."
        )
    num_classes = int(model.output_shape[-1])
    global_batch = placement.global_batch(config.batch_size)  # batch_size is per device
    data_seed = spec.seed if spec.data_seed is None else spec.data_seed
    data = sources.load(data_ref, shape or (), num_classes, global_batch, data_seed, holdout=spec.validate)
    data = hooks.loaded(data, spec.seed)
    if data.kind != "arrays" or config.changed().keys() & set(INPUT_KNOBS):
        from fitspeed.trial.data import pipeline  # the input knobs (imports tensorflow)

        data = pipeline.prepare(data, config, global_batch, spec.seed)
    data = layout.fit_layout(data, model, str(data_ref))
    batch = data.batch_size or global_batch
    build_s = time.perf_counter() - started

    n = config.steps_per_execution
    if spec.mode == Mode.TRAIN:
        trained = {**_train(spec, model, data, batch, env, hooks), **_rewritten(rewritten)}
        trained["notes"] += [remat_note] if remat_note else []
        return _validated(spec, trained, model, data)
    if spec.mode == Mode.PREDICT:
        from fitspeed.trial import predict_latency

        return predict_latency.measure(spec, model, data, batch, env)
    if spec.mode in doctor.MODES:  # `fitspeed doctor`'s measurements
        if spec.mode == Mode.INPUT:
            return doctor.input_rate(spec, data, batch, env)
        if spec.mode == Mode.EPOCHS:
            return doctor.epochs(spec, model, data, batch, env)
        data = doctor.in_memory(data, batch)  # "compute": the protocol below, on batches in memory

    hooks.before_timing()

    def run_fit(steps: int, epochs: int, timer: Any) -> None:
        model.fit(**fit_input(data, steps, batch), epochs=epochs, steps_per_epoch=steps, verbose=0, callbacks=[timer])

    cap = (max_steps(data, batch) - n) // n * n
    timed = measurement.timed_windows(spec, run_fit, n, batch, cap, build_s, env)
    if not isinstance(timed, measurement.Timed):
        return timed  # cut short, or the loss went to NaN
    steps, losses = timed.steps, timed.losses
    extra: dict[str, Any] = {"timed_wall": timed.wall, **_rewritten(rewritten)}
    notes = [note for note in (placement.note(), remat_note) if note]
    if config.jit_compile is True and not getattr(model, "jit_compile", False):
        notes.append(
            "Keras ran without XLA although jit_compile=true was asked for: the model has a "
            "layer that does not support it, or op determinism is on (Keras turns XLA off then)."
        )
    metrics = measurement.window_metrics(
        timed=timed,
        steps_per_execution=n,
        batch=batch,
        build_s=build_s,
        jit_compile=bool(getattr(model, "jit_compile", False)),
        device_mb=environment.peak_device_memory_mb(config.backend),
        params=int(model.count_params()),
        data_kind=data.origin or data.kind,
        output_dtype=rewrite.output_dtype(model),
    )
    finite = bool(losses) and math.isfinite(losses[-1])
    if finite:
        extra.update(after_timing(spec, model, data, batch, steps, n, metrics, env))
    record = new_record(
        spec,
        "ok" if finite else "nan",
        reason=None if finite else "the final loss is not finite",
        environment=env,
        metrics=metrics,
        notes=notes,
        **extra,
    )
    return _validated(spec, record, model, data)


def _validated(spec: TrialSpec, record: dict[str, Any], model: Any, data: Any) -> dict[str, Any]:
    """With `spec.validate`, an ok record gains the held-out accuracy and the weights' digest."""
    if not spec.validate or record["status"] != "ok":
        return record
    from fitspeed.trial.validation import held_out_metrics

    metrics, notes = held_out_metrics(model, data)
    record["metrics"].update(metrics)
    record["notes"].extend(notes)
    return record


def after_timing(spec: TrialSpec, model: Any, data: Any, batch: int, steps: int, n: int,
                 metrics: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
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


def _rewritten(rewritten: Any) -> dict[str, Any]:
    """The record's `rewrite`: what the model knobs changed in the model, and the check that it computes the same."""
    return {"rewrite": rewritten.to_dict()} if rewritten is not None else {}


def _train(spec: TrialSpec, model: Any, data: Any, batch: int, env: dict[str, Any],
           hooks: TrialHooks) -> dict[str, Any]:
    """Train from the seed for a fixed number of steps and keep the loss curve (`spec.validate`: then held-out)."""
    from fitspeed.core.stats import describe
    from fitspeed.trial.data.fit_input import fit_input
    from fitspeed.trial.timing import StepTimer
    from fitspeed.trial.transform.rewrite import output_dtype

    steps = spec.steps or 0
    notes = hooks.compiled_for_training(model)
    timer = StepTimer(marks=())
    started, wall = time.perf_counter(), time.time()
    model.fit(
        **fit_input(data, steps, batch),
        epochs=spec.repeats,
        steps_per_epoch=steps,
        verbose=0,
        callbacks=[timer],
    )
    fit_s = time.perf_counter() - started
    losses = timer.epoch_losses
    metrics: dict[str, Any] = {"loss_curve": losses, "final_loss": losses[-1] if losses else None,
                               "steps_per_repeat": steps, "batch_size": batch, "epoch_s": timer.epoch_s,
                               "fit_s": fit_s, "params": int(model.count_params()),
                               "output_dtype": output_dtype(model)}
    if len(timer.epoch_s) > 1:  # the first epoch holds tracing and compilation: the later ones are the speed
        metrics["samples_per_s"] = describe([steps * batch / s for s in timer.epoch_s[1:]]).to_dict()
    if timer.nonfinite or not losses or not math.isfinite(losses[-1]):
        reason = timer.nonfinite or "the final loss is not finite"
        return new_record(spec, Status.NAN, reason=reason, environment=env, metrics=metrics, notes=notes)
    return new_record(spec, Status.OK, environment=env, metrics=metrics, timed_wall=[wall, time.time()], notes=notes)


def is_oom(error: BaseException) -> bool:
    if isinstance(error, MemoryError):
        return True
    name = type(error).__name__
    text = str(error).lower()
    return name == "ResourceExhaustedError" or "out of memory" in text or "oom" in text.split()


def _unreadable_images(spec: TrialSpec, error: BaseException) -> str | None:
    """After a decode failure on an images: folder, a sentence naming the broken files, or None."""
    text = str(error)
    if "decode" not in text.lower() and "image" not in text.lower() and "jpeg" not in text.lower():
        return None
    try:
        ref = DataRef.parse(spec.data, check_paths=False)
    except UserError:
        return None
    if ref.kind != "images":
        return None
    from fitspeed.trial.data.image_folder import unreadable

    bad = unreadable(ref.name)
    if not bad:
        return None
    return (f"Expected every file in {ref.name!r} to be a readable JPEG or PNG image. These are not: "
            f"{', '.join(repr(b) for b in bad)}. Delete or replace them, and run again.")


def run(spec: TrialSpec, hooks: TrialHooks = NO_HOOKS) -> dict[str, Any]:
    """`measure`, with every exception turned into a record."""
    try:
        return measure(spec, hooks)
    except UserError as error:
        return new_record(spec, Status.FAILED, reason=str(error), user_error=True, environment=_environment(spec))
    except Refused as error:  # the knob cannot apply to this model, or cannot run here: a result, not a crash
        return new_record(spec, Status.FAILED, reason=str(error), environment=_environment(spec))
    except BaseException as error:  # a failure is data: record it, whatever it is
        named = _unreadable_images(spec, error)
        if named:
            return new_record(spec, Status.FAILED, reason=named, user_error=True, environment=_environment(spec))
        status = "oom" if is_oom(error) else "failed"
        traceback.print_exc()
        reason = f"{type(error).__name__}: {error}".strip()
        return new_record(spec, status, reason=clip_reason(reason), environment=_environment(spec))


def _environment(spec: TrialSpec) -> dict[str, Any] | None:
    """A failed trial's environment: the host, and oneDNN's state where TensorFlow got imported."""
    try:
        from fitspeed.machine import environment

        env = environment.host(spec.config.backend)
        if "tensorflow" in sys.modules:
            env["onednn"] = environment.onednn_enabled()
        return env
    except Exception:  # the record of a failure must not fail
        return None


def main(argv: list[str]) -> int:
    spec = TrialSpec.from_dict(json.loads(Path(argv[1]).read_text()))
    record = run(spec, from_environment())  # a test's faults and holds, chosen once here
    write_record(record)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
