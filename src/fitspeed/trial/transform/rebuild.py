"""Clone a model with `keras.models.clone_model`, each layer rewritten by a plan, the weights carried over.

`clone_model` walks the graph; its `call_function` sees each original layer with
the already rewritten inputs, asks `layout.Rules` what the call becomes,
inserts the input permutes, and records every tensor's layout. Each layer is
rebuilt from its config (with the plan's edits and dtype policy) and gets the
original's weights, transformed where the plan says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import keras

from fitspeed.trial.transform import Refused
from fitspeed.trial.transform.layout import (
    FEATURE_WISE,
    Image,
    Layout,
    Plan,
    Rules,
    describe,
    from_target,
    to_target,
)

# (layer, is it an output layer) -> the dtype policy it gets, or None to keep its own
PolicyFor = Callable[[keras.layers.Layer, bool], "str | None"]


@dataclass(frozen=True)
class Change:
    """One line of what a rewrite changed."""

    layer: str
    kind: str
    what: str

    def to_dict(self) -> dict[str, str]:
        return {"layer": self.layer, "class": self.kind, "change": self.what}


def functional_view(model: keras.Model) -> keras.Model:
    """The model's graph as an uncompiled Functional model over the same layers; Refused if it has none."""
    if not isinstance(model, (keras.Sequential, keras.Model)) or not _has_graph(model):
        raise Refused(
            f"the model {model.name!r} is a subclassed keras.Model ({type(model).__name__}): its layers are wired "
            "in Python code that fitspeed cannot rewrite. Build it with the functional API or keras.Sequential."
        )
    try:
        inputs, outputs = graph_inputs(model), graph_outputs(model)
    except (AttributeError, ValueError):
        raise Refused(
            f"the model {model.name!r} has no input shape yet. Give it one: start a Sequential with "
            "keras.Input(shape=...)."
        ) from None
    return keras.Model(inputs, outputs, name=model.name)


def graph_inputs(model: keras.Model) -> Any:
    """The model's symbolic inputs, as its call takes them (a Sequential knows them only as a list)."""
    if isinstance(model, keras.Sequential):
        if not model.inputs:
            raise ValueError("a Sequential model without an input")
        return model.inputs[0]
    return model.input


def graph_outputs(model: keras.Model) -> Any:
    return model.outputs[0] if isinstance(model, keras.Sequential) else model.output


def _has_graph(model: keras.Model) -> bool:
    return isinstance(model, keras.Sequential) or hasattr(model, "_nodes_by_depth")  # Functional


class Rebuild:
    """One clone of `model` into the data_format `target` (None: keep the layout) under `policy_for`."""

    def __init__(self, model: keras.Model, target: str | None, policy_for: PolicyFor | None) -> None:
        self.model = model
        self.view = functional_view(model)
        self.policy_for = policy_for
        self.output_ids = {id(t) for t in self.view.outputs}
        self.output_layers = {id(t._keras_history.operation) for t in self.view.outputs}
        self.readers: dict[int, list[Any]] = {}  # tensor -> the layers that read it, in this graph
        self.nodes: dict[int, list[Any]] = {}  # layer -> its calls, in this graph
        for nodes in self.view._nodes_by_depth.values():
            for node in nodes:
                self.nodes.setdefault(id(node.operation), []).append(node)
                for tensor in node.input_tensors:
                    self.readers.setdefault(id(tensor), []).append(node.operation)
        self.rules = None if target is None else Rules(target, self._dense_only)
        self.layouts: dict[int, Layout] = {}
        self.alive: list[Any] = []  # keeps every tensor seen, so that no id is reused during the walk
        self.clones: dict[int, tuple[keras.layers.Layer, keras.layers.Layer, Plan]] = {}
        self.permuted: dict[int, Any] = {}
        self.names = {layer.name for layer in self.view.layers}
        self.changes: list[Change] = []

    def run(self) -> keras.Model:
        inputs = keras.tree.map_structure(  # named as the original's input layers (clone_model names them after tensors)
            lambda t: keras.Input(batch_shape=t.shape, dtype=t.dtype, name=t._keras_history.operation.name),
            self.view.input)
        new = keras.models.clone_model(self.view, input_tensors=inputs, clone_function=lambda layer: layer,
                                       call_function=self._call)
        outputs = [self._restore(t) for t in new.outputs]
        if any(a is not b for a, b in zip(outputs, new.outputs)):
            new = keras.Model(new.inputs, outputs, name=self.model.name)
        for original, clone, plan in self.clones.values():
            if clone is not original and original.weights:
                weights = original.get_weights()
                clone.set_weights(plan.weights(weights) if plan.weights else weights)
        if isinstance(self.model, keras.Sequential):
            new = _as_sequential(new)
        _carry_compile(self.model, new)
        return new

    # -- the walk -------------------------------------------------------------

    def _call(self, layer: keras.layers.Layer, *args: Any, **kwargs: Any) -> Any:
        tensors = [t for t in keras.tree.flatten((args, kwargs)) if isinstance(t, keras.KerasTensor)]
        layouts = [self.layouts.get(id(t)) for t in tensors]
        plan = self.rules.plan(layer, layouts, [tuple(t.shape) for t in tensors]) if self.rules else Plan()
        if plan.remove:
            self._note(layer, *plan.notes)
            return self._mark(args[0], plan.output)
        if plan.permute_inputs:
            swap = {id(tensors[i]): self._permute(tensors[i]) for i in plan.permute_inputs}
            args, kwargs = keras.tree.map_structure(
                lambda x: swap.get(id(x), x) if isinstance(x, keras.KerasTensor) else x, (args, kwargs))
        clone = self._clone(layer, plan)
        return self._mark(clone(*args, **kwargs), plan.output)

    def _mark(self, outputs: Any, layout: Layout) -> Any:
        for tensor in keras.tree.flatten(outputs):
            self.layouts[id(tensor)] = layout
            self.alive.append(tensor)
        return outputs

    def _clone(self, layer: keras.layers.Layer, plan: Plan) -> keras.layers.Layer:
        known = self.clones.get(id(layer))
        if known is not None:
            if known[2].config != plan.config or plan.weights is not None or known[2].weights is not None:
                raise Refused(f"{describe(layer)} is shared by tensors that the rewrite changes differently. "
                              "Give each use its own layer.")
            return known[1]
        policy = self.policy_for(layer, id(layer) in self.output_layers) if self.policy_for else None
        config = {**layer.get_config(), **plan.config}
        if policy is not None:
            config["dtype"] = policy
        try:
            clone = type(layer).from_config(config)
        except Exception as error:
            if plan.config:
                raise Refused(f"{describe(layer)} cannot be rebuilt from its config ({type(error).__name__}: "
                              f"{error}). Give it a get_config() that from_config() accepts.") from None
            clone = layer  # it needs no layout change: the rewrite shares it as it is
            if policy is not None:
                self._note(layer, f"kept in {layer.dtype_policy.name}: it cannot be rebuilt from its config")
                policy = None
        self.clones[id(layer)] = (layer, clone, plan)
        before = layer.get_config()
        for key, value in plan.config.items():
            if before.get(key) != value:
                self._note(layer, f"{key} {_text(before.get(key))} → {_text(value)}")
        if policy is not None and policy != layer.dtype_policy.name:
            self._note(layer, f"dtype policy {layer.dtype_policy.name} → {policy}")
        self._note(layer, *plan.notes)
        return clone

    def _permute(self, tensor: Any) -> Any:
        """`tensor` (unchanged, in the source format) moved once into the target format."""
        if id(tensor) not in self.permuted:
            assert self.rules is not None  # noqa: S101 (only a plan under rules permutes)
            rank, target = len(tensor.shape), self.rules.target
            name = self._name(f"to_{target}")
            self.permuted[id(tensor)] = self._mark(
                keras.layers.Permute(to_target(rank, target)[1:], name=name)(tensor), Image(rank))
            source = tensor._keras_history.operation.name
            self.changes.append(Change(name, "Permute", f"inserted after {source!r}: moves the image to {target} "
                                                        "once, inside the model (the data stays as it is)"))
        return self.permuted[id(tensor)]

    def _restore(self, tensor: Any) -> Any:
        """A model output in the rewrite's layout, moved back to the original's."""
        layout = self.layouts.get(id(tensor))
        if layout is None:
            return tensor
        assert self.rules is not None  # noqa: S101 (only rules make layouts)
        if not isinstance(layout, Image):
            raise Refused(f"the output {tensor.name!r} is a flattened image whose order changed")
        name = self._name(f"to_{self.rules.source}")
        self.changes.append(Change(name, "Permute", f"inserted: the output moved back to {self.rules.source}"))
        return keras.layers.Permute(from_target(layout.rank, self.rules.target)[1:], name=name)(tensor)

    def _dense_only(self, layer: keras.layers.Layer) -> bool:
        """Whether only Dense layers, through feature-wise ones, read `layer`'s one output."""
        nodes = self.nodes.get(id(layer), [])
        if len(nodes) != 1 or len(nodes[0].outputs) != 1 or id(nodes[0].outputs[0]) in self.output_ids:
            return False
        readers = self.readers.get(id(nodes[0].outputs[0]), [])
        return bool(readers) and all(
            len(self.nodes.get(id(r), [])) == 1
            and (isinstance(r, keras.layers.Dense) or isinstance(r, FEATURE_WISE) and self._dense_only(r))
            for r in readers
        )

    def _name(self, base: str) -> str:
        name, n = base, 1
        while name in self.names:
            name, n = f"{base}_{n}", n + 1
        self.names.add(name)
        return name

    def _note(self, layer: keras.layers.Layer, *whats: str) -> None:
        self.changes.extend(Change(layer.name, type(layer).__name__, what) for what in whats)


def _text(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _as_sequential(model: keras.Model) -> keras.Sequential:
    """A rewritten Sequential model back as a Sequential (its graph is still a chain)."""
    source = model.inputs[0]
    inputs = keras.Input(batch_shape=source.shape, dtype=source.dtype, name=source.name)
    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    return keras.Sequential([inputs, *layers], name=model.name)


def _carry_compile(original: keras.Model, new: keras.Model) -> None:
    """Compile `new` with the arguments `original` was compiled with (a fresh optimizer if it has state)."""
    saved = getattr(getattr(original, "_compile_config", None), "config", None)
    if not original.compiled or saved is None:
        return
    saved = dict(saved)
    optimizer = saved.get("optimizer")
    if isinstance(optimizer, keras.optimizers.Optimizer) and optimizer.built:
        saved["optimizer"] = type(optimizer).from_config(optimizer.get_config())
    new.compile(**saved)

