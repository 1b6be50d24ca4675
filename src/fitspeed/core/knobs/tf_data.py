"""The `prefetch`, `map_parallelism`, `cache`, `vectorize`, `shuffle_buffer`, `interleave`, `data_deterministic`, `data_autotune` knobs."""

from __future__ import annotations

from fitspeed.core.data_ref import DataKind
from fitspeed.core.errors import KnobError
from fitspeed.core.knobs.base import as_bool, as_choice, as_int
from fitspeed.core.knobs.input import InputKnob


def _prefetch(raw: object) -> int | str:
    """off, a buffer of N batches, or autotune.

    >>> _prefetch("autotune"), _prefetch("off"), _prefetch("4")
    ('autotune', 'off', 4)
    """
    text = str(raw).strip().lower()
    if text in ("off", "0", "false", "none"):
        return "off"
    if text in ("autotune", "-1"):
        return "autotune"
    try:
        return as_int("prefetch", raw, 1)
    except KnobError:
        raise KnobError(
            f"Expected `prefetch` to be off, autotune or an integer >= 1. Received: {raw!r}. "
            "Use for example --set prefetch=autotune."
        ) from None


def _parallelism(raw: object) -> int | str:
    """Parallel calls of the per-example map: 1 (sequential), N, or autotune.

    >>> _parallelism("autotune"), _parallelism(2)
    ('autotune', 2)
    """
    if str(raw).strip().lower() in ("autotune", "-1"):
        return "autotune"
    try:
        return as_int("map_parallelism", raw, 1)
    except KnobError:
        raise KnobError(
            f"Expected `map_parallelism` to be autotune or an integer >= 1. Received: {raw!r}. "
            "Use for example --set map_parallelism=autotune."
        ) from None


PREFETCH = InputKnob(
    name="prefetch",
    description="tf.data: dataset.prefetch(N or AUTOTUNE) at the end of the pipeline; off adds none.",
    values="off, autotune, integer >= 1",
    default="off",
    scope="data",
    stage="data",
    parse=_prefetch,
    tried=lambda workers: ("autotune", 2),
    applies_to=frozenset({DataKind.IMAGES, DataKind.DATASET}),
)

MAP_PARALLELISM = InputKnob(
    name="map_parallelism",
    description="tf.data: num_parallel_calls of the per-example map (decode, augment).",
    values="autotune, integer >= 1",
    default=1,
    scope="data",
    stage="data",
    parse=_parallelism,
    tried=lambda workers: ("autotune", workers),
)

CACHE = InputKnob(
    name="cache",
    description="tf.data: dataset.cache() after decoding, in memory or in a file.",
    values="off, memory, file",
    default="off",
    scope="data",
    stage="data",
    parse=lambda raw: as_choice("cache", raw, ("off", "memory", "file")),
    tried=lambda workers: ("memory",),
)

VECTORIZE = InputKnob(
    name="vectorize",
    description="tf.data: batch before the augment map, so it runs once per batch (same randomness per example).",
    values="true, false",
    default=False,
    scope="data",
    stage="data",
    parse=lambda raw: as_bool("vectorize", raw),
    tried=lambda workers: (True,),
)

SHUFFLE_BUFFER = InputKnob(
    name="shuffle_buffer",
    description="tf.data: dataset.shuffle(N) before repeat; 0 reads in file order.",
    values="integer >= 0",
    default=0,
    scope="data",
    stage="data",
    parse=lambda raw: as_int("shuffle_buffer", raw, 0),
    changes_numerics=True,
    not_searched="shuffle_buffer changes the order the model sees: a training choice, not a speed knob",
)

INTERLEAVE = InputKnob(
    name="interleave",
    description="tf.data: files read in parallel with interleave(cycle_length=N); 1 reads one at a time.",
    values="integer >= 1",
    default=1,
    scope="data",
    stage="data",
    parse=lambda raw: as_int("interleave", raw, 1),
    tried=lambda workers: (workers,),
)

DATA_DETERMINISTIC = InputKnob(
    name="data_deterministic",
    description="tf.data: keep element order in parallel map and interleave (Options.deterministic).",
    values="true, false",
    default=True,
    scope="data",
    stage="data",
    parse=lambda raw: as_bool("data_deterministic", raw),
    changes_numerics=True,
    tried=lambda workers: (False,),
    applies_to=frozenset({DataKind.IMAGES, DataKind.DATASET}),
)

DATA_AUTOTUNE = InputKnob(
    name="data_autotune",
    description="tf.data: Options.autotune.enabled, also for the pipeline Keras builds from numpy arrays.",
    values="true, false",
    default=True,
    scope="data",
    stage="data",
    parse=lambda raw: as_bool("data_autotune", raw),
    tried=lambda workers: (False,),
    applies_to=frozenset({DataKind.IMAGES, DataKind.DATASET, DataKind.ARRAYS}),
)
