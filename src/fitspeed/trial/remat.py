"""The `remat` knob's check that `keras.RematScope` took, and why a training script cannot have it.

Keras 3.15 reads the scope when a layer is created (`Operation.__init__` keeps
`get_current_remat_mode()` as `_remat_mode`), and a layer with a mode wraps its
call in the backend's rematerialization when it runs: `jax.checkpoint` on JAX,
`torch.utils.checkpoint.checkpoint` on PyTorch. On TensorFlow it is
`tf.recompute_grad`, which refuses keyword arguments outside eager execution,
so a compiled train step fails there: `fitspeed.core.backends` says so and the
knob is refused on that backend. Under mode "full" every layer created inside
the scope is rematerialized, the model itself too.

A built model cannot be put under the scope afterwards, so the scope has to be
open while the model is built: the knob's own `build_scope`
(`fitspeed.core.knobs.remat`), which `fitspeed.trial.apply.model_scope` opens
around `fitspeed.trial.models.build` (a built-in model, a user's builder, a
`.keras` file rebuilt from its config) and around the rewrite that rebuilds
layers (`data_format`). `check` then counts the layers it covered. A user's training
script builds its model in its own code, where fitspeed opens no scope: the
knob is refused there with `SCRIPT_REASON`.

Runs in the trial child only.
"""

from __future__ import annotations

from typing import Any

from fitspeed.core.config import TrialConfig
from fitspeed.trial.transform import Refused

SCRIPT_REASON = (
    "remat is not applied to a training command: keras.RematScope acts on the layers created inside it, and a "
    "script builds its model in its own code, outside any scope fitspeed can open honestly. Wrap your model's "
    "construction in `with keras.RematScope(mode=\"full\"):` yourself, and measure that"
)


def layers_under(model: Any, mode: str) -> tuple[int, int]:
    """(layers built under remat `mode`, all layers) of `model`, nested ones and the model itself included."""
    layers = list(model._flatten_layers(include_self=True, recursive=True))
    return sum(getattr(getattr(layer, "_remat_mode", None), "mode", None) == mode for layer in layers), len(layers)


def check(model: Any, config: TrialConfig) -> str | None:
    """The record's note on what remat covered, or Refused if it covered nothing; None with remat=off."""
    if config.remat == "off":
        return None
    covered, total = layers_under(model, config.remat)
    if not covered:
        raise Refused(
            f"remat={config.remat} covered no layer of the model: its layers were created before fitspeed opened "
            "keras.RematScope (a builder that returns a model it built earlier). Build the model inside the "
            "function fitspeed calls"
        )
    return f"remat={config.remat}: {covered} of {total} layers built inside keras.RematScope(mode={config.remat!r})"
