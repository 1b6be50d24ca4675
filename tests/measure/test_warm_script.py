"""A script trial forked from a fork server (fitspeed.trial.warm_script) is the `python FILE ARGS...` a cold one is.

Real trials of real scripts through `run_trial`, warm and then cold (FITSPEED_WARM_START=0); what the script
saw before its first keras import, how it ended and what its record says must agree. Where a warm start would
differ, the trial starts cold, and a command that is not `python FILE ARGS...` in the runner's own Python is
never forked.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FIXTURES, child_env

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure import runner, training_command, warm_start
from fitspeed.measure.runner import run_trial
from fitspeed.trial import warm_script

SCRIPTS = FIXTURES / "scripts" / "warm"
PY = sys.executable


@pytest.fixture(autouse=True)
def no_servers() -> Iterator[None]:
    warm_start.close_all()
    yield
    warm_start.close_all()


def trial(tmp_path: Path, script: str, *args: str, warm: bool, config: TrialConfig | None = None) -> TrialRecord:
    env = {k: v for k, v in child_env().items() if k != warm_start.SHARED}  # this process's own servers
    env[warm_start.SWITCH] = "1" if warm else "0"
    described = training_command.describe([PY, str(SCRIPTS / script), *args], cwd=tmp_path)
    spec = TrialSpec(model=training_command.label(described), data=training_command.DATA, script=described,
                     steps=4, repeats=2, config=config or TrialConfig())
    return run_trial(spec, env=env)


# how the process that runs fitspeed has SIGINT: Python's own handler, or ignored (started by nohup, or as a
# background job of a script), which a cold child inherits and Python keeps; and what the script then sees
SIGINT_AT_START = {"python's handler": (signal.default_int_handler, "default_int_handler"),
                   "ignored": (signal.SIG_IGN, str(signal.SIG_IGN))}


@pytest.mark.parametrize("sigint", list(SIGINT_AT_START))
def test_a_warm_script_sees_what_a_cold_python_gives_it_and_is_timed_the_same_way(tmp_path: Path, sigint: str) -> None:
    handler, shown = SIGINT_AT_START[sigint]
    seen, records = {}, {}
    before = signal.signal(signal.SIGINT, handler)
    try:
        for warm in (True, False):
            out = tmp_path / f"seen-{warm}.json"
            records[warm] = trial(tmp_path, "sees.py", str(out), warm=warm)
            seen[warm] = json.loads(out.read_text())
            seen[warm]["argv"][1] = "OUT"  # each run writes its own file
    finally:
        signal.signal(signal.SIGINT, before)
    assert records[True].status == records[False].status == Status.OK, records[True].log_tail
    assert (records[True].warm_start, records[False].warm_start) == (True, False)
    assert seen[True] == seen[False]
    assert seen[True]["name"] == "__main__" and seen[True]["main_is_me"] and seen[True]["file"] == str(SCRIPTS / "sees.py")
    assert seen[True]["path0"] == str(SCRIPTS) and seen[True]["sigint"] == shown
    assert set(records[True].metrics.to_dict()) == set(records[False].metrics.to_dict())
    assert records[True].metrics.other["steps_per_repeat"] == records[False].metrics.other["steps_per_repeat"] == 4


def test_a_warm_script_that_ends_before_fit_ends_as_python_ends(tmp_path: Path) -> None:
    """SystemExit(3) with a thread still running: joined, then atexit, then the same record as a cold start's."""
    records = {}
    for warm in (True, False):
        out = tmp_path / f"seen-{warm}.json"
        records[warm] = trial(tmp_path, "sees.py", str(out), "--no-fit", warm=warm)
        assert Path(f"{out}.exit").read_text() == "joined"
    assert records[True].status == records[False].status == Status.FAILED
    assert records[True].reason == records[False].reason and records[True].user_error
    assert (records[True].warm_start, records[False].warm_start) == (True, False)


def test_the_knobs_arrive_when_a_warm_script_reaches_keras_through_import_module(tmp_path: Path) -> None:
    out = tmp_path / "policy.txt"
    record = trial(tmp_path, "via_importlib.py", str(out), warm=True, config=TrialConfig(precision="mixed_bfloat16"))
    assert record.status == Status.OK and record.warm_start, record.log_tail
    assert out.read_text() == "mixed_bfloat16"  # applied at that import, as a cold start's hook applies it


def test_a_script_that_changes_its_environment_before_keras_is_started_cold(tmp_path: Path) -> None:
    out = tmp_path / "backend.txt"
    record = trial(tmp_path, "sets_env.py", str(out), warm=True)
    assert record.status == Status.OK, record.log_tail
    assert record.warm_start is False  # tried warm, found the change at `import keras`, started again cold
    assert out.read_text() == "tensorflow\n"  # the cold start trained; the warm one stopped before keras
    assert Path(f"{out}.runs").read_text() == "ran\nran\n"  # the lines before keras ran twice, as documented


def test_only_python_file_in_the_runners_own_python_without_environment_changes_is_forked(tmp_path: Path) -> None:
    plain = tmp_path / "train.py"
    plain.write_text("import keras  # the environment is not touched here\n")
    setting = tmp_path / "setting.py"
    setting.write_text("import os\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\nimport keras\n")
    path = str(Path(PY).parent)

    def forkable(*command: str) -> bool:
        return training_command.forkable(list(command), tmp_path, PY, path)

    assert forkable(PY, "train.py", "--epochs", "3")
    assert forkable(Path(PY).name, "train.py")  # found on PATH: the same Python
    assert not forkable(PY, "setting.py")
    assert not forkable(PY, "-u", "train.py") and not forkable(PY, "-m", "train")
    assert not forkable("sh", "train.py") and not forkable(PY)
    assert not forkable("/usr/bin/python3", "train.py") or Path("/usr/bin/python3").resolve() == Path(PY).resolve()


def test_a_module_beside_the_script_named_as_one_the_server_imported_sends_it_cold(tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text("")  # the server imported the standard library's json
    assert "json.py" in (warm_script.shadowed(tmp_path) or "")
    (tmp_path / "json.py").unlink()
    (tmp_path / "mine.py").write_text("")
    (tmp_path / "abc_data").mkdir()  # a folder without __init__.py shadows nothing
    assert warm_script.shadowed(tmp_path) is None
    assert runner.COLD == warm_script.COLD


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_script_trial_leaves_no_autograph_source_in_the_users_tmpdir(tmp_path: Path, warm: bool,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # TensorFlow removes autograph's converted source at exit (atexit); a trial ends with os._exit, so the hook
    # must remove it. The script's TMPDIR stays the user's: only those files go.
    user_tmp = tmp_path / "user-tmp"
    user_tmp.mkdir()
    (user_tmp / "kept.txt").write_text("the user's")
    monkeypatch.setenv("TMPDIR", str(user_tmp))
    listed = tmp_path / "generated.json"
    record = trial(tmp_path, "mapped.py", str(listed), warm=warm)
    assert record.status == Status.OK, record.log_tail
    assert record.warm_start is warm
    generated = json.loads(listed.read_text())
    assert generated and all(Path(path).parent == user_tmp for path in generated), generated
    assert sorted(path.name for path in user_tmp.iterdir()) == ["kept.txt"]
