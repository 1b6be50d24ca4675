"""What the input knobs share: `InputKnob`, searched where the data's kind runs it (`fitspeed.core.input_kinds`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fitspeed.core.input_kinds import why_not
from fitspeed.core.knobs.base import Knob, Offer, Where


def _none(workers: int) -> tuple[Any, ...]:
    return ()


@dataclass(frozen=True)
class InputKnob(Knob):
    """A tf.data or PyDataset knob: `tried(workers)` gives the values a search tries, `workers` being max(2, cores).

    `not_searched` says why a search never tries it (a training choice, not a
    speed knob), or is None.
    """

    tried: Callable[[int], tuple[Any, ...]] = _none
    not_searched: str | None = None

    def offer(self, where: Where) -> Offer:
        """
        >>> from fitspeed.core.config import TrialConfig
        >>> from fitspeed.core.knobs.tf_data import MAP_PARALLELISM
        >>> MAP_PARALLELISM.offer(Where(TrialConfig(), False, 4, "images", "tiny", None)).values
        ('autotune', 4)
        >>> MAP_PARALLELISM.offer(Where(TrialConfig(), False, 4, None, "tiny", None)).skipped
        'the kind of your data is known once the baseline trial loads it'
        """
        if where.data_kind is None:
            return Offer(skipped="the kind of your data is known once the baseline trial loads it")
        why = why_not(self.name, where.data_kind, where.backend) or self.not_searched
        return Offer(skipped=why) if why else Offer(values=self.tried(max(2, where.cores)))
