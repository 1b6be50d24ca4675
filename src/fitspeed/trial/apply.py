"""The one place each knob is applied.

Who owns what, in the order a trial child runs them:

| stage        | function               | knobs                                              |
|--------------|------------------------|----------------------------------------------------|
| environment  | `before_import`, by    | in the order of `ENVIRONMENT_STEPS`: backend       |
|              | `import_environment`:  | (KERAS_BACKEND), the trial's own (log level, hash  |
|              | each knob by its       | seed: no knob's), onednn (TF_ENABLE_ONEDNN_OPTS;   |
|              | `Knob.environment`     | keep sets nothing), deterministic (its flags),     |
|              |                        | devices (JAX's host devices in XLA_FLAGS), then    |
|              |                        | xla_auto_clustering (TF_XLA_FLAGS), allocator      |
| process      | `after_import`: each   | in the order of `STEPS`: intra_op_threads,         |
|              | knob of stage "process"| inter_op_threads (`fitspeed.machine.frameworks`),  |
|              | by its `Knob.apply`,   | devices (`fitspeed.trial.distribute`: the          |
|              | through `TrialProcess` | process's strategy or distribution), precision     |
|              |                        | (global dtype policy), the seeds (no knob's:       |
|              |                        | `TrialProcess.seed`), deterministic (op            |
|              |                        | determinism)                                       |
| model        | `fitspeed.trial.transform.rewrite.for_trial` | data_format (the built model       |
|              |                        | rewritten and checked), precision (output layers   |
|              |                        | kept float32): one rewrite of the whole built      |
|              |                        | model, checked at once, so it stays there          |
| model        | `model_scope`: each    | remat (the model built inside keras.RematScope),   |
|              | knob's scope, by its   | the rewrite above inside it too; the trial checks  |
|              | `Knob.build_scope`     | it took (`fitspeed.trial.remat.check`)             |
| compile      | `compile_kwargs`       | steps_per_execution, jit_compile, auto_scale_loss  |
| data         | `fitspeed.trial.data.sources`    | batch_size (× devices: the global batch) |
| data         | `fitspeed.trial.data.pipeline`    | prefetch, map_parallelism, cache, vectorize,       |
|              |                        | shuffle_buffer, interleave, data_deterministic,    |
|              |                        | data_autotune (tf.data); workers,                  |
|              |                        | use_multiprocessing, max_queue_size (PyDataset):   |
|              |                        | one ordered composition (interleave, map, cache,   |
|              |                        | shuffle, repeat, batch, prefetch, options), so the |
|              |                        | pipeline module owns it, not each knob             |

Process-wide settings stay for the life of the process, which is why every
trial runs in a fresh one. `before_import` must run before keras is imported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fitspeed.core import best_json
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.import_environment import import_environment
from fitspeed.core.knobs import KNOBS
from fitspeed.core.knobs.base import STEPS, Process
from fitspeed.machine.frameworks import Framework, framework_of
from fitspeed.trial import distribute, joining, seeding


def apply(config: TrialConfig | Mapping[str, Any] | str | Path, seed: int = 0) -> TrialConfig:
    """Apply a configuration's process-wide knobs in this process, from Python.

    `config` is a TrialConfig, a mapping of knob values, or the path of a
    `best.json` written by `fitspeed tune`. Call it before building the model,
    and best before importing keras (the backend and determinism flags are
    read at import). Compile arguments (steps_per_execution, jit_compile) are
    yours to pass to `model.compile()`; `compile_kwargs(config)` gives them.
    data_format (and float32 outputs under mixed precision) rewrite the model
    itself: `rewrite_model(model, config)`.
    """
    config = _as_config(config)
    _check_onednn(config)
    for knob in KNOBS:  # a knob read when the process starts cannot take effect from here (`Knob.too_late`)
        why = knob.too_late(getattr(config, knob.name), os.environ)
        if why:
            raise UserError(why)
    if "keras" in sys.modules:
        import keras

        if keras.backend.backend() != config.backend:
            raise UserError(
                f"keras is already imported with the {keras.backend.backend()} backend, but the "
                f"configuration wants {config.backend}. Call fitspeed.apply() before importing keras."
            )
    else:
        before_import(config, seed)
    try:
        after_import(config, seed)
    except RuntimeError as error:
        raise UserError(
            f"Could not apply the thread or device settings: {error}. Call fitspeed.apply() before running "
            "any TensorFlow operation."
        ) from None
    return config


def _as_config(config: TrialConfig | Mapping[str, Any] | str | Path) -> TrialConfig:
    """A TrialConfig from itself, a mapping of knob values, or a best.json's path (`best_json.read`)."""
    if isinstance(config, (str, Path)):
        return best_json.read(config)[0]
    if not isinstance(config, TrialConfig):
        config = TrialConfig.from_dict(dict(config))  # type: ignore[arg-type]
    return config


def rewrite_model(model: Any, config: TrialConfig | Mapping[str, Any] | str | Path, seed: int = 0) -> Any:
    """`model` rewritten for the configuration's model knobs, as fitspeed's trials rewrote it.

    data_format=channels_first rebuilds every layer with a data_format in it, maps
    BatchNormalization axes, keeps the Flatten order (the Dense kernels after it
    permuted) and permutes the input once inside the model, so your data stays
    channels_last; under a mixed precision policy the output layers compute in
    float32. The rewritten model's outputs are checked against the original's on a
    probe batch; a model that cannot be rewritten safely raises UserError naming
    the layer. Call it after `apply()`, on the built (and compiled) model; the
    weights are carried over and the compile arguments kept.
    """
    from fitspeed.trial.transform import Refused
    from fitspeed.trial.transform.rewrite import for_trial

    try:
        done = for_trial(model, _as_config(config), seed)
    except Refused as error:
        raise UserError(str(error)) from None
    return model if done is None else done.model


def before_import(config: TrialConfig, seed: int) -> None:
    """Set the environment the backend reads when it is first imported (`core.import_environment`).

    In a process forked from a fork server (`fitspeed.trial.fork_server`),
    keras is imported already, under exactly this environment: the server
    was chosen for it. Anywhere else, keras imported first is an error.
    """
    wanted = import_environment(config, seed, os.environ)
    if "keras" in sys.modules:
        if wanted != dict(os.environ):
            raise RuntimeError("apply.before_import must run before keras is imported")
        return
    os.environ.update(wanted)


def _check_onednn(config: TrialConfig) -> None:
    """TensorFlow reads TF_ENABLE_ONEDNN_OPTS once: refuse a setting that came too late to count."""
    if config.onednn == "keep" or "tensorflow" not in sys.modules:
        return
    from fitspeed.machine.environment import onednn_enabled

    if onednn_enabled() != config.onednn:
        wanted = "1" if config.onednn else "0"
        raise UserError(
            f"TensorFlow is already imported with oneDNN {'off' if config.onednn else 'on'}, but the "
            f"configuration wants onednn={config.onednn}. Export TF_ENABLE_ONEDNN_OPTS={wanted} before "
            "starting Python, or call fitspeed.apply() before importing tensorflow or keras."
        )


class SeededProcess(Process, Protocol):
    """A `Process` that seeds too: the seeds are every trial's, set at their own step of `STEPS`, no knob's."""

    def seed(self) -> None:
        """Seed Python, NumPy, Keras and the backend."""


@dataclass
class TrialProcess:
    """`SeededProcess` in this process: the backend's calls (`framework`), and where `place` put training.

    `fingerprint` is what every process of a multi-process run must agree on (`joining.of_spec`), compared
    once they joined; None compares nothing.
    """

    framework: Framework
    seed_value: int
    placement: distribute.Placement | None = None
    fingerprint: Mapping[str, Any] | None = None

    def join(self, processes: int) -> None:
        joining.join(processes, self.fingerprint)  # each fault of the join a sentence (port, coordinator, trial)

    def set_threads(self, intra: int, inter: int) -> None:
        self.framework.set_threads(intra, inter)

    def place(self, devices: int) -> None:
        self.placement = distribute.place(self.framework, devices)

    def set_dtype_policy(self, policy: str) -> None:
        import keras

        keras.config.set_dtype_policy(policy)

    def enable_determinism(self) -> None:
        self.framework.enable_determinism()

    def seed(self) -> None:
        seeding.set_random_seed(self.seed_value, self.framework.name)  # TensorFlow seeded on import


def process_stage(config: TrialConfig, process: SeededProcess) -> None:
    """Apply every knob of stage "process" (`Knob.apply`), whatever its value, step by step (`STEPS`); seed at the
    seed's step."""
    for step in STEPS:
        if step == "seed":
            process.seed()
        for knob in KNOBS:
            if knob.stage == "process" and knob.step == step:
                knob.apply(getattr(config, knob.name), process)


def after_import(config: TrialConfig, seed: int, fingerprint: Mapping[str, Any] | None = None) -> distribute.Placement:
    """Set the process-wide Keras and backend state: the process stage's knobs and the seeds (`process_stage`).

    Returns where training will run (`fitspeed.trial.distribute.Placement`).
    data_format is no process-wide setting here: a builder that fixes its own
    layout (keras.Input((32, 32, 3)), BatchNormalization(axis=-1)) would build
    another model under it. The built model is rewritten instead. `fingerprint` is what the processes of a
    multi-process run must agree on (`joining.of_spec`): by default the knobs and the seed.
    """
    # keras first, and the backend with it: `apply()` and a script that imported tensorflow alone come without it
    import keras  # noqa: F401

    own = joining.fingerprint(config, seed) if fingerprint is None else fingerprint
    process = TrialProcess(framework_of(config.backend), seed, fingerprint=own)
    process_stage(config, process)
    if process.placement is None:
        raise RuntimeError("the devices knob placed no training: its `apply` must call `Process.place`")
    return process.placement


@contextmanager
def model_scope(config: TrialConfig) -> Iterator[None]:
    """Every knob's scope open at once (`Knob.build_scope`, in the registry's order): the model stage, around the
    model's build and its rewrite; with every knob at its default, no scope at all."""
    with ExitStack() as scopes:
        for knob in KNOBS:
            scopes.enter_context(knob.build_scope(getattr(config, knob.name)))
        yield


def compile_kwargs(config: TrialConfig) -> dict[str, Any]:
    """The `model.compile()` keyword arguments that carry knobs: every knob of the compile stage, by its name.

    >>> compile_kwargs(TrialConfig(steps_per_execution=32))
    {'steps_per_execution': 32, 'jit_compile': 'auto', 'auto_scale_loss': True}
    """
    return {knob.name: getattr(config, knob.name) for knob in KNOBS if knob.stage == "compile"}
