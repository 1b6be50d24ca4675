"""A `deterministic=true` trial proves its weights bit-identical, and the report and tables say so and what it cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser import chromium, console_errors
from conftest import built_once, fitspeed

QUICK = ["--steps", "4", "--repeats", "1"]


def _measure_and_report(folder: Path) -> None:
    for knobs in ([], ["--set", "deterministic=true"]):
        result = fitspeed("measure", "tiny", *knobs, *QUICK, cwd=folder)
        assert result.returncode == 0, result.stderr
    result = fitspeed("report", "fitspeed-results.jsonl", "--out", "report", "--tables", cwd=folder)
    assert result.returncode == 0, result.stderr
    (folder / "report.stdout").write_text(result.stdout)


@pytest.fixture(scope="session")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two measurements of tiny, the second deterministic, and their report (made once for the run)."""
    return built_once(tmp_path_factory, "determinism", _measure_and_report)


def test_the_record_carries_the_weight_hash_check(measured: Path) -> None:
    baseline, deterministic = (json.loads(line) for line in (measured / "fitspeed-results.jsonl").read_text().splitlines())
    assert "determinism" not in baseline
    check = deterministic["determinism"]
    assert check["identical"] is True and check["runs"] == 2 and check["differing"] == []
    assert check["hashes"][0] == check["hashes"][1] and len(check["hashes"][0]) == 64
    assert check["weights"] == 14  # tiny's kernels, biases and batch-norm statistics: every weight


def test_the_report_and_the_table_show_its_cost_and_that_it_held(measured: Path) -> None:
    page = (measured / "report" / "index.html").read_text()
    assert '<section id="determinism">' in page
    assert "weights bit-identical over 2 runs of 8 training steps from one seed" in page
    assert "the baseline&#39;s" in page and "× the baseline" in page
    table = " ".join((measured / "report.stdout").read_text().split())
    assert "│ determinism │ deterministic=True:" in table and "bit-identical" in table  # rich wraps the rest
    summary = json.loads((measured / "report" / "report.json").read_text())["summary"]
    assert summary["determinism"]["identical"] is True and summary["determinism"]["ratio"] > 0


def test_the_browser_shows_the_determinism_section(measured: Path) -> None:
    with chromium() as driver:  # skips where Chromium is not installed
        driver.get((measured / "report" / "index.html").as_uri())
        text = driver.find_element("id", "determinism").text
        assert "bit-identical" in text and console_errors(driver) == []
