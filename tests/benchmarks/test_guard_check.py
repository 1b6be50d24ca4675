"""benchmarks/guard_check.py: the numerics guard on real training of `tiny`, at the rule's first stage of seeds.

A candidate whose knob leaves numerics alone (steps_per_execution) trains the baseline's steps and passes; the
baseline with its learning rate times 100 (the test fault) is rejected. Nothing here reads a speed. Bad
arguments are refused before anything trains.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_env, load_script

from fitspeed.search import guard

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "guard_check.py"
FAULT = "defaults with FITSPEED_TEST_FAULT=lr_x100"
RUN = re.compile(r"^  (?P<label>.+?) +seed \+(?P<seed>\d+): (?P<status>\w+) +held-out loss (?P<loss>\S+), "
                 r"accuracy (?P<accuracy>\S+), final training loss (?P<final>\S+)$", re.M)
VERDICT = re.compile(r"^(?P<label>\S.*?): (?P<word>passes|REJECTED) on (?P<n>\d+) seeds"
                     r"(?: \(the rule asks for (?P<asked>\d+); --seeds (?P<cap>\d+)\)"
                     r"| \(the tuner replicates this failure on (?P<fresh>\d+) fresh seeds; --seeds \d+\)"
                     r"| and (?P<again>\d+) fresh seeds)?"
                     r": (?P<reason>.+)$", re.M)


def script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, env=child_env(), capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_the_guard_passes_an_unchanged_model_and_rejects_a_learning_rate_fault(tmp_path: Path) -> None:
    seeds = guard.FIRST_SEEDS
    done = script("--model", "tiny", "--seeds", str(seeds), "--candidate", "steps_per_execution=8",
                  "--fault", "lr_x100", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert f"baseline defaults at seeds {tuple(range(seeds))}:" in out, out
    runs: dict[str, list[re.Match[str]]] = {}
    for run in RUN.finditer(out):
        runs.setdefault(run["label"], []).append(run)
    assert list(runs) == ["baseline", "steps_per_execution=8", FAULT], out
    for found in runs.values():  # every side trains at the same seeds, each run a real trial that finished
        assert [int(r["seed"]) for r in found] == list(range(seeds)) and {r["status"] for r in found} == {"ok"}
        assert all(0 <= float(r["accuracy"]) <= 1 for r in found)
    loss = {label: statistics.fmean(float(r["loss"]) for r in found) for label, found in runs.items()}

    verdicts = {v["label"]: v for v in VERDICT.finditer(out)}
    assert list(verdicts) == ["steps_per_execution=8", FAULT], out
    same = verdicts["steps_per_execution=8"]
    assert same["word"] == "passes" and same["n"] == str(seeds) and same["reason"].startswith("held-out loss ")
    fault = verdicts[FAULT]
    assert fault["word"] == "REJECTED" and fault["n"] == str(seeds), fault[0]
    if fault["asked"] is not None:  # the rule wanted more seeds than --seeds gives, and says so
        assert int(fault["asked"]) > seeds and fault["cap"] == str(seeds)
    # the verdict judges the runs printed above it: their mean held-out losses, baseline's and the fault's
    said = re.match(r"held-out loss ([\d.]+) is ([\d.]+) above the baseline's ([\d.]+) over (\d+) paired seeds",
                    fault["reason"])
    assert said is not None, fault["reason"]
    assert float(said[1]) == pytest.approx(loss[FAULT], rel=0.01)
    assert float(said[3]) == pytest.approx(loss["baseline"], rel=0.01) and said[4] == str(seeds)
    assert loss[FAULT] > loss["baseline"] and "worse" in fault["reason"]


@pytest.mark.parametrize(("args", "message"), [
    (["--seeds", str(guard.FIRST_SEEDS - 1)], f"--seeds must be from {guard.FIRST_SEEDS}"),
    (["--seeds", str(2 * guard.MAX_SEEDS + 1)], f"Received: {2 * guard.MAX_SEEDS + 1}"),
    (["--candidate", "nonsense=1"], "--candidate nonsense=1: Unknown knob 'nonsense'"),
    (["--candidate", "steps_per_execution=x"], "Expected `steps_per_execution` to be an integer >= 1"),
    (["--fault", "lr_100"], "--fault lr_100: Expected FITSPEED_TEST_FAULT to be lr_x<factor>"),
], ids=["seeds_below_the_first_stage", "seeds_above_the_most", "unknown_knob", "bad_value", "unknown_fault"])
def test_a_bad_argument_is_refused_before_anything_trains(tmp_path: Path, args: list[str], message: str) -> None:
    done = script("--model", "tiny", "--seeds", str(guard.FIRST_SEEDS), *args, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr[-3000:]
    assert "baseline" not in done.stdout  # not one trial ran


def test_each_run_is_one_line_with_its_seed_and_a_dash_for_a_missing_accuracy(
        capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_script(SCRIPT)
    bench.show("baseline", [guard.GuardRun("ok", curve=(2.3, 1.7), val_loss=1.6, val_accuracy=0.4251),
                            guard.GuardRun("nan", "the loss became nan", curve=(2.3, float("nan")))])
    first, second = capsys.readouterr().out.splitlines()
    assert first == (f"  {'baseline':32s} seed +0: ok     held-out loss 1.6, accuracy 0.425, "
                     "final training loss 1.7")
    assert second == f"  {'baseline':32s} seed +1: nan    held-out loss None, accuracy –, final training loss nan"
