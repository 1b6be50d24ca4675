"""The `onednn` knob."""

from __future__ import annotations

from fitspeed.core.knobs.base import Knob, keep_or_bool


ONEDNN = Knob(
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
