"""The `allocator` knob: the process's malloc, swapped for tcmalloc or jemalloc through LD_PRELOAD.

Intel's and PyTorch's CPU performance guides both recommend a faster allocator
for training; TensorFlow and XLA allocate and free many small buffers per step.
The dynamic loader reads LD_PRELOAD once, when a process starts: a trial's
process and the command `fitspeed run` starts are started with it
(`Knob.at_start`), best.json exports it, and `fitspeed.apply()` inside a running
Python can only say that it came too late. The knob is offered where the
library is found (Debian's libtcmalloc-minimal4 and libjemalloc2), and refused
with the package to install elsewhere.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from typing import Any

from fitspeed.core.errors import KnobError
from fitspeed.core.knobs.base import Knob, Offer, Where

VARIABLE = "LD_PRELOAD"
SYSTEM = "system"
# each allocator's shared library, and the Debian package that installs it
LIBRARIES = {"tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
             "jemalloc": ("libjemalloc.so.2", "libjemalloc2")}
FOLDERS = ("/usr/lib/*-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib", "/lib/*-linux-gnu")


def library(name: str) -> str | None:
    """The path of allocator `name`'s shared library on this machine, or None.

    >>> library("system") is None
    True
    """
    if name not in LIBRARIES:
        return None
    for folder in FOLDERS:
        for found in sorted(glob.glob(os.path.join(folder, LIBRARIES[name][0]))):
            if os.path.isfile(found):
                return found
    return None


def _preloaded(environ: Mapping[str, str]) -> list[str]:
    """The libraries LD_PRELOAD names in `environ` (the loader takes spaces or colons between them)."""
    return environ.get(VARIABLE, "").replace(":", " ").split()


def _missing(name: str) -> str:
    return (f"{LIBRARIES[name][0]} is not installed on this machine: install it (apt-get install "
            f"{LIBRARIES[name][1]}), or keep allocator={SYSTEM}")


def _parse(raw: object) -> str:
    text = str(raw).strip().lower()
    if text not in (SYSTEM, *LIBRARIES):
        raise KnobError(f"Expected `allocator` to be one of {SYSTEM}, {', '.join(LIBRARIES)}. Received: {raw!r}. "
                        "Use for example --set allocator=jemalloc.")
    if text != SYSTEM and library(text) is None:
        raise KnobError(f"Expected allocator={text} to be loadable. Received: {_missing(text)}.")
    return text


class Allocator(Knob):
    """tcmalloc or jemalloc in LD_PRELOAD, in front of what it held; every backend."""

    def offer(self, where: Where) -> Offer:
        found = tuple(name for name in LIBRARIES if library(name))
        if not found:
            return Offer(skipped=f"neither tcmalloc nor jemalloc is installed: apt-get install "
                                 f"{' '.join(package for _, package in LIBRARIES.values())}")
        return Offer(values=found, each=True)

    def environment(self, value: Any, environ: Mapping[str, str], config: Any) -> dict[str, str]:
        path = library(value)
        if path is None:
            return {}
        kept = [entry for entry in _preloaded(environ) if entry != path]
        return {VARIABLE: " ".join([path, *kept])}

    def too_late(self, value: Any, environ: Mapping[str, str]) -> str | None:
        path = library(value)
        if path is None or path in _preloaded(environ):
            return None
        return (f"allocator={value} is loaded when the process starts, and this Python started without it. Start it "
                f"with {VARIABLE}={path} in its environment (best.json's snippet exports it), then call "
                "fitspeed.apply(); or run your script with `fitspeed run best.json -- python train.py`.")

    @property
    def at_start(self) -> bool:
        return True


ALLOCATOR = Allocator(
    name="allocator",
    description="The process's malloc: tcmalloc or jemalloc through LD_PRELOAD, set before the process starts "
    "(offered where Debian's libtcmalloc-minimal4 or libjemalloc2 is installed); system keeps glibc's.",
    values="system, tcmalloc, jemalloc",
    default=SYSTEM,
    scope="process",
    stage="environment",
    parse=_parse,
)
