"""The workload options a command takes: declared once, resolved once to a `Workload`, and a trial's user error back.

Every command that runs a workload (measure, compare, doctor, scale, tune)
takes the same options, the fields of `WorkloadOptions`: a WORKLOAD (a
built-in model, module:function or a saved model.keras) or, after `--`, a
training command, with --fit, --data, --augment, --set, --steps, --repeats,
--seed, --timeout and --memory-limit. `@workload_command` gives a command
those options and calls it with one `Workload` (`fitspeed.console.workload`,
which `fitspeed.tune` makes too), resolved from them by
`WorkloadOptions.resolve`: its kind (`WorkloadKind`), the model or the
training command, the data, the base configuration (--set) and how to run a
trial.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

from fitspeed.cli.options import (
    AugmentOpt,
    CommandArgs,
    DataOpt,
    FitOpt,
    MemoryOpt,
    RepeatsOpt,
    SeedOpt,
    SetOpt,
    StepsOpt,
    Target,
    TimeoutOpt,
)
from fitspeed.console.option_values import parse_memory
from fitspeed.console.workload import Workload, WorkloadKind, data_ref
from fitspeed.core.config import TrialConfig
from fitspeed.core.data_ref import is_callable_ref
from fitspeed.core.errors import UserError
from fitspeed.core.json_data import JSONObject
from fitspeed.core.knobs import check_backend_installed
from fitspeed.core.record import TrialRecord
from fitspeed.core.workloads import MODELS, check_model, is_saved_model


@dataclass(frozen=True)
class WorkloadOptions:
    """The workload options as the user gave them: each field is one option, declared here for every command.

    A command's --repeats default is its own (`workload_command(repeats=…)`);
    `doctor` takes no --memory-limit.
    """

    workload: Target = None
    command: CommandArgs = None
    fit: FitOpt = 1
    data: DataOpt = None
    augment: AugmentOpt = False
    set_: SetOpt = None
    steps: StepsOpt = None
    repeats: RepeatsOpt = 3
    seed: SeedOpt = 0
    timeout: TimeoutOpt = 900.0
    memory_limit: MemoryOpt = None

    def resolve(self) -> Workload:
        """The `Workload` these options name; a UserError for the first that is wrong.

        They are checked in this order: the workload or training command,
        --data (with --augment), --set, its backend being installed, the
        model, --memory-limit.
        """
        script = training_script(self.workload, self.command, self.fit, self.data)
        data = data_ref(self.data, self.augment)
        base = TrialConfig.from_assignments(self.set_ or [])
        check_backend_installed(base.backend)
        if script is not None:  # a training command names itself, and loads its own data
            from fitspeed.measure import training_command

            kind, model, data = WorkloadKind.SCRIPT, training_command.label(script), training_command.DATA
        else:
            model = check_model(self.workload or "")
            kind = WorkloadKind.of_model(model)
        return Workload(kind=kind, model=model, data=data, base=base, steps=self.steps, repeats=self.repeats,
                        seed=self.seed, timeout_s=self.timeout, memory_limit_mb=parse_memory(self.memory_limit),
                        script=script)


def workload_command(*, repeats: int = 3, after: str | None = None, through: str | None = None,
                     memory_limit: bool = True) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the workload options, and call it with `workload=` the `Workload` they resolve to.

    The command's first parameter is `workload: Workload`; the rest are its
    own options. `--help` lists (and click reads) the workload options in
    `WorkloadOptions`' order, with the command's own options up to `through`
    right after the workload option `after`, and its others at the end; with
    neither, all of its own come last. `repeats` is the command's --repeats
    default; `memory_limit=False` leaves out --memory-limit.

    >>> @workload_command(after="fit", through="pairs")
    ... def compare(workload: Workload, pairs: int = 5, as_json: bool = False) -> None: ...
    >>> list(inspect.signature(compare).parameters)  # doctest: +NORMALIZE_WHITESPACE
    ['workload', 'command', 'fit', 'pairs', 'data', 'augment', 'set_', 'steps', 'repeats', 'seed', 'timeout',
     'memory_limit', 'as_json']
    """
    hints = get_type_hints(WorkloadOptions, include_extras=True)
    defaults = {field.name: field.default for field in dataclasses.fields(WorkloadOptions)} | {"repeats": repeats}
    group = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hints[name])
             for name, default in defaults.items() if memory_limit or name != "memory_limit"]
    names = [parameter.name for parameter in group]
    cut = len(group) if after is None else names.index(after) + 1

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        first, *own = inspect.signature(command, eval_str=True).parameters.values()
        if first.name != "workload" or set(names) & {parameter.name for parameter in own}:
            raise TypeError(f"Expected {command.__name__}'s first parameter to be `workload: Workload`, and none of "
                            f"its own named as a workload option ({', '.join(names)}).")
        split = len(own) if through is None else [parameter.name for parameter in own].index(through) + 1
        listed = [*group[:cut], *own[:split], *group[cut:], *own[split:]]
        signature = inspect.Signature([parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY) for parameter in listed])

        @functools.wraps(command)
        def run(**given: Any) -> None:
            options = WorkloadOptions(**{name: given.pop(name) for name in names})
            dashes_first(command.__name__, options.workload, options.command, sys.argv[1:])
            command(workload=options.resolve(), **given)

        run.__signature__ = signature  # type: ignore[attr-defined]  # what typer reads the options from
        run.__annotations__ = {parameter.name: parameter.annotation for parameter in listed}
        return run

    return decorate


def training_script(workload: str | None, command: list[str] | None, fit: int,
                    data: str | None = None) -> JSONObject | None:
    """The training command after `--` (`fitspeed.measure.training_command`), or None for a model reference.

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


def dashes_first(name: str, workload: str | None, command: list[str] | None, argv: list[str]) -> None:
    """Refuse a training command given without `--` on the command line `argv` of fitspeed command `name`.

    Click hands the words after WORKLOAD to COMMAND with `--` or without it,
    but without it the command's own options would be read as fitspeed's.

    >>> dashes_first("tune", "python", ["train.py"], ["tune", "--", "python", "train.py"])
    >>> dashes_first("tune", "tiny", None, ["tune", "tiny"])
    >>> dashes_first("tune", "python", ["train.py"], ["tune", "python", "train.py"])
    Traceback (most recent call last):
    ...
    fitspeed.core.errors.UserError: Expected a training command after `--`, so that its own options are not read as fitspeed's: `fitspeed tune -- python train.py`. Received: `python train.py` without `--`.
    """
    if workload is not None and command and "--" not in argv:
        words = " ".join([workload, *command])
        raise UserError(f"Expected a training command after `--`, so that its own options are not read as "
                        f"fitspeed's: `fitspeed {name} -- {words}`. Received: `{words}` without `--`.")


def check_user_error(record: TrialRecord) -> None:
    """A record that failed on the user's input ends the command with its message."""
    if record.user_error:
        raise UserError(record.reason or "")


def profile_dir(workload: str) -> str:
    """A fresh folder for one profile: fitspeed-profiles/WORKLOAD-YYYYMMDD-HHMMSS."""
    import time

    name = re.sub(r"[^\w.-]+", "_", workload).strip("_") or "workload"
    return str(Path("fitspeed-profiles", f"{name}-{time.strftime('%Y%m%d-%H%M%S')}").absolute())
