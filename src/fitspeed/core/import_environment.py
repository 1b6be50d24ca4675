"""The environment a trial's backend reads when it is first imported, computed without importing it.

A trial sets these variables before `import keras` (`fitspeed.trial.apply.before_import`),
and the parent computes the same ones to pick a fork server whose keras was
imported under exactly them (`fitspeed.measure.warm_start`): one function, so
the two can never disagree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from fitspeed.core.backends import backend_of
from fitspeed.core.config import TrialConfig
from fitspeed.core.knobs import knob_environment

XLA_HOST_DEVICES = "--xla_force_host_platform_device_count"
DETERMINISTIC_XLA = "--xla_gpu_deterministic_ops=true"


def _with_flag(flags: str, flag: str) -> str:
    return flags if flag in flags.split() else f"{flags} {flag}".strip()


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
    env = dict(environ)
    env["KERAS_BACKEND"] = config.backend
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONHASHSEED"] = str(seed)
    backend = backend_of(config.backend)
    env.update(backend.exports(config.onednn))  # onednn: what best.json exports
    if config.deterministic:
        env["TF_DETERMINISTIC_OPS"] = "1"
        env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        env["XLA_FLAGS"] = _with_flag(env.get("XLA_FLAGS", ""), DETERMINISTIC_XLA)
    if backend.splits_cpu_before_import and config.devices != 1:  # JAX: N host devices, asked before import
        flags = re.sub(rf"{XLA_HOST_DEVICES}=\d+", "", env.get("XLA_FLAGS", "")).strip()
        env["XLA_FLAGS"] = f"{flags} {XLA_HOST_DEVICES}={config.devices}".strip()
    return knob_environment(config, env)  # what the knobs that own their environment need (`Knob.environment`)


def start_environment(config: TrialConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` with what `config` needs before the process starts (`Knob.at_start`: the loader reads it).

    A trial's process, and the command `fitspeed run` starts, are started in it;
    the rest of `import_environment` a trial sets itself, before its import.

    >>> start_environment(TrialConfig(), {"A": "1"})
    {'A': '1'}
    """
    return knob_environment(config, environ, at_start=True)
