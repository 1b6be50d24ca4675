"""What each backend does in a trial child: its devices, its thread pools, determinism, its profiler.

One class per backend, each a subclass of its `fitspeed.core.backends` class,
so one object knows both what a backend cannot do and how it does the rest:

| backend    | accelerators, peak memory  | threads                 | determinism (after import)   | profiler                 |
|------------|----------------------------|-------------------------|------------------------------|--------------------------|
| tensorflow | tf.config,                 | tf.config.threading     | enable_op_determinism        | tf.profiler.experimental |
|            | get_memory_info            |                         |                              |                          |
| jax        | jax.devices(),             | none (`cannot` says why)| the XLA flags set before     | jax.profiler             |
|            | memory_stats               |                         | import suffice               |                          |
| torch      | torch.cuda                 | set_num_threads,        | use_deterministic_algorithms | torch.profiler.profile   |
|            |                            | set_num_interop_threads |                              |                          |

`framework_of(name)` gives the one for a backend's name. Every method here
imports its framework when it is called, and is called only in a trial child
(or in the user's own process through `fitspeed.apply`): importing this
module imports no framework.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from fitspeed.core.backends import Backend, Jax, TensorFlow, Torch, backend_of

Tracer = tuple[Callable[[], None], Callable[[], None]]  # (start, stop)


class Framework(Backend):
    """A backend, with the framework calls fitspeed makes on it."""

    def accelerators(self) -> list[str]:
        """The non-CPU devices the backend sees."""
        raise NotImplementedError

    def peak_device_memory_mb(self) -> float | None:
        """Peak memory the backend allocated on its first accelerator; None without one."""
        raise NotImplementedError

    def set_threads(self, intra: int, inter: int) -> None:
        """Size the thread pools (0 keeps the backend's default); before the backend runs any op."""

    def enable_determinism(self) -> None:
        """Deterministic ops, after import (the environment flags are set before it)."""

    def tracer(self, logdir: Path) -> Tracer:
        """(start, stop) for the backend's profiler, writing under `logdir`."""
        raise NotImplementedError

    def trace_hint(self, logdir: str) -> list[str]:
        """How to open a trace: the command first, then what it needs installed."""
        return [
            f"tensorboard --logdir {logdir}",
            "needs: pip install tensorboard xprof  (xprof is the profile plugin, formerly tensorboard-plugin-profile)",
            f"or: pip install xprof; xprof --logdir={logdir} --port=6006",
        ]


class TensorFlowFramework(TensorFlow, Framework):
    def accelerators(self) -> list[str]:
        import tensorflow as tf

        return [d.name for d in tf.config.list_physical_devices() if d.device_type != "CPU"]

    def peak_device_memory_mb(self) -> float | None:
        import tensorflow as tf

        if not tf.config.list_physical_devices("GPU"):
            return None
        return float(tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20)

    def set_threads(self, intra: int, inter: int) -> None:
        if not (intra or inter):
            return
        import tensorflow as tf

        if intra:
            tf.config.threading.set_intra_op_parallelism_threads(intra)
        if inter:
            tf.config.threading.set_inter_op_parallelism_threads(inter)

    def enable_determinism(self) -> None:
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()

    def tracer(self, logdir: Path) -> Tracer:
        import tensorflow as tf

        return (lambda: tf.profiler.experimental.start(str(logdir))), tf.profiler.experimental.stop


class JaxFramework(Jax, Framework):
    def accelerators(self) -> list[str]:
        import jax

        return [str(d) for d in jax.devices() if d.platform != "cpu"]

    def peak_device_memory_mb(self) -> float | None:
        import jax

        device = jax.devices()[0]
        if device.platform == "cpu":
            return None
        stats = device.memory_stats() or {}
        peak = stats.get("peak_bytes_in_use")
        return peak / 2**20 if peak is not None else None

    def tracer(self, logdir: Path) -> Tracer:
        import jax

        return (lambda: jax.profiler.start_trace(str(logdir))), jax.profiler.stop_trace


class TorchFramework(Torch, Framework):
    def accelerators(self) -> list[str]:
        import torch

        return [f"cuda:{i}" for i in range(torch.cuda.device_count())]

    def peak_device_memory_mb(self) -> float | None:
        import torch

        if not torch.cuda.is_available():
            return None
        return float(torch.cuda.max_memory_allocated() / 2**20)

    def set_threads(self, intra: int, inter: int) -> None:
        if not (intra or inter):
            return
        import torch

        if intra:
            torch.set_num_threads(intra)
        if inter:
            torch.set_num_interop_threads(inter)

    def enable_determinism(self) -> None:
        import torch

        torch.use_deterministic_algorithms(True)

    def tracer(self, logdir: Path) -> Tracer:
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        profiler = torch.profiler.profile(
            activities=activities, on_trace_ready=torch.profiler.tensorboard_trace_handler(str(logdir))
        )
        return profiler.start, profiler.stop

    def trace_hint(self, logdir: str) -> list[str]:
        return [
            f"tensorboard --logdir {logdir}",
            "needs: pip install tensorboard torch-tb-profiler",
            "or: open the .pt.trace.json in https://ui.perfetto.dev or chrome://tracing",
        ]


FRAMEWORKS: Mapping[str, Framework] = {
    cls.name: cls() for cls in (TensorFlowFramework, JaxFramework, TorchFramework)
}


def framework_of(name: str) -> Framework:
    """The framework calls of the backend KERAS_BACKEND=`name` selects (a KnobError for another name).

    >>> framework_of("torch").trace_hint("prof/run")[1]
    'needs: pip install tensorboard torch-tb-profiler'
    """
    return FRAMEWORKS[backend_of(name).name]
