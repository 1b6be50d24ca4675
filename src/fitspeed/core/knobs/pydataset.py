"""The `workers`, `use_multiprocessing`, `max_queue_size` knobs."""

from __future__ import annotations

from fitspeed.core.data_ref import DataKind
from fitspeed.core.knobs.base import as_int, keep_or_bool
from fitspeed.core.knobs.input import InputKnob


WORKERS = InputKnob(
    name="workers",
    description="PyDataset: workers that call __getitem__ (threads, or processes); 0 keeps the PyDataset's own.",
    values="integer >= 0",
    default=0,
    scope="data",
    stage="data",
    parse=lambda raw: as_int("workers", raw, 0),
    tried=lambda workers: (workers,),
    family="PyDataset",
    applies_to=frozenset({DataKind.PYDATASET}),
)

USE_MULTIPROCESSING = InputKnob(
    name="use_multiprocessing",
    description="PyDataset: workers are processes (true) or threads under the GIL (false); keep keeps its own.",
    values="keep, true, false",
    default="keep",
    scope="data",
    stage="data",
    parse=lambda raw: keep_or_bool("use_multiprocessing", raw),
    tried=lambda workers: (True, False),
    family="PyDataset",
    applies_to=frozenset({DataKind.PYDATASET}),
)

MAX_QUEUE_SIZE = InputKnob(
    name="max_queue_size",
    description="PyDataset: batches the workers may hold ready; 0 keeps the PyDataset's own.",
    values="integer >= 0",
    default=0,
    scope="data",
    stage="data",
    parse=lambda raw: as_int("max_queue_size", raw, 0),
    tried=lambda workers: (32,),
    family="PyDataset",
    applies_to=frozenset({DataKind.PYDATASET}),
)
