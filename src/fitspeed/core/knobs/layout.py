"""The `data_format` knob."""

from __future__ import annotations

from typing import Any

from fitspeed.core.knobs.base import Knob, Lines, Offer, Recipe, Where, as_choice
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

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        """A rewrite of the built model (`fitspeed.rewrite_model`), as the trials did."""
        if value == self.default:
            return {}
        return {"rewrite": ["# every data_format layer, BatchNormalization axes and the Flatten order go channels_first;",
                            "# the input is permuted inside the model, so your data stays channels_last.",
                            "# A saved model: fitspeed convert model.keras --set data_format=channels_first -o fast.keras"],
                "rewritten": [self.name]}


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
