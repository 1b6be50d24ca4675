"""Which of a script's callbacks act per batch, and so change rhythm under steps_per_execution.

Keras calls a callback's batch hooks once per execution: with
steps_per_execution=64, `on_train_batch_end` runs once every 64 batches, so a
per-batch learning-rate schedule, a per-batch logger or a step-based
checkpoint would run 64 times less often. Per-epoch callbacks
(`LearningRateScheduler`, `EarlyStopping`, `ReduceLROnPlateau`, `CSVLogger`)
keep their meaning and are not named here.

A callback acts per batch when:

| callback                                   | acts per batch when                                     |
|--------------------------------------------|---------------------------------------------------------|
| the script's own class (or its subclass of | it defines `on_train_batch_begin/end` or               |
| a Keras callback)                          | `on_batch_begin/end` itself                             |
| `keras.callbacks.LambdaCallback`           | it was given one of those hooks                         |
| `keras.callbacks.TensorBoard`              | `update_freq` is a number of batches (or "batch")       |
| `keras.callbacks.ModelCheckpoint`,         | `save_freq` is a number of batches                      |
| `BackupAndRestore`, `OrbaxCheckpoint`      |                                                         |

Keras's own `ProgbarLogger`, `History` and `TerminateOnNaN` only display or
watch: they are not named. Runs wherever keras is imported (the trial child,
the user's process under `fitspeed run`).
"""

from __future__ import annotations

from typing import Any

HOOKS = ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end")
_RHYTHM = {"TensorBoard": "update_freq", "ModelCheckpoint": "save_freq", "BackupAndRestore": "save_freq",
           "OrbaxCheckpoint": "save_freq"}


def _keras_own(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "keras"


def per_batch(callback: Any) -> str | None:
    """How `callback` acts per batch, in a few words, or None when it does not.

    >>> import keras
    >>> class Counter(keras.callbacks.Callback):
    ...     def on_train_batch_end(self, batch, logs=None):
    ...         pass
    >>> per_batch(Counter())
    'Counter (on_train_batch_end)'
    >>> per_batch(keras.callbacks.TensorBoard(update_freq=100))
    'TensorBoard(update_freq=100)'
    >>> per_batch(keras.callbacks.EarlyStopping()) is None, per_batch(keras.callbacks.TensorBoard()) is None
    (True, True)
    """
    cls = type(callback)
    name = cls.__name__
    own = [hook for hook in HOOKS if _defined_outside_keras(cls, hook)]
    if own:
        return f"{name} ({', '.join(own)})"
    if name == "LambdaCallback" and _keras_own(cls):
        given = [hook for hook in HOOKS if hook in vars(callback)]
        return f"LambdaCallback ({', '.join(given)})" if given else None
    attribute = _RHYTHM.get(name) if _keras_own(cls) else None
    if attribute is None:
        for base in cls.__mro__[1:]:  # a script's subclass of a Keras checkpoint keeps the rhythm it was given
            if _keras_own(base) and base.__name__ in _RHYTHM:
                attribute = _RHYTHM[base.__name__]
                break
    if attribute is not None:
        value = getattr(callback, attribute, "epoch")
        if isinstance(value, int) and not isinstance(value, bool):
            return f"{name}({attribute}={value})"
    return None


def _defined_outside_keras(cls: type, hook: str) -> bool:
    """Whether the class that gives `cls` its `hook` is the script's (not Keras's)."""
    for klass in cls.__mro__:
        if hook in vars(klass):
            return not _keras_own(klass)
    return False


def named(callbacks: Any) -> list[str]:
    """Each callback in `callbacks` (a list, or None) that acts per batch, as `per_batch` names it."""
    return [found for callback in list(callbacks or []) if (found := per_batch(callback))]


def rhythm_warning(names: list[str], steps_per_execution: int) -> str | None:
    """One line for `fitspeed run`: the callbacks that steps_per_execution would call less often.

    >>> rhythm_warning(["Counter (on_train_batch_end)"], 64)
    'steps_per_execution=64 calls batch hooks once every 64 batches: Counter (on_train_batch_end) will run 64x less often. Tune with the script as it is (fitspeed caps steps_per_execution for batch callbacks), or drop steps_per_execution from best.json.'
    >>> rhythm_warning(["Counter (on_train_batch_end)"], 1) is None
    True
    """
    if steps_per_execution <= 1 or not names:
        return None
    return (f"steps_per_execution={steps_per_execution} calls batch hooks once every {steps_per_execution} batches: "
            f"{', '.join(names)} will run {steps_per_execution}x less often. Tune with the script as it is "
            "(fitspeed caps steps_per_execution for batch callbacks), or drop steps_per_execution from best.json.")
