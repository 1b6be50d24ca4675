"""Every command's `--help` and the exit status of its common user errors, diffed against files kept here.

The files in tests/cli/help/ were written from the code as it was before the
workload options were declared once (issue 37, item 4), so that a refactor of
the CLI is checked against what users saw: one `COMMAND.txt` per command
(`fitspeed.txt` for the program itself) rendered at 100 columns without
colour, and `exit_codes.txt`, two lines per case: the status and the command
line, then the error as the user reads it (its lines joined, from `Error`
on), so that a refactor that checks the options in another order shows too. A change meant to be seen by users is recorded by writing the
files again:

    FITSPEED_WRITE_HELP=1 pytest tests/cli/test_help_unchanged.py

and the diff of tests/cli/help/ shows in review what changed.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from conftest import fitspeed_in_process
from typer.testing import CliRunner

from fitspeed.cli import app

HELP = Path(__file__).parent / "help"
WRITE = os.environ.get("FITSPEED_WRITE_HELP") == "1"
WIDTH = {"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}
COMMANDS = sorted(command.name or command.callback.__name__.replace("_", "-") for command in app.registered_commands
                  if command.callback is not None)

# A user's common mistakes, per command: each is refused before any trial starts, with the status shown in
# exit_codes.txt (2: a UserError or click's usage error). Each is refused before anything runs.
WORKLOAD_COMMANDS = ("measure", "compare", "doctor", "scale", "tune")
WORKLOAD_ERRORS = (
    "",  # no workload and no training command
    "no-such-model",
    "mlp --set no_such_knob=1",
    "mlp --set steps_per_execution=many",
    "mlp --set steps_per_execution",
    "mlp --data no_such_source",
    "mlp --data npz:missing.npz",
    "mlp --augment",
    "mlp --repeats many",
    "mlp --seed x",
    "mlp --timeout soon",
    "-- missing_script.py",
    "--data synthetic -- missing_script.py",
    "mlp --fit 0 -- python train.py",
    "mlp --set backend=no_such",
    # two mistakes at once: which is reported first
    "no-such-model --set no_such_knob=1",
    "no-such-model --data no_such_source",
    "mlp --set no_such_knob=1 --data no_such_source",
    "--set no_such_knob=1 -- missing_script.py",
    "--data no_such_source -- python train.py",
)
OWN_ERRORS = (
    "measure mlp --memory-limit 0",
    "measure mlp --memory-limit lots",
    "measure mlp --profile -- python train.py",
    "compare mlp --statistic mode",
    "compare mlp --pairs 1",
    "compare mlp --a no_such_knob=1",
    "doctor mlp --epochs 1",
    "scale mlp --devices 0",
    "scale mlp --devices two",
    "scale mlp --statistic mode",
    "tune mlp --time soon",
    "tune mlp --batch-sizes x",
    "tune mlp --memory-limit 0",
    "tune mlp --heartbeat 0",
    "tune mlp --pairs 1",
    "show --results missing.jsonl",
    "show --storage sqlite:///missing.db",
    "report missing.jsonl",
    "workloads --no-such-option",
    "knobs extra",
    "run missing.json -- python train.py",
    "run",
    "convert",
    "reproduce missing.json",
    "make-images",
    "monitor --interval x",
    "no-such-command",
)
CASES = [f"{command} {words}".strip() for command in WORKLOAD_COMMANDS for words in WORKLOAD_ERRORS] + list(OWN_ERRORS)


def help_text(*words: str) -> str:
    result = CliRunner().invoke(app, [*words, "--help"], env=WIDTH, prog_name="fitspeed", color=False)
    assert result.exit_code == 0, result.output
    return result.output


def error_text(stderr: str) -> str:
    """The error on stderr as one line, from its `Error` on: the same words at any terminal width."""
    words = " ".join(line.strip("│╭╮╰╯─ ") for line in stderr.splitlines())
    return " ".join(words[words.find("Error"):].split())


def compare_or_write(path: Path, text: str) -> None:
    if WRITE:
        path.write_text(text)
        return
    assert path.exists(), f"{path} is missing: write it with FITSPEED_WRITE_HELP=1"
    assert text == path.read_text(), f"{path.name} changed; if users are meant to see it, write it again " \
                                     "(FITSPEED_WRITE_HELP=1) and show the diff in review"


def test_every_command_is_kept() -> None:
    kept = sorted(path.stem for path in HELP.glob("*.txt") if path.stem not in ("fitspeed", "exit_codes"))
    assert WRITE or kept == COMMANDS, "a command was added or removed: write the files again"


def test_program_help_is_unchanged() -> None:
    compare_or_write(HELP / "fitspeed.txt", help_text())


@pytest.mark.parametrize("command", COMMANDS)
def test_command_help_is_unchanged(command: str) -> None:
    compare_or_write(HELP / f"{command}.txt", help_text(command))


def test_user_errors_keep_their_exit_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    (tmp_path / "train.py").write_text("raise SystemExit('never run: every case is refused before a trial')\n")
    lines = []
    for case in CASES:
        result = fitspeed_in_process(*shlex.split(case), cwd=tmp_path)
        assert "Traceback" not in result.stdout + result.stderr, (case, result.stderr)
        lines.append(f"{result.returncode}  fitspeed {case}\n    {error_text(result.stderr)}\n")
    compare_or_write(HELP / "exit_codes.txt", "".join(lines))
