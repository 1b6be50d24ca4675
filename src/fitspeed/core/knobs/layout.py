"""The `data_format` knob."""

from __future__ import annotations

from fitspeed.core.knobs.base import Knob, Offer, Where, as_choice
from fitspeed.core.workloads import MODELS


class DataFormat(Knob):
    """channels_first, tried on any model with image layers, and on a user's model, whose trial says if it cannot."""

    def offer(self, where: Where) -> Offer:
        """
        >>> from fitspeed.core.config import TrialConfig
        >>> DATA_FORMAT.offer(Where(TrialConfig(), False, 2, None, "mlp", None)).skipped
        'the model has no image layers'
        """
        info = MODELS.get(where.model)
        if info is not None and (len(info.input_shape) != 3 or where.model == "mlp"):
            return Offer(skipped="the model has no image layers")
        return Offer(values=("channels_first",))


DATA_FORMAT = DataFormat(
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
