"""`fitspeed scale` as a user runs it: real trials on logical CPU devices, the table, the JSON and the plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import QUICK, fitspeed, fitspeed_in_process


@pytest.mark.slow
def test_scale_prints_the_table_and_writes_every_trial_and_the_plot(workdir: Path) -> None:
    result = fitspeed("scale", "tiny", "--devices", "1,2", "--pairs", "2", *QUICK, "--set", "batch_size=16",
                      "--out", "scaled", cwd=workdir)
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
    assert [t["spec"]["mode"] for t in result_json["trials"]] == ["train", "time", "time", "time", "time", "train"]
    assert {t["environment"]["devices"]["strategy"] for t in result_json["trials"]} == {
        None, "tf.distribute.MirroredStrategy"}
    assert (workdir / "scaled" / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plot in scaled/scaling.png" in " ".join(result.stderr.split())


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--set", "backend=torch"], "torch backend cannot do devices=2: Keras has no data-parallel distribution"),
        (["--devices", "1"], "Expected --devices to list at least one count above 1"),
        (["--devices", "1,two"], "Expected --devices as positive integers separated by commas"),
        (["--set", "devices=2"], "Expected the device counts in --devices only"),
    ],
    ids=["torch", "one-count", "not-a-number", "set-devices"],
)
def test_bad_input_is_one_sentence(workdir: Path, args: list[str], expected: str) -> None:
    result = fitspeed_in_process("scale", "tiny", *args, cwd=workdir)  # refused before any trial
    assert result.returncode == 2, result.stdout
    assert expected in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr
    assert not (workdir / "fitspeed-scale").exists()
