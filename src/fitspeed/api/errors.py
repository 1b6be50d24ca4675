"""A user's mistake, from Python, reads as one sentence: the traceback of fitspeed's insides is left out."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from fitspeed.core.errors import UserError

F = TypeVar("F", bound=Callable[..., Any])


def said(function: F) -> F:
    """A public call whose user error reads as one sentence: the traceback starts and is hidden here.

    A `UserError` raised anywhere below (the shipping, a knob, the
    baseline's trial) is raised again from this frame with no traceback of
    its own, and IPython (and pytest) hide a frame that sets
    `__tracebackhide__`: a notebook shows the user's own line and the
    sentence, never fitspeed's insides.
    """
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # noqa: F841 - read by IPython and pytest
        try:
            return function(*args, **kwargs)
        except UserError as error:
            raise error.with_traceback(None) from None

    return cast(F, call)
