"""The `data_format` knob."""

from __future__ import annotations

from fitspeed.core.knobs.base import Knob, as_choice


DATA_FORMAT = Knob(
    name="data_format",
    description="Image layout: the model is rewritten (layers' data_format, BatchNormalization axis, Flatten "
    "order, the input permuted inside it) and checked to compute the same; the data stays as it is.",
    values="channels_last, channels_first",
    default="channels_last",
    scope="model",
    stage="model",
    parse=lambda raw: as_choice("data_format", raw, ("channels_last", "channels_first")),
    changes_numerics=True,
)
