"""From a command's words to what its trials run, and a trial's user error back to the command.

A command names a workload (a built-in model, module:function or a saved
model.keras) or, after `--`, a training command; `training_script` tells the
two apart, `data_ref` reads `--data`, and `trial_spec` makes the `TrialSpec`
that `fitspeed.measure.runner` runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fitspeed.cli.options import parse_memory
from fitspeed.core.config import TrialConfig
from fitspeed.core.data_ref import DataRef, is_callable_ref
from fitspeed.core.errors import UserError
from fitspeed.core.knobs import check_backend_installed
from fitspeed.core.record import TrialRecord, TrialSpec
from fitspeed.core.workloads import MODELS, check_model, is_saved_model


def data_ref(text: str | None, augment: bool) -> str | None:
    """`--data` (with `--augment`) as its canonical reference; None for the model's default."""
    if text is None and not augment:
        return None
    return str(DataRef.parse(text, augment=augment))


def trial_spec(
    workload: str,
    data: str | None,
    assignments: list[str],
    steps: int | None,
    repeats: int,
    seed: int,
    timeout: float,
    memory_limit: str | None,
    base: TrialConfig | None = None,
    script: dict[str, Any] | None = None,
) -> TrialSpec:
    config = TrialConfig.from_assignments(assignments, base=base)
    check_backend_installed(config.backend)
    if script is not None:  # a training command names itself, and loads its own data
        from fitspeed.measure import training_command

        model, data = training_command.label(script), training_command.DATA
    else:
        model = check_model(workload)
    return TrialSpec(model=model, data=data, config=config, steps=steps, repeats=repeats, seed=seed,
                     timeout_s=timeout, memory_limit_mb=parse_memory(memory_limit), script=script)


def training_script(workload: str | None, command: list[str] | None, fit: int,
                    data: str | None = None) -> dict[str, Any] | None:
    """The training command after `--` (`fitspeed.measure.training_command`), or None for a built-in or module:function workload.

    Click hands the first word after `--` to WORKLOAD and the rest to COMMAND; a
    single word is a command when it names a file or a path (`-- ./train.sh`).
    """
    if workload is None:
        raise UserError("Expected a workload (a built-in model or module:function) or a training command after "
                        "`--`, such as `fitspeed measure -- python train.py`. Received neither.")
    if not command and (workload in MODELS or is_callable_ref(workload) or is_saved_model(workload)
                        or not ("/" in workload or workload.endswith((".py", ".sh")) or Path(workload).is_file())):
        return None
    if data is not None:
        raise UserError(f"Expected no --data with a training command: the script loads its own. Received: --data "
                        f"{data}. Drop --data, or point your script at that data with its own arguments.")
    from fitspeed.measure import training_command

    return training_command.describe([workload, *(command or [])], fit)


def check_user_error(record: TrialRecord) -> None:
    """A record that failed on the user's input ends the command with its message."""
    if record.user_error:
        raise UserError(record.reason or "")


def profile_dir(workload: str) -> str:
    """A fresh folder for one profile: fitspeed-profiles/WORKLOAD-YYYYMMDD-HHMMSS."""
    import time

    name = re.sub(r"[^\w.-]+", "_", workload).strip("_") or "workload"
    return str(Path("fitspeed-profiles", f"{name}-{time.strftime('%Y%m%d-%H%M%S')}").absolute())
