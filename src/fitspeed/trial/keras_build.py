"""A compiled model's training state built before `fit()`: the one place that uses Keras's private `_symbolic_build`.

With no distribution strategy, Keras 3 on TensorFlow builds the optimizer's
slots and the compiled metrics inside the first trace of the train step
(`TensorFlowTrainer._maybe_symbolic_build` defers it). tf.function, having
seen variables made in that trace, traces the step again. Under a strategy,
and on JAX and PyTorch, Keras builds them first from one batch's shapes
(`Trainer._symbolic_build`); doing the same before `fit()` traces the step
once. A model made under a strategy is left to `fit()`, which builds it
first inside the strategy's scope.

The weights, losses and held-out figures are bit-identical
(tests/trial/test_keras_build.py). The guard's train-mode runs, which read
no time, take it (`TrialSpec.build_first`; docs/benchmarks/guard_build_first.md).
A time trial does not: its compile time is what the user's own `fit()` pays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fitspeed.trial.data.kinds import FitArgs


def batch_of(args: FitArgs) -> Any | None:
    """The (x, y, sample_weight) of one batch of `args`, enough for its shapes and dtypes; None where only
    drawing a batch would tell (a PyDataset, a generator), which `fit()` then builds from as it always does.

    >>> import numpy as np
    >>> x, y = batch_of({"x": np.zeros((8, 3)), "y": np.zeros(8), "batch_size": 4})[:2]
    >>> x.shape, y.shape
    ((4, 3), (4,))
    >>> batch_of({"x": iter([])}) is None
    True
    """
    x = args["x"]
    if "batch_size" in args:  # arrays, or dicts and lists of them
        import keras

        n = args["batch_size"]
        return keras.tree.map_structure(lambda a: None if a is None else a[:n],
                                        (x, args.get("y"), args.get("sample_weight")))
    return getattr(x, "element_spec", None)  # a tf.data.Dataset: its batches' shapes and dtypes


def before_fit(model: Any, args: FitArgs) -> bool:
    """Build `model`'s weights, loss, metrics and optimizer for `args`' batches, as Keras does under a
    strategy; False where it could not (nothing is then changed that `fit()` would not build itself)."""
    if getattr(model, "_distribute_strategy", None) is not None:
        return False  # built under a strategy: fit() builds first itself, inside the strategy's scope
    batch = batch_of(args)
    build = getattr(model, "_symbolic_build", None)
    if batch is None or build is None:
        return False
    try:
        build(data_batch=batch)
    except Exception:  # a model Keras cannot build from shapes alone builds in fit(), as without this
        return False
    return True
