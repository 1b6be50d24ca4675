"""`TrialConfig`: the frozen, validated set of knob values for one trial.

Every field is a knob of `fitspeed.core.knobs.KNOBS` (a test holds the two in step).
A config is validated when it is made: unknown keys, bad values and values the
chosen backend cannot do are refused with a `KnobError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fitspeed.core.errors import KnobError
from fitspeed.core.knobs import KNOBS_BY_NAME, get_knob, parse_assignment


@dataclass(frozen=True)
class TrialConfig:
    """The knob values of one trial. Defaults are Keras's own defaults."""

    backend: str = "tensorflow"
    batch_size: int = 32
    devices: int = 1
    steps_per_execution: int = 1
    jit_compile: bool | str = "auto"
    precision: str = "float32"
    data_format: str = "channels_last"
    deterministic: bool = False
    onednn: bool | str = "keep"
    intra_op_threads: int = 0
    inter_op_threads: int = 0
    prefetch: int | str = "off"
    map_parallelism: int | str = 1
    cache: str = "off"
    vectorize: bool = False
    shuffle_buffer: int = 0
    interleave: int = 1
    data_deterministic: bool = True
    data_autotune: bool = True
    workers: int = 0
    use_multiprocessing: bool | str = "keep"
    max_queue_size: int = 0

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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

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
