"""The Keras backends, one class each: what differs between TensorFlow, JAX and PyTorch.

| what                            | tensorflow                        | jax                             | torch                  |
|---------------------------------|-----------------------------------|---------------------------------|------------------------|
| knobs it cannot turn (`cannot`) | remat                             | onednn, intra_op_threads,       | onednn, devices,       |
|                                 |                                   | inter_op_threads                | steps_per_execution    |
| onednn (TF_ENABLE_ONEDNN_OPTS)  | read at import                    | never read                      | never read             |
| its own knobs, measured on top  | steps_per_execution, jit_compile, | steps_per_execution (jit_compile| jit_compile           |
| of it when tune tries it as     | intra_op_threads, inter_op_threads| is its default; threads: none it| (torch.compile),       |
| another backend (`own_knobs`)   |                                   | honours)                        | intra/inter_op_threads |
| jit_compile="auto" resolves to  | XLA on a GPU only                 | XLA                             | no XLA                 |
| jit_compile=True is             | XLA (tf.function jit_compile)     | XLA (jax.jit, as auto)          | torch.compile          |
| data parallel (`devices`)       | tf.distribute.MirroredStrategy    | keras.distribution.DataParallel | none in Keras          |
| a CPU split into N devices      | after import (tf.config)          | before import (XLA_FLAGS)       | -                      |
| numpy arrays reach fit() as     | a tf.data pipeline Keras builds   | plain batches                   | plain batches          |
| FLOPs counted (`model-check`)   | from the traced train graph       | no                              | no                     |

A backend is named by its KERAS_BACKEND value; `backend_of(name)` is the one
place a name becomes a backend. The classes here are pure knowledge and the
lines best.json's snippet gives for them; what a backend does in a trial
child (threads, determinism, devices, its profiler) is
`fitspeed.machine.frameworks`, one subclass of each of these.

This module is imported by the parent process: it imports no framework.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from fitspeed.core.errors import KnobError

NAMES = ("tensorflow", "jax", "torch")


class Backend:
    """One Keras backend: its name, what it cannot do and why, and how best.json speaks of it."""

    name: ClassVar[str]
    title: ClassVar[str]  # as its makers write it
    extra: ClassVar[str]  # the pip extra that installs it: pip install 'fitspeed[extra]'
    reads_onednn: ClassVar[bool] = False  # TF_ENABLE_ONEDNN_OPTS means something to it
    feeds_arrays_through_tf_data: ClassVar[bool] = False  # fit(x, y) on numpy arrays builds a tf.data pipeline
    counts_flops: ClassVar[bool] = False  # model-check counts FLOPs in its traced train graph
    data_parallel: ClassVar[str | None] = None  # the API that spreads training over `devices`
    splits_cpu_before_import: ClassVar[bool] = False  # `devices` on a CPU: XLA_FLAGS, read at import
    import_line: ClassVar[str | None] = None  # how the snippet imports the module its thread settings live in
    # the calls that size its thread pools (intra-op, inter-op), or None where it has none that it honours
    thread_calls: ClassVar[tuple[str, str] | None] = None
    cannot_turn: ClassVar[Mapping[str, str]] = {}  # knob -> why no value but the default runs here
    # The knobs measured on top of this backend when the search tries it as another backend (its own knobs);
    # each is tried there, or skipped with `cannot` or `default_here` saying why.
    own_knobs: ClassVar[tuple[str, ...]] = ("steps_per_execution", "jit_compile", "intra_op_threads",
                                            "inter_op_threads")
    default_here: ClassVar[Mapping[str, str]] = {}  # knob -> why its value to try is this backend's default already

    def is_installed(self) -> bool:
        """Whether its framework's package is installed here; found, never imported."""
        import importlib.util

        return importlib.util.find_spec(self.name) is not None

    def cannot(self, knob: str) -> str | None:
        """Why this backend runs `knob` at its default only, or None when it can turn it.

        >>> backend_of("torch").cannot("steps_per_execution")
        'the PyTorch backend of Keras runs one step per execution only'
        >>> backend_of("tensorflow").cannot("steps_per_execution") is None
        True
        """
        return self.cannot_turn.get(knob)

    def why_not_on_top(self, knob: str) -> str | None:
        """Why `knob` is not measured on top of this backend, or None when it is (one of `own_knobs`).

        >>> backend_of("jax").why_not_on_top("jit_compile")
        "jit_compile=auto is XLA already on JAX (Keras's default there); false would run each step eagerly"
        >>> backend_of("torch").why_not_on_top("jit_compile") is None
        True
        """
        return self.cannot(knob) or self.default_here.get(knob)

    def auto_jit_compile(self, has_gpu: bool) -> bool:
        """What Keras resolves jit_compile="auto" to (Trainer._resolve_auto_jit_compile)."""
        return True

    def exports(self, onednn: bool | str) -> dict[str, str]:
        """Environment variables to set before the backend is imported."""
        return {}

    def determinism_lines(self) -> list[str]:
        """The snippet's lines for deterministic ops, after keras.utils.set_random_seed."""
        return []

    def thread_lines(self, intra: int, inter: int) -> list[str]:
        """The snippet's lines for the thread pools (0 keeps the backend's default).

        >>> backend_of("tensorflow").thread_lines(2, 0)
        ['tf.config.threading.set_intra_op_parallelism_threads(2)']
        >>> backend_of("torch").thread_lines(0, 1), backend_of("jax").thread_lines(2, 1)
        (['torch.set_num_interop_threads(1)'], [])
        """
        if self.thread_calls is None:
            return []
        return [f"{call}({count})" for call, count in zip(self.thread_calls, (intra, inter)) if count]

    def devices_lines(self, devices: int) -> tuple[list[str], list[str]]:
        """The snippet's lines for data parallel over `devices`: (process-wide ones, around the model's build).

        Lines that need the backend's module import it first; the snippet keeps
        the first import of each (`core.best_json`).
        """
        return [], []

    def __repr__(self) -> str:
        return f"backend_of({self.name!r})"


class TensorFlow(Backend):
    name = "tensorflow"
    title = "TensorFlow"
    extra = ""
    reads_onednn = True
    feeds_arrays_through_tf_data = True
    counts_flops = True
    data_parallel = "tf.distribute.MirroredStrategy"
    import_line = "import tensorflow as tf"
    # tf.config.threading, before TensorFlow runs any op
    thread_calls = ("tf.config.threading.set_intra_op_parallelism_threads",
                    "tf.config.threading.set_inter_op_parallelism_threads")
    cannot_turn = {"remat": ("Keras 3.15's RematScope wraps each layer's call in tf.recompute_grad, which takes no "
                             "keyword arguments (training=) outside eager execution: the compiled train step fails")}

    def auto_jit_compile(self, has_gpu: bool) -> bool:
        return has_gpu

    def exports(self, onednn: bool | str) -> dict[str, str]:
        """TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, at import.

        >>> backend_of("tensorflow").exports(True), backend_of("tensorflow").exports("keep")
        ({'TF_ENABLE_ONEDNN_OPTS': '1'}, {})
        """
        if onednn == "keep":
            return {}
        return {"TF_ENABLE_ONEDNN_OPTS": "1" if onednn else "0"}

    def determinism_lines(self) -> list[str]:
        return ["import tensorflow as tf", "tf.config.experimental.enable_op_determinism()"]


    def devices_lines(self, devices: int) -> tuple[list[str], list[str]]:
        """The model built and compiled inside a MirroredStrategy's scope.

        >>> print("\\n".join(backend_of("tensorflow").devices_lines(2)[1]))
        <BLANKLINE>
        # Data parallel over 2 devices: build and compile the model inside the strategy's scope.
        # (A host without GPUs: split its CPU first with tf.config.set_logical_device_configuration.)
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy(devices=[f"/gpu:{i}" for i in range(2)])
        with strategy.scope():
            model = build_model()  # your own
            model.compile(...)  # your own
        """
        return [], ["", f"# Data parallel over {devices} devices: build and compile the model inside the strategy's "
                    "scope.",
                    "# (A host without GPUs: split its CPU first with tf.config.set_logical_device_configuration.)",
                    "import tensorflow as tf",
                    f'strategy = tf.distribute.MirroredStrategy(devices=[f"/gpu:{{i}}" for i in range({devices})])',
                    "with strategy.scope():",
                    "    model = build_model()  # your own",
                    "    model.compile(...)  # your own"]


_ONEDNN = "TF_ENABLE_ONEDNN_OPTS is read by TensorFlow alone"
_NO_THREADS = ("JAX has no thread-pool setting that it honours: Keras exposes none, and jax 0.10's CPU runtime "
               "still runs a jitted matmul on several threads under XLA_FLAGS=--xla_cpu_multi_thread_eigen=false")


class Jax(Backend):
    name = "jax"
    title = "JAX"
    extra = "[jax]"
    data_parallel = "keras.distribution.DataParallel"
    splits_cpu_before_import = True
    cannot_turn = {"onednn": _ONEDNN, "intra_op_threads": _NO_THREADS, "inter_op_threads": _NO_THREADS}
    default_here = {"jit_compile": "jit_compile=auto is XLA already on JAX (Keras's default there); false would "
                                   "run each step eagerly"}

    def devices_lines(self, devices: int) -> tuple[list[str], list[str]]:
        return [f"# (A host without accelerators: export XLA_FLAGS=--xla_force_host_platform_device_count={devices} "
                "first.)",
                "keras.distribution.set_distribution(",
                f"    keras.distribution.DataParallel(devices=keras.distribution.list_devices()[:{devices}]))"], []


class Torch(Backend):
    name = "torch"
    title = "PyTorch"
    extra = "[torch]"
    import_line = "import torch"
    thread_calls = ("torch.set_num_threads", "torch.set_num_interop_threads")
    cannot_turn = {
        "onednn": _ONEDNN,
        "steps_per_execution": "the PyTorch backend of Keras runs one step per execution only",  # its trainer raises
        "devices": ("Keras has no data-parallel distribution for the PyTorch backend (tf.distribute is "
                    "TensorFlow's, keras.distribution is JAX's)"),
    }

    def auto_jit_compile(self, has_gpu: bool) -> bool:
        return False



BACKENDS: Mapping[str, Backend] = {cls.name: cls() for cls in (TensorFlow, Jax, Torch)}


def backend_of(name: str) -> Backend:
    """The backend KERAS_BACKEND=`name` selects; a KnobError for any other name.

    >>> backend_of("jax").title, backend_of("torch").auto_jit_compile(has_gpu=True)
    ('JAX', False)
    """
    try:
        return BACKENDS[name]
    except KeyError:
        raise KnobError(
            f"Expected `backend` to be one of {', '.join(NAMES)}. Received: {name!r}. "
            "Use for example --set backend=torch."
        ) from None
