"""The `deterministic` knob."""

from __future__ import annotations

from typing import Any

from fitspeed.core.backends import backend_of
from fitspeed.core.knobs.base import Knob, Lines, Offer, Process, Recipe, Where, as_bool


class Determinism(Knob):
    """Measured for its cost alone: a user who wants determinism learns what it costs; never recommended.

    Applied in two stages: its flags before import (`core.import_environment`),
    and deterministic ops after import, once the process is seeded (`apply`).
    """

    step = "determinism"

    def offer(self, where: Where) -> Offer:
        return Offer(values=(True,), cost_only=True)

    def apply(self, value: Any, process: Process) -> None:
        if value:
            process.enable_determinism()

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        if not value:
            return {}
        return {"before_import": ['os.environ["TF_DETERMINISTIC_OPS"] = "1"'],
                "process": ["keras.utils.set_random_seed(0)", *backend_of(recipe.config.backend).determinism_lines()]}


DETERMINISTIC = Determinism(
    name="deterministic",
    description="Deterministic ops plus fixed seeds (TF op determinism, XLA or torch flags).",
    values="true, false",
    default=False,
    scope="process",
    stage="process",
    parse=lambda raw: as_bool("deterministic", raw),
    changes_numerics=True,
)
