"""What every knob is: `Knob`, the class each knob module makes its knobs from, and the parsers they share.

A knob knows its valid values, its default, which backends can do it, whether
it is process-wide or belongs to one model, and its `stage` (see
`fitspeed.trial.apply`). The hooks below are how a knob owns the rest of its
life; each has a default that does nothing, so a knob says only what it needs:

| hook               | asked by                                          | for                                     |
|--------------------|---------------------------------------------------|-----------------------------------------|
| `refuses`          | `TrialConfig`, `fitspeed knobs`                   | a backend that cannot turn it, and why  |
| `offer`            | the search space (`fitspeed.search.space`)        | the values a search tries, or why none  |
| `across_processes` | the search space, over several processes          | whether it is tried there unasked       |
| `environment`,     | `knob_environment`, for every knob, in the        | variables set before the backend loads: |
| `environment_step` | order of `ENVIRONMENT_STEPS`: a trial's           | KERAS_BACKEND, TF_ENABLE_ONEDNN_OPTS,   |
|                    | `core.import_environment`, a fork server's key    | XLA_FLAGS, TF_XLA_FLAGS, LD_PRELOAD ... |
| `exported`         | `core.best_json.exports`: the knobs it is         | the variables a user exports (False:    |
|                    | true of                                           | the knob's snippet sets them)           |
| `at_start`         | trial processes, `fitspeed run`                   | variables needed when a process starts  |
| `too_late`         | `fitspeed.apply()` in a running Python            | why the value cannot take effect now    |
| `apply`, `step`    | `fitspeed.trial.apply.after_import`, for the      | the value applied in a process, after   |
|                    | knobs of stage "process", in the order of `STEPS` | keras is imported, through `Process`    |
| `build_scope`      | `fitspeed.trial.apply.model_scope`, every knob's  | the scope a trial's model is built in   |
|                    | open at once, in a trial, around the model build  | (the model stage: remat's RematScope)   |
| `snippet`          | `core.best_json.snippet` and `input_lines`, by    | the lines that apply the value in a     |
|                    | section (`SECTIONS`)                              | user's own Keras code                   |

The knobs themselves live in this package's modules, one per knob or family,
and `fitspeed.core.knobs.KNOBS` is their registry. This module is imported by
the parent process, so it never imports keras.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, get_args

from fitspeed.core.backends import NAMES, backend_of
from fitspeed.core.errors import KnobError

BACKENDS = NAMES

Scope = Literal["process", "model", "data"]
Stage = Literal["environment", "process", "model", "compile", "data"]
# The process stage's steps (`Knob.step`), in the order `fitspeed.trial.apply.after_import` runs them: the other
# processes joined before the backend runs anything (JAX's multi-process runtime starts first or not at all), the
# thread pools before anything starts TensorFlow's runtime (it refuses them after), the devices before anything is
# placed on one, the dtype policy before any layer is built, the seeds (every trial's, no knob's), then deterministic
# ops.
Step = Literal["processes", "threads", "devices", "dtype_policy", "seed", "determinism"]
STEPS: tuple[Step, ...] = get_args(Step)
# The environment stage's steps (`Knob.environment_step`), in the order `knob_environment` sets their variables: the
# backend to import, the trial's own (the log level and the hash seed, no knob's: `core.import_environment`),
# oneDNN's switch, the determinism flags, the host's devices (JAX's count in XLA_FLAGS, after the determinism flag),
# then every other knob's. A fork server is kept per environment (`fitspeed.measure.warm_start`): the order is its key's.
EnvironmentStep = Literal["backend", "trial", "onednn", "determinism", "devices", "others"]
ENVIRONMENT_STEPS: tuple[EnvironmentStep, ...] = get_args(EnvironmentStep)
# best.json's snippet, section by section (`Knob.snippet`), in the order `core.best_json` writes them:
# before_import  lines that set os.environ before keras is imported
# process        process-wide calls (the dtype policy, seeds and deterministic ops), then `devices`' and `threads`'
# strategy       around the model's build: data parallel
# build          the model built inside a scope
# compile        `model.compile()` arguments, one line each
# interleave ... prefetch: the tf.data pipeline's lines, in the pipeline's order (`fitspeed.trial.data.pipeline`)
# options        `tf.data.Options` attributes; options_note after `with_options`
# loader         `keras.utils.PyDataset.__init__` arguments, joined into one call
# rewrite        comments on the model rewrite; rewritten: the names of the knobs `fitspeed.rewrite_model` is given
# fit            the `model.fit()` call
# A section's lines come in the registry's order; an import a section needs is its own first line (the snippet
# keeps the first of each import, `core.best_json._each_import_once`).
Section = Literal["before_import", "process", "devices", "threads", "strategy", "build", "compile", "interleave",
                  "map", "cache", "shuffle", "batch", "prefetch", "options", "options_note", "loader", "rewrite",
                  "rewritten", "fit"]
SECTIONS: tuple[Section, ...] = get_args(Section)
Lines = dict[Section, list[str]]

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def as_bool(name: str, raw: object) -> bool:
    """Accept a JSON bool or the usual spellings of one.

    >>> as_bool("deterministic", "yes")
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


def as_int(name: str, raw: object, minimum: int) -> int:
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


def as_choice(name: str, raw: object, choices: tuple[str, ...]) -> str:
    text = str(raw).strip()
    if text not in choices:
        raise KnobError(
            f"Expected `{name}` to be one of {', '.join(choices)}. Received: {raw!r}. "
            f"Use for example --set {name}={choices[-1]}."
        )
    return text


def keep_or_bool(name: str, raw: object) -> bool | str:
    if str(raw).strip().lower() == "keep":
        return "keep"
    try:
        return as_bool(name, raw)
    except KnobError:
        raise KnobError(
            f"Expected `{name}` to be keep, true or false. Received: {raw!r}. "
            f"Use for example --set {name}=true."
        ) from None


class Process(Protocol):
    """What a process gives the knobs of the process stage (`Knob.apply`), with keras imported.

    `fitspeed.trial.apply` makes it from the backend's framework calls
    (`fitspeed.machine.frameworks`) and `fitspeed.trial.distribute`: this
    package names what the knobs need, and imports neither.
    """

    def join(self, processes: int) -> None:
        """Join the other processes of a multi-process run (1: none), before the backend runs anything."""

    def set_threads(self, intra: int, inter: int) -> None:
        """Size the backend's thread pools, intra-op then inter-op; 0 leaves a pool as it is."""

    def place(self, devices: int) -> None:
        """Spread training over `devices` devices (1: where the backend puts it), before anything is placed."""

    def set_dtype_policy(self, policy: str) -> None:
        """Make `policy` Keras's global dtype policy."""

    def enable_determinism(self) -> None:
        """Deterministic ops (the flags read at import are `core.import_environment`'s)."""


@dataclass(frozen=True)
class Recipe:
    """What a knob's snippet lines may read besides its own value (`Knob.snippet`)."""

    config: Any  # the recommended TrialConfig
    fixed: tuple[str, ...] = ()  # the output layers the best trial's rewrite moved to float32, as "'dense_1' (Dense)"


@dataclass(frozen=True)
class Knob:
    """One setting fitspeed can turn.

    `parse` turns a CLI string or a JSON value into the knob's value and raises
    `KnobError` on anything else. `unsupported(value, backend)` gives the reason
    a backend cannot do a value, or None (`refuses`: by default the backend's
    own reason, `fitspeed.core.backends`). A knob with more to say subclasses
    this and overrides the hooks (the module docstring's table).
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
    # a knob of the process stage: the step (`STEPS`) at which `fitspeed.trial.apply.after_import` calls its `apply`
    step: ClassVar[Step | None] = None
    # the step (`ENVIRONMENT_STEPS`) at which `knob_environment` asks its `environment`
    environment_step: ClassVar[EnvironmentStep] = "others"
    # whether best.json exports its `environment` (`core.best_json.exports`); False: its `snippet` says what to set
    exported: ClassVar[bool] = True
    # whether a search over several processes (`processes` above 1) tries it unasked: each of its trials costs N
    # processes, so such a search tunes what the run over N is sized by (`fitspeed.search.space.over_processes`)
    across_processes: ClassVar[bool] = False

    def idle_in(self, config: Any) -> bool:
        """Whether every value of this knob trains the same in `config` (a `KnobValues`): `only_under` unmet.

        >>> from fitspeed.core.config import TrialConfig
        >>> from fitspeed.core.knobs import get_knob
        >>> scaling = get_knob("auto_scale_loss")
        >>> scaling.idle_in(TrialConfig(precision="mixed_bfloat16")), scaling.idle_in(TrialConfig(
        ...     precision="mixed_float16"))
        (True, False)
        """
        return self.only_under is not None and getattr(config, self.only_under[0]) != self.only_under[1]

    def unsupported(self, value: Any, backend: str) -> str | None:
        """Why `backend` cannot run this knob at `value`, or None; every backend runs the default.

        >>> from fitspeed.core.knobs import get_knob
        >>> get_knob("steps_per_execution").unsupported(32, "torch")
        'the PyTorch backend of Keras runs one step per execution only'
        >>> get_knob("steps_per_execution").unsupported(1, "torch") is None
        True
        """
        if value == self.default:
            return None
        return self.refuses(backend)

    def backends(self) -> tuple[str, ...]:
        """The backends that can do at least one non-default value."""
        return tuple(name for name in BACKENDS if self.refuses(name) is None)

    def refuses(self, backend: str) -> str | None:
        """Why `backend` cannot turn this knob at all, or None: by default the backend's own word (`core.backends`)."""
        return backend_of(backend).cannot(self.name)

    def offer(self, where: Where) -> Offer | None:
        """The values a search tries `where` (besides the baseline's), or why none; None: never searched.

        The search space (`fitspeed.search.space.default_space`) asks every
        knob of the registry; a knob that is set by the user only (batch_size,
        devices, remat) keeps this default.
        """
        return None

    def environment(self, value: Any, environ: Mapping[str, str], config: Any) -> dict[str, str]:
        """The variables `value` needs set before the backend is imported, given the rest of `environ`.

        `config` is the whole configuration (a `KnobValues`), for a knob whose
        variables depend on another knob (the backend). `knob_environment` asks
        every knob, whatever its value, at its `environment_step`: they are set
        in every trial's environment (`core.import_environment`) and, where
        `exported`, in best.json's exports; where `at_start` is true they are
        set before the process starts too, as a loader reads them then.
        """
        return {}

    def apply(self, value: Any, process: Process) -> None:
        """Apply `value` in this process, keras imported: the process stage, at the knob's `step`.

        `fitspeed.trial.apply.after_import` calls it for every knob of stage
        "process", whatever the value, in the order of `STEPS` (the registry's
        within a step): in a trial, in a user's script and in `fitspeed.apply()`.
        """

    def build_scope(self, value: Any) -> contextlib.AbstractContextManager[Any]:
        """The scope a trial's model is built in, for `value` (the model stage); by default none.

        `fitspeed.trial.apply.model_scope` opens every knob's, around the
        model's build and the rewrite that rebuilds its layers; keras is
        imported by then, so a knob imports it inside this method.

        >>> from fitspeed.core.knobs import get_knob
        >>> with get_knob("steps_per_execution").build_scope(32):
        ...     pass
        """
        return contextlib.nullcontext()

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        """The lines of best.json's snippet that apply `value` in a user's own code, by section (`SECTIONS`).

        By default a knob of the compile stage is a `model.compile()` argument
        of its own name, where it differs from its default, and any other knob
        writes nothing.

        >>> from fitspeed.core.knobs import get_knob
        >>> get_knob("steps_per_execution").snippet(32, Recipe(None))
        {'compile': ['    steps_per_execution=32,']}
        """
        if self.stage != "compile" or value == self.default:
            return {}
        return {"compile": [f"    {self.name}={value!r},"]}

    def too_late(self, value: Any, environ: Mapping[str, str]) -> str | None:
        """Why `value` cannot take effect in a Python that is running already with `environ`, or None."""
        return None

    @property
    def at_start(self) -> bool:
        """Whether `environment` must be in place when the process starts (the dynamic loader reads it then)."""
        return False


@dataclass(frozen=True)
class Where:
    """What a knob may ask about where a search runs (`Knob.offer`)."""

    base: Any  # the baseline's TrialConfig
    has_gpu: bool
    cores: int
    data_kind: str | None  # `fitspeed.core.input_kinds`' kind, or None until the baseline trial has loaded it
    model: str
    script: str | None  # the file of a user's training command, or None
    onednn_on: bool | None = None  # whether the baseline's trials run with oneDNN on; None: TensorFlow's rule, unknown
    on: str | None = None  # another backend the dimension is measured on top of (its own knobs), or None

    @property
    def backend(self) -> str:
        """The backend the values are tried on: `on`, else the baseline's."""
        return self.on or str(self.base.backend)


@dataclass(frozen=True)
class Offer:
    """A knob's search dimension: the values to try besides the baseline's, or why it is not searched.

    `each`: the values are alternatives, and the screen measures every one
    (not only the next where one fails). `alone`: kept only where the screen
    alone shows the gain. `cost_only`: measured for its cost, never recommended.
    """

    values: tuple[Any, ...] = ()
    skipped: str | None = None
    each: bool = False
    alone: bool = False
    cost_only: bool = False
    left_out: tuple[tuple[Any, str], ...] = ()  # values not tried, each with why
    on: tuple[str, Any] | None = None  # measured on top of this other knob value, not the baseline's
