"""The options that several commands take, declared once, and the parsers of their values.

Each alias is a typer `Annotated` type: a command that takes `--seed` writes
`seed: SeedOpt = 0` and gets the same flag and help text as every other.
An option only one command takes is declared beside that command. The
workload options (WORKLOAD, COMMAND, --fit, --data … --memory-limit) are the
fields of `fitspeed.cli.workload.WorkloadOptions`, which commands take as one
group.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Optional

import typer

from fitspeed.core.errors import UserError

DEFAULT_RESULTS = Path("fitspeed-results.jsonl")

DataOpt = Annotated[Optional[str], typer.Option("--data", help="synthetic, cifar10, fashion_mnist, npz:PATH or module:function.")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", help="A knob as name=value; repeat for more (see `fitspeed knobs`).")]
StepsOpt = Annotated[Optional[int], typer.Option("--steps", help="Timed steps per repeat, a multiple of steps_per_execution [default: about 1 s of training].")]
RepeatsOpt = Annotated[int, typer.Option("--repeats", help="Timed repeats per trial.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for data, weights and shuffling.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds before a trial is stopped and recorded as timeout.")]
MemoryOpt = Annotated[Optional[str], typer.Option("--memory-limit", help="Resident memory limit per trial, such as 4GiB or 2048 (MiB); over it the trial is recorded as oom.")]
ResultsOpt = Annotated[Path, typer.Option("--results", help="JSON-lines file the records are appended to.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the machine-readable record(s) instead of tables.")]
AugmentOpt = Annotated[bool, typer.Option("--augment", help="With --data images:DIR: random crop and flip per example (same as --data images+augment:DIR).")]
Target = Annotated[Optional[str], typer.Argument(help="Built-in model (see `fitspeed workloads`), module:function or a saved model.keras; or, after `--`, your training command, run unchanged: -- python train.py --epochs 15.", show_default=False)]
CommandArgs = Annotated[Optional[list[str]], typer.Argument(help="The rest of the training command after `--`.", show_default=False)]
FitOpt = Annotated[int, typer.Option("--fit", help="With a training command: which of its fit() calls to time (1 is the first).")]
MonitorOpt = Annotated[bool, typer.Option("--monitor", help="Sample the trial's process tree and the GPUs; each record gains mean/peak CPU, threads, device use and power.")]
StorageOpt = Annotated[str, typer.Option("--storage", help="Optuna storage URL.")]

_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_MEMORY_UNITS = {"": 1.0, "k": 1 / 1024, "kb": 1 / 1024, "kib": 1 / 1024, "m": 1.0, "mb": 1.0, "mib": 1.0,
                 "g": 1024.0, "gb": 1024.0, "gib": 1024.0, "t": 1024.0**2, "tb": 1024.0**2, "tib": 1024.0**2}
_TIME_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def _quantity(text: str, units: dict[str, float], option: str, examples: str) -> float:
    """A number with an optional unit, scaled by `units`; a UserError otherwise."""
    match = _QUANTITY.match(text)
    if not match or match.group(2).lower() not in units:
        raise UserError(f"Expected {option} as {examples}. Received: {text!r}.")
    value = float(match.group(1)) * units[match.group(2).lower()]
    if value <= 0:  # a zero budget or limit cannot measure even the baseline
        raise UserError(f"Expected {option} to be more than zero, as {examples}. Received: {text!r}.")
    return value


def parse_memory(text: str | None) -> int | None:
    """MiB from '2048', '512MiB', '4GiB' or '1.5G'.

    >>> parse_memory("4GiB"), parse_memory("1.5G"), parse_memory("2048")
    (4096, 1536, 2048)
    """
    if text is None:
        return None
    mib = _quantity(text, _MEMORY_UNITS, "--memory-limit", "a size such as 4GiB, 512MiB or 2048 (MiB)")
    return max(1, int(mib))


def parse_duration(text: str | None) -> float | None:
    """Seconds from '90', '90s', '20m' or '1.5h'.

    >>> parse_duration("20m"), parse_duration("1.5h")
    (1200.0, 5400.0)
    """
    if text is None:
        return None
    return _quantity(text, _TIME_UNITS, "--time", "a duration such as 90s, 20m or 1h")


def parse_int_list(text: str | None, option: str) -> tuple[int, ...]:
    """Positive integers from '32,64,128'; () for none.

    >>> parse_int_list("1,2,4", "--devices"), parse_int_list(None, "--batch-sizes")
    ((1, 2, 4), ())
    """
    if not text:
        return ()
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise UserError(f"Expected {option} as positive integers separated by commas, such as "
                        f"32,64,128. Received: {text!r}.")
    return values
