"""benchmarks/snippet_speed.py and benchmarks/script_run_check.py, run as a user runs them, on tiny inputs.

They are the checks behind "the snippet gives the speed-up tune measured" and "`fitspeed run` reproduces it".
Nothing here asserts a speed: only that each side ran what it says, in the order it says, and that the
figures and the comparison with best.json's interval come out.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_env

from fitspeed.core import best_json
from fitspeed.core.config import TrialConfig
from fitspeed.core.study_summary import Baseline, Best, StudySummary

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
SEED_AB_BA = 8  # sequential.pair_order(8, ...) orders two pairs AB, then BA in both scripts
WIDE = {"median": 1.5, "ci_low": 0.1, "ci_high": 10.0, "confidence": 0.95, "ratios": [1.5, 1.5, 1.5]}

TRAIN = """
import numpy as np
import keras
x = np.random.default_rng(0).normal(size=(1024, 16)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=32, epochs=3, verbose=2)
"""


def script(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = child_env()
    env["PATH"] = str(Path(sys.executable).parent) + ":" + env.get("PATH", "")  # `python -m fitspeed` as installed
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_snippet_speed_pastes_the_snippet_and_times_both_in_a_random_order(tmp_path: Path) -> None:
    answer = TrialConfig(steps_per_execution=8, precision="mixed_bfloat16")
    best_json.write(tmp_path / "best.json", StudySummary(
        study="s", model="tiny", baseline=Baseline(TrialConfig(), 100.0),
        best=Best(answer, answer.label(), 150.0, claimed=True, estimate=WIDE)))
    done = script("snippet_speed.py", "best.json", "--pairs", "2", "--steps", "16", "--seed", str(SEED_AB_BA),
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.findall(r"^pair (\d) \((AB|BA)\): plain +\d+  with snippet +\d+  speed-up \d\.\d{3}$", out, re.M) == [
        ("1", "AB"), ("2", "BA")], out
    # the pasted script's model holds what the snippet says; the plain one Keras's defaults
    assert "  plain: steps_per_execution=1, dtype policy float32" in out
    assert "  with snippet: steps_per_execution=8, dtype policy mixed_bfloat16" in out
    assert "snippet: steps_per_execution=8 precision=mixed_bfloat16" in out
    assert "tune verified 1.500 (95% CI 0.100-10.000); inside the interval: yes" in out


@pytest.mark.slow
def test_script_run_check_runs_the_command_as_is_and_under_fitspeed_run(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "best.json").write_text(json.dumps({"kind": "best", "model": "train.py", "script": None,
                                                    "knobs": {"steps_per_execution": 8}, "best": {"estimate": WIDE}}))
    done = script("script_run_check.py", "best.json", "--pairs", "2", "--seed", str(SEED_AB_BA), "--", sys.executable,
                  "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    pairs = re.findall(r"^pair (\d) \((AB|BA)\): as is ([\d.]+) ms/step \(\d+ s, exit 0\); fitspeed run ([\d.]+) "
                       r"ms/step \(\d+ s, exit 0\); speed-up ([\d.]+)$", out, re.M)
    assert [(p[0], p[1]) for p in pairs] == [("1", "AB"), ("2", "BA")], out
    assert all(float(p[2]) > 0 and float(p[3]) > 0 for p in pairs)
    assert "knobs: {'steps_per_execution': 8}" in out
    assert re.search(r"^speed-up of the full runs: median [\d.]+ over 2 pairs", out, re.M)
    assert "tune's verified interval: 1.500 (0.100-10.000)" in out and "within the interval: yes" in out

    refused = script("script_run_check.py", "best.json", cwd=tmp_path)
    assert refused.returncode == 2 and "expected the training command after --" in refused.stderr
