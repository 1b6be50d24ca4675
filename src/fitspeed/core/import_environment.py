"""The environment a trial's backend reads when it is first imported, computed without importing it.

A trial sets these variables before `import keras` (`fitspeed.trial.apply.before_import`),
and the parent computes the same ones to pick a fork server whose keras was
imported under exactly them (`fitspeed.measure.warm_start`): one function, so
the two can never disagree.

Every knob's variables are its own (`Knob.environment`: KERAS_BACKEND, oneDNN's
switch, the determinism flags, JAX's host devices, TF_XLA_FLAGS, LD_PRELOAD),
set by `knob_environment` in the order of `ENVIRONMENT_STEPS`; this module adds
only the trial's own, which are no knob's: TensorFlow's log level (unless set)
and the hash seed, at the step "trial".
"""

from __future__ import annotations

from collections.abc import Mapping

from fitspeed.core.config import TrialConfig
from fitspeed.core.knobs import knob_environment


def import_environment(config: TrialConfig, seed: int, environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` with what `config` needs set before the backend is imported.

    >>> env = import_environment(TrialConfig(backend="jax", devices=4, deterministic=True), 3, {"XLA_FLAGS": "--a"})
    >>> env["KERAS_BACKEND"], env["PYTHONHASHSEED"], env["TF_DETERMINISTIC_OPS"], env["XLA_FLAGS"]
    ('jax', '3', '1', '--a --xla_gpu_deterministic_ops=true --xla_force_host_platform_device_count=4')
    >>> import_environment(TrialConfig(backend="jax", devices=4), 3, env)["XLA_FLAGS"]  # applied twice: the same
    '--a --xla_gpu_deterministic_ops=true --xla_force_host_platform_device_count=4'
    >>> import_environment(TrialConfig(onednn=True), 0, {})
    {'KERAS_BACKEND': 'tensorflow', 'TF_CPP_MIN_LOG_LEVEL': '2', 'PYTHONHASHSEED': '0', 'TF_ENABLE_ONEDNN_OPTS': '1'}
    """
    trial = {"TF_CPP_MIN_LOG_LEVEL": environ.get("TF_CPP_MIN_LOG_LEVEL", "2"), "PYTHONHASHSEED": str(seed)}
    return knob_environment(config, environ, trial=trial)


def start_environment(config: TrialConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` with what `config` needs before the process starts (`Knob.at_start`: the loader reads it).

    A trial's process, and the command `fitspeed run` starts, are started in it;
    the rest of `import_environment` a trial sets itself, before its import.

    >>> start_environment(TrialConfig(), {"A": "1"})
    {'A': '1'}
    """
    return knob_environment(config, environ, at_start=True)
