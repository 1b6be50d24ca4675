"""`import keras` in a built-in trial, without the optional packages it would load for nothing.

Under TensorFlow, `import keras` also imports JAX where it is installed
(`tensorflow.lite.python.util` tries `from jax import jit`) and
matplotlib.pyplot (Keras's own visualization module), each inside `try: ...
except ImportError`. No built-in trial uses either, and on 2 cores they were
about a second of every trial process's start (keras's import: 4.1-5.3 s
with them, 3.5-4.1 s without, 5 interleaved runs on a loaded machine). A
None in `sys.modules` is Python's documented way to make an import raise
ImportError, so keras skips them; the entries go once keras is in, and a
later `import matplotlib` or `import jax` works as always. JAX is kept when
it is the backend. A user's script is never run through here: its imports
are its own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

OPTIONAL = ("jax", "matplotlib")  # imported by keras (or TensorFlow under it) only if present


@contextmanager
def skipped(*names: str) -> Iterator[None]:
    """Imports of `names` (and their submodules) raise ImportError inside the block; as before after it."""
    blocked = [name for name in names if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def import_keras(backend: str) -> ModuleType:
    """keras, imported for `backend` (KERAS_BACKEND already set) without the optional packages it need not load."""
    with skipped(*(name for name in OPTIONAL if name != backend)):
        import keras
    return keras
