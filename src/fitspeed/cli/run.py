"""`fitspeed run`: the user's training command run to its end with a tuned configuration applied."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer



def run_script(
    config: Annotated[Path, typer.Argument(help="A best.json written by `fitspeed tune`.")],
    command: Annotated[list[str], typer.Argument(help="Your training command after `--`, such as -- python train.py --epochs 15.", show_default=False)],
    seed: Annotated[int, typer.Option("--seed", help="Seed set at keras import when the configuration has deterministic=true; otherwise the run keeps its own randomness.")] = 0,
    force: Annotated[bool, typer.Option("--force", help="Say nothing when best.json was tuned on another workload or another version of the script.")] = False,
    processes: Annotated[int | None, typer.Option("--processes", min=1, help="Train over N processes on this host, each a copy of the command joined by keras.distribution (JAX); overrides best.json's processes.", show_default=False)] = None,
) -> None:
    """Run your training command to its end with a configuration applied, unchanged; exit with its status."""
    from fitspeed.core import best_json
    from fitspeed.measure import training_command

    chosen, best = best_json.read(config)
    command, seed, force, processes = own_options(command, seed, force, processes)
    # `training_command.run` says what it applies: a script's batch size and model layout stay the script's own
    raise typer.Exit(training_command.run(chosen, command, seed=seed, best=best, force=force, processes=processes))


def own_options(command: list[str], seed: int, force: bool,
                processes: int | None = None) -> tuple[list[str], int, bool, int | None]:
    """`run`'s own options given after CONFIG, taken off the front of the command.

    Everything after CONFIG reaches `command` untouched (the training command's
    options are its own), so `--force`, `--seed N` and `--processes N` given
    between CONFIG and `--` are read here; after `--`, every word is the command's.

    >>> own_options(["--force", "--seed", "3", "--", "python", "t.py", "--seed", "9"], 0, False)
    (['python', 't.py', '--seed', '9'], 3, True, None)
    >>> own_options(["python", "t.py", "--force"], 0, False)
    (['python', 't.py', '--force'], 0, False, None)
    >>> own_options(["--processes", "2", "--", "python", "t.py", "--processes", "8"], 0, False)
    (['python', 't.py', '--processes', '8'], 0, False, 2)
    >>> own_options(["--processes=0", "--", "python", "t.py"], 0, False)
    Traceback (most recent call last):
    ...
    fitspeed.core.errors.UserError: Expected --processes to be given an integer of 1 or more, such as --processes 2. Received: '0'.
    """
    from fitspeed.core.errors import UserError

    words = list(command)
    while words and words[0] != "--" and words[0].startswith("-"):
        word = words.pop(0)
        name, _, value = word.partition("=")
        if name == "--force" and not value:
            force = True
        elif name == "--seed":
            text = value or (words.pop(0) if words else "")
            try:
                seed = int(text)
            except ValueError:
                raise UserError(f"Expected --seed to be given an integer, such as --seed 3. Received: {text!r}.") from None
        elif name == "--processes":
            text = value or (words.pop(0) if words else "")
            if not text.isdigit() or int(text) < 1:
                raise UserError("Expected --processes to be given an integer of 1 or more, such as --processes 2. "
                                f"Received: {text!r}.")
            processes = int(text)
        else:
            raise UserError(
                f"Expected `fitspeed run`'s own options (--force, --seed N, --processes N) before the training "
                f"command. Received: {word!r}. Put the training command after `--`, as in: fitspeed run best.json --force -- python "
                "train.py"
            )
    if words[:1] == ["--"]:  # Click keeps `--` after the first argument here
        words = words[1:]
    if not words:
        raise UserError("Expected a training command after `--`, as in: fitspeed run best.json -- python train.py. "
                        "Received none. Add the command that trains.")
    return words, seed, force, processes
