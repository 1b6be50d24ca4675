"""The model's training step as a TensorFlow graph: its FLOPs, its layers' op names, what keeps XLA out.

Runs in the trial child, TensorFlow backend only (`fitspeed doctor --model`).

- **Layer scopes.** Keras 3 names each layer's ops under a TensorFlow name
  scope that TensorFlow may make unique (`convnet_1/conv2d_1_2/convolution`
  for the second Conv2D of a Sequential named `convnet`), so a layer's name
  alone does not find its ops. `trace` wraps every layer's `call` while the
  step is traced and records the name scope each layer's call ran in. The
  same model traced again (Keras's own `train_function`, which the profiler
  sees) gets the same scopes; `layer_of` maps an op name back to its layer.
- **FLOPs.** `tf.compat.v1.profiler` with `float_operation()` counts the
  floating-point operations of every op that registers a count (MatMul,
  Conv2D and its two gradients, BiasAdd, pooling, ...) in the traced graph of
  one step on a 2-sample batch: forward, loss and gradients, without the
  optimizer's update. Forward FLOPs are the ops outside `gradient_tape/`.
  Ops without a registered count (Einsum, a while loop's body run N times)
  are not counted, so the total is a lower bound for RNNs and attention.
- **XLA.** Inspecting: ops of the traced step that run Python
  (`EagerPyFunc`, `PyFunc`: `tf.py_function`, `tf.numpy_function`) cannot be
  compiled. Trying: the same step under `tf.function(jit_compile=True)`, run
  once on the 2-sample batch; XLA's refusal names the node, mapped to its layer.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

PYTHON_OPS = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})
PROBE = 2  # samples in the traced step
_NODE = re.compile(r"\{\{node ([^}]+)\}\}")


@dataclass(frozen=True)
class Scopes:
    """Each layer's name scope in a traced step, most specific first."""

    by_scope: tuple[tuple[str, str, str], ...] = ()  # (scope, layer name, layer class)
    model_scope: str | None = None

    def layer_of(self, op: str) -> tuple[str, str] | None:
        """(layer name, class) of the op named `op`, or None if it is outside every layer.

        >>> scopes = Scopes((("m_1/conv2d_1_2", "conv2d_1", "Conv2D"), ("m_1/conv2d_1", "conv2d", "Conv2D")), "m_1")
        >>> scopes.layer_of("gradient_tape/m_1/conv2d_1_2/convolution/Conv2DBackpropFilter")
        ('conv2d_1', 'Conv2D')
        >>> scopes.layer_of("m_1/conv2d_1/Relu"), scopes.layer_of("adam/truediv_9")
        (('conv2d', 'Conv2D'), None)
        """
        name = op.removeprefix("gradient_tape/")
        for scope, layer, kind in self.by_scope:
            if name == scope or name.startswith(scope + "/"):
                return layer, kind
        return None

    def group_of(self, op: str) -> str:
        """A layer's name, or the part of the step outside the layers (the loss, the optimizer).

        >>> scopes = Scopes((("m_1/dense_1", "dense", "Dense"),), "m_1")
        >>> scopes.group_of("adam/truediv_9"), scopes.group_of("Add_1/ReadVariableOp")
        ('(outside: adam)', '(unscoped: input, runtime)')
        """
        found = self.layer_of(op)
        if found:
            return found[0]
        name = op.removeprefix("gradient_tape/")
        head = name.split("/", 1)[0]
        if "/" not in name or head[:1].isupper():  # TensorFlow's own names (GatherV2, Add_1): no Keras scope
            return "(unscoped: input, runtime)"
        if head == self.model_scope:
            return "(the model itself)"
        return f"(outside: {head})"


@dataclass
class TracedStep:
    scopes: Scopes
    flops: dict[str, Any] = field(default_factory=dict)
    python_ops: list[dict[str, str]] = field(default_factory=list)


@contextmanager
def _recording(model: Any, found: list[tuple[str, str, str]]) -> Iterator[None]:
    """Wrap every layer's `call` to note the TensorFlow name scope it runs in."""
    import tensorflow as tf

    layers = [model, *model._flatten_layers(include_self=False, recursive=True)]
    wrapped = []
    for layer in layers:
        real = layer.call

        def call(*args: Any, _layer: Any = layer, _real: Any = real, **kwargs: Any) -> Any:
            found.append((tf.get_current_name_scope(), _layer.name, type(_layer).__name__))
            return _real(*args, **kwargs)

        object.__setattr__(layer, "call", call)  # an instance attribute: Keras's tracking stays out of it
        wrapped.append(layer)
    try:
        yield
    finally:
        for layer in wrapped:
            layer.__dict__.pop("call", None)


def probe_batch(data: Any, batch: int) -> tuple[Any, Any]:
    """The first PROBE samples of one batch the trial's data gives: (x, y)."""
    import tensorflow as tf

    from fitspeed.trial.doctor import in_memory

    x, y = next(iter(in_memory(data, batch, count=1).source))[:2]
    return tf.nest.map_structure(lambda t: t[:PROBE], x), tf.nest.map_structure(lambda t: t[:PROBE], y)


def _step(model: Any) -> Any:
    import tensorflow as tf

    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(x=x, y=y, y_pred=y_pred, training=True)
        return loss, tape.gradient(loss, model.trainable_variables)

    return step


def trace(model: Any, x: Any, y: Any) -> TracedStep:
    """Trace one training step on (x, y): the layers' scopes, FLOPs and the ops that run Python."""
    import tensorflow as tf

    found: list[tuple[str, str, str]] = []
    with _recording(model, found):
        concrete = tf.function(_step(model)).get_concrete_function(x, y)
    top = next((scope for scope, name, _ in found if name == model.name), None)
    layers = {(scope, name, kind) for scope, name, kind in found if name != model.name and scope}
    scopes = Scopes(tuple(sorted(layers, key=lambda item: -len(item[0]))), top)
    traced = TracedStep(scopes)
    for op in concrete.graph.get_operations():
        if op.type in PYTHON_OPS:
            layer = scopes.layer_of(op.name)
            traced.python_ops.append({"op": op.name, "type": op.type, "layer": layer[0] if layer else op.name})
    try:
        traced.flops = _flops(concrete, scopes)
    except Exception as error:  # the count is best effort: say why it is missing
        traced.flops = {"error": f"{type(error).__name__}: {error}"[:500]}
    return traced


def _flops(concrete: Any, scopes: Scopes) -> dict[str, Any]:
    """FLOPs per sample of the traced step, in all, forward only, and by layer."""
    import tensorflow as tf

    # The traced graph itself, not a frozen copy: freezing turns variables into constants, which fails on a
    # BatchNormalization's moving-statistics updates (an AssignVariableOp on a constant); the variables' reads
    # carry their shapes, so every op counts the same as in a frozen graph of a model without them.
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    tree = tf.compat.v1.profiler.profile(graph=concrete.graph, run_meta=tf.compat.v1.RunMetadata(), cmd="scope",
                                         options=options)
    live = _live_ops(concrete)
    total = forward = 0
    by_layer: dict[str, int] = {}
    pending = list(tree.children)
    while pending:
        node = pending.pop()
        pending.extend(node.children)
        if not node.float_ops or node.name not in live:
            continue
        total += node.float_ops
        if not node.name.startswith("gradient_tape/"):
            forward += node.float_ops
        group = scopes.group_of(node.name)
        by_layer[group] = by_layer.get(group, 0) + node.float_ops
    return {
        "per_sample": total / PROBE,
        "forward_per_sample": forward / PROBE,
        "by_layer": {k: v / PROBE for k, v in sorted(by_layer.items(), key=lambda item: -item[1])},
        "method": "tf.compat.v1.profiler float_operation() over one traced training step "
                  "(forward, loss and gradients; the optimizer's update is not counted)",
    }


def _live_ops(concrete: Any) -> set[str]:
    """The ops a step runs: those its outputs and its variable updates need.

    A gradient op TensorFlow adds but nothing reads (the first convolution's
    gradient with respect to the input images) is traced, never run, and not
    counted; freezing the graph used to prune it.
    """
    graph = concrete.graph
    stack = [tensor.op for tensor in concrete.outputs]
    stack += [op for op in graph.get_operations() if op.type.startswith(("Assign", "ResourceApply"))]
    seen: set[str] = set()
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        stack.extend(tensor.op for tensor in op.inputs)
        stack.extend(op.control_inputs)
    return seen


def try_xla(model: Any, x: Any, y: Any, scopes: Scopes) -> dict[str, Any]:
    """Compile and run one training step with XLA: does it compile, and which layer stops it if not."""
    import tensorflow as tf

    started = time.perf_counter()
    try:
        tf.function(_step(model), jit_compile=True)(x, y)
    except Exception as error:
        text = str(error)
        layers = []
        for node in _NODE.findall(text):
            layer = scopes.layer_of(node.removeprefix("StatefulPartitionedCall/"))
            if layer and layer[0] not in layers:
                layers.append(layer[0])
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return {"compiles": False, "layers": layers, "error": f"{type(error).__name__}: {lines[0] if lines else ''}"[:400],
                "seconds": time.perf_counter() - started, "how": "tried: one training step under jit_compile=True"}
    return {"compiles": True, "layers": [], "seconds": time.perf_counter() - started,
            "how": "tried: one training step under jit_compile=True"}
