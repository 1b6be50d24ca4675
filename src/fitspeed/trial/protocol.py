"""One trial, in its own process: `python -m fitspeed.trial SPEC.json`.

The child applies the knobs (see `fitspeed.trial.apply` for who owns which), builds
the model and data into a `Subject`, runs its mode through `fitspeed.trial.driver`
(the one driver a user's script is measured by too), and prints one record
after `record.MARKER`.
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
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fitspeed.core.data_ref import DataRef, SourceKind
from fitspeed.core.errors import DataError
from fitspeed.core.record import TRIAL_TMP, TrialRecord, TrialSpec, write_record
from fitspeed.trial import apply, driver, joining, remat
from fitspeed.trial.hooks import NO_HOOKS, TrialHooks, from_environment
from fitspeed.trial.keras_import import import_keras

if TYPE_CHECKING:  # both import keras, which must wait for the environment the knobs set
    from fitspeed.trial.data.kinds import Data
    from fitspeed.trial.distribute import Placement


def subject(spec: TrialSpec, hooks: TrialHooks = NO_HOOKS) -> driver.Subject:
    """The built-in variant: the knobs applied, the model built and compiled, the data loaded and prepared."""
    config = spec.config
    apply.before_import(config, spec.seed)
    import_keras(config.backend)  # after the environment is set

    from fitspeed.machine import environment
    from fitspeed.trial import models
    from fitspeed.trial.data import layout
    from fitspeed.trial.transform import rewrite

    placement = apply.after_import(config, spec.seed, joining.of_spec(spec))  # what its processes must agree on
    env = environment.collect(config.backend)
    env["devices"] = placement.to_dict()
    started = time.perf_counter()
    with apply.model_scope(config):  # every knob's scope (`Knob.build_scope`): remat's keras.RematScope
        model = models.build(spec.model)
        rewritten = rewrite.for_trial(model, config, spec.seed)  # data_format, float32 outputs: checked, or Refused
    model = rewritten.model if rewritten else model
    remat_note = remat.check(model, config)
    models.compile_model(model, apply.compile_kwargs(config))
    data_ref = DataRef.parse(spec.data)
    shape = layout.channels_last_shape(model)
    if shape is None and data_ref.kind == SourceKind.SYNTHETIC:
        raise DataError(
            f"Cannot make synthetic data for {spec.model!r}: its input shape is not fully "
            "known. Give the model a fixed keras.Input shape, or pass --data."
        )
    feed = placement.feed(config.batch_size)  # batch_size is per device; the global batch is × processes too
    data = shared_data(spec, data_ref, shape or (), int(model.output_shape[-1]), feed, placement)
    data = hooks.loaded(data, spec.seed).with_knobs(config, feed, spec.seed)
    data = layout.fit_layout(data, model, str(data_ref))
    return driver.Subject(model, data, data.batch_size or feed, env, time.perf_counter() - started,
                          config.steps_per_execution,
                          notes=[note for note in (placement.note(), remat_note) if note],
                          fields={"rewrite": rewritten.to_dict()} if rewritten is not None else {}, hooks=hooks,
                          processes=placement.processes)


def shared_data(spec: TrialSpec, ref: DataRef, shape: tuple[int, ...], classes: int, feed: int,
                placement: Placement) -> Data:
    """This process's training data and the held-out data: every process of a multi-process trial draws one data
    set alike (the spec's data seed, never the process's), and trains on its own share of it (`Data.share`),
    so that N processes train one model on one task, as one process would on their global batch."""
    from fitspeed.trial.data import sources

    seed = spec.seed if spec.data_seed is None else spec.data_seed
    data = sources.load(ref, shape, classes, feed, seed, holdout=spec.validate)
    return data.share(placement.process, placement.processes)


def run(spec: TrialSpec, hooks: TrialHooks = NO_HOOKS) -> TrialRecord:
    """One built-in trial, every exception turned into a record; `hooks` are a test's (`fitspeed.trial.hooks`)."""
    return driver.run(spec, lambda: subject(spec, hooks))


def use_trial_tmp() -> None:
    """Put this process's temporary files in the trial's folder, where the runner names one.

    A trial forked from a server ends with `os._exit`, so the `atexit` removals
    of what TensorFlow wrote to the temporary folder never run: autograph's
    converted source of every tf.data function (`__autograph_generated_file*.py`),
    a disk cache. In the trial's folder they go when the trial does, not pile up in /tmp.
    """
    folder = os.environ.get(TRIAL_TMP)
    if folder:
        os.environ["TMPDIR"] = folder
        tempfile.tempdir = folder  # a fork inherits the server's choice, made before this trial's folder existed


def main(argv: list[str]) -> int:
    use_trial_tmp()
    spec = TrialSpec.from_dict(json.loads(Path(argv[1]).read_text()))
    write_record(run(spec, from_environment()).to_dict())  # a test's faults and holds, chosen once here
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
