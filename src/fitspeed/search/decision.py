"""A paired decision, typed: B against A in fresh pairs, as the decider returns, stores and announces it.

The decider returns a `Decision`, the `DecisionMade` event carries it, and
the ledger hands it back; only the study's storage holds it as plain data
under its key (`ledger`): `to_dict` writes that, `from_dict` reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from fitspeed.core.config import TrialConfig
from fitspeed.core.json_data import JSONObject
from fitspeed.core.sequential import Noise, Verdict
from fitspeed.search.phase import CHOICES, Phase


class LostPair(TypedDict):
    """A pair one of whose trials failed (`side`: "a" or "b"): kept in the decision with the trial's status and
    reason, without a ratio. The decider loses a pair to A's trial only (B's failure ends its decision); the lean
    step's pass to either side's."""

    pair: int
    order: str
    status: str
    reason: str
    side: str


@dataclass(frozen=True)
class Decision:
    """`b` against `a`, for `purpose` (a `Phase`: screen, combine, bundle, choose, race, sampler, verify, ...).

    `pairs` holds each pair's samples/s as (a, b), `orders` the order each
    ran in ("AB" or "BA"), `lost_pairs` each pair one of whose trials failed (its
    index, order, side, status and reason: kept, though it has no ratio); `ratio` is the estimate of b/a and `low`..`high`
    its interval at `confidence`, None where there were too few pairs.

    >>> decision = Decision.from_dict({"id": "c1", "purpose": "combine", "a": {}, "b": {"jit_compile": True},
    ...     "verdict": "faster", "pairs": [[100.0, 150.0]], "orders": ["BA"], "ratio": 1.5, "low": 1.2,
    ...     "high": 1.9, "confidence": 0.9, "noise": {"sd": 0.1, "df": 8, "source": "the screen"}, "why": None})
    >>> decision.verdict, decision.purpose, decision.b_label, decision.noise.df
    (<Verdict.FASTER: 'faster'>, <Phase.COMBINE: 'combine'>, 'jit_compile=True', 8)

    `to_dict` is the stored form, in the order the study has always stored it, and reads back the same:

    >>> list(decision.to_dict())[:3], Decision.from_dict(decision.to_dict()) == decision
    (['verdict', 'pairs', 'ratio'], True)
    """

    id: str
    purpose: Phase
    a: TrialConfig
    b: TrialConfig
    verdict: Verdict
    pairs: tuple[tuple[float, float], ...] = ()
    orders: tuple[str, ...] = ()
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float = 0.95
    noise: Noise | None = None
    min_gain: float | None = None
    why: str | None = None
    design: Mapping[str, Any] | None = field(default=None, compare=False)
    lost_pairs: tuple[LostPair, ...] = field(default=(), compare=False)  # pairs whose A trial failed
    measured_by: tuple[str, ...] = field(default=(), compare=False)  # each pair's design: lockstep or sequential

    @property
    def measured_as(self) -> str:
        """How its pairs were measured, in words: "lockstep rounds", "sequential pairs", or both with counts.

        >>> Decision("x", Phase.COMBINE, TrialConfig(), TrialConfig(), Verdict.FASTER,
        ...          measured_by=("lockstep", "lockstep", "sequential")).measured_as
        'lockstep rounds (2), sequential pairs (1)'
        """
        together, apart = self.measured_by.count("lockstep"), self.measured_by.count("sequential")
        if together and apart:
            return f"lockstep rounds ({together}), sequential pairs ({apart})"
        return "lockstep rounds" if together else "sequential pairs" if apart else ""

    @property
    def a_label(self) -> str:
        return self.a.label()

    @property
    def b_label(self) -> str:
        return self.b.label()

    @property
    def is_choice(self) -> bool:
        """A choice (`CHOICES`: B kept when its estimate leans its way over a fixed few pairs), never a claim."""
        return self.purpose in CHOICES

    @property
    def kept(self) -> str:
        """A choice's verdict as the tables and the terminal say it: kept or not kept."""
        return "kept" if self.verdict.is_faster() else "not kept"

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Decision:
        noise = values.get("noise")
        return cls(
            id=str(values["id"]), purpose=Phase(values["purpose"]),
            a=TrialConfig.from_dict(dict(values["a"])), b=TrialConfig.from_dict(dict(values["b"])),
            verdict=Verdict(values.get("verdict") or Verdict.NOT_CONFIRMED),
            pairs=tuple((float(a), float(b)) for a, b in values.get("pairs") or ()),
            orders=tuple(values.get("orders") or ()), ratio=values.get("ratio"), low=values.get("low"),
            high=values.get("high"), confidence=float(values.get("confidence") or 0.95),
            noise=Noise(float(noise["sd"]), int(noise["df"]), str(noise.get("source", ""))) if noise else None,
            min_gain=values.get("min_gain"), why=values.get("why"), design=values.get("design"),
            lost_pairs=tuple(LostPair(pair=int(p["pair"]), order=str(p["order"]), status=str(p["status"]),
                                      reason=str(p["reason"]), side=str(p.get("side", "a")))
                             for p in values.get("lost_pairs") or ()),
            measured_by=tuple(values.get("measured_by") or ()))

    def to_dict(self) -> JSONObject:
        """The stored form (`Ledger.put_decision`): plain data, in the order the study has always stored it."""
        return {"verdict": self.verdict, "pairs": [list(p) for p in self.pairs], "ratio": self.ratio,
                "low": self.low, "high": self.high, "confidence": self.confidence,
                "noise": self.noise.to_dict() if self.noise else None, "id": self.id, "purpose": self.purpose,
                "a": self.a.to_dict(), "b": self.b.to_dict(), "a_label": self.a_label, "b_label": self.b_label,
                "orders": list(self.orders), "design": dict(self.design) if self.design else None,
                "min_gain": self.min_gain, "why": self.why, "lost_pairs": [dict(p) for p in self.lost_pairs],
                **({"measured_by": list(self.measured_by)} if self.measured_by else {})}
