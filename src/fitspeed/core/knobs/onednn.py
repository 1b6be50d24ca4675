"""The `onednn` knob."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fitspeed.core.backends import backend_of
from fitspeed.core.knobs.base import Knob, Offer, Where, keep_or_bool


class OneDnn(Knob):
    """The value that differs from what the baseline runs with on this CPU (`Where.onednn_on`)."""

    environment_step = "onednn"

    def environment(self, value: Any, environ: Mapping[str, str], config: Any) -> dict[str, str]:
        """TF_ENABLE_ONEDNN_OPTS, as the backend exports it (`Backend.exports`: TensorFlow's; keep sets nothing).

        >>> from fitspeed.core.config import TrialConfig
        >>> ONEDNN.environment(False, {}, TrialConfig()), ONEDNN.environment("keep", {}, TrialConfig())
        ({'TF_ENABLE_ONEDNN_OPTS': '0'}, {})
        """
        return backend_of(config.backend).exports(value)

    def offer(self, where: Where) -> Offer:
        """
        >>> from fitspeed.core.config import TrialConfig
        >>> [ONEDNN.offer(Where(TrialConfig(), False, 2, None, "tiny", None, onednn_on=on)).values
        ...  for on in (True, False, None)]
        [(False,), (True,), (True, False)]
        """
        why = self.refuses(where.backend)
        if why:
            return Offer(skipped=why)
        if isinstance(where.base.onednn, bool):
            return Offer(values=(not where.base.onednn,))
        if where.onednn_on is None:  # TensorFlow decides by rules we do not know here: try both
            return Offer(values=(True, False))
        # Turning off what TensorFlow turned on for this CPU costs one screen trial: kept only if that shows a gain.
        return Offer(values=(not where.onednn_on,), alone=where.onednn_on)


ONEDNN = OneDnn(
    name="onednn",
    description="TensorFlow's oneDNN CPU kernels (TF_ENABLE_ONEDNN_OPTS, read at import); keep leaves "
    "TensorFlow's own default (on only for CPUs with AVX512-VNNI, AVX512-BF16 or AMX).",
    values="keep, true, false",
    default="keep",
    scope="process",
    stage="environment",
    parse=lambda raw: keep_or_bool("onednn", raw),
    changes_numerics=True,
)
