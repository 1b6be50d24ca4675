"""The `deterministic` knob."""

from __future__ import annotations

from fitspeed.core.knobs.base import Knob, as_bool


DETERMINISTIC = Knob(
    name="deterministic",
    description="Deterministic ops plus fixed seeds (TF op determinism, XLA or torch flags).",
    values="true, false",
    default=False,
    scope="process",
    stage="environment",
    parse=lambda raw: as_bool("deterministic", raw),
    changes_numerics=True,
)
