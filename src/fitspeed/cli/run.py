"""`fitspeed run`: the user's training command run to its end with a tuned configuration applied."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fitspeed.cli.console import err


def run_script(
    config: Annotated[Path, typer.Argument(help="A best.json written by `fitspeed tune`.")],
    command: Annotated[list[str], typer.Argument(help="Your training command after `--`, such as -- python train.py --epochs 15.", show_default=False)],
    seed: Annotated[int, typer.Option("--seed", help="Seed set at keras import when the configuration has deterministic=true (give it before CONFIG); otherwise the run keeps its own randomness.")] = 0,
    force: Annotated[bool, typer.Option("--force", help="Say nothing when best.json was tuned on another workload or another version of the script (give it before CONFIG).")] = False,
) -> None:
    """Run your training command to its end with a configuration applied, unchanged; exit with its status."""
    from fitspeed.core import best_json
    from fitspeed.measure import training_command

    chosen, best = best_json.read(config)
    command = command[1:] if command[:1] == ["--"] else command  # Click keeps `--` after the first argument here
    err.print(f"running `{' '.join(command)}` with {chosen.label()}", highlight=False)
    raise typer.Exit(training_command.run(chosen, command, seed=seed, best=best, force=force))
