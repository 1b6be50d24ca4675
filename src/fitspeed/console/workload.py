"""The workload a command or a `fitspeed.tune` call runs, resolved: its kind, model, data and how to run a trial.

The command line resolves its workload options to a `Workload`
(`fitspeed.cli.workload.WorkloadOptions.resolve`); the Python API makes one
from what it shipped to files (`fitspeed.api.tuning`). `Workload.spec` makes
the `TrialSpec` that `fitspeed.measure.runner` runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from fitspeed.core.config import TrialConfig
from fitspeed.core.data_ref import DataRef
from fitspeed.core.json_data import JSONObject
from fitspeed.core.knobs import check_backend_installed
from fitspeed.core.record import TrialSpec
from fitspeed.core.workloads import MODELS, is_saved_model


class WorkloadKind(StrEnum):
    """What a command's workload is, known once its options are resolved."""

    BUILT_IN = "built-in"  # a model `fitspeed workloads` lists
    BUILDER = "builder"  # the user's module:function
    SAVED_MODEL = "saved model"  # a model.keras file, rebuilt with fresh weights for every trial
    SCRIPT = "script"  # the user's training command after `--`, run unchanged and hooked

    @classmethod
    def of_model(cls, model: str) -> WorkloadKind:
        """The kind of a model reference that `check_model` accepted.

        >>> WorkloadKind.of_model("tiny"), WorkloadKind.of_model("mypkg.models:build"), WorkloadKind.of_model("m.keras")
        (<WorkloadKind.BUILT_IN: 'built-in'>, <WorkloadKind.BUILDER: 'builder'>, <WorkloadKind.SAVED_MODEL: 'saved model'>)
        """
        if is_saved_model(model):
            return cls.SAVED_MODEL
        return cls.BUILT_IN if model in MODELS else cls.BUILDER


@dataclass(frozen=True)
class Workload:
    """A command's workload, resolved: what every trial of the command runs, less the knobs it varies."""

    kind: WorkloadKind
    model: str  # the model reference, or a training command's label (`script:train.py`)
    data: str | None  # the canonical --data; None for the model's default; training_command.DATA for a script
    base: TrialConfig  # --set
    steps: int | None
    repeats: int
    seed: int
    timeout_s: float
    memory_limit_mb: int | None
    script: JSONObject | None = None  # the training command (`fitspeed.measure.training_command.describe`)

    @property
    def is_script(self) -> bool:
        return self.kind == WorkloadKind.SCRIPT

    def spec(self, assignments: Iterable[str] = ()) -> TrialSpec:
        """A trial of this workload with the knobs `assignments` (name=value) on top of the base configuration."""
        config = TrialConfig.from_assignments(assignments, base=self.base)
        check_backend_installed(config.backend)
        return TrialSpec(model=self.model, data=self.data, config=config, steps=self.steps, repeats=self.repeats,
                         seed=self.seed, timeout_s=self.timeout_s, memory_limit_mb=self.memory_limit_mb,
                         script=self.script)


def data_ref(text: str | None, augment: bool) -> str | None:
    """`--data` (with `--augment`) as its canonical reference; None for the model's default."""
    if text is None and not augment:
        return None
    return str(DataRef.parse(text, augment=augment))
