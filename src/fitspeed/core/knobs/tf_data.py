"""The `prefetch`, `map_parallelism`, `cache`, `vectorize`, `shuffle_buffer`, `interleave`, `data_deterministic`, `data_autotune` knobs."""

from __future__ import annotations

from typing import Any

from fitspeed.core.data_ref import DataKind
from fitspeed.core.errors import KnobError
from fitspeed.core.knobs.base import Lines, Recipe, as_bool, as_choice, as_int
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


def _autotune(value: int | str) -> str:
    return "tf.data.AUTOTUNE" if value == "autotune" else str(value)


# Each knob's snippet lines (`InputKnob.lines`), at a value other than its default, in its section of the pipeline.

def _interleave_lines(value: Any, recipe: Recipe) -> Lines:
    return {"interleave": [f"ds = files.interleave(read_file, cycle_length={value}, num_parallel_calls={value})  "
                           "# your own reader"]}


def _map_lines(value: Any, recipe: Recipe) -> Lines:
    return {"map": [f"ds = ds.map(decode_and_augment, num_parallel_calls={_autotune(value)})  # your own map"]}


def _cache_lines(value: Any, recipe: Recipe) -> Lines:
    where = '"/tmp/my-cache"' if value == "file" else ""
    return {"cache": [f"ds = ds.cache({where})  # after decoding, before random augmentation"]}


def _shuffle_lines(value: Any, recipe: Recipe) -> Lines:
    return {"shuffle": [f"ds = ds.shuffle({value})  # before repeat; it changes the data order"]}


def _vectorize_lines(value: Any, recipe: Recipe) -> Lines:
    return {"batch": ["ds = ds.batch(batch_size).map(augment)  # batch first: augment once per batch"]}


def _prefetch_lines(value: Any, recipe: Recipe) -> Lines:
    return {"prefetch": [f"ds = ds.prefetch({_autotune(value)})  # last"]}


def _deterministic_lines(value: Any, recipe: Recipe) -> Lines:
    return {"options": [f"options.deterministic = {bool(value)}"]}


def _autotune_lines(value: Any, recipe: Recipe) -> Lines:
    """Options.autotune, the one option for numpy arrays too: alone, the snippet says how arrays get it."""
    if recipe.config.data_deterministic != DATA_DETERMINISTIC.default:  # an option for tf.data pipelines only
        return {"options": [f"options.autotune.enabled = {bool(value)}"]}
    return {"options": [f"options.autotune.enabled = {bool(value)}"],
            "options_note": ["# For fit(x, y) on numpy arrays, hand fit() a tf.data.Dataset of them with these options "
                             "(the trials did so to Keras's own array pipeline)."]}


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
    lines=_prefetch_lines,
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
    lines=_map_lines,
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
    lines=_cache_lines,
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
    lines=_vectorize_lines,
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
    lines=_shuffle_lines,
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
    lines=_interleave_lines,
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
    lines=_deterministic_lines,
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
    lines=_autotune_lines,
)
