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
| the script's chosen `fit()`  | `Data.prepare` on the x it was given, then           | the input knobs that apply |
|                              | the mode, run by `fitspeed.trial.driver`             | to arrays, a tf.data       |
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
the script runs to its end untouched otherwise. Run as one of N processes
(`fitspeed run --processes N`, each process a copy of the command), the hook
also makes them one run: the run's fresh seed is process 0's, broadcast, so
every process builds the same weights (JAX refuses a replicated value that
differs by process); a tf.data.Dataset or NumPy arrays given to fit() are
sharded by process (`Hook._sharded`); and a process that fails ends at once
with its status (`Hook._fail_fast`), not in JAX's shutdown barrier.
"""

from __future__ import annotations

import atexit
import faulthandler
import hashlib
import inspect
import json
import os
import sys
import time
import traceback
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fitspeed.core.errors import UserError
from fitspeed.core.input_kinds import INPUT_KNOBS
from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record, to_json
from fitspeed.trial import apply, driver
from fitspeed.trial.import_watch import ImportWatch
from fitspeed.trial.remat import SCRIPT_REASON
from fitspeed.trial.script_stop import LEGACY, stop_reason
from fitspeed.trial.transform import Refused

if TYPE_CHECKING:  # imports keras, which the script imports first
    from fitspeed.trial.transform.rewrite import RewriteRecord

ENV = "FITSPEED_SCRIPT"
NOT_TIMED_CALLBACKS = ("ModelCheckpoint", "BackupAndRestore", "EarlyStopping")
LOG_LINES = 12

_hook: Hook | None = None


class Action(StrEnum):
    """What the order asks of the user's process (`fitspeed.measure.training_command` writes it)."""

    TRIAL = "trial"  # measure the chosen fit(), write the record, end the process
    RUN = "run"  # `fitspeed run best.json -- ...`: the knobs applied, the script run to its end


def install() -> None:
    """Take the order named by FITSPEED_SCRIPT, if any, and hook this process."""
    global _hook
    path = os.environ.pop(ENV, None)
    if not path or _hook is not None:
        return
    order = json.loads(Path(path).read_text())
    trial = Action(order.get("action", Action.TRIAL)) == Action.TRIAL
    if trial:
        faulthandler.enable()  # a trial killed by a signal dumps its Python stacks into the log the record keeps
    if trial and order.get("record") and Path(order["record"]).exists():
        # A wrapper runs python again after the timed fit() ended the trial (`python train.py && python eval.py`):
        # the trial is over, so this process ends before its first line.
        os._exit(0)
    _hook = Hook(order)
    _hook.start()


def current() -> Hook | None:
    """This process's hook, once `install` took an order."""
    return _hook


class Hook:
    """One user process under fitspeed: knobs applied, fit() watched."""

    def __init__(self, order: dict[str, Any]) -> None:
        self.spec = TrialSpec.from_dict(order["spec"])
        self.config = self.spec.config
        self.action = Action(order.get("action", Action.TRIAL))
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
        self.failing = 0  # `fitspeed run --processes N`: the status this process is exiting with, where it failed
        self._sources_before = generated_sources()  # a forked trial's server's own, not this trial's to remove

    # -- start-up -------------------------------------------------------------

    def start(self) -> None:
        apply.before_import(self.config, self.spec.seed)
        # the knobs and the Model wrappers arrive with keras (or tensorflow); a call to tf_keras's fit() is refused
        sys.meta_path.insert(0, ImportWatch({"keras": lambda: self.imported("keras"),
                                             "tensorflow": lambda: self.imported("tensorflow"),
                                             "tf_keras": self.tf_keras_imported}))
        if self.action != Action.TRIAL:
            if self.config.processes > 1:
                self._note_failure()
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
            if self.action == Action.RUN and self.placement.processes > 1:
                atexit.register(self._fail_fast)  # after JAX's own at-exit shutdown, so run before it
            if self.action == Action.RUN and not self.config.deterministic:
                import keras  # a real run keeps its own randomness: the fixed seed is for trials

                keras.utils.set_random_seed(_run_seed())
        if "keras" in sys.modules and not self.patched:
            self.patched = True
            self._patch()

    def _note_failure(self) -> None:
        """`fitspeed run --processes N`: note the status this process exits with, where it fails (an exception
        nothing caught, `sys.exit(N)`, `exit(N)`), for `_fail_fast`."""
        import builtins

        previous = sys.excepthook

        def excepthook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
            self.failing = 130 if issubclass(kind, KeyboardInterrupt) else 1
            previous(kind, error, tb)

        def exiting(real: Any) -> Any:
            def exit_(code: Any = None) -> None:
                self.failing = exit_status(code)
                real(code)
            return exit_

        sys.excepthook = excepthook
        sys.exit = exiting(sys.exit)
        for name in ("exit", "quit"):  # site's, in a script too
            if hasattr(builtins, name):
                setattr(builtins, name, exiting(getattr(builtins, name)))

    def _fail_fast(self) -> None:
        """At exit, in one process of several: a process that failed ends now, with its status.

        JAX's own at-exit shutdown waits at a barrier for every process
        (`jax.distributed.shutdown`, up to its 5 minutes), and the others wait
        for this one in the step's collective: the run would hang until both
        timed out. Ended now, `fitspeed run` sees the status at once and stops
        the others. A process that ends well goes through the barrier, to wait
        for its peers. (A `raise SystemExit(N)` of the script's own is not seen.)
        """
        if self.failing:
            sys.stdout.flush()
            sys.stderr.flush()
            self._real_os_exit(self.failing)

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
        if self.action != Action.TRIAL:
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
            if hook.action != Action.TRIAL:
                hook._applied(model)
                return hook._run_fit(real_fit, model, args, kwargs)
            if hook.fits != hook.fit_index or hook.done:
                return real_fit(model, *args, **kwargs)
            hook.done = True
            hook._finish(driver.run(hook.spec, lambda: hook._subject(real_fit, model, args, kwargs),
                                    script=hook._script_info()))
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
        dataset gets the knobs `Data.prepare` applies to it, a PyDataset its
        worker settings; a knob that does not apply to what fit() was given is
        left out, said once in one line.
        """
        given = dict(inspect.signature(real_fit).bind(model, *args, **kwargs).arguments)
        given.pop(next(iter(inspect.signature(real_fit).parameters)), None)  # the model itself
        from fitspeed.trial import batch_callbacks

        self._say(batch_callbacks.rhythm_warning(batch_callbacks.named(given.get("callbacks")),
                                                 int(getattr(model, "steps_per_execution", 1) or 1)))
        changed = sorted(self.config.changed().keys() & set(INPUT_KNOBS))
        processes = self.placement is not None and self.placement.processes > 1
        if not changed and not processes:
            return real_fit(model, *args, **kwargs)
        if not changed:
            return real_fit(model, **self._sharded(given))
        from fitspeed.trial.data import pipeline

        from fitspeed.trial.data.kinds import as_given

        x, autotune = given.get("x"), True
        data = as_given(given)
        for knob in changed:
            why = data.why_not(knob, self.config.backend) if data else (
                f"{knob} applies to numpy arrays, a tf.data.Dataset or a keras.utils.PyDataset; fit() was given "
                f"{type(x).__name__}")
            if why:
                self._say(f"{knob}={getattr(self.config, knob)} is not applied: {why}.")
        if data is not None and data.in_memory:
            autotune = bool(self.config.data_autotune)
        elif data is not None:
            try:
                prepared = data.prepare(data.applicable(self.config), 0, self.spec.seed)
            except Exception as error:  # noqa: BLE001 (the script's fit() must run as it would without fitspeed)
                self._say(f"the input knobs are not applied to the script's {type(x).__name__}: "
                          f"{type(error).__name__}: {error}")
            else:
                for note in prepared.notes:
                    self._say(note + ".")
                given["x"] = prepared.given_x()
        with pipeline.array_autotune(autotune):
            return real_fit(model, **(self._sharded(given) if processes else given))

    def _sharded(self, given: dict[str, Any]) -> dict[str, Any]:
        """`fitspeed run --processes N`: fit()'s arguments with each tf.data.Dataset (x, validation_data) sharded
        by process (`shard_batches`), and NumPy arrays too (`shard_arrays`).

        Each process runs the whole script and builds the whole dataset: sharded,
        the script's batch is the global batch, and each process feeds its share
        of it. The process's distribution keeps `auto_shard_dataset=False`
        (`distribute._jax_processes`), so fit() never shards again. Data that
        cannot be sharded (a dataset not batched, a batch not divisible by N)
        goes in whole, said once.
        """
        import jax

        from fitspeed.trial.data.kinds import as_given

        out = dict(given)
        data = as_given(given)
        if data is not None and data.in_memory:
            try:
                out = shard_arrays(given, jax.process_count(), jax.process_index())
            except ValueError as error:
                self._say(f"fit()'s arrays are not sharded by process, so each process trains on all of them: {error}")
        tf = sys.modules.get("tensorflow")
        if tf is None:  # no tf.data without TensorFlow
            return out
        for name in ("x", "validation_data"):
            value = given.get(name)
            if isinstance(value, tf.data.Dataset):
                try:
                    out[name] = shard_batches(value, jax.process_count(), jax.process_index())
                except ValueError as error:
                    self._say(f"fit()'s {name} is not sharded by process, so each process trains on all of it: {error}")
        return out

    def _say(self, line: str | None) -> None:
        """One line on the script's stderr, each line once per process."""
        if line and line not in self.said:
            self.said.add(line)
            sys.stderr.write(f"fitspeed: {line}\n")

    # -- the trial --------------------------------------------------------------

    def _subject(self, real_fit: Any, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> driver.Subject:
        """The script's variant of a trial's subject: its model, rewritten, and what its chosen fit() was given."""
        from fitspeed.machine import environment
        from fitspeed.trial import batch_callbacks
        from fitspeed.trial.data.kinds import entering
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
        rewrites = _rewrites(outputs, rewritten, model) if outputs or rewritten else None
        if "batch_size" in config.changed():
            raise UserError(
                f"Expected knobs that apply to a training script. Received: batch_size={config.batch_size}, but a "
                "script's batch size is its own (it changes the recipe). Drop --set batch_size=... and pass the "
                "size through the script's own arguments."
            )
        data = entering(bound.get("x"), bound.get("y"), float(bound.get("validation_split") or 0.0),
                        sample_weight=bound.get("sample_weight"), shuffle=bound.get("shuffle", True),
                        validation_data=bound.get("validation_data"))
        batch = data.batch_size or int(bound.get("batch_size") or 32)
        # the script's own epoch: the tuner tries no steps_per_execution beyond it (`fitspeed.search.script_caps`)
        own_epoch = int(bound["steps_per_epoch"]) if bound.get("steps_per_epoch") else data.epoch_steps(batch)
        data = data.with_knobs(config, batch, spec.seed)
        kept, dropped = _callbacks(bound.get("callbacks"))
        n = int(getattr(model, "steps_per_execution", 1) or 1)
        build_s = time.perf_counter() - started
        notes = [f"not run during the trial: the script's {', '.join(dropped)}"] if dropped else []
        notes.extend(data.notes)
        if self.placement is not None and self.placement.used > 1:
            notes.append(f"the script's batch of {batch} is the global batch, {batch / self.placement.used:g} per device "
                         f"on {self.placement.used} devices")
        if self.placement is not None and self.placement.note():
            notes.append(self.placement.note())
        if bound.get("validation_data") is not None or bound.get("validation_split"):
            notes.append("the script's validation is not run during the trial")
        metrics: driver.ScriptFigures = {
            "steps_per_execution_resolved": n, "dtype_policy": _policy_name(), "fit_call": self.fits,
            "epoch_steps": own_epoch, "batch_callbacks": batch_callbacks.named(bound.get("callbacks")),
            # the epochs the script's fit() runs, as Keras counts them: what one run of it trains (`search.cost`)
            "epochs": max(1, int(bound.get("epochs", 1) or 1) - int(bound.get("initial_epoch", 0) or 0))}
        return driver.Subject(model, data, batch, env, build_s, n, real_fit=real_fit, callbacks=kept,
                              fit_kwargs={"verbose": bound.get("verbose", "auto"),
                                          "class_weight": bound.get("class_weight")},
                              notes=notes, fields=_sections(self._script_info(), rewrites), metrics=metrics,
                              # the guard's runs judge on the script's own held-out arrays where it has them
                              end=self._finish, validates=getattr(data, "x_val", None) is not None)

    # -- the end ----------------------------------------------------------------

    def _script_info(self) -> driver.ScriptInfo:
        main = sys.modules.get("__main__")
        path = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv and sys.argv[0] else None)
        info: driver.ScriptInfo = {"path": path, "argv": list(sys.argv[1:]),
                                   "command": (self.spec.script or {}).get("command")}
        try:
            info["sha256"] = hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
        except OSError:
            info["sha256"] = None
        return info

    def _failed(self, reason: str, user_error: bool, **fields: Any) -> TrialRecord:
        return new_record(self.spec, Status.FAILED, reason=reason, user_error=user_error, script=self._script_info(),
                          **fields)

    def _stopped_early(self) -> None:
        """At exit (or os._exit) before the chosen fit(): say what stopped the script."""
        if self.done or self.action != Action.TRIAL:
            return
        self.done = True
        if self.record_path is not None and self.record_path.exists():
            return  # an earlier python of the same command already said what happened
        name = Path(str(self._script_info()["path"] or "the script")).name
        text = self.failure_text
        reason = stop_reason(name, self.failure, text, self.exit_call, fits=self.fits, fit_index=self.fit_index,
                             devices=self.config.devices)
        self._write(self._failed(reason, user_error=True, traceback_tail=text[-4000:] or None))

    def _write(self, record: TrialRecord) -> None:
        if self.record_path is not None:
            temp = self.record_path.with_name(self.record_path.name + ".tmp")
            temp.write_text(to_json(record.to_dict()))
            os.replace(temp, self.record_path)

    def _finish(self, record: TrialRecord) -> None:
        """Write the record and end the process now: the rest of the script does not run."""
        self.done = True
        self._write(record)
        remove_generated_sources(self._sources_before)
        sys.stdout.flush()
        sys.stderr.flush()
        self._real_os_exit(0)


def exit_status(code: Any) -> int:
    """The status Python exits with after `sys.exit(code)`.

    >>> exit_status(None), exit_status(3), exit_status("no data"), exit_status(True)
    (0, 3, 1, 1)
    """
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code) & 0xFF
    return 1


def shard_batches(dataset: Any, count: int, index: int) -> Any:
    """Process `index`'s share of each batch of `dataset`, of `count` processes: rows index, index + count, ...

    Keras's own sharding (`DataParallel.distribute_dataset` with
    `auto_shard_dataset=True`) rebatches to batch / N and gives each process
    every Nth of those batches: where the last batch is partial (a dataset of
    70 rows in batches of 32: 16, 16, 16, 16, 6) the processes get different
    counts (3 and 2), and the one with more waits in a collective for the
    others until XLA's timeout. Here every process gets its share of every
    batch, so each steps as often as the dataset has batches (its cardinality
    kept); the last, partial batch is filled up from its own first rows where
    its size is not divisible by `count` (2 rows over 4 processes: 1 each, each
    row twice), never empty, never uneven.

    The batch is tf.data's, as Keras reads it (`compute_batch_size`: the
    first dimension of each element, which fit() takes as the batch). Raises
    ValueError, in words, for a dataset whose batch is unknown (batched out of
    tf.data's sight, as by a generator), not divisible by `count`, or whose
    elements are not dense tensors.
    """
    import tensorflow as tf
    from tensorflow.python.data.experimental.ops import distribute as tf_data_distribute  # as Keras reads it

    if not all(isinstance(spec, tf.TensorSpec) and spec.shape.rank for spec in tf.nest.flatten(dataset.element_spec)):
        raise ValueError("its elements are not all dense tensors with a batch dimension.")
    batch = int(tf_data_distribute.compute_batch_size(dataset).numpy())
    if batch < 0:
        raise ValueError("its batch size is unknown; batch it with .batch(N) to shard it.")
    if batch % count:
        raise ValueError(f"its batch of {batch} is not divisible by the {count} processes.")

    def share(tensor: Any) -> Any:
        rows = tf.shape(tensor)[0]
        return tf.gather(tensor, (index + count * tf.range((rows + count - 1) // count)) % rows)

    if isinstance(dataset.element_spec, tuple):
        return dataset.map(lambda *element: tuple(tf.nest.map_structure(share, element)))
    return dataset.map(lambda element: tf.nest.map_structure(share, element))


def shard_arrays(given: dict[str, Any], count: int, index: int) -> dict[str, Any]:
    """fit()'s arguments (bound by name) with its arrays cut to process `index`'s share, of `count` processes.

    As `shard_batches` does for a dataset, the script's batch stays the global
    batch: each process gets rows index, index + count, ... of x, y and
    sample_weight, and `batch_size` / count of them a step. Every share has as
    many rows (a short one is filled up from the arrays' first rows), so every
    process steps as often. A `validation_split` is cut first, where Keras cuts
    it, and goes in whole as `validation_data`: every process judges the same
    held-out rows. Raises ValueError, in words, for a batch not divisible by
    `count`.

    >>> import numpy as np
    >>> x, y = np.arange(10).reshape(5, 2), np.arange(5)
    >>> out = shard_arrays({"x": x, "y": y, "batch_size": 4, "validation_split": 0.2}, 2, 1)
    >>> out["y"].tolist(), out["batch_size"], out["validation_data"][1].tolist(), out["validation_split"]
    ([1, 3], 2, [4], 0.0)
    >>> shard_arrays({"x": x, "y": y}, 2, 0)["y"].tolist()  # rows 0, 2, 4 of five: three each, row 0 twice
    [0, 2, 4]
    >>> shard_arrays({"x": x, "y": y}, 2, 1)["y"].tolist()
    [1, 3, 0]
    """
    import numpy as np

    from fitspeed.trial import keras_private
    from fitspeed.trial.data.kinds import ArrayData

    batch = given.get("batch_size") or 32  # Keras's own default for arrays
    if batch % count:
        raise ValueError(f"its batch_size of {batch} is not divisible by the {count} processes.")
    out = dict(given)
    x, y, weights = given.get("x"), given.get("y"), given.get("sample_weight")
    if given.get("validation_split") and given.get("validation_data") is None:
        (x, y, weights), held = keras_private.train_validation_split()((x, y, weights),
                                                                       validation_split=given["validation_split"])
        out["validation_data"] = held if held[2] is not None else held[:2]
        out["validation_split"] = 0.0
    arrays = ArrayData(x=x, y=y, sample_weight=weights)
    rows = arrays.samples
    x, y, weights = arrays.take((index + count * np.arange(-(-rows // count))) % rows)
    out.update(x=x, y=y, sample_weight=weights, batch_size=batch // count)
    return out


def _run_seed() -> int:
    """A fresh seed for a real run, the same in every process of a multi-process run (process 0's, broadcast):
    each process builds its own copy of the model, and Keras places it as one, so every copy must start from the
    same weights (and a shuffle of the same data must be the same order, for a shard of it to be a share)."""
    from fitspeed.trial import distribute

    return int(distribute.agree(float(int.from_bytes(os.urandom(4), "little"))))


AUTOGRAPH_PREFIX = "__autograph_generated_file"  # tensorflow.python.autograph.pyct.loader's temporary modules


def generated_sources() -> frozenset[str]:
    """The names of the modules autograph has loaded in this process from the converted source it wrote."""
    return frozenset(name for name in list(sys.modules) if name.startswith(AUTOGRAPH_PREFIX))


def remove_generated_sources(kept: frozenset[str]) -> None:
    """Remove the converted source of every function autograph converted in this process, but `kept`'s.

    TensorFlow writes the source of each function it converts (a tf.data
    `map` function, a `tf.function` with Python control flow) to the
    temporary folder as `__autograph_generated_file*.py`, loads it as a
    module of that name, and removes the file at exit through `atexit`. A
    trial ends with `os._exit` (the rest of the script must not run), so
    those removals never ran, and every trial of a script with a `map` left
    its files in the user's TMPDIR. Only a module of that name whose file
    has that name is touched.
    """
    for name in sorted(generated_sources() - kept):
        path = getattr(sys.modules.get(name), "__file__", None)
        if not path or not os.path.basename(path).startswith(AUTOGRAPH_PREFIX) or not path.endswith(".py"):
            continue
        try:
            os.remove(path)
        except OSError:  # gone already, or not ours to remove: the trial's record is written either way
            pass


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


def _sections(script: driver.ScriptInfo, rewrites: RewriteRecord | None) -> driver.Sections:
    """A script trial's record sections: the script, then what was changed in its model, if anything."""
    sections: driver.Sections = {"script": script}
    if rewrites is not None:
        sections["rewrite"] = rewrites
    return sections


def _rewrites(outputs: Any, layout: Any, model: Any) -> RewriteRecord:
    """One record of what a trial changed in the script's model: float32 outputs (in place), then the layout."""
    from fitspeed.trial.transform import rewrite

    parts = [part.to_dict() for part in (outputs, layout) if part is not None]
    return {"changes": [c for part in parts for c in part["changes"]],
            "checks": [c for part in parts for c in part["checks"]],
            "params": parts[-1]["params"], "output_dtype": rewrite.output_dtype(model)}
