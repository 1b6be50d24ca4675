"""The parsers of option values that a person types: a memory size, a duration, a list of integers.

`fitspeed tune --time 20m --memory-limit 4GiB` and `fitspeed.tune(time="20m",
memory_limit="4GiB")` read them with the same functions, and refuse the
same mistakes with the same sentence.
"""

from __future__ import annotations

import re

from fitspeed.core.errors import UserError

_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_MEMORY_UNITS = {"": 1.0, "k": 1 / 1024, "kb": 1 / 1024, "kib": 1 / 1024, "m": 1.0, "mb": 1.0, "mib": 1.0,
                 "g": 1024.0, "gb": 1024.0, "gib": 1024.0, "t": 1024.0**2, "tb": 1024.0**2, "tib": 1024.0**2}
_TIME_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def _quantity(text: str, units: dict[str, float], option: str, examples: str) -> float:
    """A number with an optional unit, scaled by `units`; a UserError otherwise."""
    match = _QUANTITY.match(text)
    if not match or match.group(2).lower() not in units:
        raise UserError(f"Expected {option} as {examples}. Received: {text!r}.")
    value = float(match.group(1)) * units[match.group(2).lower()]
    if value <= 0:  # a zero budget or limit cannot measure even the baseline
        raise UserError(f"Expected {option} to be more than zero, as {examples}. Received: {text!r}.")
    return value


def parse_memory(text: str | None) -> int | None:
    """MiB from '2048', '512MiB', '4GiB' or '1.5G'.

    >>> parse_memory("4GiB"), parse_memory("1.5G"), parse_memory("2048")
    (4096, 1536, 2048)
    """
    if text is None:
        return None
    mib = _quantity(text, _MEMORY_UNITS, "--memory-limit", "a size such as 4GiB, 512MiB or 2048 (MiB)")
    return max(1, int(mib))


def parse_duration(text: str | None) -> float | None:
    """Seconds from '90', '90s', '20m' or '1.5h'.

    >>> parse_duration("20m"), parse_duration("1.5h")
    (1200.0, 5400.0)
    """
    if text is None:
        return None
    return _quantity(text, _TIME_UNITS, "--time", "a duration such as 90s, 20m or 1h")


def parse_int_list(text: str | None, option: str) -> tuple[int, ...]:
    """Positive integers from '32,64,128'; () for none.

    >>> parse_int_list("1,2,4", "--devices"), parse_int_list(None, "--batch-sizes")
    ((1, 2, 4), ())
    """
    if not text:
        return ()
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise UserError(f"Expected {option} as positive integers separated by commas, such as "
                        f"32,64,128. Received: {text!r}.")
    return values
