"""The `backend` knob."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fitspeed.core.knobs.base import BACKENDS, Knob, Lines, Recipe, as_choice


class BackendKnob(Knob):
    """KERAS_BACKEND, set before keras is imported, first (`environment`; the snippet's `os.environ` line)."""

    environment_step = "backend"
    exported = False  # the snippet sets it in Python, before importing keras

    def environment(self, value: Any, environ: Mapping[str, str], config: Any) -> dict[str, str]:
        """
        >>> BACKEND.environment("jax", {"KERAS_BACKEND": "torch"}, None)
        {'KERAS_BACKEND': 'jax'}
        """
        return {"KERAS_BACKEND": value}

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        return {} if value == self.default else {"before_import": [f'os.environ["KERAS_BACKEND"] = "{value}"']}


BACKEND = BackendKnob(
    name="backend",
    description="Keras backend that runs the model (KERAS_BACKEND).",
    values="tensorflow, jax, torch",
    default="tensorflow",
    scope="process",
    stage="environment",
    parse=lambda raw: as_choice("backend", raw, BACKENDS),
    changes_numerics=True,
)
