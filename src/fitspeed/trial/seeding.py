"""Seed a trial's process as `keras.utils.set_random_seed` does, without importing TensorFlow for it.

Keras seeds TensorFlow whenever TensorFlow can be imported, whatever the
backend, because a `tf.data` pipeline may shuffle. On JAX and PyTorch
nothing in a trial imports TensorFlow otherwise, and that one import was
most of a trial's start: a `tiny` trial on JAX took 5.7-6.2 s with it and
3.6 s without, on PyTorch 6.5 s and 2.8 s (2 cores). So where TensorFlow is
not imported yet, Keras seeds everything else, and TensorFlow is seeded the
moment anything imports it (wrapt's post-import hook): a pipeline the user's
code builds later shuffles exactly as it would have.
"""

from __future__ import annotations

import sys
from typing import Any

from fitspeed.trial import keras_private


class _NotImported:
    """Stands in for Keras's lazy `tensorflow` module during the seeding: "not available"."""

    available = False


def set_random_seed(seed: int, backend: str) -> None:
    """`keras.utils.set_random_seed(seed)`; on another backend than TensorFlow, TensorFlow only once it is imported."""
    import keras

    if backend == "tensorflow" or "tensorflow" in sys.modules:
        keras.utils.set_random_seed(seed)
        return
    rng_utils = keras_private.rng_utils_module()  # where Keras 3 looks TensorFlow up for this

    lazy = getattr(rng_utils, "tf", None)
    if not isinstance(lazy, keras_private.lazy_module_class()):  # another Keras: seed as it does, import and all
        keras.utils.set_random_seed(seed)
        return
    setattr(rng_utils, "tf", _NotImported())
    try:
        keras.utils.set_random_seed(seed)
    finally:
        setattr(rng_utils, "tf", lazy)
    import wrapt

    def seed_tensorflow(tf: Any) -> None:
        tf.random.set_seed(seed)

    wrapt.register_post_import_hook(seed_tensorflow, "tensorflow")
