"""`--help` reads cleanly at 80 columns: no type tag beside a flag, nothing cropped, no text eaten as markup."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fitspeed.cli import app

COMMANDS = sorted(command.name or command.callback.__name__ for command in app.registered_commands
                  if command.callback is not None)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_at_80_columns(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "<bool>" not in text and "…" not in text.split("\n", 3)[-1], text
    assert not any(line.strip() in (".", ",", ")") for line in text.splitlines()), text
    assert all(len(line) <= 80 for line in text.splitlines()), text


def test_tune_help_keeps_its_examples_and_defaults_whole() -> None:
    text = CliRunner().invoke(app, ["tune", "--help"], env={"COLUMNS": "80"}).output
    assert "postgresql://USER:PW@HOST/DB" in text and "steps_per_execution,precision." in text
    assert "Study name [default: WORKLOAD-DATA]; an existing" in " ".join(text.split())
