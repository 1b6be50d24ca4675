"""The `intra_op_threads`, `inter_op_threads` knobs."""

from __future__ import annotations

from typing import Any

from fitspeed.core.backends import backend_of
from fitspeed.core.knobs.base import Knob, Lines, Offer, Process, Recipe, Where, as_int


class Threads(Knob):
    """One thread, tried where the backend honours the setting; intra-op only where there is more than one core.

    Each knob sizes its own pool (`Process.set_threads`, and the snippet's
    `Backend.thread_lines`, with 0 for the other, which leaves that one as it
    is): intra-op first, in the registry's order.
    """

    step = "threads"

    def offer(self, where: Where) -> Offer:
        """
        >>> from fitspeed.core.config import TrialConfig
        >>> INTRA_OP_THREADS.offer(Where(TrialConfig(), False, 1, None, "tiny", None)).skipped
        'this machine has one core'
        """
        why = self.refuses(where.backend)
        if why is None and self.name == "intra_op_threads" and where.cores < 2:
            why = "this machine has one core"
        return Offer(skipped=why) if why else Offer(values=(1,))

    def apply(self, value: Any, process: Process) -> None:
        process.set_threads(*self._pools(value))

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        backend = backend_of(recipe.config.backend)
        lines = backend.thread_lines(*self._pools(value))
        return {"threads": [backend.import_line, *lines]} if lines and backend.import_line else {}

    def _pools(self, value: int) -> tuple[int, int]:
        """(intra-op, inter-op) threads that size this knob's pool only: 0 for the other."""
        return (value, 0) if self.name == "intra_op_threads" else (0, value)


INTRA_OP_THREADS = Threads(
    name="intra_op_threads",
    description="Threads inside one op; 0 keeps the backend's default.",
    values="integer >= 0",
    default=0,
    scope="process",
    stage="process",
    parse=lambda raw: as_int("intra_op_threads", raw, 0),
)

INTER_OP_THREADS = Threads(
    name="inter_op_threads",
    description="Ops run side by side; 0 keeps the backend's default.",
    values="integer >= 0",
    default=0,
    scope="process",
    stage="process",
    parse=lambda raw: as_int("inter_op_threads", raw, 0),
)
