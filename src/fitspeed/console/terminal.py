"""The two consoles every command writes to, and the bar a tune shows on a terminal.

`out` takes the results (tables, `--json`), `err` the progress and the notes,
so that `fitspeed measure ... --json > record.json` keeps only the record.
`TerminalProgress` draws on `err`, for `fitspeed tune` and for `fitspeed.tune`
called from a terminal.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

# markup off: a user's text ('[/]' in a name, pip install 'fitspeed[jax]') prints as it is
out = Console(markup=False)
err = Console(stderr=True, markup=False)


class TerminalProgress:
    """rich's transient bar on stderr with each trial's line above it, as `fitspeed tune` shows them.

    What `fitspeed.tune` shows when called from a terminal; it has the
    methods of `fitspeed.api.progress.Progress`.
    """

    def __init__(self) -> None:
        from rich.progress import Progress

        self.progress = Progress(console=err, transient=True)
        self.task: Any = None
        self.what = ""

    def start(self, total: int | None, what: str) -> None:
        if self.task is None:
            self.progress.start()
        else:  # the stage before ends done at what it counted, named as it started
            done = next(task.completed for task in self.progress.tasks if task.id == self.task)
            self.progress.update(self.task, total=done, completed=done,
                                 description=f"{self.what}: {done:.0f} trial processes")
        self.what = what
        self.task = self.progress.add_task(what, total=total)

    def describe(self, text: str) -> None:
        if self.task is not None:
            self.progress.update(self.task, description=text)

    def line(self, text: str, advance: bool = False) -> None:
        if advance and self.task is not None:
            self.progress.advance(self.task)
        err.print(text, highlight=False)

    def close(self) -> None:
        self.progress.stop()
