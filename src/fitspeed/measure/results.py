"""The results file: append-only JSON lines that survive a kill.

Each record is one line, written with a single `write`, then flushed and
fsynced before `append` returns, so a record that was reported is on disk. A
reader skips a torn last line (a kill mid-write) and says how many it skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fitspeed.core.errors import UserError
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import to_json


def append(path: str | Path, records: Iterable[JSONObject]) -> None:
    """Append records to `path`, one JSON line each, durably."""
    target = Path(path)
    lines = "".join(to_json(record) + "\n" for record in records)
    size = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("ab") as stream:
            size = stream.tell()
            if size > 0 and not _ends_with_newline(target):
                lines = "\n" + lines  # never glue a record onto a torn line
            stream.write(lines.encode("utf-8"))
            stream.flush()
            os.fsync(stream.fileno())
    except OSError as error:
        if size is not None:  # a write that ran out of space: take its torn part back off
            with contextlib.suppress(OSError):
                os.truncate(target, size)
        raise UserError(
            f"Could not write results to {str(target)!r}: {error.strerror}. "
            "Free some space or pass --results with another path; earlier records are intact."
        ) from None


def check_writable(path: str | Path) -> None:
    """Refuse a results path that cannot be appended to, before any trial runs.

    Creates nothing: a file that did not exist is removed again after the check.
    """
    target = Path(path)
    existed = target.exists()
    problem = None
    if target.is_dir():
        problem = "it is a folder"
    elif any(parent.exists() and not parent.is_dir() for parent in target.parents):
        problem = "a part of its folder is a file"
    else:
        try:
            folder = target.parent
            missing = [p for p in (folder, *folder.parents) if not p.exists()]
            folder.mkdir(parents=True, exist_ok=True)
            with target.open("a", encoding="utf-8"):
                pass
        except OSError as error:
            problem = error.strerror or str(error)
        else:
            if not existed:
                target.unlink()
            for made in missing:  # leave no empty folders behind
                made.rmdir()
    if problem:
        raise UserError(f"Expected --results to be a file that records can be appended to. Received: "
                        f"{str(target)!r}: {problem}. Pass --results with another path.")


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as stream:
        stream.seek(-1, os.SEEK_END)
        return stream.read(1) == b"\n"


def foreign(record: Any) -> str | None:
    """Why a decoded line is not a fitspeed record, or None when it is one.

    >>> foreign({"schema": 1, "kind": "trial", "spec": {"model": "tiny", "knobs": {}}}) is None
    True
    >>> foreign({"event": "epoch", "loss": 0.3})
    'not a fitspeed record (no schema)'
    """
    if not isinstance(record, dict):
        return f"not a fitspeed record (a JSON {type(record).__name__})"
    if "schema" not in record:
        return "not a fitspeed record (no schema)"
    if record.get("kind") == "trial":
        spec = record.get("spec")
        return None if isinstance(spec, dict) and {"model", "knobs"} <= set(spec) else "a trial record without its spec"
    if record.get("kind") == "comparison":
        return None if {"model", "a", "b"} <= set(record) else "a comparison record without its configurations"
    return f"not a trial or comparison record (kind {record.get('kind')!r})"


def read(path: str | Path) -> tuple[list[JSONObject], list[str]]:
    """All whole fitspeed records in `path`, and a sentence for each line skipped ("line 3: ...")."""
    records: list[JSONObject] = []
    skipped: list[str] = []
    with Path(path).open(encoding="utf-8", errors="replace") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                skipped.append(f"line {number}: not JSON (a torn last write, or another tool's line)")
                continue
            why = foreign(record)
            if why:
                skipped.append(f"line {number}: {why}")
            else:
                records.append(record)
    return records, skipped
