"""The knobs: every setting fitspeed can turn, with Keras's own names.

A knob knows its valid values, its default, which backends can do it, whether
it is process-wide or belongs to one model, and the one place that applies it
(its `stage`, see `fitspeed.trial.apply`). `fitspeed knobs` prints this table.

The table is `KnobValues`, one typed field per knob with its default and its
description: `KNOBS` is read from those fields, and `TrialConfig` is
`KnobValues` validated, so a knob is declared once. Which backends cannot turn
a knob, and why, is `fitspeed.core.backends`'s.

This module is imported by the parent process, so it never imports keras.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from fitspeed.core.backends import NAMES, backend_of
from fitspeed.core.errors import KnobError

BACKENDS = NAMES

Scope = Literal["process", "model", "data"]
Stage = Literal["environment", "process", "model", "compile", "data"]

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _bool(name: str, raw: object) -> bool:
    """Accept a JSON bool or the usual spellings of one.

    >>> _bool("deterministic", "yes")
    True
    """
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise KnobError(
        f"Expected `{name}` to be true or false. Received: {raw!r}. "
        f"Use --set {name}=true or --set {name}=false."
    )


def _int(name: str, raw: object, minimum: int) -> int:
    if isinstance(raw, bool):
        value = None
    elif isinstance(raw, int):
        value = raw
    else:
        try:
            value = int(str(raw).strip())
        except ValueError:
            value = None
    if value is None or value < minimum:
        raise KnobError(
            f"Expected `{name}` to be an integer >= {minimum}. Received: {raw!r}. "
            f"Use for example --set {name}={max(minimum, 1)}."
        )
    return value


def _choice(name: str, raw: object, choices: tuple[str, ...]) -> str:
    text = str(raw).strip()
    if text not in choices:
        raise KnobError(
            f"Expected `{name}` to be one of {', '.join(choices)}. Received: {raw!r}. "
            f"Use for example --set {name}={choices[-1]}."
        )
    return text


def _steps_per_execution(raw: object) -> int:
    if str(raw).strip().lower() == "auto":
        raise KnobError(
            "Expected `steps_per_execution` to be an integer >= 1. Received: 'auto', "
            "which Keras 3 does not accept (tf-keras did). Use an integer such as "
            "--set steps_per_execution=32."
        )
    return _int("steps_per_execution", raw, 1)


def _jit_compile(raw: object) -> bool | str:
    if str(raw).strip().lower() == "auto":
        return "auto"
    try:
        return _bool("jit_compile", raw)
    except KnobError:
        raise KnobError(
            f"Expected `jit_compile` to be auto, true or false. Received: {raw!r}. "
            "Use for example --set jit_compile=true."
        ) from None


def _prefetch(raw: object) -> int | str:
    """off, a buffer of N batches, or autotune.

    >>> _prefetch("autotune"), _prefetch("off"), _prefetch("4")
    ('autotune', 'off', 4)
    """
    text = str(raw).strip().lower()
    if text in ("off", "0", "false", "none"):
        return "off"
    if text in ("autotune", "-1"):
        return "autotune"
    try:
        return _int("prefetch", raw, 1)
    except KnobError:
        raise KnobError(
            f"Expected `prefetch` to be off, autotune or an integer >= 1. Received: {raw!r}. "
            "Use for example --set prefetch=autotune."
        ) from None


def _parallelism(raw: object) -> int | str:
    """Parallel calls of the per-example map: 1 (sequential), N, or autotune.

    >>> _parallelism("autotune"), _parallelism(2)
    ('autotune', 2)
    """
    if str(raw).strip().lower() in ("autotune", "-1"):
        return "autotune"
    try:
        return _int("map_parallelism", raw, 1)
    except KnobError:
        raise KnobError(
            f"Expected `map_parallelism` to be autotune or an integer >= 1. Received: {raw!r}. "
            "Use for example --set map_parallelism=autotune."
        ) from None


def _keep_or_bool(name: str, raw: object) -> bool | str:
    if str(raw).strip().lower() == "keep":
        return "keep"
    try:
        return _bool(name, raw)
    except KnobError:
        raise KnobError(
            f"Expected `{name}` to be keep, true or false. Received: {raw!r}. "
            f"Use for example --set {name}=true."
        ) from None


@dataclass(frozen=True)
class Knob:
    """One setting fitspeed can turn.

    `parse` turns a CLI string or a JSON value into the knob's value and raises
    `KnobError` on anything else. `unsupported(value, backend)` gives the reason
    a backend cannot do a value, or None; the reasons live with the backends
    (`fitspeed.core.backends`).
    """

    name: str
    description: str
    values: str
    default: Any
    scope: Scope
    stage: Stage
    parse: Callable[[object], Any]
    changes_numerics: bool = False
    # the other knob's value without which this knob's values all do the same (auto_scale_loss: only mixed_float16
    # scales the loss), or None: a search never sets it elsewhere, where it would ride along with no effect
    only_under: tuple[str, Any] | None = None

    def idle_in(self, config: Any) -> bool:
        """Whether every value of this knob trains the same in `config` (a `KnobValues`): `only_under` unmet.

        >>> from fitspeed.core.config import TrialConfig
        >>> scaling = get_knob("auto_scale_loss")
        >>> scaling.idle_in(TrialConfig(precision="mixed_bfloat16")), scaling.idle_in(TrialConfig(
        ...     precision="mixed_float16"))
        (True, False)
        """
        return self.only_under is not None and getattr(config, self.only_under[0]) != self.only_under[1]

    def unsupported(self, value: Any, backend: str) -> str | None:
        """Why `backend` cannot run this knob at `value`, or None; every backend runs the default.

        >>> get_knob("steps_per_execution").unsupported(32, "torch")
        'the PyTorch backend of Keras runs one step per execution only'
        >>> get_knob("steps_per_execution").unsupported(1, "torch") is None
        True
        """
        if value == self.default:
            return None
        return backend_of(backend).cannot(self.name)

    def backends(self) -> tuple[str, ...]:
        """The backends that can do at least one non-default value."""
        return tuple(name for name in BACKENDS if backend_of(name).cannot(self.name) is None)


def knob(default: Any, description: str, values: str, scope: Scope, stage: Stage,
         parse: Callable[[object], Any], changes_numerics: bool = False,
         only_under: tuple[str, Any] | None = None) -> Any:
    """A field of the knob table: its default, and the rest of its `Knob`."""
    return dataclasses.field(default=default, metadata={"knob": {
        "description": description, "values": values, "scope": scope, "stage": stage, "parse": parse,
        "changes_numerics": changes_numerics, "only_under": only_under}})


@dataclass(frozen=True)
class KnobValues:
    """The knob table: one field per knob, with its type, its default (Keras's own) and its `Knob`.

    `fitspeed.core.config.TrialConfig` is this class, validated; `KNOBS` is read
    from its fields, so a knob is declared here once.
    """

    backend: str = knob(
        description="Keras backend that runs the model (KERAS_BACKEND).",
        values="tensorflow, jax, torch",
        default="tensorflow",
        scope="process",
        stage="environment",
        parse=lambda raw: _choice("backend", raw, BACKENDS),
        changes_numerics=True,
    )
    batch_size: int = knob(
        description="Samples per training step; changes the recipe (re-tune the learning rate).",
        values="integer >= 1",
        default=32,
        scope="data",
        stage="data",
        parse=lambda raw: _int("batch_size", raw, 1),
        changes_numerics=True,
    )
    devices: int = knob(
        description="Data parallel over N devices: tf.distribute.MirroredStrategy (TensorFlow) or "
        "keras.distribution.DataParallel (JAX); on a CPU, N logical devices. The global batch is "
        "batch_size × N: re-tune the learning rate.",
        values="integer >= 1",
        default=1,
        scope="process",
        stage="process",
        parse=lambda raw: _int("devices", raw, 1),
        changes_numerics=True,
    )
    steps_per_execution: int = knob(
        description="Batches run per compiled call: compile(steps_per_execution=N).",
        values="integer >= 1",
        default=1,
        scope="model",
        stage="compile",
        parse=_steps_per_execution,
    )
    jit_compile: bool | str = knob(
        description="XLA compilation of the train step: compile(jit_compile=...).",
        values="auto, true, false",
        default="auto",
        scope="model",
        stage="compile",
        parse=_jit_compile,
        changes_numerics=True,
    )
    precision: str = knob(
        description="Global dtype policy: keras.mixed_precision.set_global_policy(...); the model's output layers "
        "are kept float32 (rewritten and checked where they follow the policy).",
        values="float32, mixed_float16, mixed_bfloat16",
        default="float32",
        scope="process",
        stage="process",
        parse=lambda raw: _choice(
            "precision", raw, ("float32", "mixed_float16", "mixed_bfloat16")
        ),
        changes_numerics=True,
    )
    auto_scale_loss: bool = knob(
        description="Loss scaling under mixed_float16: compile(auto_scale_loss=...) wraps the optimizer in a "
        "LossScaleOptimizer (dynamic scale, skipped steps on inf); false trains without it (float16 gradients may "
        "underflow: the guard decides). Under other policies Keras scales nothing: measured only on mixed_float16.",
        values="true, false",
        default=True,
        scope="model",
        stage="compile",
        parse=lambda raw: _bool("auto_scale_loss", raw),
        changes_numerics=True,
        only_under=("precision", "mixed_float16"),
    )
    data_format: str = knob(
        description="Image layout: the model is rewritten (layers' data_format, BatchNormalization axis, Flatten "
        "order, the input permuted inside it) and checked to compute the same; the data stays as it is.",
        values="channels_last, channels_first",
        default="channels_last",
        scope="model",
        stage="model",
        parse=lambda raw: _choice("data_format", raw, ("channels_last", "channels_first")),
        changes_numerics=True,
    )
    remat: str = knob(
        description="Rematerialization: the model built inside keras.RematScope(mode=...), its layers' activations "
        "recomputed in the backward pass (less memory, more compute). Tried by tune --batch-sizes on a size that "
        "ran out of memory, never by the screen.",
        values="off, full",
        default="off",
        scope="model",
        stage="model",
        parse=lambda raw: _choice("remat", raw, ("off", "full")),
    )
    deterministic: bool = knob(
        description="Deterministic ops plus fixed seeds (TF op determinism, XLA or torch flags).",
        values="true, false",
        default=False,
        scope="process",
        stage="environment",
        parse=lambda raw: _bool("deterministic", raw),
        changes_numerics=True,
    )
    onednn: bool | str = knob(
        description="TensorFlow's oneDNN CPU kernels (TF_ENABLE_ONEDNN_OPTS, read at import); keep leaves "
        "TensorFlow's own default (on only for CPUs with AVX512-VNNI, AVX512-BF16 or AMX).",
        values="keep, true, false",
        default="keep",
        scope="process",
        stage="environment",
        parse=lambda raw: _keep_or_bool("onednn", raw),
        changes_numerics=True,
    )
    intra_op_threads: int = knob(
        description="Threads inside one op; 0 keeps the backend's default.",
        values="integer >= 0",
        default=0,
        scope="process",
        stage="process",
        parse=lambda raw: _int("intra_op_threads", raw, 0),
    )
    inter_op_threads: int = knob(
        description="Ops run side by side; 0 keeps the backend's default.",
        values="integer >= 0",
        default=0,
        scope="process",
        stage="process",
        parse=lambda raw: _int("inter_op_threads", raw, 0),
    )
    prefetch: int | str = knob(
        description="tf.data: dataset.prefetch(N or AUTOTUNE) at the end of the pipeline; off adds none.",
        values="off, autotune, integer >= 1",
        default="off",
        scope="data",
        stage="data",
        parse=_prefetch,
    )
    map_parallelism: int | str = knob(
        description="tf.data: num_parallel_calls of the per-example map (decode, augment).",
        values="autotune, integer >= 1",
        default=1,
        scope="data",
        stage="data",
        parse=_parallelism,
    )
    cache: str = knob(
        description="tf.data: dataset.cache() after decoding, in memory or in a file.",
        values="off, memory, file",
        default="off",
        scope="data",
        stage="data",
        parse=lambda raw: _choice("cache", raw, ("off", "memory", "file")),
    )
    vectorize: bool = knob(
        description="tf.data: batch before the augment map, so it runs once per batch (same randomness per example).",
        values="true, false",
        default=False,
        scope="data",
        stage="data",
        parse=lambda raw: _bool("vectorize", raw),
    )
    shuffle_buffer: int = knob(
        description="tf.data: dataset.shuffle(N) before repeat; 0 reads in file order.",
        values="integer >= 0",
        default=0,
        scope="data",
        stage="data",
        parse=lambda raw: _int("shuffle_buffer", raw, 0),
        changes_numerics=True,
    )
    interleave: int = knob(
        description="tf.data: files read in parallel with interleave(cycle_length=N); 1 reads one at a time.",
        values="integer >= 1",
        default=1,
        scope="data",
        stage="data",
        parse=lambda raw: _int("interleave", raw, 1),
    )
    data_deterministic: bool = knob(
        description="tf.data: keep element order in parallel map and interleave (Options.deterministic).",
        values="true, false",
        default=True,
        scope="data",
        stage="data",
        parse=lambda raw: _bool("data_deterministic", raw),
        changes_numerics=True,
    )
    data_autotune: bool = knob(
        description="tf.data: Options.autotune.enabled, also for the pipeline Keras builds from numpy arrays.",
        values="true, false",
        default=True,
        scope="data",
        stage="data",
        parse=lambda raw: _bool("data_autotune", raw),
    )
    workers: int = knob(
        description="PyDataset: workers that call __getitem__ (threads, or processes); 0 keeps the PyDataset's own.",
        values="integer >= 0",
        default=0,
        scope="data",
        stage="data",
        parse=lambda raw: _int("workers", raw, 0),
    )
    use_multiprocessing: bool | str = knob(
        description="PyDataset: workers are processes (true) or threads under the GIL (false); keep keeps its own.",
        values="keep, true, false",
        default="keep",
        scope="data",
        stage="data",
        parse=lambda raw: _keep_or_bool("use_multiprocessing", raw),
    )
    max_queue_size: int = knob(
        description="PyDataset: batches the workers may hold ready; 0 keeps the PyDataset's own.",
        values="integer >= 0",
        default=0,
        scope="data",
        stage="data",
        parse=lambda raw: _int("max_queue_size", raw, 0),
    )


KNOBS: tuple[Knob, ...] = tuple(
    Knob(name=field.name, default=field.default, **field.metadata["knob"]) for field in dataclasses.fields(KnobValues)
)

KNOBS_BY_NAME: Mapping[str, Knob] = {item.name: item for item in KNOBS}


def get_knob(name: str) -> Knob:
    """The knob called `name`, or a KnobError that lists the known ones."""
    try:
        return KNOBS_BY_NAME[name]
    except KeyError:
        raise KnobError(
            f"Unknown knob {name!r}. Expected one of: {', '.join(KNOBS_BY_NAME)}. "
            "Run `fitspeed knobs` to see them all."
        ) from None


def check_backend_installed(backend: str) -> None:
    """Refuse a backend whose package is not installed, without importing it."""
    if not backend_of(backend).is_installed():
        extra = backend_of(backend).extra
        raise KnobError(
            f"The {backend} backend is not installed in this environment. Received: "
            f"backend={backend}. Install it with pip install 'fitspeed{extra}', "
            "or choose another backend."
        )


def parse_assignment(text: str) -> tuple[str, Any]:
    """Split and parse one `name=value` from the command line.

    >>> parse_assignment("steps_per_execution=32")
    ('steps_per_execution', 32)
    """
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise KnobError(
            f"Expected a knob setting of the form name=value. Received: {text!r}. "
            "Use for example --set steps_per_execution=32."
        )
    return name, get_knob(name).parse(raw)
