"""The options that several commands take, declared once.

Each alias is a typer `Annotated` type: a command that takes `--seed` writes
`seed: SeedOpt = 0` and gets the same flag and help text as every other.
An option only one command takes is declared beside that command. The
workload options (WORKLOAD, COMMAND, --fit, --data … --memory-limit) are the
fields of `fitspeed.cli.workload.WorkloadOptions`, which commands take as one
group. The parsers of their values (--memory-limit, --time, --batch-sizes)
are in `fitspeed.console.option_values`, which `fitspeed.tune` shares.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

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
