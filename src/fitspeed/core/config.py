"""`TrialConfig`: the frozen, validated set of knob values for one trial.

Its fields are the knob table, `fitspeed.core.knobs.KnobValues`, made from the registry `KNOBS`: a knob is
declared once, in its own module.
A config is validated when it is made: unknown keys, bad values and values the
chosen backend cannot do are refused with a `KnobError`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fitspeed.core.errors import KnobError
from fitspeed.core.json_data import JSONObject
from fitspeed.core.knobs import KNOBS_BY_NAME, KnobValues, get_knob, parse_assignment


@dataclass(frozen=True)
class TrialConfig(KnobValues):
    """The knob values of one trial: the knob table's fields (`KnobValues`), validated. Defaults are Keras's own."""

    if TYPE_CHECKING:  # the fields come from the registry at run time; mypy reads them from `KnobValues`' typed view
        def __init__(self, **values: Any) -> None: ...

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            knob = get_knob(field.name)
            value = knob.parse(getattr(self, field.name))
            object.__setattr__(self, field.name, value)
        for field in dataclasses.fields(self):
            knob = KNOBS_BY_NAME[field.name]
            reason = knob.unsupported(getattr(self, field.name), self.backend)
            if reason:
                raise KnobError(
                    f"The {self.backend} backend cannot do "
                    f"{field.name}={getattr(self, field.name)!r}: {reason}. "
                    f"Drop that setting or choose another backend with --set backend=..."
                )

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrialConfig:
        """Build from a mapping of knob names; unknown names are refused."""
        for name in values:
            get_knob(name)
        return cls(**dict(values))

    @classmethod
    def from_assignments(
        cls, assignments: Iterable[str], base: TrialConfig | None = None
    ) -> TrialConfig:
        """Apply `name=value` strings, in order, on top of `base`."""
        values = (base or cls()).to_dict()
        given: dict[str, str] = {}
        for text in assignments:
            name, value = parse_assignment(text)
            if name in given:
                raise KnobError(
                    f"Expected each knob once. Received: {name} twice ({given[name]!r} and {text!r}). "
                    "Keep the one you mean."
                )
            given[name] = text
            values[name] = value
        return cls.from_dict(values)

    def replace(self, **changes: Any) -> TrialConfig:
        return self.from_dict({**self.to_dict(), **changes})

    def to_dict(self) -> JSONObject:
        # every knob value is a scalar (str, int, bool): a shallow copy is asdict's answer, without its deep copies
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    def changed(self) -> dict[str, Any]:
        """The knobs that differ from their defaults."""
        return {
            name: value
            for name, value in self.to_dict().items()
            if value != KNOBS_BY_NAME[name].default
        }

    def label(self) -> str:
        """A short human label such as `steps_per_execution=32 jit_compile=True`."""
        changed = self.changed()
        if not changed:
            return "defaults"
        return " ".join(f"{name}={value}" for name, value in changed.items())


# The knobs a key has carried at their defaults since studies were first stored. A knob added since enters a
# key only where it differs from its default, so adding one leaves every stored key, decision id and pair order
# (`decider.pair_order`, seeded by the id) as it was.
KEYED_AT_DEFAULT = frozenset((
    "backend", "batch_size", "devices", "steps_per_execution", "jit_compile", "precision", "auto_scale_loss",
    "data_format", "remat", "deterministic", "onednn", "intra_op_threads", "inter_op_threads", "prefetch",
    "map_parallelism", "cache", "vectorize", "shuffle_buffer", "interleave", "data_deterministic", "data_autotune",
    "workers", "use_multiprocessing", "max_queue_size"))


def config_key(config: TrialConfig) -> str:
    """The configuration's key in a study's storage: its knob values, those added since at their defaults left out.

    >>> set(json.loads(config_key(TrialConfig()))) == KEYED_AT_DEFAULT
    True
    """
    changed = config.changed()
    return json.dumps({name: value for name, value in config.to_dict().items()
                       if name in KEYED_AT_DEFAULT or name in changed}, sort_keys=True)
