"""One class per kind of input, each answering what a trial asks of its data.

Runs in the trial child, or in a user's process under the script hook. Keras
gives each input kind its own `DataAdapter`, chosen once by
`get_data_adapter`; fitspeed does the same. The kind is chosen once, where the
data enters: `sources.load` for a `--data` reference, `entering` for what a
script or `auto_steps` hands `fit()`. The rest of the code asks the object:

| class           | kind (`DataKind`) | fit() gets                        | in memory | epoch's steps       |
|-----------------|-------------------|-----------------------------------|-----------|---------------------|
| `ArrayData`     | arrays            | x, y cycled to whole batches      | yes       | samples / batch     |
| `DatasetData`   | dataset           | the dataset, repeated             | no        | its cardinality     |
| `PyDatasetData` | pydataset         | the PyDataset, cycled             | no        | its length          |
| `ImageFolder`   | images            | nothing: `prepare` builds a       | no        | unknown             |
|                 |                   | `DatasetData` from the files      |           |                     |

Which input knobs apply to each kind, and why the others do not, is
`fitspeed.core.input_kinds`'s table; `why_not` asks it for this object's kind.
"""

from __future__ import annotations

import cProfile
import dataclasses
import math
import pstats
import time
from dataclasses import dataclass
from typing import Any, ClassVar, NotRequired, TypedDict

import keras
import numpy as np

from fitspeed.core.data_ref import DataKind
from fitspeed.core.errors import DataError
from fitspeed.core.input_kinds import INPUT_KNOBS, check, why_not
from fitspeed.trial import keras_private

MAX_ARRAY_BYTES = 1 << 30  # the cycled fit() arrays stay under 1 GiB
UNBOUNDED_STEPS = 1_000_000  # what a pipeline can feed in one epoch: as many steps as asked
PROFILE_SECONDS = 2.0  # doctor's cProfile of a PyDataset's __getitem__
PROFILE_TOP = 10


class FitArgs(TypedDict):
    """The keyword arguments of `fit()` that carry the data (`Data.fit_args`): `x` always, the rest for arrays."""

    x: Any  # arrays (or dicts and lists of them), a tf.data.Dataset or a PyDataset
    y: NotRequired[Any]
    batch_size: NotRequired[int]
    shuffle: NotRequired[bool | str]
    sample_weight: NotRequired[Any]


class ProfileRow(TypedDict):
    """One function in a profile of a PyDataset's `__getitem__`, by its own time."""

    function: str  # "name (file.py:line)"
    calls: int
    own_s: float
    cumulative_s: float


class GetitemProfile(TypedDict):
    """cProfile of a PyDataset's `__getitem__` in the trial's process (`PyDatasetData.profile`)."""

    batches: int
    seconds: float
    ms_per_batch: float
    top: list[ProfileRow]


class InputDetails(TypedDict, total=False):
    """What doctor's "input" measurement adds to its metrics for a kind (`Data.input_details`)."""

    pipeline: list[str]  # a dataset's ops as built
    profile: GetitemProfile  # a PyDataset's `__getitem__`


@dataclass
class Data:
    """What feeds a trial's `fit()`: a subclass per input kind, with the held-out arrays where there are any."""

    kind: ClassVar[DataKind]
    in_memory: ClassVar[bool] = False  # whether fit() is fed from arrays in memory, which need no pipeline
    batch_size: int | None = None  # fixed by a dataset or a PyDataset; None for arrays
    x_val: Any = None  # held-out arrays (channels_last until `layout.fit_layout`), with validation only
    y_val: Any = None
    notes: list[str] = dataclasses.field(default_factory=list)  # input knobs left out, each with why

    @property
    def label(self) -> str:
        """The record's `metrics.data_kind`."""
        return str(self.kind)

    def fit_args(self, steps: int, batch_size: int) -> FitArgs:
        """Keyword arguments for `fit()` that cover exactly `steps` batches per epoch."""
        raise NotImplementedError

    def max_steps(self, batch_size: int) -> int:
        """The most steps one epoch of `fit_args` may hold."""
        return UNBOUNDED_STEPS

    def epoch_steps(self, batch_size: int) -> int | None:
        """The steps in one epoch of this data as Keras would run it, or None where the data does not say."""
        return None

    def sample_shape(self) -> tuple[Any, ...]:
        """The per-sample shape of the inputs fit() gets."""
        raise NotImplementedError

    def first_inputs(self) -> Any:
        """The inputs of the first batch, as an array."""
        raise NotImplementedError

    def given_x(self) -> Any:
        """What fit() takes as `x` for this data, as it is (not cycled)."""
        raise NotImplementedError

    def laid_out(self, layout: Any) -> Data:
        """This data with its arrays in the model's layout (`layout` turns one array); a pipeline is its own."""
        return self

    def share(self, process: int, processes: int) -> Data:
        """Process `process`'s share of the training data, of `processes` that train together, each on its own
        (every `processes`-th sample, batch or file from `process` on); the held-out data stays whole, so every
        process judges the same. A kind that cannot be split without reading all of it (a tf.data dataset of the
        user's) is fed whole by every process."""
        return self

    def prepare(self, config: Any, batch_size: int, seed: int) -> Data:
        """The input knobs of `config` applied (`fitspeed.trial.data.pipeline`); one that cannot apply is refused."""
        check(config.changed(), self.kind, config.backend)
        return self._applied(config, batch_size, seed)

    def _applied(self, config: Any, batch_size: int, seed: int) -> Data:
        """The input knobs of `config` applied, already checked for this kind."""
        return self

    def input_details(self) -> InputDetails:
        """What doctor's "input" measurement adds for this kind."""
        return {}

    def with_knobs(self, config: Any, batch_size: int, seed: int) -> Data:
        """This data ready for fit(): `prepare`d, unless it is arrays no input knob changes."""
        if self.in_memory and not config.changed().keys() & set(INPUT_KNOBS):
            return self
        return self.prepare(config, batch_size, seed)

    def why_not(self, knob: str, backend: str) -> str | None:
        """Why `knob` does not apply to this data, or None when it does (`fitspeed.core.input_kinds`)."""
        return why_not(knob, self.kind, backend)

    def applicable(self, config: Any) -> Any:
        """`config` with the input knobs that do not apply to this kind put back to their defaults."""
        defaults = type(config)()
        return config.replace(**{knob: getattr(defaults, knob) for knob in config.changed().keys() & set(INPUT_KNOBS)
                                 if self.why_not(knob, config.backend)})


@dataclass
class ArrayData(Data):
    """Numpy arrays (or dicts and lists of them, as Keras takes them), which Keras batches itself."""

    kind: ClassVar[DataKind] = DataKind.ARRAYS
    in_memory: ClassVar[bool] = True
    x: Any = None
    y: Any = None
    autotune: bool = True  # False feeds Keras's array pipeline with autotune off
    sample_weight: Any = None  # the script's fit(sample_weight=...), cut as x and y are
    shuffle: bool | str = True  # the script's fit(shuffle=...), Keras's meaning (True, False or "batch")

    @property
    def samples(self) -> int:
        return len(keras.tree.flatten(self.x)[0])

    @property
    def sample_bytes(self) -> int:
        leaves = keras.tree.flatten((self.x, self.y))
        return int(sum(np.asarray(leaf[0]).nbytes for leaf in leaves))

    def take(self, index: np.ndarray) -> tuple[Any, Any, Any]:
        """x, y and the sample weights at `index`, each structure kept."""
        def pick(tree: Any) -> Any:
            return None if tree is None else keras.tree.map_structure(lambda a: np.asarray(a)[index], tree)

        return pick(self.x), pick(self.y), pick(self.sample_weight)

    def fit_args(self, steps: int, batch_size: int) -> FitArgs:
        """Cycled to `steps * batch_size` samples, so every epoch is whole batches, the sample weights beside them."""
        x, y, weights = self.take(np.arange(steps * batch_size) % self.samples)
        if not self.autotune:
            from fitspeed.trial.data.pipeline import keras_array_dataset  # imports tensorflow

            return {"x": keras_array_dataset(x, y, batch_size, autotune=False, shuffle=self.shuffle,
                                             sample_weight=weights)}
        args: FitArgs = {"x": x, "y": y, "batch_size": batch_size, "shuffle": self.shuffle}
        if weights is not None:
            args["sample_weight"] = weights
        return args

    def max_steps(self, batch_size: int) -> int:
        """Within MAX_ARRAY_BYTES of cycled arrays."""
        return max(1, MAX_ARRAY_BYTES // max(1, self.sample_bytes * batch_size))

    def epoch_steps(self, batch_size: int) -> int | None:
        return max(1, math.ceil(self.samples / batch_size)) if self.x is not None else None

    def sample_shape(self) -> tuple[Any, ...]:
        return tuple(self.x.shape[1:])

    def first_inputs(self) -> Any:
        return self.x

    def given_x(self) -> Any:
        return self.x

    def laid_out(self, layout: Any) -> Data:
        return dataclasses.replace(self, x=layout(self.x))

    def share(self, process: int, processes: int) -> Data:
        """
        >>> data = ArrayData(x=np.arange(10).reshape(5, 2), y=np.arange(5), x_val=np.zeros((1, 2)))
        >>> shared = data.share(1, 2)
        >>> shared.y.tolist(), shared.x.tolist(), shared.x_val is data.x_val
        ([1, 3], [[2, 3], [6, 7]], True)
        """
        if processes == 1:
            return self
        x, y, weights = self.take(np.arange(process, self.samples, processes))
        return dataclasses.replace(self, x=x, y=y, sample_weight=weights)

    def _applied(self, config: Any, batch_size: int, seed: int) -> Data:
        return dataclasses.replace(self, autotune=bool(config.data_autotune))


@dataclass
class DatasetData(Data):
    """A `tf.data.Dataset`, batched: a user's, or the pipeline fitspeed built (`origin` says which)."""

    kind: ClassVar[DataKind] = DataKind.DATASET
    source: Any = None
    origin: str | None = None  # "images" for the pipeline fitspeed built from a folder, "memory" for doctor's

    @property
    def label(self) -> str:
        return self.origin or str(self.kind)

    def fit_args(self, steps: int, batch_size: int) -> FitArgs:
        """Repeated, so it never runs out mid-window."""
        import tensorflow as tf

        dataset = self.source
        if dataset.cardinality() != tf.data.INFINITE_CARDINALITY:
            dataset = dataset.repeat()
        return {"x": dataset}

    def epoch_steps(self, batch_size: int) -> int | None:
        count = int(self.source.cardinality())
        return count if count > 0 else None  # infinite or unknown

    def sample_shape(self) -> tuple[Any, ...]:
        spec = self.source.element_spec
        inputs = spec[0] if isinstance(spec, tuple) else spec
        return tuple(inputs.shape[1:])

    def first_inputs(self) -> Any:
        batch = next(iter(self.source))
        return np.asarray(batch[0] if isinstance(batch, (tuple, list)) else batch)

    def given_x(self) -> Any:
        return self.source

    def _applied(self, config: Any, batch_size: int, seed: int) -> Data:
        from fitspeed.trial.data.pipeline import user_dataset

        ds, notes = user_dataset(self.source, config)
        return dataclasses.replace(self, source=ds, notes=[*self.notes, *notes])

    def input_details(self) -> InputDetails:
        """The ops of the pipeline as built."""
        from fitspeed.trial.data.pipeline import graph_ops

        try:
            return {"pipeline": [op for op, _ in graph_ops(self.source)]}
        except Exception as error:  # a user's dataset may hold ops that do not serialize
            return {"pipeline": [f"(not readable: {type(error).__name__})"]}


class _Cycle(keras.utils.PyDataset):
    """A finite PyDataset, repeated forever, keeping its worker settings and its epoch-end hook."""

    def __init__(self, inner: keras.utils.PyDataset) -> None:
        super().__init__(
            workers=inner.workers,
            use_multiprocessing=inner.use_multiprocessing,
            max_queue_size=inner.max_queue_size,
        )
        self.inner = inner
        self.length = len(inner)

    @property
    def num_batches(self) -> int | None:
        return None

    def __getitem__(self, index: int) -> Any:
        return self.inner[index % self.length]

    def on_epoch_end(self) -> None:  # as fit() would for the user's own PyDataset (reshuffling, say)
        self.inner.on_epoch_end()


class _Share(keras.utils.PyDataset):
    """Process `process`'s batches of a PyDataset, of `processes`: batches process, process + processes, ...

    >>> class Ten(keras.utils.PyDataset):
    ...     def __len__(self): return 10
    ...     def __getitem__(self, i): return i
    >>> share = _Share(Ten(), 1, 3)
    >>> len(share), [share[i] for i in range(len(share))]
    (3, [1, 4, 7])
    """

    def __init__(self, inner: keras.utils.PyDataset, process: int, processes: int) -> None:
        super().__init__(
            workers=inner.workers,
            use_multiprocessing=inner.use_multiprocessing,
            max_queue_size=inner.max_queue_size,
        )
        self.inner, self.process, self.processes = inner, process, processes

    @property
    def num_batches(self) -> int | None:
        total = self.inner.num_batches
        return None if total is None else max(1, (total - self.process + self.processes - 1) // self.processes)

    def __len__(self) -> int:
        count = self.num_batches
        if count is None:
            raise TypeError("an endless PyDataset has no length")
        return count

    def __getitem__(self, index: int) -> Any:
        at = index * self.processes + self.process
        total = self.inner.num_batches
        return self.inner[at % total if total else at]

    def on_epoch_end(self) -> None:
        self.inner.on_epoch_end()


@dataclass
class PyDatasetData(Data):
    """A `keras.utils.PyDataset`: `pyloader`, or a user's."""

    kind: ClassVar[DataKind] = DataKind.PYDATASET
    source: Any = None

    def fit_args(self, steps: int, batch_size: int) -> FitArgs:
        """Cycled when finite, so it never runs out mid-window."""
        return {"x": _Cycle(self.source) if self.source.num_batches is not None else self.source}

    def epoch_steps(self, batch_size: int) -> int | None:
        return len(self.source)

    def sample_shape(self) -> tuple[Any, ...]:
        return tuple(np.shape(self.first_inputs())[1:])

    def first_inputs(self) -> Any:
        batch = self.source[0]
        return np.asarray(batch[0] if isinstance(batch, (tuple, list)) else batch)

    def given_x(self) -> Any:
        return self.source

    def share(self, process: int, processes: int) -> Data:
        return self if processes == 1 else dataclasses.replace(self, source=_Share(self.source, process, processes))

    def _applied(self, config: Any, batch_size: int, seed: int) -> Data:
        from fitspeed.trial.data.pipeline import worker_settings

        return dataclasses.replace(self, source=worker_settings(self.source, config))

    def input_details(self) -> InputDetails:
        """cProfile of `__getitem__` in this process (article 002's method)."""
        return {"profile": self.profile()}

    def profile(self, seconds: float = PROFILE_SECONDS, top: int = PROFILE_TOP) -> GetitemProfile:
        """cProfile of `source[i]` in this process for about `seconds`: the top functions by own time."""
        source, profiler, count = self.source, cProfile.Profile(), 0
        length = len(source)
        started = time.perf_counter()
        profiler.enable()
        while count < 2 or (time.perf_counter() - started < seconds and count < length):
            source[count % length]
            count += 1
        profiler.disable()
        elapsed = time.perf_counter() - started
        stats = pstats.Stats(profiler)
        rows: list[ProfileRow] = []
        for (file, line, name), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
            rows.append({"function": f"{name} ({file.rsplit('/', 1)[-1]}:{line})", "calls": calls,
                         "own_s": own, "cumulative_s": cumulative})
        rows.sort(key=lambda row: row["own_s"], reverse=True)
        return {"batches": count, "seconds": elapsed, "ms_per_batch": 1000 * elapsed / count, "top": rows[:top]}


@dataclass
class ImageFolder(Data):
    """An `images:DIR` folder, listed: `prepare` builds its tf.data pipeline with every tf.data knob."""

    kind: ClassVar[DataKind] = DataKind.IMAGES
    source: Any = None  # the `ImageSource`
    holdout: Any = None  # the held-out files (an ImageSource), decoded by `prepare`

    def share(self, process: int, processes: int) -> Data:
        if processes == 1:
            return self
        mine = range(process, len(self.source.paths), processes)
        return dataclasses.replace(self, source=dataclasses.replace(
            self.source, paths=tuple(self.source.paths[i] for i in mine),
            labels=tuple(self.source.labels[i] for i in mine)))

    def _applied(self, config: Any, batch_size: int, seed: int) -> Data:
        from fitspeed.trial.data import pipeline

        held = pipeline.decoded(self.holdout) if self.holdout is not None else (None, None)
        return DatasetData(source=pipeline.build(self.source, config, batch_size, seed), batch_size=batch_size,
                           origin="images", x_val=held[0], y_val=held[1])


def batch_size_of(batch: Any) -> int:
    inputs = batch[0] if isinstance(batch, (tuple, list)) else batch
    return int(np.shape(inputs)[0])


def dataset_batch_size(dataset: Any, ref: str) -> int:
    for batch in dataset.take(1):
        return batch_size_of(batch)
    raise DataError(f"Expected {ref!r} to return a dataset with data. It is empty.")


def _is_dataset(x: Any) -> bool:
    return type(x).__module__.startswith("tensorflow") and hasattr(x, "element_spec")


def pipeline_of(x: Any, ref: str) -> Data | None:
    """A PyDataset or a tf.data.Dataset as its class, with the batch size it fixes; None for anything else."""
    if isinstance(x, keras.utils.PyDataset):
        return PyDatasetData(source=x, batch_size=batch_size_of(x[0]))
    if _is_dataset(x):
        return DatasetData(source=x, batch_size=dataset_batch_size(x, ref))
    return None


def as_given(given: dict[str, Any]) -> Data | None:
    """What a script's fit() was given (its bound arguments) as its class, as it is; None where no input knob fits.

    `fitspeed run` applies the input knobs through it and leaves the rest to
    Keras. Arrays are what Keras's ArrayDataAdapter takes (arrays, dicts and
    lists of them), asked of Keras itself.
    """
    can_convert_arrays = keras_private.can_convert_arrays()

    x = given.get("x")
    if isinstance(x, keras.utils.PyDataset):
        return PyDatasetData(source=x)
    if _is_dataset(x):
        return DatasetData(source=x)
    if x is not None and can_convert_arrays((x, given.get("y"), given.get("sample_weight"))):
        return ArrayData(x=x, y=given.get("y"), sample_weight=given.get("sample_weight"))
    return None


def entering(x: Any, y: Any, validation_split: float = 0.0, sample_weight: Any = None,
             shuffle: bool | str = True, ref: str = "the script's dataset", validation_data: Any = None) -> Data:
    """What a script (or `auto_steps`) handed fit(), as its class: the one place its kind is chosen.

    Arrays keep the script's `sample_weight` and `shuffle`; with a
    validation_split they are cut where Keras cuts them (its own
    `train_validation_split`: the first 1 - split of the samples train, the
    rest held out). The held-out arrays, the split's or the script's own
    `validation_data=(x_val, y_val)` (arrays), are what the numerics guard
    judges a candidate on (`x_val`, `y_val`).
    """
    found = pipeline_of(x, ref)
    if found is not None:
        return found
    if isinstance(y, list) and not any(isinstance(v, (np.ndarray, list, tuple, dict)) for v in y):
        y = np.asarray(y)  # labels as a plain list
    if _arrays(x) and y is not None and _arrays(y):
        x, y = keras.tree.map_structure(np.asarray, x), keras.tree.map_structure(np.asarray, y)
        weights = None if sample_weight is None else keras.tree.map_structure(np.asarray, sample_weight)
        held: tuple[Any, Any] = (None, None)
        if validation_split:
            train_validation_split = keras_private.train_validation_split()

            (x, y, weights), (x_val, y_val, _) = train_validation_split((x, y, weights),
                                                                        validation_split=validation_split)
            held = (x_val, y_val)
        elif isinstance(validation_data, (tuple, list)) and len(validation_data) in (2, 3) \
                and all(_arrays(part) for part in validation_data[:2]):
            held = tuple(keras.tree.map_structure(np.asarray, part) for part in validation_data[:2])
        if not all(isinstance(part, np.ndarray) for part in held):
            held = (None, None)  # held-out figures take one input array and one label array (`trial.validation`)
        return ArrayData(x=x, y=y, sample_weight=weights, shuffle=shuffle, x_val=held[0], y_val=held[1])
    raise DataError(
        "Expected the script to pass fit() numpy arrays x and y (or dicts or lists of them), a tf.data.Dataset or "
        "a keras.utils.PyDataset, "
        f"which fitspeed can time and rewrite. Received: x of type {type(x).__name__}"
        f"{'' if y is None or isinstance(x, np.ndarray) else ' with y'}. Hand fit() one of those."
    )


def _arrays(tree: Any) -> bool:
    """Whether `tree` is a numpy array, or a dict, list or tuple of them (Keras's multi-input and -output form)."""
    leaves = keras.tree.flatten(tree)
    return bool(leaves) and all(isinstance(leaf, np.ndarray) for leaf in leaves)
