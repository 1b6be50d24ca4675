"""The parent process never imports a framework, even while it runs trials."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import child_env

HEAVY = ("keras", "tensorflow", "jax", "torch", "matplotlib")

SCRIPT = """
import json, sys
from typer.testing import CliRunner
from fitspeed.cli import app
runner = CliRunner()
measured = runner.invoke(app, ["measure", "tiny", "--steps", "8", "--repeats", "1", "--json"])
listed = runner.invoke(app, ["knobs"])
print(json.dumps({
    "codes": [measured.exit_code, listed.exit_code],
    "status": json.loads(measured.stdout)["status"],
    "heavy": [name for name in %r if name in sys.modules],
}))
""" % (HEAVY,)


def test_cli_parent_stays_free_of_frameworks(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=child_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["codes"] == [0, 0]
    assert report["status"] == "ok"  # a real trial ran, in a child
    assert report["heavy"] == []


def test_importing_fitspeed_is_light() -> None:
    """`fitspeed --help` answers at once: no framework, and no scipy or optuna until needed."""
    slow = (*HEAVY, "scipy", "optuna")
    code = "import sys, fitspeed, fitspeed.cli; print([m for m in %r if m in sys.modules])" % (slow,)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr
