"""The `intra_op_threads`, `inter_op_threads` knobs."""

from __future__ import annotations

from fitspeed.core.knobs.base import Knob, as_int


INTRA_OP_THREADS = Knob(
    name="intra_op_threads",
    description="Threads inside one op; 0 keeps the backend's default.",
    values="integer >= 0",
    default=0,
    scope="process",
    stage="process",
    parse=lambda raw: as_int("intra_op_threads", raw, 0),
)

INTER_OP_THREADS = Knob(
    name="inter_op_threads",
    description="Ops run side by side; 0 keeps the backend's default.",
    values="integer >= 0",
    default=0,
    scope="process",
    stage="process",
    parse=lambda raw: as_int("inter_op_threads", raw, 0),
)
