"""The results file: append-only JSON lines that survive a kill.

Each record is one line, written with a single `write`, then flushed and
fsynced before `append` returns, so a record that was reported is on disk. A
reader skips a torn last line (a kill mid-write) and says how many it skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fitspeed.core.errors import UserError
from fitspeed.core.record import to_json


def append(path: str | Path, records: Iterable[dict[str, Any]]) -> None:
    """Append records to `path`, one JSON line each, durably."""
    target = Path(path)
    lines = "".join(to_json(record) + "\n" for record in records)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as stream:
            if stream.tell() > 0 and not _ends_with_newline(target):
                lines = "\n" + lines  # never glue a record onto a torn line
            stream.write(lines)
            stream.flush()
            os.fsync(stream.fileno())
    except OSError as error:
        raise UserError(
            f"Could not write results to {str(target)!r}: {error.strerror}. "
            "Free some space or pass --results with another path; earlier records are intact."
        ) from None


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as stream:
        stream.seek(-1, os.SEEK_END)
        return stream.read(1) == b"\n"


def read(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """All whole records in `path`, and how many lines were skipped as torn or foreign."""
    records: list[dict[str, Any]] = []
    skipped = 0
    with Path(path).open(encoding="utf-8", errors="replace") as stream:
        for line in stream:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                skipped += 1
                continue
            if isinstance(record, dict) and "schema" in record:
                records.append(record)
            else:
                skipped += 1
    return records, skipped
