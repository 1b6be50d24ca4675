"""The `remat` knob."""

from __future__ import annotations

import contextlib
from typing import Any

from fitspeed.core.knobs.base import Knob, Lines, Recipe, as_choice


class Remat(Knob):
    """The model built inside keras.RematScope (`build_scope`): the snippet wraps the user's build in it.

    Keras reads the scope when a layer is created, so it is open while the
    trial builds the model (`fitspeed.trial.apply.model_scope`); the trial
    then checks that it took (`fitspeed.trial.remat.check`).
    """

    def build_scope(self, value: Any) -> contextlib.AbstractContextManager[Any]:
        """Inside, layers created get remat mode `value`; with off, nothing changes.

        >>> with REMAT.build_scope("off"):
        ...     pass
        """
        if value == "off":
            return contextlib.nullcontext()
        import keras

        return keras.RematScope(mode=value)

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        if value == self.default:  # keras.RematScope acts on the layers created inside it
            return {}
        return {"build": ["", "# Build the model inside the scope: its layers' activations are recomputed in the "
                          "backward pass.", f"with keras.RematScope(mode={value!r}):",
                          "    model = build_model()  # your own"]}


REMAT = Remat(
    name="remat",
    description="Rematerialization: the model built inside keras.RematScope(mode=...), its layers' activations "
    "recomputed in the backward pass (less memory, more compute). Tried by tune --batch-sizes on a size that "
    "ran out of memory, never by the screen.",
    values="off, full",
    default="off",
    scope="model",
    stage="model",
    parse=lambda raw: as_choice("remat", raw, ("off", "full")),
)
