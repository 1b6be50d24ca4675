"""The one place the input knobs are applied, and the tf.data pipeline fitspeed builds.

Runs in the trial child only (imports tensorflow and keras). Who owns what
(`fitspeed.core.input_kinds` says which knob applies to which kind of data):

| data                      | built by                  | knobs applied here                        |
|---------------------------|---------------------------|-------------------------------------------|
| `images:DIR` (a source    | `build`, below            | every tf.data knob, in the order below    |
| plus per-example work)    |                           |                                           |
| a user's tf.data.Dataset  | the user's function       | prefetch (appended), data_deterministic   |
|                           |                           | and data_autotune (tf.data.Options)       |
| numpy arrays              | Keras (ArrayDataAdapter)  | data_autotune=false: Keras's own array    |
|                           |                           | pipeline, fed with autotune off           |
| a PyDataset               | the user, or `pyloader`   | workers, use_multiprocessing,             |
|                           |                           | max_queue_size (set on the object; Keras  |
|                           |                           | 3 reads them there, not from fit())       |

The order for a source, after article 001 ("Data Input Pipeline Performance"):

    file names -> read: interleave(cycle_length=interleave) when > 1, else map
               -> map(decode + resize, num_parallel_calls=map_parallelism)
               -> cache (memory or file): decoded examples, so later epochs skip the decode
               -> shuffle(shuffle_buffer), before repeat
               -> repeat
               -> map(augment + scale, map_parallelism) -> batch
                  or, with vectorize: batch -> map(augment + scale) once per batch
               -> prefetch(N or AUTOTUNE)
               -> with_options(deterministic=data_deterministic, autotune.enabled=data_autotune)

Random augmentation comes after the cache, so every epoch draws new crops and
flips. The augment function takes a batch and draws per example, so
vectorize changes the speed, not what the model sees.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from fitspeed.core.config import TrialConfig
from fitspeed.trial import keras_private
from fitspeed.trial.data.image_folder import ImageSource


def _read(path: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.io.read_file(path), label


def _decoder(size: tuple[int, int]) -> Any:
    def decode(raw: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        image = tf.io.decode_image(raw, channels=3, expand_animations=False)
        image = tf.image.resize(image, size)
        image.set_shape((*size, 3))
        return tf.saturate_cast(tf.round(image), tf.uint8), label

    return decode


def augment_batch(images: tf.Tensor) -> tf.Tensor:
    """Random crop (from a reflection-padded image) and left-right flip, drawn per example.

    `images` is a float batch [B, H, W, C]; each example gets its own offsets and flip.
    """
    height, width = int(images.shape[1]), int(images.shape[2])
    pad = max(1, height // 8)
    padded = tf.pad(images, [[0, 0], [pad, pad], [pad, pad], [0, 0]], mode="REFLECT")
    count = tf.shape(images)[0]
    rows = tf.random.uniform([count], 0, 2 * pad + 1, dtype=tf.int32)[:, None] + tf.range(height)[None, :]
    cols = tf.random.uniform([count], 0, 2 * pad + 1, dtype=tf.int32)[:, None] + tf.range(width)[None, :]
    out = tf.gather(padded, rows, axis=1, batch_dims=1)
    out = tf.gather(out, cols, axis=2, batch_dims=1)
    flip = tf.random.uniform([count]) < 0.5
    return tf.where(flip[:, None, None, None], tf.reverse(out, axis=[2]), out)


def _transform(augment: bool, batched: bool) -> Any:
    channels_first = keras.config.image_data_format() == "channels_first"

    def transform(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        x = tf.cast(image, tf.float32)
        if not batched:
            x = x[None]
        if augment:
            x = augment_batch(x)
        x = x / 255.0
        if channels_first:
            x = tf.transpose(x, (0, 3, 1, 2))
        return (x if batched else x[0]), label

    return transform


def _parallel(config: TrialConfig) -> int | None:
    """num_parallel_calls: None (a sequential map) for 1."""
    value = config.map_parallelism
    if value == "autotune":
        return int(tf.data.AUTOTUNE)
    return None if value == 1 else int(value)


def _cache_file() -> str:
    folder = tempfile.mkdtemp(prefix="fitspeed-cache-")
    atexit.register(shutil.rmtree, folder, True)
    return str(Path(folder) / "examples")


def _prefetched(ds: tf.data.Dataset, config: TrialConfig) -> tf.data.Dataset:
    """`ds` with the prefetch knob applied: off, N batches, or AUTOTUNE."""
    if config.prefetch == "off":
        return ds
    return ds.prefetch(int(tf.data.AUTOTUNE) if config.prefetch == "autotune" else int(config.prefetch))


def options(config: TrialConfig) -> tf.data.Options:
    """The tf.data options the data knobs set."""
    opts = tf.data.Options()
    opts.deterministic = bool(config.data_deterministic)
    opts.autotune.enabled = bool(config.data_autotune)
    return opts


def build(source: ImageSource, config: TrialConfig, batch_size: int, seed: int) -> tf.data.Dataset:
    """The training pipeline for `source`, with every tf.data knob applied in order."""
    deterministic = bool(config.data_deterministic)
    parallel = _parallel(config)
    names = tf.data.Dataset.from_tensor_slices(
        (np.array(source.paths), np.array(source.labels, dtype="int32"))
    )
    if config.interleave > 1:
        ds = names.interleave(
            lambda path, label: tf.data.Dataset.from_tensors(_read(path, label)),
            cycle_length=config.interleave,
            num_parallel_calls=config.interleave,
            deterministic=deterministic,
        )
    else:
        ds = names.map(_read)
    map_args: dict[str, Any] = {}
    if parallel is not None:
        map_args = {"num_parallel_calls": parallel, "deterministic": deterministic}
    ds = ds.map(_decoder(source.size), **map_args)
    if config.cache == "memory":
        ds = ds.cache()
    elif config.cache == "file":
        ds = ds.cache(_cache_file())
    if config.shuffle_buffer:
        ds = ds.shuffle(config.shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    ds = ds.repeat()
    if config.vectorize:
        ds = ds.batch(batch_size, drop_remainder=True)
        ds = ds.map(_transform(source.augment, batched=True), **map_args)
    else:
        ds = ds.map(_transform(source.augment, batched=False), **map_args)
        ds = ds.batch(batch_size, drop_remainder=True)
    return _prefetched(ds, config).with_options(options(config))


def decoded(source: ImageSource) -> tuple[np.ndarray, np.ndarray]:
    """Held-out files as arrays, decoded and scaled as training sees them (no augmentation, channels_last)."""
    ds = tf.data.Dataset.from_tensor_slices((np.array(source.paths), np.array(source.labels, dtype="int32")))
    ds = ds.map(_read).map(_decoder(source.size)).batch(256)
    xs, ys = zip(*((x.numpy(), y.numpy()) for x, y in ds))
    return np.concatenate(xs).astype("float32") / 255.0, np.concatenate(ys)


def keras_array_dataset(x: Any, y: Any, batch_size: int, autotune: bool, shuffle: bool | str = True,
                        sample_weight: Any = None) -> tf.data.Dataset:
    """The pipeline Keras's ArrayDataAdapter builds for fit(x, y, sample_weight, shuffle=...), with autotune set.

    The arguments keep Keras's meaning: `shuffle` (True, False or "batch") and
    `sample_weight` go to the adapter as fit() would hand them over. Keras 3.15
    builds it with map(AUTOTUNE) and prefetch(AUTOTUNE) and tears it down at
    every epoch end; with autotune off, that teardown does not wait on
    tf.data's autotune thread (issue 6, section 5). Its cardinality is kept, so
    Keras still starts a fresh pass every epoch, as it does for arrays.
    """
    adapter_class = keras_private.array_data_adapter_class()
    adapter = adapter_class(x, y, sample_weight=sample_weight, batch_size=batch_size, shuffle=shuffle)
    ds = adapter.get_tf_dataset()
    ds = ds.apply(tf.data.experimental.assert_cardinality(int(adapter.num_batches)))
    return _autotuned(ds, autotune)


def _autotuned(ds: tf.data.Dataset, enabled: bool) -> tf.data.Dataset:
    opts = tf.data.Options()
    opts.autotune.enabled = enabled
    return ds.with_options(opts)


@contextlib.contextmanager
def array_autotune(enabled: bool) -> Iterator[None]:
    """Within it, the pipeline Keras builds from arrays runs with tf.data's autotune `enabled`.

    `fitspeed run` applies data_autotune=false to a script's own fit(x, y, ...)
    this way: Keras still sorts every argument (sample_weight, class_weight,
    shuffle, validation_split, steps_per_epoch, dicts of arrays) as it would
    without fitspeed, and only the options of the dataset it builds change.
    """
    if enabled:
        yield
        return
    adapter_class = keras_private.array_data_adapter_class()
    real = adapter_class.get_tf_dataset

    def get_tf_dataset(adapter: Any) -> tf.data.Dataset:
        return _autotuned(real(adapter), False)

    adapter_class.get_tf_dataset = get_tf_dataset
    try:
        yield
    finally:
        adapter_class.get_tf_dataset = real


def worker_settings(source: keras.utils.PyDataset, config: TrialConfig) -> keras.utils.PyDataset:
    """A PyDataset with the worker knobs set on the object (Keras 3 reads them there, not from fit())."""
    if config.workers:
        source.workers = config.workers
    if config.use_multiprocessing != "keep":
        source.use_multiprocessing = bool(config.use_multiprocessing)
    if config.max_queue_size:
        source.max_queue_size = config.max_queue_size
    return source


def user_dataset(ds: tf.data.Dataset, config: TrialConfig) -> tuple[tf.data.Dataset, list[str]]:
    """A user's dataset with the knobs that keep its meaning; why any other was left out.

    The dataset keeps its own options unless a knob says otherwise. prefetch
    and data_autotune change when elements are made, never which or in what
    order. data_deterministic=false lets parallel maps hand elements out as
    they finish: on a dataset that shuffles, one random order becomes another,
    but on one read in order (a time series, a curriculum) it would reorder
    what the script meant to be ordered, so it is not applied there.
    """
    notes = []
    ds = _prefetched(ds, config)
    deterministic = config.data_deterministic
    if not deterministic and reads_in_order(ds):
        notes.append("data_deterministic=false is not applied: the script's dataset reads its elements in order "
                     "(no shuffle) through parallel calls, which would then hand them out as they finish")
        deterministic = True
    if not deterministic or not config.data_autotune:
        opts = tf.data.Options()
        if not deterministic:
            opts.deterministic = False
        if not config.data_autotune:
            opts.autotune.enabled = False
        ds = ds.with_options(opts)
    return ds, notes


_PARALLEL = ("ParallelMap", "ParallelInterleave", "ParallelBatch", "MapAndBatch", "ParallelFilter")


def reads_in_order(ds: tf.data.Dataset) -> bool:
    """Whether `ds` has parallel calls whose order matters: no shuffle op anywhere in its graph."""
    ops = [op for op, _ in graph_ops(ds)]
    return any(op.startswith(_PARALLEL) for op in ops) and not any("Shuffle" in op for op in ops)


def graph_ops(ds: tf.data.Dataset) -> list[tuple[str, dict[str, Any]]]:
    """The dataset ops of a built pipeline, source first, with their constant inputs.

    Read from the pipeline's own graph (`tf.raw_ops.DatasetToGraphV2`), so it shows
    what was built, not what was asked for. Constant inputs such as
    num_parallel_calls (-1 is AUTOTUNE), buffer_size and cycle_length appear
    under their input names where TensorFlow names them, as `input_N` otherwise.
    """
    graph = tf.compat.v1.GraphDef()
    serialized = tf.raw_ops.DatasetToGraphV2(input_dataset=ds._variant_tensor)  # noqa: SLF001
    graph.ParseFromString(serialized.numpy())
    nodes = {node.name: node for node in graph.node}
    out = []
    for node in graph.node:
        if not node.op.endswith("Dataset") and "Dataset" not in node.op:
            continue
        attrs: dict[str, Any] = {}
        if "deterministic" in node.attr:
            attrs["deterministic"] = node.attr["deterministic"].s.decode()
        for index, name in enumerate(node.input):
            const = nodes.get(name.split(":")[0].lstrip("^"))
            if const is None or const.op != "Const":
                continue
            proto = const.attr["value"].tensor
            if proto.dtype == tf.string.as_datatype_enum:
                if len(proto.string_val) == 1:
                    attrs[f"input_{index}"] = proto.string_val[0].decode("utf-8", "replace")
                continue
            try:
                value = tf.make_ndarray(proto)
            except (KeyError, TypeError, ValueError):  # resources and variants have no numpy value
                continue
            if value.size == 1:
                attrs[f"input_{index}"] = value.item()
        out.append((node.op, attrs))
    return out
