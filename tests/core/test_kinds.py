"""Status, mode and data kind are enums in core, and travel as their text."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import fitspeed.core
from fitspeed.core.data_ref import DataKind, DataRef, SourceKind
from fitspeed.core.record import Mode, Status, TrialSpec, decode, encode, new_record

ENUMS = (Status, Mode, DataKind, SourceKind)
CORE = Path(fitspeed.core.__file__).parent


def test_a_record_crosses_the_process_boundary_as_text_and_comes_back_typed() -> None:
    spec = TrialSpec(model="tiny", mode=Mode.TRAIN, steps=4)
    record = decode(encode(new_record(spec, Status.NAN)))
    assert record is not None and record["status"] == "nan" and record["spec"]["mode"] == "train"
    assert '"status": "nan"' in json.dumps(record)
    back = TrialSpec.from_dict(record["spec"])
    assert back.mode is Mode.TRAIN and back == spec
    assert DataRef("images", "photos").kind is SourceKind.IMAGES


def test_unknown_values_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown trial mode"):
        TrialSpec(model="tiny", mode="sprint")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown status"):
        new_record(TrialSpec(model="tiny"), "fine")
    with pytest.raises(ValueError):
        DataRef("ftp", "x")  # type: ignore[arg-type]


def _compared_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string constant compared with == / != / in (a docstring's examples are not code)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                found += [(item.lineno, item.value) for item in items
                          if isinstance(item, ast.Constant) and isinstance(item.value, str)]
    return found


def test_no_module_in_core_compares_a_bare_string_where_an_enum_exists() -> None:
    values = {member.value: type(member).__name__ for enum in ENUMS for member in enum}
    offenders = []
    for path in sorted(CORE.glob("*.py")):
        for line, text in _compared_strings(ast.parse(path.read_text())):
            if text in values:
                offenders.append(f"{path.name}:{line}: {text!r} (use {values[text]})")
    assert not offenders, offenders
