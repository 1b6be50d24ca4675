"""What every measured number is stored with: software and hardware.

`host()` is safe in the parent (no frameworks). `collect(backend)` runs in the
trial child and adds the Keras and backend versions and the accelerators.
"""

from __future__ import annotations

import os
import platform
import socket
from importlib import metadata
from typing import Any


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


def package_versions() -> dict[str, str | None]:
    """Installed versions, read from package metadata without importing anything."""
    return {
        "keras": _version("keras"),
        "tensorflow": _version("tensorflow") or _version("tensorflow-cpu"),
        "jax": _version("jax"),
        "torch": _version("torch"),
        "numpy": _version("numpy"),
    }


def host(backend: str | None = None) -> dict[str, Any]:
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
    }


def nvidia_gpus() -> tuple[list[dict[str, Any]], str | None]:
    """NVIDIA GPUs and the driver version through NVML, or ([], None) without one."""
    from fitspeed.machine.nvml import Nvml

    try:
        source = Nvml()
    except Exception:  # no nvidia-ml-py, no driver, no library
        return [], None
    try:
        gpus = [{"index": reading.index, "name": name,
                 "memory_mb": None if reading.memory_total_mb is None else round(reading.memory_total_mb)}
                for name, reading in zip(source.names, source.read())]
        return gpus, source.driver_version()
    finally:
        source.close()


def collect(backend: str) -> dict[str, Any]:
    """The full environment, from inside a trial child."""
    import keras

    gpus, driver = nvidia_gpus()
    env = host(backend)
    env["versions"]["keras"] = keras.__version__
    return {
        **env,
        "gpus": gpus,
        "driver": driver,
        "accelerators": accelerators(backend),
    }


def accelerators(backend: str) -> list[str]:
    """The non-CPU devices the backend sees."""
    if backend == "tensorflow":
        import tensorflow as tf

        return [d.name for d in tf.config.list_physical_devices() if d.device_type != "CPU"]
    if backend == "jax":
        import jax

        return [str(d) for d in jax.devices() if d.platform != "cpu"]
    import torch

    return [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def peak_device_memory_mb(backend: str) -> float | None:
    """Peak memory the backend allocated on its first accelerator, if it can tell."""
    try:
        if backend == "tensorflow":
            import tensorflow as tf

            if not tf.config.list_physical_devices("GPU"):
                return None
            return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
        if backend == "jax":
            import jax

            device = jax.devices()[0]
            if device.platform == "cpu":
                return None
            stats = device.memory_stats() or {}
            peak = stats.get("peak_bytes_in_use")
            return peak / 2**20 if peak is not None else None
        import torch

        if not torch.cuda.is_available():
            return None
        return torch.cuda.max_memory_allocated() / 2**20
    except Exception:
        return None
