from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fitspeed.core.errors import UserError
from fitspeed.measure import results


def rec(name: str) -> dict:
    """The smallest record `read` takes as fitspeed's."""
    return {"schema": 1, "kind": "comparison", "model": "tiny", "a": {}, "b": {}, "id": name}


def test_append_then_read(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    results.append(path, [rec("a")])
    results.append(path, [rec("b"), rec("c")])
    records, skipped = results.read(path)
    assert [r["id"] for r in records] == ["a", "b", "c"]
    assert skipped == []


def test_a_torn_last_line_is_skipped_and_never_glued_to(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    results.append(path, [rec("a")])
    with path.open("a") as stream:
        stream.write('{"schema": 1, "id": "tor')
    records, skipped = results.read(path)
    assert [r["id"] for r in records] == ["a"] and skipped == ["line 2: not JSON (a torn last write, or another tool's line)"]
    results.append(path, [rec("b")])
    records, skipped = results.read(path)
    assert [r["id"] for r in records] == ["a", "b"] and len(skipped) == 1


def test_records_survive_a_kill_mid_write(tmp_path: Path) -> None:
    """A writer killed at a random moment leaves every record it finished readable."""
    path = tmp_path / "r.jsonl"
    script = (
        "import sys\n"
        "from fitspeed.measure import results\n"
        "i = 0\n"
        "while True:\n"
        "    results.append(sys.argv[1], [{'schema': 1, 'kind': 'comparison', 'model': 'm', 'a': {}, 'b': {}, 'i': i, 'pad': 'x' * 5000}])\n"
        "    print(i, flush=True)\n"
        "    i += 1\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    reported = [proc.stdout.readline() for _ in range(50)]
    proc.send_signal(signal.SIGKILL)  # it never stops writing: the kill lands in some append, wherever
    proc.wait()
    records, _ = results.read(path)
    numbers = [r["i"] for r in records]
    assert numbers == list(range(len(numbers)))
    assert len(numbers) >= len(reported)  # everything reported as written is there


def test_unwritable_path_is_a_user_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UserError, match="Could not write results"):
        results.append(blocker / "r.jsonl", [{"schema": 1}])


def test_foreign_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps([1, 2]) + "\n" + json.dumps(rec("x")) + "\n"
                    + json.dumps({"event": "epoch", "loss": 0.3}) + "\n" + json.dumps({"schema": 1, "kind": "trial"}) + "\n")
    records, skipped = results.read(path)
    assert [r["id"] for r in records] == ["x"]
    assert skipped == ["line 1: not a fitspeed record (a JSON list)", "line 3: not a fitspeed record (no schema)",
                       "line 4: a trial record without its spec"]
