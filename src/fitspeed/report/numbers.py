"""How figures are written for people, in the terminal tables and the HTML page alike."""

from __future__ import annotations


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
