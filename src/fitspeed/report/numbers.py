"""How figures are written for people, in the terminal tables and the HTML page alike."""

from __future__ import annotations

from fitspeed.core.sequential import level

__all__ = ["level", "number", "ratio", "si"]


def number(value: float | None, digits: int = 0) -> str:
    """A figure with thousands separators, or a dash when there is none.

    >>> number(12345.678), number(0.1234, 2), number(None)
    ('12,346', '0.12', '–')
    """
    return "–" if value is None else f"{value:,.{digits}f}"


def ratio(value: float | None) -> str:
    """A speed ratio, such as a configuration's against the baseline's.

    >>> ratio(1.2345), ratio(None)
    ('1.23×', '–')
    """
    return "–" if value is None else f"{value:.2f}×"


def si(value: float | None, unit: str) -> str:
    """A figure with an SI prefix, such as FLOPs or FLOP/s.

    >>> si(9914731.5, "FLOP"), si(3.75e10, "FLOP/s"), si(512, "FLOP"), si(None, "FLOP")
    ('9.91 MFLOP', '37.5 GFLOP/s', '512 FLOP', '–')
    """
    if value is None:
        return "–"
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"
