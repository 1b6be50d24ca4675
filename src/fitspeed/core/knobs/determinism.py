"""The `deterministic` knob."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fitspeed.core.backends import backend_of
from fitspeed.core.knobs.base import Knob, Lines, Offer, Process, Recipe, Where, as_bool

FLAGS = {"TF_DETERMINISTIC_OPS": "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
DETERMINISTIC_XLA = "--xla_gpu_deterministic_ops=true"


class Determinism(Knob):
    """Measured for its cost alone: a user who wants determinism learns what it costs; never recommended.

    Applied in two stages: its flags before import (`environment`), and
    deterministic ops after import, once the process is seeded (`apply`).
    """

    step = "determinism"
    environment_step = "determinism"
    exported = False  # the snippet sets TF_DETERMINISTIC_OPS in Python and calls the backend's determinism

    def environment(self, value: Any, environ: Mapping[str, str], config: Any) -> dict[str, str]:
        """TensorFlow's and cuBLAS's flags, and XLA's deterministic ops added to XLA_FLAGS once.

        >>> DETERMINISTIC.environment(True, {"XLA_FLAGS": "--a"}, None)["XLA_FLAGS"]
        '--a --xla_gpu_deterministic_ops=true'
        >>> DETERMINISTIC.environment(True, {"XLA_FLAGS": "--xla_gpu_deterministic_ops=true"}, None)["XLA_FLAGS"]
        '--xla_gpu_deterministic_ops=true'
        """
        if not value:
            return {}
        flags = environ.get("XLA_FLAGS", "")
        if DETERMINISTIC_XLA not in flags.split():
            flags = f"{flags} {DETERMINISTIC_XLA}".strip()
        return {**FLAGS, "XLA_FLAGS": flags}

    def offer(self, where: Where) -> Offer:
        return Offer(values=(True,), cost_only=True)

    def apply(self, value: Any, process: Process) -> None:
        if value:
            process.enable_determinism()

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        if not value:
            return {}
        return {"before_import": ['os.environ["TF_DETERMINISTIC_OPS"] = "1"'],
                "process": ["keras.utils.set_random_seed(0)", *backend_of(recipe.config.backend).determinism_lines()]}


DETERMINISTIC = Determinism(
    name="deterministic",
    description="Deterministic ops plus fixed seeds (TF op determinism, XLA or torch flags).",
    values="true, false",
    default=False,
    scope="process",
    stage="process",
    parse=lambda raw: as_bool("deterministic", raw),
    changes_numerics=True,
)
