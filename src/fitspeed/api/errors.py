"""A user's mistake, from Python, reads as one sentence: the traceback of fitspeed's insides is left out."""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from fitspeed.core.errors import UserError

F = TypeVar("F", bound=Callable[..., Any])
PACKAGE = str(Path(__file__).resolve().parents[1])  # the fitspeed package's folder


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


def users_frames(traceback: types.TracebackType | None) -> types.TracebackType | None:
    """`traceback` without the frames of fitspeed's own files: the user's lines alone."""
    kept = []
    while traceback is not None:
        if not str(Path(traceback.tb_frame.f_code.co_filename).resolve()).startswith(PACKAGE):
            kept.append(traceback)
        traceback = traceback.tb_next
    chain = None
    for frame in reversed(kept):
        chain = types.TracebackType(chain, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
    return chain


def _hook(kind: type[BaseException], error: BaseException, traceback: types.TracebackType | None) -> None:
    if isinstance(error, UserError):  # the printer reads the error's own traceback: that is the one to trim
        traceback = users_frames(traceback)
        error.with_traceback(traceback)
    sys.__excepthook__(kind, error, traceback)


def install_hook() -> None:
    """In a plain Python process, a `UserError` left uncaught prints the user's lines and the sentence, without
    fitspeed's frames (IPython hides them by `__tracebackhide__`; a hook someone else set is left alone)."""
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = _hook
