"""The README is a newcomer's page: its first screen fits in 60 lines and says what a newcomer needs."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_first_screen_fits_in_60_lines_and_holds_the_two_commands_and_the_verdict() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    first = lines[: next(i for i, line in enumerate(lines) if line.startswith("## More"))]
    assert len(first) <= 60, len(first)
    text = "\n".join(first)
    for needed in ("bash run.sh", "bash test.sh", "fitspeed measure -- python", "fitspeed tune -- python",
                   "fitspeed run best.json -- python", "## How to read a verdict"):
        assert needed in text, needed
    for link in ("docs/guide.md", "docs/benchmarks/search_simulation.md"):
        assert link in "\n".join(lines) and (ROOT / link).is_file(), link


def test_run_sh_installs_the_tool_without_the_test_extras(tmp_path: Path) -> None:
    # issue 25, item 15: run.sh installed pytest, mypy and selenium for a user who only wanted the tuner
    run = (ROOT / "run.sh").read_text()
    assert run.index("FITSPEED_EXTRAS=${FITSPEED_EXTRAS-}") < run.index("source scripts/ensure-venv.sh")
    assert _installed(tmp_path, "") == "-e ."  # run.sh's empty extras: the tool alone
    assert _installed(tmp_path, None) == "-e .[test]"  # test.sh: unset, the test extras
    assert _installed(tmp_path, "test,jax") == "-e .[test,jax]"


def _installed(folder: Path, extras: str | None) -> str:
    """What scripts/ensure-venv.sh asks pip to install, run for real against a stand-in .venv/bin/python."""
    import os
    import shutil
    import subprocess

    shutil.rmtree(folder / ".venv", ignore_errors=True)
    python = folder / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/asked"\n')
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "FITSPEED_EXTRAS"}
    if extras is not None:
        env["FITSPEED_EXTRAS"] = extras
    subprocess.run(["bash", "-c", f"source {ROOT / 'scripts' / 'ensure-venv.sh'}"], cwd=folder, env=env, check=True)
    asked = (python.parent / "asked").read_text().split()
    return " ".join(asked[asked.index("-e"):])


def test_run_sh_passes_its_arguments_to_tune(tmp_path: Path) -> None:
    # issue 61: the host lock's refusal said "pass --allow-shared-host", which run.sh did not take
    import shutil
    import subprocess

    shutil.copy(ROOT / "run.sh", tmp_path / "run.sh")
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "ensure-venv.sh", tmp_path / "scripts" / "ensure-venv.sh")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "fitspeed"):  # stand-ins: pip's install asked of python, each command fitspeed ran
        (bin_dir / name).write_text(f'#!/bin/sh\necho "$@" >> "$(dirname "$0")/{name}.asked"\n')
        (bin_dir / name).chmod(0o755)
    subprocess.run(["bash", "run.sh", "--allow-shared-host", "--trials", "60"], cwd=tmp_path, check=True)
    assert (bin_dir / "fitspeed.asked").read_text().splitlines() == [
        "tune tiny --allow-shared-host --trials 60", "report"]
