"""Progress while trials run, where the caller is: a notebook's bar, a terminal's, or plain lines.

| where                                   | shows                                              |
|-----------------------------------------|----------------------------------------------------|
| a Jupyter kernel with ipywidgets        | tqdm's notebook bar, and a line for each trial     |
| a terminal (stderr is a TTY)            | rich's transient bar on stderr, as the CLI shows it |
| anything else (a kernel without ipywidgets, a log) | a plain line for each trial, on stdout  |

`choose()` picks once per call of `fitspeed.tune`; each kind has the same
methods, so the tuning code never asks where it runs. `start` again begins
the next stage (a tune's search, then its lean step and verification): the
bar before it ends where it stands, marked done at what it counted.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol


class Progress(Protocol):
    def start(self, total: int | None, what: str) -> None: ...
    def describe(self, text: str) -> None: ...
    def line(self, text: str, advance: bool = False) -> None: ...
    def close(self) -> None: ...


def in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython's kernel app is running)."""
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - an IPython without a shell
        return False
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


class Lines:
    """A plain line for each trial, on stdout: readable in any kernel and in any log."""

    def __init__(self) -> None:
        self.done: int = 0
        self.total: int | None = None

    def start(self, total: int | None, what: str) -> None:
        if self.total:  # the stage before: what it took of its total
            print(f"{self.done} of {self.total} trial processes", flush=True)
        self.total, self.done = total, 0
        print(f"{what}: up to {total} trial processes" if total else what, flush=True)

    def describe(self, text: str) -> None:
        return None

    def line(self, text: str, advance: bool = False) -> None:
        self.done += advance
        print(text, flush=True)

    def close(self) -> None:
        return None


class NotebookBar:
    """tqdm's notebook bar (ipywidgets) over the trial processes; a line per trial under it."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.what = ""

    def start(self, total: int | None, what: str) -> None:
        from tqdm.notebook import tqdm

        if self.bar is not None:  # the stage before ends done at what it counted (never red short of its total),
            self.bar.total = self.bar.n  # named as it started
            self.bar.set_description_str(f"{self.what}: {self.bar.n} trial processes"[:60])
            self.bar.close()
        self.what = what
        self.bar = tqdm(total=total, desc=what, unit="trial")

    def describe(self, text: str) -> None:
        self.bar.set_description_str(text[:60])

    def line(self, text: str, advance: bool = False) -> None:
        if advance:
            self.bar.update(1)
        self.bar.write(text)

    def close(self) -> None:
        self.bar.close()


def choose(show: bool = True) -> Progress:
    """The progress for where this process runs; `show=False` gives lines that print nothing."""
    if not show:
        return Silent()
    if in_notebook():
        try:
            import ipywidgets  # noqa: F401 - tqdm's notebook bar draws with it
        except ImportError:
            return Lines()
        return NotebookBar()
    if sys.stderr.isatty():
        from fitspeed.console.terminal import TerminalProgress  # rich's bar: rich is imported in console/, never in api/

        return TerminalProgress()
    return Lines()


class Silent(Lines):
    def start(self, total: int | None, what: str) -> None:
        return None

    def line(self, text: str, advance: bool = False) -> None:
        self.done += advance
