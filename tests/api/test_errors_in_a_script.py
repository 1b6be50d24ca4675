"""A user's mistake in a plain Python script: one frame (the user's line), then the sentence (issue 61)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import child_env

SCRIPT = """
import numpy as np
import fitspeed
fitspeed.tune("not a model", np.zeros((4, 2)), np.zeros(4))
"""


def test_an_uncaught_user_error_shows_the_users_line_and_the_sentence_alone(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=child_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1
    frames = re.findall(r'^  File "([^"]+)", line (\d+)', done.stderr, re.M)
    assert frames == [(str(tmp_path / "train.py"), "4")] or frames == [("train.py", "4")], done.stderr
    assert done.stderr.rstrip().endswith("Received: 'not a model'."), done.stderr


def test_other_errors_keep_their_whole_traceback(tmp_path: Path) -> None:
    # only fitspeed's user errors are trimmed: any other error raised inside fitspeed keeps fitspeed's frames
    (tmp_path / "bug.py").write_text("import fitspeed\nfrom fitspeed.core.stats import describe\ndescribe([1.0, 'x'])\n")
    done = subprocess.run([sys.executable, "bug.py"], cwd=tmp_path, env=child_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1 and "UserError" not in done.stderr, done.stderr
    files = re.findall(r'^  File "([^"]+)"', done.stderr, re.M)
    assert files[0].endswith("bug.py") and any("fitspeed" in f for f in files[1:]), done.stderr
