"""What every measured number is stored with: software and hardware.

`host()` is safe in the parent (no frameworks). `collect(backend)` runs in the
trial child and adds the Keras and backend versions, the accelerators and
whether TensorFlow's oneDNN kernels are on.

`cpu_features()` names the CPU flags that decide which precision and which
kernels are fast (`CPU_FEATURES`), so a reader can see why mixed_bfloat16 won
on one machine and lost on another. `onednn_default()` is TensorFlow's own rule
for turning oneDNN on when TF_ENABLE_ONEDNN_OPTS is unset; `onednn_enabled()`
asks TensorFlow what it did.
"""

from __future__ import annotations

import os
import platform
import socket
from importlib import metadata
from typing import NotRequired, TypedDict

from fitspeed.machine.frameworks import framework_of


class Gpu(TypedDict):
    """An NVIDIA GPU as NVML names it (`nvidia_gpus`)."""

    index: int
    name: str
    memory_mb: int | None


class Devices(TypedDict):
    """Where a trial's training ran (`fitspeed.trial.distribute.Placement`, as the record holds it)."""

    asked: int
    used: int
    kind: str
    available: int | None
    strategy: str | None
    processes: NotRequired[int]  # where several processes trained together (the `processes` knob)
    process: NotRequired[int]  # this record's process among them


class Environment(TypedDict, total=False):
    """A record's `environment`: `host()`'s keys always, `collect()`'s from inside a trial child, then `devices`.

    Written to the record as it is; the parent reads it back as JSON (`TrialRecord.environment`).
    """

    backend: str | None
    versions: dict[str, str | None]
    fitspeed: str | None
    python: str
    platform: str
    hostname: str
    cpu: str
    cpu_count: int | None
    cpu_features: list[str]
    gpus: list[Gpu]  # from here on, `collect()`'s
    driver: str | None
    accelerators: list[str]
    onednn: bool | None  # TensorFlow's oneDNN kernels: on, off, or None where it cannot tell
    devices: Devices  # the trial's placement


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# CPU flags (as /proc/cpuinfo spells them) that decide which precisions and kernels are fast
CPU_FEATURES = (
    "avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16",
    "amx_tile", "amx_bf16", "amx_fp16", "amx_int8", "asimd", "sve", "bf16",
)

# TensorFlow turns oneDNN on by default on x86 only with one of these
# (tensorflow/core/util/port.cc, DefaultOneDnnPolicy: AVX512_VNNI, AVX512_BF16, AVX_VNNI, AMX_TILE,
# AMX_INT8 or AMX_BF16 through port::TestCPUFeature; TF_ENABLE_ONEDNN_OPTS overrides it)
_ONEDNN_BY_DEFAULT = {"avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"}


def cpu_flags(text: str | None = None) -> frozenset[str]:
    """Every flag of the first CPU in /proc/cpuinfo (`flags` on x86, `Features` on ARM); empty if unreadable.

    >>> sorted(cpu_flags("processor : 0\\nflags : fpu avx2 avx512f\\n"))
    ['avx2', 'avx512f', 'fpu']
    """
    if text is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
                text = cpuinfo.read()
        except OSError:
            return frozenset()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_features(flags: frozenset[str] | None = None) -> list[str]:
    """The flags of `CPU_FEATURES` this CPU has, in that order.

    >>> cpu_features(frozenset({"fpu", "avx2", "fma", "amx_bf16"}))
    ['avx2', 'fma', 'amx_bf16']
    """
    flags = cpu_flags() if flags is None else flags
    return [name for name in CPU_FEATURES if name in flags]


def onednn_default(flags: frozenset[str] | None = None, machine: str | None = None) -> bool | None:
    """Whether TensorFlow turns oneDNN on here when TF_ENABLE_ONEDNN_OPTS is unset; None where unknown.

    >>> onednn_default(frozenset({"avx2", "fma"}), "x86_64")
    False
    >>> onednn_default(frozenset({"avx2", "avx512_vnni"}), "x86_64")
    True
    """
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64"):
        return None  # aarch64 builds follow rules of their own
    flags = cpu_flags() if flags is None else flags
    if not flags:
        return None
    return bool(flags & _ONEDNN_BY_DEFAULT)


def onednn_exported(environ: dict[str, str] | None = None) -> bool | None:
    """TF_ENABLE_ONEDNN_OPTS as this process exports it to its trials; None when unset or unreadable.

    TensorFlow reads it with `ReadBoolFromEnvVar`: "1"/"true" or "0"/"false",
    case aside; anything else it ignores, and so do we.

    >>> onednn_exported({"TF_ENABLE_ONEDNN_OPTS": "0"}), onednn_exported({"TF_ENABLE_ONEDNN_OPTS": "True"})
    (False, True)
    >>> onednn_exported({}) is None
    True
    """
    raw = (os.environ if environ is None else environ).get("TF_ENABLE_ONEDNN_OPTS", "").strip().lower()
    return {"1": True, "true": True, "0": False, "false": False}.get(raw)


def onednn_enabled() -> bool | None:
    """TensorFlow's own answer (`IsMklEnabled`) in this process, or None where it cannot tell.

    Imports TensorFlow: call it in a trial child only.
    """
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:
        return None
    try:
        return bool(_pywrap_util_port.IsMklEnabled())
    except Exception:  # a build without the function: say we do not know
        return None


def package_versions() -> dict[str, str | None]:
    """Installed versions, read from package metadata without importing anything."""
    return {
        "keras": _version("keras"),
        "tensorflow": _version("tensorflow") or _version("tensorflow-cpu"),
        "jax": _version("jax"),
        "torch": _version("torch"),
        "numpy": _version("numpy"),
    }


def host(backend: str | None = None) -> Environment:
    """What the parent can tell without importing a framework."""
    return {
        "backend": backend,
        "versions": package_versions(),
        "fitspeed": _version("fitspeed"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_features": cpu_features(),
    }


def nvidia_gpus() -> tuple[list[Gpu], str | None]:
    """NVIDIA GPUs and the driver version through NVML, or ([], None) without one."""
    from fitspeed.machine.nvml import Nvml

    try:
        source = Nvml()
    except Exception:  # no nvidia-ml-py, no driver, no library
        return [], None
    try:
        gpus: list[Gpu] = [{"index": reading.index, "name": name, "memory_mb": None if reading.memory_total_mb is None
                            else round(reading.memory_total_mb)} for name, reading in zip(source.names, source.read())]
        return gpus, source.driver_version()
    finally:
        source.close()


def collect(backend: str) -> Environment:
    """The full environment, from inside a trial child."""
    import keras

    gpus, driver = nvidia_gpus()
    env = host(backend)
    env["versions"]["keras"] = keras.__version__
    env["gpus"] = gpus
    env["driver"] = driver
    env["accelerators"] = accelerators(backend)
    env["onednn"] = onednn_enabled() if framework_of(backend).reads_onednn else None
    return env


def accelerators(backend: str) -> list[str]:
    """The non-CPU devices the backend sees."""
    return framework_of(backend).accelerators()


def peak_device_memory_mb(backend: str) -> float | None:
    """Peak memory the backend allocated on its first accelerator, if it can tell."""
    try:
        return framework_of(backend).peak_device_memory_mb()
    except Exception:
        return None
