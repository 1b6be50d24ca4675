"""The tuner's search space: which values of which knobs to try, and which to skip.

Framework-free. Each knob offers its own dimension (`Knob.offer`, in its
module under `fitspeed.core.knobs`); the space puts them in order, adds the
other backends and their own knobs, and applies `--space` and `--knobs` (over
several processes, `--knobs` defaults to the knobs tried there: `narrowed`). Each
dimension either lists values to try (besides the baseline's) or says why it
cannot run on this backend. Nothing is skipped
because of a belief about the hardware: mixed_float16 is tried on a CPU too,
and a slow value is rejected by its measurement. `--space knob=v1,v2` replaces
a dimension's values, and un-skips it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from fitspeed.core.backends import NAMES, backend_of
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.input_kinds import INPUT_KNOBS, data_kind
from fitspeed.core.knobs import KNOBS, Knob, Where, get_knob
from fitspeed.core.knobs.processes import SEARCH_REASON
from fitspeed.machine.environment import onednn_default, onednn_exported
from fitspeed.measure import portability


@dataclass(frozen=True)
class Dimension:
    knob: str
    values: tuple[Any, ...]  # values to try besides the baseline's
    skipped: str | None = None  # why it is not searched
    cost_only: bool = False  # measured alone for its cost, never recommended for speed
    alone: bool = False  # judged by the screen alone: combined only if the screen showed min_gain
    each: bool = False  # alternatives, not a ladder: the screen measures every value, not the next only if one fails
    left_out: tuple[tuple[Any, str], ...] = ()  # values not tried, each with why (a backend not installed)
    # measured on top of this other knob value, not the baseline's: another backend (one of its own knobs),
    # or the precision that gives the knob a meaning (auto_scale_loss under mixed_float16)
    on: tuple[str, Any] | None = None

    @property
    def name(self) -> str:
        """The knob, and the value it is measured on top of where that is not the baseline's.

        >>> Dimension("jit_compile", (True,), on=("backend", "torch")).name
        'jit_compile@torch'
        """
        return f"{self.knob}@{self.on[1]}" if self.on else self.knob

    def change(self, value: Any) -> dict[str, Any]:
        """The knob values one screen trial of `value` sets: the one it is measured on top of too.

        >>> Dimension("jit_compile", (True,), on=("backend", "torch")).change(True)
        {'backend': 'torch', 'jit_compile': True}
        """
        return {self.on[0]: self.on[1], self.knob: value} if self.on else {self.knob: value}

    @property
    def backend(self) -> str | None:
        """The other backend this is measured on top of, or None."""
        return self.on[1] if self.on and self.on[0] == "backend" else None

    @property
    def searched(self) -> bool:
        return self.skipped is None and bool(self.values)


# The order the articles try the knobs in, and the screen measures them in. Every other backend's own knobs
# come next, then any knob not named here, in the registry's order (`fitspeed.core.knobs.KNOBS`).
ARTICLE_ORDER = ("steps_per_execution", "jit_compile", "precision", "auto_scale_loss", "backend", "onednn",
                 "data_format", "intra_op_threads", "inter_op_threads", "deterministic", *INPUT_KNOBS)


def default_space(
    model: str,
    base: TrialConfig,
    has_gpu: bool,
    cores: int | None = None,
    data: str | None = None,
    onednn_on: bool | None | Literal["detect"] = "detect",
    script: str | None = None,
) -> list[Dimension]:
    """The dimensions to sweep: each knob's own offer (`Knob.offer`), in `ARTICLE_ORDER`; input knobs by `data`'s kind.

    The backend dimension is the space's own (`backend_dimension`): `script`
    is the file of a user's training command, and the backends it ties itself
    to (`fitspeed.measure.portability`) decide whether another is tried; each
    other backend's own knobs are measured on top of it (`own_knobs`).

    `onednn_on` is whether the baseline's trials run with oneDNN on ("detect":
    TF_ENABLE_ONEDNN_OPTS where this process exports it, else TensorFlow's
    rule for this CPU's flags, `fitspeed.machine.environment.onednn_default`).
    """
    cores = cores or os.cpu_count() or 1
    if onednn_on == "detect":  # what the trials inherit: the user's export, else TensorFlow's rule for this CPU
        exported = onednn_exported()
        onednn_on = onednn_default() if exported is None else exported
    where = Where(base, has_gpu, cores, data_kind(data), model, script, onednn_on)
    others = backend_dimension(base, model, script)
    first = [others if name == "backend" else offered(get_knob(name), where) for name in ARTICLE_ORDER]
    rest = [offered(knob, where) for knob in KNOBS if knob.name not in ARTICLE_ORDER]
    dims = [*first, *own_knobs(others, base, has_gpu, cores), *rest]
    return [_drop_baseline(d, base) for d in dims if d is not None]


def offered(knob: Knob, where: Where) -> Dimension | None:
    """`knob`'s search dimension `where` (`Knob.offer`), or None for a knob no search sets.

    >>> from fitspeed.core.knobs import get_knob
    >>> where = Where(TrialConfig(), False, 2, None, "tiny", None)
    >>> offered(get_knob("steps_per_execution"), where).values, offered(get_knob("batch_size"), where)
    ((64, 16, 4), None)
    """
    offer = knob.offer(where)
    if offer is None:
        return None
    return Dimension(knob.name, offer.values, offer.skipped, cost_only=offer.cost_only, alone=offer.alone,
                     each=offer.each, left_out=offer.left_out, on=offer.on)


def own_knobs(others: Dimension, base: TrialConfig, has_gpu: bool, cores: int) -> list[Dimension]:
    """Each other backend's own knobs (`Backend.own_knobs`), measured on top of it, or skipped with why.

    A knob that backend cannot turn, or whose value to try is its default
    already, is skipped with the backend's reason; so is every own knob of a
    backend the search does not try (not installed, or the script ties itself
    to the baseline's).

    >>> dims = own_knobs(Dimension("backend", ("jax", "torch")), TrialConfig(), has_gpu=False, cores=2)
    >>> [(d.name, d.values) for d in dims if d.searched]
    [('steps_per_execution@jax', (64, 16, 4)), ('jit_compile@torch', (True,)), ('intra_op_threads@torch', (1,)), ('inter_op_threads@torch', (1,))]
    >>> skipped(dims)["steps_per_execution@torch"]
    'the PyTorch backend of Keras runs one step per execution only'
    """
    dims = []
    for name in NAMES:
        if name == base.backend:
            continue
        other = backend_of(name)
        tried = name in others.values
        for knob in other.own_knobs:
            dim = offered(get_knob(knob), Where(base, has_gpu, cores, None, "", None, on=name))
            assert dim is not None, knob  # a backend's own knobs are searched knobs
            why = other.why_not_on_top(knob) or dim.skipped
            if not tried:
                why = f"measured on top of {other.title}, which this search does not try: " + (
                    others.skipped or dict(others.left_out).get(name) or "left out by --space")
            dims.append(replace(dim, values=() if why else dim.values, skipped=why, on=("backend", name)))
    return dims


def backend_dimension(base: TrialConfig, model: str, script: str | None = None,
                      installed: Callable[[str], bool] | None = None) -> Dimension:
    """The other Keras backends, each measured on its own defaults: those installed that the model can run on.

    A built-in model and a `.keras` file run on any backend. A user's script
    or builder module that imports a framework (or sets KERAS_BACKEND) is
    offered none, with the file and line that tie it. A backend not installed
    is left out and named with the pip extra that installs it.

    >>> dim = backend_dimension(TrialConfig(), "tiny", installed=lambda name: name == "jax")
    >>> dim.values, dim.left_out
    (('jax',), (('torch', "PyTorch is not installed: pip install 'fitspeed[torch]'"),))
    >>> backend_dimension(TrialConfig(), "tiny", installed=lambda name: False).skipped
    "no other backend is installed: pip install 'fitspeed[jax]' for JAX, 'fitspeed[torch]' for PyTorch"
    """
    others = [backend_of(name) for name in NAMES if name != base.backend]
    here = [other for other in others if (installed(other.name) if installed else other.is_installed())]
    left_out = tuple((other.name, f"{other.title} is not installed: pip install 'fitspeed{other.extra}'")
                     for other in others if other not in here)
    if not here:
        extras = ", ".join(f"'fitspeed{other.extra}' for {other.title}" for other in others)
        return Dimension("backend", (), f"no other backend is installed: pip install {extras}")
    source = script or portability.module_file(model)
    if source is not None:
        tied = {other.name: portability.why_not(source, other.name, base.backend) for other in here}
        reasons = [why for why in tied.values() if why]
        here = [other for other in here if tied[other.name] is None]
        if not here:
            return Dimension("backend", (), reasons[0], left_out=left_out)
    return Dimension("backend", tuple(other.name for other in here), each=True, left_out=left_out)


def skipped(dims: Iterable[Dimension]) -> dict[str, str]:
    """What the search leaves out and why: a whole knob by its name (`Dimension.name`), one value as `knob=value`.

    >>> skipped([Dimension("onednn", (), "TensorFlow alone"), Dimension("backend", ("jax",), left_out=(("torch", "not installed"),))])
    {'onednn': 'TensorFlow alone', 'backend=torch': 'not installed'}
    """
    out: dict[str, str] = {}
    for dim in dims:
        if dim.skipped:
            out[dim.name] = dim.skipped
        for value, why in dim.left_out:
            out[f"{dim.knob}={value}"] = why
    return out


def input_space(kind: str | None, base: TrialConfig, cores: int) -> list[Dimension]:
    """The input knobs for data of `kind` (`fitspeed.core.input_kinds`); the others skipped with the reason.

    `kind` None is a user's function, whose kind the baseline trial reports.
    """
    where = Where(base, False, cores, kind, "", None)
    return [dim for dim in (offered(get_knob(name), where) for name in INPUT_KNOBS) if dim is not None]


def _drop_baseline(dim: Dimension, base: TrialConfig) -> Dimension:
    if dim.on:  # on top of another backend, where the baseline's value is that backend's default
        return dim
    current = getattr(base, dim.knob)
    return replace(dim, values=tuple(v for v in dim.values if v != current))


def override(dims: list[Dimension], assignments: Iterable[str], base: TrialConfig) -> list[Dimension]:
    """Apply `knob=v1,v2,...` overrides: replace that knob's values, searched or not."""
    out = [d for d in dims]
    for text in assignments:
        name, sep, raw = text.partition("=")
        name = name.strip()
        if not sep or not raw.strip():
            raise KnobError(
                f"Expected --space as knob=value1,value2. Received: {text!r}. "
                "Use for example --space steps_per_execution=1,8,32."
            )
        knob = get_knob(name)
        values = tuple(dict.fromkeys(knob.parse(part) for part in raw.split(",")))
        for value in values:
            base.replace(**{name: value})  # refuses values the backend cannot do
        kept = next((d for d in out if d.knob == name and not d.on), None)
        out = [d for d in out if d.knob != name or d.on]
        out.append(_drop_baseline(Dimension(name, values, cost_only=bool(kept and kept.cost_only),
                                            each=bool(kept and kept.each)), base))
        if name == "backend":  # a backend's own knobs are measured only where the backend is
            out = [replace(d, values=(), skipped=f"measured on top of {backend_of(d.backend).title}, which --space "
                           "leaves out") if d.backend and d.backend not in values else d for d in out]
    return out


def only(dims: list[Dimension], knobs: Iterable[str]) -> list[Dimension]:
    """Search only the named knobs; the others keep the baseline's values.

    A backend's own knob is searched where `backend` is named too, and either
    its knob (`jit_compile`: on every backend) or its own name (`jit_compile@torch`);
    so is `auto_scale_loss@mixed_float16` where `precision` is.

    >>> dims = [Dimension("backend", ("torch",)), Dimension("jit_compile", (True,)),
    ...         Dimension("jit_compile", (True,), on=("backend", "torch"))]
    >>> [d.name for d in only(dims, ["backend", "jit_compile@torch"])]
    ['backend', 'jit_compile@torch']
    """
    names = [_knob_name(name.strip()) for name in knobs if name.strip()]
    if not names:
        return dims
    return [d for d in dims if (d.knob in names or d.name in names) and (not d.on or d.on[0] in names)]


def narrowed(dims: list[Dimension], knobs: Iterable[str], base: TrialConfig) -> list[Dimension]:
    """The dimensions `--knobs` keeps (`only`); with none named and the baseline over several processes, those
    whose knob is tried there (`Knob.across_processes`), the others skipped with why.

    Every trial of such a search starts `processes` processes, and the
    search tunes what the run over them is sized by; a knob named in
    `--knobs` is tried as asked.

    >>> dims = [Dimension("steps_per_execution", (64,)), Dimension("precision", ("mixed_bfloat16",)),
    ...         Dimension("jit_compile", (True,), on=("backend", "torch"))]
    >>> over = TrialConfig(backend="jax", processes=2)
    >>> [(d.name, d.searched) for d in narrowed(dims, (), over)]
    [('steps_per_execution', True), ('precision', False), ('jit_compile@torch', False)]
    >>> skipped(narrowed(dims, (), over))["precision"].startswith("left out of a search over 2 processes")
    True
    >>> [d.name for d in narrowed(dims, ["precision"], over)], narrowed(dims, (), TrialConfig()) == dims
    (['precision'], True)
    """
    kept = only(dims, knobs)
    if base.processes == 1 or any(name.strip() for name in knobs):
        return kept
    why = SEARCH_REASON.format(n=base.processes)
    return [d if not d.searched or (get_knob(d.knob).across_processes and not d.on)
            else replace(d, values=(), skipped=why) for d in kept]


def _knob_name(text: str) -> str:
    """A knob's name, or `knob@backend` for a backend's own knob (`auto_scale_loss@mixed_float16`); else a KnobError."""
    knob, at, on = text.partition("@")
    if at and on == "mixed_float16":
        return get_knob(knob).name + at + on
    return get_knob(knob).name + (at + backend_of(on).name if at else "")


def choices(dims: list[Dimension], base: TrialConfig) -> dict[str, tuple[Any, ...]]:
    """Every searched knob's values, the baseline's first: Optuna's categorical choices."""
    out: dict[str, tuple[Any, ...]] = {}
    for dim in dims:
        if dim.searched and not dim.cost_only:
            current = getattr(base, dim.knob)
            out[dim.knob] = tuple(dict.fromkeys((current, *out.get(dim.knob, ()), *dim.values)))
    return out
