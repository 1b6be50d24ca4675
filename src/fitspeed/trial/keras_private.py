"""Every private Keras symbol fitspeed uses, each behind one accessor: the one place that names `keras.src`.

Keras's public API (`keras.*`) is what Keras promises to keep; `keras.src` is
its implementation, which a Keras release may move or rename without notice.
fitspeed reaches into it only where the public API cannot say what fit() does
itself: which pipeline it builds from arrays, which inputs it takes as arrays,
where validation_split cuts, which adapter reads a dataset, and how
`keras.utils.set_random_seed` finds TensorFlow. Each accessor below says why.

Who uses what:

- `array_data_adapter_class`: `trial.data.pipeline` (`keras_array_dataset`,
  `array_autotune`).
- `can_convert_arrays`, `train_validation_split`: `trial.data.kinds`
  (`as_given`, `entering`).
- `get_data_adapter`: `trial.doctor` (`_iterate`).
- `rng_utils_module`, `lazy_module_class`: `trial.seeding`.

Every accessor imports inside its body, and this module imports nothing at
module level: importing it never imports keras, so `trial.seeding` and the
others keep importing keras only when they did before (after KERAS_BACKEND is
set, and not at all for a `--help`). Once keras is in, each call is a lookup
in `sys.modules`.

tests/trial/test_keras_private.py resolves every accessor in `ACCESSORS`
against the installed Keras and checks the behaviour fitspeed relies on, so it
fails the day Keras moves one; it also fails when `keras.src` is named
anywhere else under src/.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any


def array_data_adapter_class() -> type[Any]:
    """Keras's `ArrayDataAdapter`: the class fit(x, y) turns numpy arrays into batches with.

    No public API returns the tf.data pipeline fit() builds from arrays, or
    lets its options be set: `trial.data.pipeline` builds that same pipeline
    with it (`keras_array_dataset`) and wraps its `get_tf_dataset` to turn
    tf.data's autotune off inside a script's own fit() (`array_autotune`).
    """
    from keras.src.trainers.data_adapters.array_data_adapter import ArrayDataAdapter

    return ArrayDataAdapter


def can_convert_arrays() -> Callable[[Any], bool]:
    """Keras's `can_convert_arrays(arrays)`: whether fit() takes `(x, y, sample_weight)` as arrays.

    Keras's own answer to which inputs its ArrayDataAdapter accepts (numpy
    arrays, and dicts and lists of them, among others); no public API asks it,
    and a copy of its rules would drift from the Keras installed.
    """
    from keras.src.trainers.data_adapters.array_data_adapter import can_convert_arrays as found

    return found


def train_validation_split() -> Callable[..., Any]:
    """Keras's `train_validation_split(arrays, validation_split)`: the cut fit(validation_split=...) makes.

    The first 1 - split of the samples train and the rest are held out, as
    arrays. The public `keras.utils.split_dataset` returns datasets rather than
    arrays and is not the function fit() calls, so it could cut elsewhere.
    """
    from keras.src.trainers.data_adapters.array_slicing import train_validation_split as found

    return found


def get_data_adapter() -> Callable[..., Any]:
    """Keras's `get_data_adapter(x, y, ...)`: the adapter fit() chooses for its inputs.

    Doctor's input mode pulls the very batches fit() would read, with no
    model; fit() makes its adapter internally and no public API returns it.
    """
    from keras.src.trainers.data_adapters import get_data_adapter as found

    return found


def rng_utils_module() -> ModuleType:
    """Keras's random-seed module, whose `tf` attribute `keras.utils.set_random_seed` reads to find TensorFlow.

    The public `set_random_seed` seeds TensorFlow whenever it can import it,
    whatever the backend, and has no switch to leave it out; `trial.seeding`
    swaps that attribute for the length of one call so a JAX or PyTorch trial
    does not import TensorFlow to seed it.
    """
    from keras.src.utils import rng_utils

    return rng_utils


def lazy_module_class() -> type[Any]:
    """Keras's `LazyModule`: the class of the `tf` attribute that `rng_utils_module()` holds.

    `trial.seeding` swaps the attribute only when it is one of these, that is
    on a Keras that looks TensorFlow up the way it knows; on any other it
    seeds as Keras does. The class is not exported publicly.
    """
    from keras.src.utils.module_utils import LazyModule

    return LazyModule


ACCESSORS: tuple[Callable[[], object], ...] = (
    array_data_adapter_class,
    can_convert_arrays,
    train_validation_split,
    get_data_adapter,
    rng_utils_module,
    lazy_module_class,
)  # every accessor above; tests/trial/test_keras_private.py resolves each against the installed Keras
