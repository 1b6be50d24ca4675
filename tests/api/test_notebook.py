"""examples/notebook.ipynb runs on a real ipykernel through nbclient, as a user runs it cell by cell."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"


def text_of(cell: nbformat.NotebookNode) -> str:
    return "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")


@pytest.mark.slow
def test_the_example_notebook_tunes_applies_and_trains(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FITSPEED_FORK_SERVERS", raising=False)  # the kernel's own servers, as a user's has
    monkeypatch.setenv("FITSPEED_ALLOW_SHARED_HOST", "1")  # the suite runs tests side by side
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(workdir)}}).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    errors = [out for cell in code for out in cell.outputs if out.output_type == "error"]
    assert errors == [], errors
    assert not any("Traceback" in text_of(cell) for cell in code)
    tuned, shown, said, applied, saved = code[2:7]
    assert re.search(r"baseline batch_size=64: ok, [\d,]+ samples/s", text_of(tuned))  # a line per trial
    page = next(out["data"]["text/html"] for out in shown.outputs if "text/html" in out.get("data", {}))
    assert "<table>" in page and "fitspeed-result" in page
    verdict = text_of(said).splitlines()[0]
    assert verdict.startswith(("B is at least ", "keep the defaults")), verdict
    answer = text_of(said).splitlines()[1].removeprefix("answer: ")
    policy = re.search(r"policy: (\S+) steps_per_execution: (\d+)", text_of(applied))
    assert policy is not None and policy.group(1) == "float32"
    expected = re.search(r"steps_per_execution=(\d+)", answer)
    assert int(policy.group(2)) == (int(expected.group(1)) if expected else 1)
    assert "validation accuracy:" in text_of(applied)
    assert text_of(saved).splitlines() == [verdict, "global policy still: float32"]
    assert (workdir / "best.json").is_file() and list((workdir / "fitspeed-shipped").glob("*.npy"))
