"""The `batch_size` knob."""

from __future__ import annotations

from typing import Any

from fitspeed.core.knobs.base import Knob, Lines, Recipe, as_int


class BatchSize(Knob):
    """The batch of one device: fit() is given it times `devices`, the global batch, wherever there are several;
    over several processes, each process's fit() is given its own share, and the global batch is that × processes."""

    def snippet(self, value: Any, recipe: Recipe) -> Lines:
        """
        >>> from fitspeed.core.config import TrialConfig
        >>> print("\\n".join(BATCH_SIZE.snippet(32, Recipe(TrialConfig(backend="jax", processes=2)))["fit"]))
        <BLANKLINE>
        # The global batch is 32 per device × 1 device × 2 processes: re-tune the learning rate.
        # Each process feeds its own share of the data, 32 a step, as fitspeed's trials did:
        import jax
        process, processes = jax.process_index(), jax.process_count()
        model.fit(x_train[process::processes], y_train[process::processes], batch_size=32)
        """
        devices, processes = recipe.config.devices, recipe.config.processes
        if processes > 1:
            return {"fit": ["", f"# The global batch is {value} per device × {devices} device{'s' * (devices > 1)} × "
                            f"{processes} processes: re-tune the learning rate.",
                            f"# Each process feeds its own share of the data, {value * devices} a step, as fitspeed's "
                            "trials did:",
                            "import jax",
                            "process, processes = jax.process_index(), jax.process_count()",
                            "model.fit(x_train[process::processes], y_train[process::processes], "
                            f"batch_size={value * devices})"]}
        if devices > 1:
            return {"fit": ["", f"# The global batch is {value} per device × {devices} devices: re-tune the learning "
                            "rate.", f"model.fit(x_train, y_train, batch_size={value * devices})"]}
        if value == self.default:
            return {}
        return {"fit": ["", f"# batch_size={value} changes the recipe: re-tune the learning rate.",
                        f"model.fit(x_train, y_train, batch_size={value})"]}


BATCH_SIZE = BatchSize(
    name="batch_size",
    description="Samples per training step; changes the recipe (re-tune the learning rate).",
    values="integer >= 1",
    default=32,
    scope="data",
    stage="data",
    parse=lambda raw: as_int("batch_size", raw, 1),
    changes_numerics=True,
)
