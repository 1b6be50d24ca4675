"""The `deterministic` knob."""

from __future__ import annotations

from fitspeed.core.knobs.base import Knob, Offer, Where, as_bool


class Determinism(Knob):
    """Measured for its cost alone: a user who wants determinism learns what it costs; never recommended."""

    def offer(self, where: Where) -> Offer:
        return Offer(values=(True,), cost_only=True)


DETERMINISTIC = Determinism(
    name="deterministic",
    description="Deterministic ops plus fixed seeds (TF op determinism, XLA or torch flags).",
    values="true, false",
    default=False,
    scope="process",
    stage="environment",
    parse=lambda raw: as_bool("deterministic", raw),
    changes_numerics=True,
)
