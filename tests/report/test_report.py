"""`fitspeed report` for real: a tuned study and a results file, opened in headless Chromium."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from browser import chromium, console_errors, full_screenshot, images
from conftest import QUICK, built_once, compared, fitspeed, fitspeed_in_process

# Markup that would run if any user string reached the page unescaped.
EVIL = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"


def _tune_and_report(folder: Path) -> None:
    storage = f"sqlite:///{folder / 'fitspeed.db'}"
    result = fitspeed("tune", "tiny", "--study", EVIL, "--knobs", "steps_per_execution", "--screen-only",
                      "--pairs", "2", "--storage", storage, *QUICK, cwd=folder)
    assert result.returncode == 0, result.stderr
    result = fitspeed("report", "--storage", storage, "--out", "report", cwd=folder)
    assert result.returncode == 0, result.stderr
    # the tables are tune's and show's: a report after a tune (run.sh) does not print them a second time
    assert "each knob alone" not in result.stdout and "verdict:" in result.stdout
    assert "report written to report/index.html" in result.stderr


@pytest.fixture(scope="session")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real, small study whose name is a script tag, and its report (made once for the run)."""
    return built_once(tmp_path_factory, "tuned", _tune_and_report) / "report"


@pytest.mark.slow
def test_the_page_loads_every_plot_with_no_console_errors(tuned: Path, tmp_path: Path) -> None:
    pngs = sorted(p.name for p in tuned.glob("*.png"))
    assert {"time_per_config.png", "throughput_by_knob.png", "compile_time.png", "loss_curves.png"} <= set(pngs)
    with chromium() as driver:
        driver.get(tuned.joinpath("index.html").as_uri())
        loaded = images(driver)
        assert sorted(i["src"] for i in loaded) == pngs
        assert all(i["complete"] and i["width"] > 0 for i in loaded), loaded
        assert console_errors(driver) == []
        shot = full_screenshot(driver, tmp_path / "report.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000


@pytest.mark.slow
def test_a_script_in_the_study_name_is_shown_not_run(tuned: Path) -> None:
    with chromium() as driver:
        driver.get(tuned.joinpath("index.html").as_uri())
        assert driver.execute_script("return window.__pwned") is None
        assert driver.execute_script("return document.getElementById('study-name').textContent") == EVIL
        assert driver.title == f"fitspeed report: {EVIL}"


@pytest.mark.slow
def test_the_trials_table_sorts_when_a_heading_is_clicked(tuned: Path) -> None:
    from selenium.webdriver.common.by import By

    with chromium() as driver:
        driver.get(tuned.joinpath("index.html").as_uri())
        heading = driver.find_element(By.XPATH, "//table[@id='trials-table']//th[text()='samples/s']")

        def column() -> list[float]:
            cells = driver.find_elements(By.CSS_SELECTOR, "#trials-table tbody tr td:nth-child(6)")
            return [float(c.get_attribute("data-sort")) for c in cells if c.get_attribute("data-sort")]

        heading.click()
        ascending = column()
        assert len(ascending) >= 2 and ascending == sorted(ascending)
        heading.click()
        assert column() == sorted(ascending, reverse=True)
        assert console_errors(driver) == []


def test_every_configuration_row_counts_its_trials_and_they_add_up_to_the_study(tuned: Path) -> None:
    # issue 25, item 11: "Every trial" had 14 rows for 26 trials
    import optuna
    from selenium.webdriver.common.by import By

    storage = f"sqlite:///{tuned.parent / 'fitspeed.db'}"
    name = optuna.get_all_study_names(storage)[0]
    measured = [t for t in optuna.load_study(study_name=name, storage=storage).trials if "record" in t.user_attrs]
    with chromium() as driver:
        driver.get(tuned.joinpath("index.html").as_uri())
        cells = driver.find_elements(By.CSS_SELECTOR, "#trials-table tbody tr td:nth-child(3)")
        counts = [int(c.text) for c in cells]
        heading = driver.find_element(By.CSS_SELECTOR, "#trials h2").text
        lead = driver.find_element(By.CSS_SELECTOR, "#trials p").text
    assert heading == "Every configuration" and all(n >= 1 for n in counts)
    assert sum(counts) == len(measured) and f"over {len(measured)} trial process(es)" in lead, (counts, lead)


@pytest.mark.slow
def test_report_from_a_results_file_escapes_the_workload_name(
        workdir: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    folder, result = compared(tmp_path_factory)  # a real comparison of 3 pairs, made once for the run
    assert result.returncode == 0, result.stderr
    results = workdir / "fitspeed-results.jsonl"
    lines = [json.loads(line) for line in (folder / "fitspeed-results.jsonl").read_text().splitlines()]
    for record in lines:  # a workload named with markup, as a module path or file could be
        if record["kind"] == "trial":
            record["spec"]["model"] = EVIL
        else:
            record["model"] = EVIL
    results.write_text("".join(json.dumps(record) + "\n" for record in lines))

    result = fitspeed("report", str(results), "--out", "out", cwd=workdir)
    assert result.returncode == 0, result.stderr
    data = json.loads((workdir / "out" / "report.json").read_text())
    assert data["summary"]["model"] == EVIL
    assert [bar["label"] for bar in data["plots"]["time_bars"]][0] == "baseline: batch_size=4"
    assert len(data["plots"]["time_bars"]) == 2
    assert len(data["summary"]["best"]["estimate"]["ratios"]) == 3
    html = (workdir / "out" / "index.html").read_text()
    assert "<script>window.__pwned" not in html and "&lt;script&gt;window.__pwned" in html
    with chromium() as driver:
        driver.get((workdir / "out" / "index.html").as_uri())
        assert driver.execute_script("return window.__pwned") is None
        assert EVIL in driver.find_element("css selector", "p.sub").text
        assert all(i["complete"] and i["width"] > 0 for i in images(driver))
        assert console_errors(driver) == []


def test_a_study_whose_baseline_failed_renders_with_a_note(workdir: Path) -> None:
    storage = f"sqlite:///{workdir / 'study.db'}"
    result = fitspeed("tune", "userwork:dies", "--data", "userwork:arrays", "--trials", "2", "--screen-only",
                      "--storage", storage, *QUICK, cwd=workdir)
    assert result.returncode == 0, result.stderr
    result = fitspeed("report", "study.db", cwd=workdir)
    assert result.returncode == 0, result.stderr
    page = workdir / "fitspeed-report" / "index.html"
    data = json.loads((workdir / "fitspeed-report" / "report.json").read_text())
    assert data["plots"]["time_bars"] == [] and data["plots"]["waterfall"] == []
    assert data["summary"]["trials"][0]["status"] == "crashed"
    with chromium() as driver:
        driver.get(page.as_uri())
        notes = [n.text for n in driver.find_elements("css selector", "p.note")]
        assert any("baseline has no successful measurement" in n for n in notes), notes
        assert any("Time per configuration: no configuration finished yet" in n for n in notes), notes
        assert console_errors(driver) == []


def test_show_and_the_page_print_the_end_of_a_crashed_trials_stderr(workdir: Path) -> None:
    storage = f"sqlite:///{workdir / 'study.db'}"
    result = fitspeed("tune", "userwork:aborts", "--data", "userwork:arrays", "--trials", "2", "--screen-only",
                      "--storage", storage, *QUICK, cwd=workdir)
    assert result.returncode == 0, result.stderr
    shown = fitspeed("show", "--storage", storage, cwd=workdir)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert ("defaults (baseline): crashed, the trial process was killed by SIGABRT before it sent a record: "
            "F0000 native_library.cc:42] Check failed: devices == 2 (1 vs. 2). The end of its stderr:") in text
    # the native message, the fault handler's stack down to the builder, the signal: in that order
    native, fault = text.index("Check failed: devices == 2"), text.index("Fatal Python error: Aborted")
    assert native < fault < text.index("in aborts") < text.index("[fitspeed: the trial process was killed by SIGABRT]")
    result = fitspeed("report", "study.db", cwd=workdir)
    assert result.returncode == 0, result.stderr
    page = (workdir / "fitspeed-report" / "index.html").read_text()
    section = page[page.index('<section id="failures">'):]
    assert "Fatal Python error: Aborted" in section and "killed by SIGABRT]" in section
    data = json.loads((workdir / "fitspeed-report" / "report.json").read_text())
    assert [f["status"] for f in data["summary"]["failures"]] == ["crashed"]


@pytest.mark.parametrize(("args", "expected"), [
    (["missing.jsonl"], "No results file at 'missing.jsonl'"),
    (["missing.db"], "No study database at 'missing.db'"),
    ([], "No study database at 'fitspeed.db'"),
])
def test_bad_sources_get_one_clear_sentence(workdir: Path, args: list[str], expected: str) -> None:
    result = fitspeed_in_process("report", *args, cwd=workdir)
    assert result.returncode == 2
    assert expected in result.stderr and "Traceback" not in result.stderr
    assert list(workdir.iterdir()) == []  # no empty database or report folder made


def test_every_table_row_has_a_cell_per_heading(tmp_path: Path) -> None:
    # the page of a study with rejected configurations: each of its tables, row by row
    from html.parser import HTMLParser

    from test_plot_data import VERIFIED, study

    from fitspeed.report.html import write
    from fitspeed.search.summary import study_summary

    summary = study_summary(study(VERIFIED))
    assert summary.rejected and summary.trials
    page = write(dataclasses.replace(summary, read_notes=()), tmp_path).index.read_text()

    class Tables(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tables: list[list[list[str]]] = []  # per table, per row, the cell tags

        def handle_starttag(self, tag: str, attrs: list) -> None:  # noqa: ANN001 - HTMLParser's own
            if tag == "table":
                self.tables.append([])
            elif tag == "tr" and self.tables:
                self.tables[-1].append([])
            elif tag in ("th", "td") and self.tables and self.tables[-1]:
                self.tables[-1][-1].append(tag)

    parser = Tables()
    parser.feed(page)
    headed = [rows for rows in parser.tables if rows and rows[0] and set(rows[0]) == {"th"}]
    assert len(headed) >= 2, parser.tables
    for rows in headed:
        assert all(len(row) == len(rows[0]) for row in rows[1:]), rows


def test_the_decisions_text_names_the_level_its_table_shows(tmp_path: Path) -> None:
    # issue 61: the text said combination steps use "a 90% interval" while the table showed "(30%)"
    from test_plot_data import VERIFIED, study

    from fitspeed.report.html import write
    from fitspeed.search.decider import COMBINE_ALPHA
    from fitspeed.search.decision import Decision
    from fitspeed.search.summary import decision_row, study_summary

    level = 1 - 2 * COMBINE_ALPHA  # a one-sided COMBINE_ALPHA test: the two-sided interval at this level
    combine = decision_row(Decision.from_dict({
        "id": "c1", "purpose": "combine", "a": {}, "b": {"jit_compile": True}, "pairs": [[100.0, 150.0]] * 2,
        "ratio": 1.5, "low": 1.2, "high": 1.8, "confidence": level, "verdict": "faster"}))
    summary = dataclasses.replace(study_summary(study(VERIFIED)), decisions=(combine,), read_notes=())
    page = write(summary, tmp_path).index.read_text()
    shown = f"{round(100 * level)}%"
    assert f"({shown})" in combine["interval"] and f"({shown})" in page
    assert f"step&#39;s {shown} interval" in page or f"step's {shown} interval" in page
    assert "90% interval" not in page
