"""The hook that runs inside a user's own training process (`fitspeed ... -- python train.py`).

`fitspeed.measure.training_command` starts the user's command with `fitspeed/script_site` first on
PYTHONPATH; Python imports its `sitecustomize` at start-up, before the
script's first line, and that calls `install()` here when `FITSPEED_SCRIPT`
names an order file. The first Python process that reads the order takes it
(the variable is removed), so a shell wrapper passes it on to the python it
starts, and the script's own worker processes stay unhooked.

Who owns what in the user's process:

| when                         | what                                                 | knobs                      |
|------------------------------|------------------------------------------------------|----------------------------|
| start-up (sitecustomize)     | `apply.before_import`                          | backend, deterministic     |
| `keras` (or `tensorflow`)    | `apply.after_import`, once, then Model.compile | precision, threads,        |
| finishes importing           | and Model.fit are wrapped                            | determinism, the seed,     |
|                              |                                                      | devices (the process's     |
|                              |                                                      | strategy: every model the  |
|                              |                                                      | script builds is in it)    |
| the script's `compile()`     | the wrapper adds the knobs the config changes        | steps_per_execution,       |
|                              | (the script's own values stay otherwise)             | jit_compile                |
| the script's chosen `fit()`  | `pipeline.prepare` on the x it was given, then       | the input knobs that apply |
|                              | the measurement protocol of `fitspeed.trial.protocol`         | to arrays, a tf.data       |
|                              |                                                      | Dataset or a PyDataset     |
| the script's chosen `fit()`  | the script's model rewritten and checked             | data_format, float32       |
|                              | (`fitspeed.trial.transform.rewrite.for_trial`)       | outputs under precision    |
| the script's chosen `fit()`  | refused with the reason (`fitspeed.trial.remat`): the | remat                      |
|                              | script builds its model outside any RematScope       |                            |

The rewritten model (compiled as the script compiled its own) is the one timed;
`fitspeed run` cannot swap the model a script holds, so it leaves data_format to
the script (best.json's snippet shows the line). With devices=N the script's
batch size stays its own and is the global batch, split over the N devices. A
model the strategy cannot reach (built in another thread, or in a strategy scope
of the script's own) is refused with the reason: a built model cannot be moved
into a scope.

In a trial (action "trial") the chosen `fit()` never trains the script's
recipe: it runs the warm-up and the timed windows on the script's own model,
data, batch size and callbacks (less ModelCheckpoint, BackupAndRestore and
EarlyStopping), writes the record, and ends the process at once, so the rest
of the script (evaluation, `model.save`) never runs. Whatever stops the script
before that `fit()` (an exception, `sys.exit`, `os._exit`, reaching its end,
training with `tf_keras`) becomes a record with one sentence that says so.
With action "run" (`fitspeed run best.json -- ...`) the knobs are applied and
the script runs to its end untouched otherwise.
"""

from __future__ import annotations

import atexit
import faulthandler
import hashlib
import inspect
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from fitspeed.core.errors import UserError
from fitspeed.core import input_kinds
from fitspeed.core.input_kinds import INPUT_KNOBS
from fitspeed.core.record import TrialSpec, clip_reason, new_record, to_json
from fitspeed.trial import apply
from fitspeed.trial.data.fit_args import data_from, epoch_steps, fit_kind, not_applicable
from fitspeed.trial.import_watch import ImportWatch
from fitspeed.trial.protocol import after_timing, is_oom
from fitspeed.trial.remat import SCRIPT_REASON
from fitspeed.trial.script_stop import LEGACY, stop_reason
from fitspeed.trial.transform import Refused

ENV = "FITSPEED_SCRIPT"
NOT_TIMED_CALLBACKS = ("ModelCheckpoint", "BackupAndRestore", "EarlyStopping")
LOG_LINES = 12

_hook: Hook | None = None


def install() -> None:
    """Take the order named by FITSPEED_SCRIPT, if any, and hook this process."""
    global _hook
    path = os.environ.pop(ENV, None)
    if not path or _hook is not None:
        return
    order = json.loads(Path(path).read_text())
    if order.get("action", "trial") == "trial":
        faulthandler.enable()  # a trial killed by a signal dumps its Python stacks into the log the record keeps
    if order.get("action", "trial") == "trial" and order.get("record") and Path(order["record"]).exists():
        # A wrapper runs python again after the timed fit() ended the trial (`python train.py && python eval.py`):
        # the trial is over, so this process ends before its first line.
        os._exit(0)
    _hook = Hook(order)
    _hook.start()


class Hook:
    """One user process under fitspeed: knobs applied, fit() watched."""

    def __init__(self, order: dict[str, Any]) -> None:
        self.spec = TrialSpec.from_dict(order["spec"])
        self.config = self.spec.config
        self.action: str = order.get("action", "trial")
        self.record_path = Path(order["record"]) if order.get("record") else None
        self.fit_index = int((self.spec.script or {}).get("fit", 1))
        self.fits = 0
        self.applied = False
        self.placement: Any = None  # fitspeed.trial.distribute.Placement, once keras is imported
        self.patched = False
        self.done = False
        self.failure: BaseException | None = None
        self.failure_text = ""
        self.exit_call: str | None = None
        self.said: set[str] = set()  # `fitspeed run`'s one-line notes, each once
        self._real_exit = sys.exit
        self._real_os_exit = os._exit

    # -- start-up -------------------------------------------------------------

    def start(self) -> None:
        apply.before_import(self.config, self.spec.seed)
        # the knobs and the Model wrappers arrive with keras (or tensorflow); a call to tf_keras's fit() is refused
        sys.meta_path.insert(0, ImportWatch({"keras": lambda: self.imported("keras"),
                                             "tensorflow": lambda: self.imported("tensorflow"),
                                             "tf_keras": self.tf_keras_imported}))
        if self.action != "trial":
            return
        previous = sys.excepthook

        def excepthook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
            if self.failure is None:
                self.failure = error
                self.failure_text = "".join(traceback.format_exception(kind, error, tb))
            previous(kind, error, tb)

        def exit_(code: Any = None) -> None:
            if self.exit_call is None:
                self.exit_call = f"sys.exit({'' if code is None else repr(code)})"
            self._real_exit(code)

        def os_exit(code: int) -> None:
            if not self.done:
                self.exit_call = f"os._exit({code})"
                self._stopped_early()
            self._real_os_exit(code)

        sys.excepthook = excepthook
        sys.exit = exit_  # type: ignore[assignment]
        os._exit = os_exit  # type: ignore[assignment]
        atexit.register(self._stopped_early)

    def imported(self, name: str) -> None:
        """`keras` or `tensorflow` finished importing: apply the process-wide knobs, wrap Model."""
        if name == "tensorflow" and "keras" in sys.modules:
            return  # keras is importing tensorflow; keras's own turn comes when it is done
        if not self.applied:
            self.applied = True
            self.placement = apply.after_import(self.config, self.spec.seed)
            if self.action == "run" and not self.config.deterministic:
                import keras  # a real run keeps its own randomness: the fixed seed is for trials

                keras.utils.set_random_seed(int.from_bytes(os.urandom(4), "little"))
        if "keras" in sys.modules and not self.patched:
            self.patched = True
            self._patch()

    def tf_keras_imported(self) -> None:
        """Keras 2 loaded: its fit() would train untimed, so calling it ends the trial with the reason.

        Only a call counts: libraries that merely probe for tf_keras stay harmless.
        """
        import tf_keras

        real_fit, hook = tf_keras.Model.fit, self

        def fit(model: Any, *args: Any, **kwargs: Any) -> Any:
            hook.legacy_keras()
            return real_fit(model, *args, **kwargs)

        tf_keras.Model.fit = fit

    def legacy_keras(self) -> None:
        message = LEGACY
        if self.action != "trial":
            sys.stderr.write(f"fitspeed: {message} The knobs are not applied.\n")
            return
        self._finish(self._failed(message, user_error=True))

    # -- Model.compile and Model.fit ------------------------------------------

    def _patch(self) -> None:
        import keras

        model_class = keras.Model
        real_compile, real_fit = model_class.compile, model_class.fit
        hook = self
        changed = self.config.changed()
        compile_knobs = {k: v for k, v in apply.compile_kwargs(self.config).items() if k in changed}

        def compile(model: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A001 (Keras's own name)
            kwargs.update(compile_knobs)
            return real_compile(model, *args, **kwargs)

        def fit(model: Any, *args: Any, **kwargs: Any) -> Any:
            hook.fits += 1
            if hook.action != "trial":
                hook._applied(model)
                return hook._run_fit(real_fit, model, args, kwargs)
            if hook.fits != hook.fit_index or hook.done:
                return real_fit(model, *args, **kwargs)
            hook.done = True
            hook._finish(hook._trial(real_fit, model, args, kwargs))
            return None  # not reached: _finish ends the process

        compile.__wrapped__ = real_compile  # type: ignore[attr-defined]
        fit.__wrapped__ = real_fit  # type: ignore[attr-defined]
        model_class.compile = compile
        model_class.fit = fit

    def _applied(self, model: Any) -> None:
        """`fitspeed run`: the script's model changed as its trials changed it (float32 outputs under a mixed policy)."""
        from fitspeed.trial.transform import rewrite

        try:
            rewrite.float32_outputs(model, self.config.precision)
        except Refused as error:
            sys.stderr.write(f"fitspeed: the model's outputs stay as they are ({error}); its trials were refused "
                             "the same way.\n")

    def _run_fit(self, real_fit: Any, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """`fitspeed run`: the script's own fit() call, with the input knobs that keep every argument's meaning.

        The arguments go to Keras as the script gave them. data_autotune=false on
        arrays changes only the options of the pipeline Keras builds from them
        (`pipeline.array_autotune`), so sample_weight, class_weight, shuffle,
        validation_split and steps_per_epoch keep Keras's own handling. A
        dataset gets the knobs `pipeline.prepare` applies to it, a PyDataset its
        worker settings; a knob that does not apply to what fit() was given is
        left out, said once in one line.
        """
        given = dict(inspect.signature(real_fit).bind(model, *args, **kwargs).arguments)
        given.pop(next(iter(inspect.signature(real_fit).parameters)), None)  # the model itself
        from fitspeed.trial import batch_callbacks

        self._say(batch_callbacks.rhythm_warning(batch_callbacks.named(given.get("callbacks")),
                                                 int(getattr(model, "steps_per_execution", 1) or 1)))
        changed = sorted(self.config.changed().keys() & set(INPUT_KNOBS))
        if not changed:
            return real_fit(model, *args, **kwargs)
        from fitspeed.trial.data import pipeline

        x, autotune = given.get("x"), True
        kind = fit_kind(given)
        for knob in changed:
            why = input_kinds.why_not(knob, kind, self.config.backend) if kind else (
                f"{knob} applies to numpy arrays, a tf.data.Dataset or a keras.utils.PyDataset; fit() was given "
                f"{type(x).__name__}")
            if why:
                self._say(f"{knob}={getattr(self.config, knob)} is not applied: {why}.")
        if kind == "arrays":
            autotune = bool(self.config.data_autotune)
        elif kind in ("dataset", "pydataset"):
            from fitspeed.trial.data.sources import Data

            try:
                prepared = pipeline.prepare(Data(kind, source=x), self.config.replace(**not_applicable(self.config, kind)),
                                            0, self.spec.seed)
            except Exception as error:  # noqa: BLE001 (the script's fit() must run as it would without fitspeed)
                self._say(f"the input knobs are not applied to the script's {type(x).__name__}: "
                          f"{type(error).__name__}: {error}")
            else:
                for note in prepared.notes:
                    self._say(note + ".")
                given["x"] = prepared.source
        with pipeline.array_autotune(autotune):
            return real_fit(model, **given)

    def _say(self, line: str | None) -> None:
        """One line on the script's stderr, each line once per process."""
        if line and line not in self.said:
            self.said.add(line)
            sys.stderr.write(f"fitspeed: {line}\n")

    # -- the trial --------------------------------------------------------------

    def _trial(self, real_fit: Any, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._measure(real_fit, model, args, kwargs)
        except UserError as error:
            return self._failed(str(error), user_error=True)
        except Refused as error:  # a knob that cannot apply to the script's model, or cannot run here
            return self._failed(str(error), user_error=False)
        except BaseException as error:  # a failure is data
            traceback.print_exc()
            status = "oom" if is_oom(error) else "failed"
            return new_record(self.spec, status, reason=clip_reason(f"{type(error).__name__}: {error}".strip()),
                              script=self._script_info())

    def _measure(self, real_fit: Any, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        from fitspeed.machine import environment
        from fitspeed.trial import doctor
        from fitspeed.trial.timing import StepTimer
        from fitspeed.trial.transform import rewrite

        spec, config = self.spec, self.config
        if config.remat != "off":
            raise Refused(SCRIPT_REASON)
        env = environment.collect(config.backend)
        started = time.perf_counter()
        bound = inspect.signature(real_fit).bind(model, *args, **kwargs).arguments
        if self.placement is not None:
            env["devices"] = self.placement.to_dict()
            _check_replicas(model, self.placement)
        # The outputs in float32 in place, as `fitspeed run` does (`_applied`); the layout as a builder's model gets it.
        outputs = rewrite.float32_outputs(model, config.precision)
        rewritten = rewrite.for_trial(model, config.replace(precision="float32"), spec.seed)
        if rewritten is not None:
            model = rewritten.model  # compiled as the script compiled its own
        fields = {"rewrite": _rewrites(outputs, rewritten, model)} if outputs or rewritten else {}
        if "batch_size" in config.changed():
            raise UserError(
                f"Expected knobs that apply to a training script. Received: batch_size={config.batch_size}, but a "
                "script's batch size is its own (it changes the recipe). Drop --set batch_size=... and pass the "
                "size through the script's own arguments."
            )
        data = data_from(bound.get("x"), bound.get("y"), float(bound.get("validation_split") or 0.0),
                         sample_weight=bound.get("sample_weight"), shuffle=bound.get("shuffle", True))
        batch = data.batch_size or int(bound.get("batch_size") or 32)
        own_epoch = epoch_steps(bound.get("steps_per_epoch"), data, batch)  # the script's own epoch
        from fitspeed.trial.data.fit_input import fit_input, max_steps

        if data.kind != "arrays" or config.changed().keys() & set(INPUT_KNOBS):
            from fitspeed.trial.data import pipeline

            data = pipeline.prepare(data, config, batch, spec.seed)
        kept, dropped = _callbacks(bound.get("callbacks"))
        extra = {"verbose": bound.get("verbose", "auto"), "class_weight": bound.get("class_weight")}
        n = int(getattr(model, "steps_per_execution", 1) or 1)
        build_s = time.perf_counter() - started
        notes = [f"not run during the trial: the script's {', '.join(dropped)}"] if dropped else []
        notes.extend(data.notes)
        from fitspeed.trial import batch_callbacks

        per_batch = batch_callbacks.named(bound.get("callbacks"))
        if self.placement is not None and self.placement.used > 1:
            notes.append(f"the script's batch of {batch} is the global batch, {batch / self.placement.used:g} per device "
                         f"on {self.placement.used} devices")
        if self.placement is not None and self.placement.note():
            notes.append(self.placement.note())
        if bound.get("validation_data") is not None or bound.get("validation_split"):
            notes.append("the script's validation is not run during the trial")

        def run_fit(steps: int, epochs: int, timer: Any) -> None:
            real_fit(model, **fit_input(data, steps, batch), epochs=epochs, steps_per_epoch=steps,
                     callbacks=[*kept, timer], **extra)

        if spec.mode == "train":  # the numerics guard's loss curve: from the seed, no warm-up
            steps = spec.steps or 0
            timer = StepTimer(marks=())
            run_fit(steps, spec.repeats, timer)
            losses = timer.epoch_losses
            metrics = {"loss_curve": losses, "final_loss": losses[-1] if losses else None,
                       "steps_per_repeat": steps, "batch_size": batch, "data_kind": data.kind,
                       "output_dtype": rewrite.output_dtype(model)}
            bad = timer.nonfinite or (None if losses and math.isfinite(losses[-1]) else "the final loss is not finite")
            return new_record(spec, "nan" if bad else "ok", reason=bad, environment=env, metrics=metrics,
                              script=self._script_info(), notes=notes, **fields)
        if spec.mode == "input":
            return {**doctor.input_rate(spec, data, batch, env), "script": self._script_info()}
        if spec.mode == "epochs":
            return {**doctor.epochs(spec, model, data, batch, env), "script": self._script_info()}
        if spec.mode == "compute":
            data = doctor.in_memory(data, batch)

        from fitspeed.trial import measurement

        cap = (max_steps(data, batch) - n) // n * n
        script = self._script_info()
        timed = measurement.timed_windows(spec, run_fit, n, batch, cap, build_s, env, end=self._finish,
                                          script=script, **fields)
        if not isinstance(timed, measurement.Timed):
            return timed  # cut short, or the loss went to NaN
        losses = timed.losses
        finite = bool(losses) and math.isfinite(losses[-1])
        metrics = measurement.window_metrics(
            timed=timed, steps_per_execution=n, batch=batch, build_s=build_s,
            jit_compile=bool(getattr(model, "jit_compile", False)),
            device_mb=environment.peak_device_memory_mb(config.backend), params=int(model.count_params()),
            data_kind=data.kind, output_dtype=rewrite.output_dtype(model),
        )
        metrics.update(steps_per_execution_resolved=n, dtype_policy=_policy_name(), fit_call=self.fits,
                       epoch_steps=own_epoch, batch_callbacks=per_batch)
        checks = after_timing(spec, model, data, batch, timed.steps, n, metrics, env) if finite else {}
        return new_record(spec, "ok" if finite else "nan", reason=None if finite else "the final loss is not finite",
                          environment=env, metrics=metrics, notes=notes, script=script,
                          timed_wall=timed.wall, **fields, **checks)

    # -- the end ----------------------------------------------------------------

    def _script_info(self) -> dict[str, Any]:
        main = sys.modules.get("__main__")
        path = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv and sys.argv[0] else None)
        info: dict[str, Any] = {"path": path, "argv": list(sys.argv[1:]),
                                "command": (self.spec.script or {}).get("command")}
        try:
            info["sha256"] = hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
        except OSError:
            info["sha256"] = None
        return info

    def _failed(self, reason: str, user_error: bool, **fields: Any) -> dict[str, Any]:
        return new_record(self.spec, "failed", reason=reason, user_error=user_error, script=self._script_info(),
                          **fields)

    def _stopped_early(self) -> None:
        """At exit (or os._exit) before the chosen fit(): say what stopped the script."""
        if self.done or self.action != "trial":
            return
        self.done = True
        if self.record_path is not None and self.record_path.exists():
            return  # an earlier python of the same command already said what happened
        name = Path(str(self._script_info()["path"] or "the script")).name
        text = self.failure_text
        reason = stop_reason(name, self.failure, text, self.exit_call, fits=self.fits, fit_index=self.fit_index,
                             devices=self.config.devices)
        self._write(self._failed(reason, user_error=True, traceback_tail=text[-4000:] or None))

    def _write(self, record: dict[str, Any]) -> None:
        if self.record_path is not None:
            temp = self.record_path.with_name(self.record_path.name + ".tmp")
            temp.write_text(to_json(record))
            os.replace(temp, self.record_path)

    def _finish(self, record: dict[str, Any]) -> None:
        """Write the record and end the process now: the rest of the script does not run."""
        self.done = True
        self._write(record)
        sys.stdout.flush()
        sys.stderr.flush()
        self._real_os_exit(0)


def _check_replicas(model: Any, placement: Any) -> None:
    """Refuse a model that trains on fewer devices than the strategy set up: it was built outside its scope."""
    from fitspeed.trial.distribute import replicas

    found = replicas(model, placement)
    if found == placement.used:
        return
    raise UserError(
        f"Expected the script's model to be built under fitspeed's {placement.strategy} over {placement.used} "
        f"devices (devices={placement.asked}), which is the process's strategy from the moment keras is imported. "
        f"Received a model that trains on {found} device(s): it was built outside that scope (in another thread, "
        "or in a strategy scope of its own), and a built model cannot be moved into one. Build the model in the "
        "script's main thread, or drop --set devices=..."
    )


def _callbacks(given: Any) -> tuple[list[Any], list[str]]:
    kept, dropped = [], []
    for callback in list(given or []):
        if type(callback).__name__ in NOT_TIMED_CALLBACKS:
            dropped.append(type(callback).__name__)
        else:
            kept.append(callback)
    return kept, dropped


def _policy_name() -> str:
    import keras

    return str(keras.config.dtype_policy().name)


def _rewrites(outputs: Any, layout: Any, model: Any) -> dict[str, Any]:
    """One record of what a trial changed in the script's model: float32 outputs (in place), then the layout."""
    from fitspeed.trial.transform import rewrite

    parts = [part.to_dict() for part in (outputs, layout) if part is not None]
    return {"changes": [c for part in parts for c in part["changes"]],
            "checks": [c for part in parts for c in part["checks"]],
            "params": parts[-1]["params"], "output_dtype": rewrite.output_dtype(model)}
