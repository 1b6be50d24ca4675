"""`fitspeed scale` as a user runs it: real trials on logical CPU devices, the table, the JSON and the plot."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import pytest
from conftest import QUICK, fitspeed, fitspeed_in_process, missing
from rich.console import Console

from fitspeed.cli.scale import print_scale
from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record
from fitspeed.search.scale import Scaling


@pytest.mark.slow
def test_scale_prints_the_table_and_writes_every_trial_and_the_plot(workdir: Path) -> None:
    # --guard-margin 0.5: the tune's guard, whose first 5 seeds a side see a margin this wide (at 1% it may ask
    # for up to 24, minutes of runs: the rule is tests/search/test_guard_runs.py's to check)
    result = fitspeed("scale", "tiny", "--devices", "1,2", "--pairs", "2", *QUICK, "--set", "batch_size=16",
                      "--guard-margin", "0.5", "--out", "scaled", cwd=workdir)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "speed-up (95% CI)" in line)
    assert all(word in header for word in ("devices", "batch", "samples/s", "efficiency", "loss", "guard"))
    one = next(line.split() for line in lines if line.split()[:2] == ["1", "16"])
    two = next(line.split() for line in lines if line.split()[:2] == ["2", "32"])  # global batch: 16 × 2
    assert one[3:5] == ["1.00×", "100%"]
    assert two[-1] in ("ok", "changed")
    result_json = json.loads((workdir / "scaled" / "scale.json").read_text())
    assert result_json["status"] == "ok" and result_json["devices_measured"] == [1, 2]
    row = result_json["rows"][1]
    assert row["used"] == 2 and row["pairs_ok"] == 2
    assert row["efficiency"] == pytest.approx(row["speedup"] / 2)
    assert row["efficiency_low"] == pytest.approx(row["speedup_low"] / 2)
    assert f"{100 * row['efficiency']:.0f}%" in two and f"{row['speedup']:.2f}×" in two
    assert row["guard"]["curve"] and row["guard"]["baseline_curve"]
    # the guard's first run, the pairs, then the rest of the tune's paired-seed guard: 5 seeds or more a side
    modes = [t["spec"]["mode"] for t in result_json["trials"]]
    assert modes[:5] == ["train", "time", "time", "time", "time"] and set(modes[5:]) == {"train"}
    guard_runs = [t["spec"] for t in result_json["trials"] if t["spec"]["mode"] == "train"]
    per_count = {n: sorted(g["seed"] for g in guard_runs if g["knobs"].get("devices", 1) == n) for n in (1, 2)}
    assert per_count[1][:5] == per_count[2][:5] == [0, 1, 2, 3, 4]  # paired: the same seeds on each side
    assert row["guard"]["runs"]["baseline"] >= 5 and row["guard"]["runs"]["candidate"] >= 5
    assert "paired seeds" in " ".join(result.stdout.split())
    assert {t["environment"]["devices"]["strategy"] for t in result_json["trials"]} == {
        None, "tf.distribute.MirroredStrategy"}
    assert (workdir / "scaled" / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plot in scaled/scaling.png" in " ".join(result.stderr.split())


@pytest.mark.slow
@pytest.mark.timeout(900)  # the paired-seed guard: 5 seeds or more of two JAX processes, each started cold
def test_scale_over_processes_prints_both_rows_with_intervals_and_the_guard(workdir: Path) -> None:
    """Two real JAX processes on this host against one: both rows, the interval, the guard's verdict, no crash."""
    if importlib.util.find_spec("jax") is None:
        missing("jax is not installed")
    # 64 steps a window, not QUICK's 8: one process's 8 steps take about 20 ms here, and a window that short can
    # measure less than no time when Keras's callback threads read the clock late on a loaded machine
    result = fitspeed("scale", "tiny", "--processes", "1,2", "--set", "backend=jax", "--pairs", "2", "--steps", "64",
                      "--repeats", "2", "--set", "batch_size=16", "--guard-margin", "0.5", "--out", "scaled",
                      cwd=workdir)
    assert result.returncode == 0, result.stderr
    result_json = json.loads((workdir / "scaled" / "scale.json").read_text())
    assert result_json["status"] == "ok" and result_json["axis"] == "processes"
    assert result_json["processes_measured"] == [1, 2]
    one, two = result_json["rows"]
    assert (one["processes"], one["used"], one["global_batch"]) == (1, 1, 16)
    assert (two["processes"], two["used"], two["global_batch"]) == (2, 2, 32)  # 16 per device × 1 × 2 processes
    assert two["pairs_ok"] == 2 and two["speedup_low"] is not None and two["speedup_high"] is not None
    assert two["guard"]["curve"] and two["guard"]["ok"] in (True, False)
    trials = [TrialRecord.from_dict(t) for t in result_json["trials"]]
    assert all(t.status == Status.OK for t in trials), [(t.status, t.reason) for t in trials]
    widths = [len(t.extra.get("processes", ())) for t in trials]  # the guard's first run, then each pair's in its order
    assert widths[0] == 0 and sorted(widths[1:5]) == [0, 0, 2, 2], widths
    guarded = widths[5:]  # the rest of the paired-seed guard: one process and two, 5 seeds or more each
    assert guarded.count(0) >= 4 and guarded.count(2) >= 5 and set(guarded) == {0, 2}, widths
    assert two["guard"]["runs"]["candidate"] >= 5 and "paired seeds" in two["guard"]["reason"]
    text = " ".join(result.stdout.split())
    assert "speed-up: samples/s on N processes over 1 process" in text and "guard, processes=2:" in text


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--set", "backend=torch"], "torch backend cannot do devices=2: Keras has no data-parallel distribution"),
        (["--devices", "1"], "Expected --devices to list at least one count above 1"),
        (["--devices", "1,two"], "Expected --devices as positive integers separated by commas"),
        (["--set", "devices=2"], "Expected the device counts in --devices only"),
        (["--processes", "1,2"], "tensorflow backend cannot do processes=2: TensorFlow's multi-process route"),
        (["--processes", "1,2", "--devices", "1,2"], "Expected one of --devices and --processes"),
        (["--processes", "1,2", "--set", "backend=jax", "--set", "processes=2"],
         "Expected the process counts in --processes only"),
    ],
    ids=["torch", "one-count", "not-a-number", "set-devices", "processes-on-tensorflow", "both-axes", "set-processes"],
)
def test_bad_input_is_one_sentence(workdir: Path, args: list[str], expected: str) -> None:
    result = fitspeed_in_process("scale", "tiny", *args, cwd=workdir)  # refused before any trial
    assert result.returncode == 2, result.stdout
    assert expected in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr
    assert not (workdir / "fitspeed-scale").exists()


ABORT_TAIL = ("F0000 00:00:1795774694 rendezvous.cc:131] [id=0] Termination timeout for `all-reduce` of 40 seconds "
              "exceeded. Exiting to ensure a consistent program state.\nFatal Python error: Aborted\n\n"
              "Current thread 0x00007f061f002b80 (most recent call first):\n  File \"trainer.py\", line 398 in fit\n"
              "[fitspeed: the trial process was killed by SIGABRT]\n")


def test_the_table_counts_only_the_pairs_that_ran_and_prints_each_crash(tmp_path: Path) -> None:
    """Two of five two-device trials crash: the median is of 3 of 5 pairs, and each crash shows its stderr's end."""
    crashes = iter([False, True, False, True, False])

    def runner(spec: TrialSpec) -> TrialRecord:
        devices = spec.config.devices
        if spec.mode == "train":
            return new_record(spec, Status.OK, metrics={"loss_curve": [2.0, 1.0], "final_loss": 1.0})
        if devices == 2 and next(crashes):
            return new_record(spec, Status.CRASHED, reason="the trial process was killed by SIGABRT before it sent a "
                                "record", stderr_tail=ABORT_TAIL)
        speed = 1000.0 * devices
        return new_record(spec, Status.OK, metrics={"samples_per_s": {"median": speed, "max": speed}, "final_loss": 1.0})

    result = Scaling(TrialSpec(model="tiny"), (2,), pairs=5).run(runner=runner).result()
    row = result["rows"][1]
    assert (row["pairs_ok"], row["pairs_run"], row["pairs_lost"]) == (3, 5, {"crashed": 2})
    console = Console(file=io.StringIO(), width=80, color_system=None)
    print_scale(console, result)
    text = console.file.getvalue()
    flat = " ".join(text.split())
    assert "over 1 device, the median of 3 of 5 pairs; 2 crashed." in flat
    assert "interleaved pairs" not in flat
    assert flat.count("device(s): crashed, the trial process was killed by SIGABRT before it sent a record.") == 2
    assert "pair 2, 2 device(s): crashed" in flat and "pair 4, 2 device(s): crashed" in flat
    # the tail as the trial wrote it, one line of it per line
    assert "  Fatal Python error: Aborted\n" in text
    assert "  [fitspeed: the trial process was killed by SIGABRT]\n" in text
    assert "Termination timeout for `all-reduce` of 40 seconds exceeded." in flat


def test_a_table_too_wide_for_80_columns_prints_one_count_per_block() -> None:
    """'2 (4 asked)', where a trial ran on fewer devices than asked, widens the table past 80 columns: rich cut
    'changed' to 'chang'."""
    def two_gpus(spec: TrialSpec) -> TrialRecord:
        used = min(spec.config.devices, 2)
        env = {"devices": {"asked": spec.config.devices, "used": used, "kind": "GPU", "available": None,
                           "strategy": "tf.distribute.MirroredStrategy" if used > 1 else None}}
        if spec.mode == "train":
            final = 1.0 if used == 1 else 1.5  # the guard: changed
            return new_record(spec, Status.OK, environment=env, metrics={"loss_curve": [2.0, final], "final_loss": final})
        speed = 1000.0 * used
        return new_record(spec, Status.OK, environment=env,
                            metrics={"samples_per_s": {"median": speed, "max": speed}, "final_loss": 1.0})

    result = Scaling(TrialSpec(model="tiny"), (4,), pairs=2).run(runner=two_gpus).result()
    console = Console(file=io.StringIO(), width=80, color_system=None)
    print_scale(console, result)
    lines = console.file.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert "devices: 2 (4 asked)" in lines, "\n".join(lines)
    at = lines.index("devices: 2 (4 asked)")
    assert [line.split() for line in lines[at + 1:at + 7]] == [
        ["batch", "64"], ["samples/s", "2,000"], ["speed-up", "(95%", "CI)", "2.00×", "(2.00–2.00)"],
        ["efficiency", "100%"], ["loss", "1.5"], ["guard", "changed"]]


def test_the_loss_column_prints_every_count_in_one_notation() -> None:
    """A model that learns its data to a loss of 1e-4 printed 0.0001945 for one device and 9.468e-05 for two."""
    def small_losses(spec: TrialSpec) -> TrialRecord:
        final = {1: 1.945e-4, 2: 9.468e-5}[spec.config.devices]
        if spec.mode == "train":
            return new_record(spec, Status.OK, metrics={"loss_curve": [2.0, final], "final_loss": final})
        speed = 1000.0 * spec.config.devices
        return new_record(spec, Status.OK, metrics={"samples_per_s": {"median": speed, "max": speed},
                                                    "final_loss": final})

    result = Scaling(TrialSpec(model="tiny"), (2,), pairs=2).run(runner=small_losses).result()
    console = Console(file=io.StringIO(), width=80, color_system=None)
    print_scale(console, result)
    lines = [line.split() for line in console.file.getvalue().splitlines()]
    assert [words for words in lines if words[:1] == ["loss"]] == [["loss", "1.945e-04"], ["loss", "9.468e-05"]]
