"""`fitspeed reproduce NAME --tiny`: each of the five experiments end to end, in seconds.

Real trial children train real (tiny) models on the learnable templates; the
tests read what the command wrote: results.json (every timed row has a
held-out accuracy), the table's columns, the chart and the HTML section.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import fitspeed

# the experiment's own columns and extra columns its table must show
EXPECTED = {
    "steps-per-execution": ["model", "batch", "steps_per_execution", "article's %"],
    "input-pipeline": ["pipeline", "ms/step", "input-bound %"],
    "batch-and-workers": ["part", "setting", "predict(1) ms", "model(x) ms"],
    "precision-and-determinism": ["precision", "op determinism", "bit-identical over 2 runs"],
    "channels-first": ["data_format", "devices", "total s", "CPU % mean"],
}
COMMON = ["status", "samples/s", "time % of baseline", "held-out accuracy", "accuracy mark"]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPECTED))
def test_a_tiny_reproduction_writes_its_table_chart_and_page(name: str, workdir: Path) -> None:
    result = fitspeed("reproduce", name, "--tiny", "--data", "synthetic", "--out", "out", cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = workdir / "out" / name
    saved = json.loads((folder / "results.json").read_text())
    summary, records = saved["summary"], saved["records"]
    assert records and all(r["status"] == "ok" for r in records), [r.get("reason") for r in records]
    run = [row for row in summary["rows"] if row["status"] != "skipped"]
    assert run and all(row["status"] == "ok" for row in run)
    for row in run:
        validated = [r for r in records if r["reproduce"]["row"] == row["label"] and r["spec"].get("validate")]
        if validated:  # trained rows carry held-out accuracy, a share in [0, 1]
            assert 0.0 <= row["accuracy"]["mean"] <= 1.0
            assert all(0.0 <= r["metrics"]["val_accuracy"] <= 1.0 for r in validated)
            assert all(len(r["metrics"]["weights_sha256"]) == 64 for r in validated)
    assert any(row["accuracy"] for row in run)
    assert summary["ran_on"]["cores"] and summary["ran_on"]["backend"] == "tensorflow"
    assert "class templates" in summary["data"]
    if name == "channels-first":  # the 2-device rows ran data parallel, on the same global batch
        two = [row for row in summary["rows"] if row["cells"]["devices"] == 2]
        assert len(two) == 2 and all(row["status"] == "ok" and row["extra"]["percent_of_one_device"] for row in two)
        placed = [r for r in records if r["spec"]["knobs"]["devices"] == 2]
        assert placed and all(r["environment"]["devices"]["used"] == 2 for r in placed)
        assert all(r["spec"]["knobs"]["batch_size"] == 32 for r in placed)  # 64 split over 2

    table = (folder / "table.md").read_text()
    header = next(line for line in table.splitlines() if line.startswith("| "))
    for column in EXPECTED[name] + COMMON:
        assert f" {column} |" in header, (column, header)
    assert "Differs from the article:" in table and "Ran on:" in table
    assert (folder / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (workdir / "out" / "index.html").read_text()
    assert f'id="{name}"' in page and "chart.png" in page
    assert f"{name} (article" in result.stdout and "Ran on:" in result.stdout  # the terminal table and its context
