"""The input knobs, checked on the pipeline that was built: its graph and options, not a flag.

Runs tf.data in this process on a small folder of real JPEG files.
"""

from __future__ import annotations

import doctest
import importlib
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from conftest import FIXTURES  # noqa: E402

from fitspeed.cli.make_images import write as write_images  # noqa: E402
from fitspeed.core.config import TrialConfig  # noqa: E402
from fitspeed.core.errors import KnobError  # noqa: E402
from fitspeed.trial.data import pipeline  # noqa: E402
from fitspeed.trial.data.image_folder import list_images  # noqa: E402
from fitspeed.trial.data.kinds import ArrayData, DatasetData, PyDatasetData  # noqa: E402

sys.path.insert(0, str(FIXTURES))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("images")
    write_images(root, 60, 20, "synthetic")
    return str(root)


def built(folder: str, augment: bool = True, **knobs: Any) -> Any:
    source = list_images(folder, (16, 16), augment, 10)
    return pipeline.build(source, TrialConfig(**knobs), batch_size=8, seed=0)


def ops(ds: Any) -> list[str]:
    return [op for op, _ in pipeline.graph_ops(ds)]


def node(ds: Any, op: str, nth: int = 0) -> dict[str, Any]:
    return [attrs for name, attrs in pipeline.graph_ops(ds) if name == op][nth]


def consts(attrs: dict[str, Any]) -> list[Any]:
    return [value for key, value in attrs.items() if key.startswith("input_")]


@pytest.mark.parametrize("name", ["fitspeed.core.input_kinds", "fitspeed.measure.doctor"])
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def test_defaults_build_a_plain_sequential_pipeline(folder: str) -> None:
    ds = built(folder)
    assert ops(ds) == ["TensorSliceDataset", "MapDataset", "MapDataset", "RepeatDataset", "MapDataset",
                       "BatchDatasetV2", "OptionsDataset"]
    x, y = next(iter(ds))
    assert x.shape == (8, 16, 16, 3) and x.dtype == tf.float32 and y.shape == (8,)
    assert 0.0 <= float(tf.reduce_min(x)) and float(tf.reduce_max(x)) <= 1.0
    assert ds.options().autotune.enabled is True and ds.options().deterministic is True


@pytest.mark.parametrize(("value", "buffer"), [("autotune", -1), (3, 3)])
def test_prefetch_is_the_last_dataset_op(folder: str, value: Any, buffer: int) -> None:
    ds = built(folder, prefetch=value)
    assert ops(ds)[-2] == "PrefetchDataset"
    assert consts(node(ds, "PrefetchDataset"))[0] == buffer


@pytest.mark.parametrize(("value", "calls"), [("autotune", -1), (2, 2)])
def test_map_parallelism_makes_parallel_maps(folder: str, value: Any, calls: int) -> None:
    ds = built(folder, map_parallelism=value, data_deterministic=False)
    names = ops(ds)
    assert names.count("ParallelMapDatasetV2") == 2  # decode, and augment + scale
    assert "MapDataset" in names  # the file read stays sequential without interleave
    for nth in (0, 1):
        attrs = node(ds, "ParallelMapDatasetV2", nth)
        assert consts(attrs)[-1] == calls
        assert attrs["deterministic"] == "false"
    assert ds.options().deterministic is False


def test_cache_sits_after_decode_and_before_shuffle_and_repeat(folder: str, tmp_path: Path) -> None:
    ds = built(folder, cache="memory", shuffle_buffer=32)
    names = ops(ds)
    assert names.index("MapDataset", 2) < names.index("CacheDatasetV2") < names.index("ShuffleDatasetV3")
    assert names.index("ShuffleDatasetV3") < names.index("RepeatDataset")
    assert consts(node(ds, "CacheDatasetV2"))[0] == ""  # memory
    assert consts(node(ds, "ShuffleDatasetV3"))[0] == 32
    on_disk = built(folder, cache="file")
    filename = consts(node(on_disk, "CacheDatasetV2"))[0]
    assert filename.endswith("examples")
    for _ in zip(range(10), on_disk):  # more than one pass: the cache is written, then read
        pass
    assert any(Path(filename).parent.iterdir())


def test_vectorize_batches_before_the_augment_map(folder: str) -> None:
    plain, vector = ops(built(folder)), ops(built(folder, vectorize=True))
    assert plain[-3:] == ["MapDataset", "BatchDatasetV2", "OptionsDataset"]
    assert vector[-3:] == ["BatchDatasetV2", "MapDataset", "OptionsDataset"]
    x, _ = next(iter(built(folder, vectorize=True)))
    assert x.shape == (8, 16, 16, 3)


def test_interleave_reads_files_in_parallel(folder: str) -> None:
    ds = built(folder, interleave=3)
    assert ops(ds)[1] == "ParallelInterleaveDatasetV4"
    assert consts(node(ds, "ParallelInterleaveDatasetV4"))[0] == 3  # cycle_length


def test_autotune_off_is_in_the_options(folder: str) -> None:
    ds = built(folder, data_autotune=False, prefetch="autotune")
    assert ds.options().autotune.enabled is False
    assert next(iter(ds))[0].shape == (8, 16, 16, 3)


def test_augment_draws_per_example() -> None:
    tf.random.set_seed(1)
    image = tf.random.uniform((1, 16, 16, 3))
    out = pipeline.augment_batch(tf.repeat(image, 16, axis=0)).numpy()
    assert out.shape == (16, 16, 16, 3)
    assert len({out[i].tobytes() for i in range(16)}) > 4  # not one crop for the whole batch


def test_numpy_arrays_keep_keras_pipeline_with_autotune_off() -> None:
    x, y = np.ones((96, 8), "float32"), np.zeros(96, "int32")
    ds = pipeline.keras_array_dataset(x, y, 32, autotune=False)
    assert ds.options().autotune.enabled is False
    assert int(ds.cardinality()) == 3  # Keras still starts a fresh pass each epoch
    names = ops(ds)
    assert "ParallelMapDatasetV2" in names and names[-3:] == ["PrefetchDataset", "AssertCardinalityDataset", "OptionsDataset"]
    assert sum(1 for _ in ds) == 3


def test_pydataset_knobs_are_set_on_the_object() -> None:
    from inputwork import Batches

    loader = Batches(32)
    config = TrialConfig(workers=3, use_multiprocessing=True, max_queue_size=5)
    data = PyDatasetData(source=loader).prepare(config, 32, 0)
    assert (data.source.workers, data.source.use_multiprocessing, data.source.max_queue_size) == (3, True, 5)
    kept = PyDatasetData(source=Batches(32, workers=2)).prepare(TrialConfig(), 32, 0)
    assert (kept.source.workers, kept.source.use_multiprocessing, kept.source.max_queue_size) == (2, False, 10)


def test_user_dataset_gets_prefetch_and_options_only() -> None:
    ds = tf.data.Dataset.from_tensor_slices(np.ones((64, 8), "float32")).batch(8)
    same = DatasetData(source=ds).prepare(TrialConfig(), 8, 0)
    assert same.source is ds
    tuned = DatasetData(source=ds).prepare(TrialConfig(prefetch=2, data_autotune=False), 8, 0)
    assert ops(tuned.source)[-2:] == ["PrefetchDataset", "OptionsDataset"]
    assert tuned.source.options().autotune.enabled is False
    with pytest.raises(KnobError, match="only its prefetch and options can change"):
        DatasetData(source=ds).prepare(TrialConfig(cache="memory"), 8, 0)


def test_knobs_that_cannot_apply_are_refused() -> None:
    arrays = ArrayData(x=np.ones((4, 8)), y=np.zeros(4))
    with pytest.raises(KnobError, match="numpy arrays"):
        arrays.prepare(TrialConfig(map_parallelism="autotune"), 2, 0)
    with pytest.raises(KnobError, match="applies to a keras.utils.PyDataset"):
        arrays.prepare(TrialConfig(workers=2), 2, 0)
    assert arrays.prepare(TrialConfig(data_autotune=False), 2, 0).autotune is False


def test_pyloader_does_its_work_in_python() -> None:
    from fitspeed.trial.data.loaders import HeavyLoader

    loader = HeavyLoader((16, 16, 3), 10, batch_size=8, seed=0, batches=4)
    x, y = loader[1]
    assert x.shape == (8, 16, 16, 3) and y.shape == (8,)
    np.testing.assert_array_equal(loader[1][0], x)  # the same index gives the same batch
    report = PyDatasetData(source=loader).profile(seconds=0.2)
    assert report["batches"] >= 2
    names = [row["function"] for row in report["top"][:3]]
    assert any("feature_key" in name or "<genexpr>" in name or "format" in name for name in names), names
