"""The `devices` knob."""

from __future__ import annotations

from fitspeed.core.knobs.base import Knob, as_int


DEVICES = Knob(
    name="devices",
    description="Data parallel over N devices: tf.distribute.MirroredStrategy (TensorFlow) or "
    "keras.distribution.DataParallel (JAX); on a CPU, N logical devices. The global batch is "
    "batch_size × N: re-tune the learning rate.",
    values="integer >= 1",
    default=1,
    scope="process",
    stage="process",
    parse=lambda raw: as_int("devices", raw, 1),
    changes_numerics=True,
)
