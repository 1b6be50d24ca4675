"""The `xla_auto_clustering` knob: TensorFlow clusters the ops of every graph it runs and compiles each with XLA.

`jit_compile=True` compiles the train step Keras builds, as one function. Auto-clustering
(`TF_XLA_FLAGS=--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit`, read when TensorFlow is
imported) instead lets TensorFlow pick the clusters itself, on the CPU too, in every
graph the process runs, the input pipeline's functions included. TensorFlow's own
XLA guide describes it; it is TensorFlow's alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fitspeed.core.knobs.base import Knob, Offer, Where, as_bool

VARIABLE = "TF_XLA_FLAGS"
FLAGS = ("--tf_xla_auto_jit=2", "--tf_xla_cpu_global_jit")


class XlaAutoClustering(Knob):
    """On: TF_XLA_FLAGS gains the two flags, before TensorFlow is imported; TensorFlow only."""

    def refuses(self, backend: str) -> str | None:
        """Why `backend` has no auto-clustering to turn on, or None on TensorFlow.

        >>> XLA_AUTO_CLUSTERING.refuses("jax")
        "XLA auto-clustering is TensorFlow's (TF_XLA_FLAGS); JAX compiles every step with XLA already"
        """
        if backend == "tensorflow":
            return None
        return "XLA auto-clustering is TensorFlow's (TF_XLA_FLAGS); " + (
            "JAX compiles every step with XLA already" if backend == "jax" else "PyTorch does not run XLA")

    def offer(self, where: Where) -> Offer:
        why = self.refuses(where.base.backend)
        return Offer(skipped=why) if why else Offer(values=(True,))

    def environment(self, value: Any, environ: Mapping[str, str], config: Any) -> dict[str, str]:
        """The flags added to what TF_XLA_FLAGS holds already, once each.

        >>> XLA_AUTO_CLUSTERING.environment(True, {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2 --x"}, None)
        {'TF_XLA_FLAGS': '--tf_xla_auto_jit=2 --x --tf_xla_cpu_global_jit'}
        >>> XLA_AUTO_CLUSTERING.environment(False, {}, None)
        {}
        """
        if not value:
            return {}
        flags = environ.get(VARIABLE, "").split()
        return {VARIABLE: " ".join([*flags, *(flag for flag in FLAGS if flag not in flags)])}


XLA_AUTO_CLUSTERING = XlaAutoClustering(
    name="xla_auto_clustering",
    description="TensorFlow's XLA auto-clustering (TF_XLA_FLAGS=--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit, read at "
    "import): TensorFlow picks op clusters in every graph and compiles them; not jit_compile's one train step.",
    values="true, false",
    default=False,
    scope="process",
    stage="environment",
    parse=lambda raw: as_bool("xla_auto_clustering", raw),
    changes_numerics=True,
)
