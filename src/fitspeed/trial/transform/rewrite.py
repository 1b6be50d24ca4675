"""A model rewritten for data_format and precision, checked, with what changed.

`rewrite` runs one step per knob, each a clone of the model before it and each
checked against it on a probe batch (`fitspeed.trial.transform.check`):

1. data_format: every layer with a `data_format` in the other format is rebuilt
   in the target one (`fitspeed.trial.transform.layout` has the rules);
2. precision: `scope="all"` (`fitspeed convert`) gives every floating layer the
   policy; `scope="outputs"` (a trial, whose model was built under the global
   policy) only moves 16-bit output layers to float32. Either way the layers
   that make the model's outputs compute in float32 under a mixed policy, so the
   loss sees float32.

The parameter count must come out the same. `for_trial` is what a trial child
(and a training script's hooked fit) calls with its knobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict

import keras

from fitspeed.core.config import TrialConfig
from fitspeed.trial.transform import Refused
from fitspeed.trial.transform.check import Check, CheckRecord, compare
from fitspeed.trial.transform.layout import FORMAT_LAYERS, FORMATS
from fitspeed.trial.transform.rebuild import (
    Change,
    PolicyFor,
    Rebuild,
    functional_view,
    graph_outputs,
)

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
FLOAT_POLICIES = ("float32", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")


class RewriteRecord(TypedDict):
    """What a trial changed in its model, as the record's `rewrite` holds it."""

    changes: list[dict[str, str]]  # `Change.to_dict`: layer, class, change
    checks: list[CheckRecord]
    params: dict[str, int]  # before, after
    output_dtype: str


@dataclass(frozen=True)
class Rewrite:
    model: keras.Model
    changes: tuple[Change, ...]
    checks: tuple[Check, ...]
    params: tuple[int, int]  # before, after

    @property
    def output_dtype(self) -> str:
        return output_dtype(self.model)

    def to_dict(self) -> RewriteRecord:
        return {"changes": [c.to_dict() for c in self.changes], "checks": [c.to_dict() for c in self.checks],
                "params": {"before": self.params[0], "after": self.params[1]}, "output_dtype": self.output_dtype}


def output_dtype(model: keras.Model) -> str:
    """The dtype of the model's outputs; several, comma-separated, when they differ.

    A layer's output dtype is its compute dtype, whatever the symbolic graph says.
    """
    dtypes = sorted({str(layer.dtype_policy.compute_dtype) for layer in output_layers(model)})
    return ", ".join(dtypes)


def output_layers(model: keras.Model) -> list[keras.layers.Layer]:
    """The layers whose calls make the model's outputs."""
    return list({id(layer): layer for layer in (t._keras_history.operation
                                                for t in keras.tree.flatten(graph_outputs(model)))}.values())


def source_layers(model: keras.Model, target: str) -> list[str]:
    """The names of the layers with a data_format other than `target`."""
    layers: list[Any] = functional_view(model).layers
    return [layer.name for layer in layers
            if isinstance(layer, FORMAT_LAYERS) and layer.get_config().get("data_format") not in (None, target)]


def _policies(precision: str, scope: Literal["all", "outputs"]) -> PolicyFor:
    mixed = precision != "float32"

    def policy_for(layer: keras.layers.Layer, is_output: bool) -> str | None:
        current = layer.dtype_policy.name
        if current not in FLOAT_POLICIES or isinstance(layer, keras.Model):
            return None  # integer and quantized layers, and nested models, keep their own
        if is_output and mixed:
            return "float32" if layer.dtype_policy.compute_dtype != "float32" or scope == "all" else None
        return precision if scope == "all" and current != precision else None

    return policy_for


def rewrite(
    model: keras.Model,
    *,
    data_format: str | None = None,
    precision: str | None = None,
    scope: Literal["all", "outputs"] = "all",
    seed: int = 0,
) -> Rewrite:
    """`model` rewritten to `data_format` and `precision` (None: as it is), each step checked; Refused if not."""
    if data_format is not None and data_format not in FORMATS:
        raise ValueError(f"unknown data_format {data_format!r}")
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}")
    current, changes, checks = model, list[Change](), list[Check]()
    before = int(model.count_params())
    steps: list[tuple[str, str | None, PolicyFor | None]] = []
    if data_format is not None and source_layers(model, data_format):
        steps.append((f"data_format={data_format}", data_format, None))
    if precision is not None:  # the layout is checked in the more precise of the two policies
        step = (f"precision={precision}", None, _policies(precision, scope))
        steps.insert(0 if precision == "float32" else len(steps), step)
    for what, target, policy_for in steps:
        rebuild = Rebuild(current, target, policy_for)
        rewritten = rebuild.run()
        if rebuild.changes:
            checks.append(compare(current, rewritten, what, seed))
            current, changes = rewritten, [*changes, *rebuild.changes]
    if precision not in (None, "float32"):
        moved = {c.layer for c in changes if c.what.startswith("dtype policy")}
        changes += [Change(layer.name, type(layer).__name__, "computes in float32: it makes the model's output, "
                                                             "which the loss reads")
                    for layer in output_layers(current)
                    if layer.dtype_policy.compute_dtype == "float32" and layer.name not in moved]
    after = int(current.count_params())
    if after != before:
        raise Refused(f"the rewrite changed the parameter count from {before:,} to {after:,}")
    return Rewrite(current, tuple(changes), tuple(checks), (before, after))


def for_trial(model: keras.Model, config: TrialConfig, seed: int = 0) -> Rewrite | None:
    """A trial's model under its knobs: channels_first rewritten, the outputs float32 under a mixed policy.

    None when the knobs ask for nothing (the model is used as it is).
    """
    data_format = "channels_first" if config.data_format == "channels_first" else None
    precision = config.precision if config.precision != "float32" else None
    if data_format is None and precision is None:
        return None
    if data_format is not None and not source_layers(model, data_format):
        formats = [layer for layer in functional_view(model).layers if isinstance(layer, FORMAT_LAYERS)]
        raise Refused(
            f"data_format={data_format} changes nothing in this model: "
            + (f"its {len(formats)} layer(s) with a data_format are {data_format} already"
               if formats else "none of its layers takes a data_format (convolutions, pooling, upsampling)")
            + ", so the knob is skipped rather than timed as a change")
    return rewrite(model, data_format=data_format, precision=precision, scope="outputs", seed=seed)


def float32_outputs(model: keras.Model, precision: str | None) -> Rewrite | None:
    """Under a mixed policy, the layers that make the model's outputs compute in float32, in place.

    A user's script holds its own model, so a trial of it and `fitspeed run`
    both change that model object (one code path, `trial/script_hook.py`), and
    the model `run` trains is the one the trial timed and the guard checked.
    None under float32; Refused for a subclassed model, as `for_trial` is.
    """
    if precision in (None, "float32"):
        return None
    functional_view(model)  # Refused where the graph is Python code: the trial's rewrite refuses it the same way
    changes = []
    for layer in output_layers(model):
        before = layer.dtype_policy.name
        if before in FLOAT_POLICIES and layer.dtype_policy.compute_dtype != "float32" \
                and not isinstance(layer, keras.Model):
            layer.dtype_policy = "float32"
            changes.append(Change(layer.name, type(layer).__name__, f"dtype policy {before} → float32"))
    params = int(model.count_params())
    return Rewrite(model, tuple(changes), (), (params, params))
