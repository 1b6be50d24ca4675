"""Status, mode, verdict and data kind are enums in core, a search phase is one in search; all travel as their text."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import fitspeed.core
from fitspeed.core.data_ref import DataKind, DataRef, SourceKind
from fitspeed.core.record import Metrics, Mode, Status, TrialRecord, TrialSpec, decode, encode, new_record
from fitspeed.core.config import TrialConfig
from fitspeed.core.sequential import Design, Verdict, step
from fitspeed.search.decider import decision_id
from fitspeed.search.phase import Phase

ENUMS = (Status, Mode, Verdict, DataKind, SourceKind)
FIELDS = {"status", "mode", "verdict", "kind"}  # names whose value is one of these enums
CORE = Path(fitspeed.core.__file__).parent
PACKAGE = CORE.parent
PHASE_FIELDS = {"phase", "purpose", "phases", "BUDGET_FREE"}  # names whose value is a Phase (or a tuple of them)
# where each call that takes a phase or purpose takes it, by position
# (the Tuner's public members as search/searcher.py's `Searcher` names them, and the private ones tuner.py calls)
PHASE_ARGS = {"decide": 0, "store": 0, "decision_id": 0, "settle": 0, "TrialStarted": 0, "TrialFinished": 0,
              "measure": 1, "measure_or_busy": 1, "_measure": 1, "_attrs": 1, "_tell": 1,
              "claim_asked": 2, "_claim": 2, "run_claimed": 2, "challenge": 2, "_challenged": 2, "_try": 2}


def test_a_record_crosses_the_process_boundary_as_text_and_comes_back_typed() -> None:
    spec = TrialSpec(model="tiny", mode=Mode.TRAIN, steps=4)
    record = decode(encode(new_record(spec, Status.NAN).to_dict()))
    assert record is not None and record["status"] == "nan" and record["spec"]["mode"] == "train"
    assert '"status": "nan"' in json.dumps(record)
    back = TrialSpec.from_dict(record["spec"])
    assert back.mode is Mode.TRAIN and back == spec
    assert DataRef("images", "photos").kind is SourceKind.IMAGES


def test_a_decision_ends_in_a_verdict_that_travels_as_its_text() -> None:
    decided = step([1.5] * 3, Design(0.025, 10, 3, 0.0))
    assert decided.verdict is Verdict.FASTER
    assert json.loads(json.dumps(decided.to_dict()))["verdict"] == Verdict.FASTER == "faster"


def test_a_record_reads_typed_and_loses_nothing_on_the_way_back() -> None:
    spec = TrialSpec(model="tiny", config=TrialConfig(precision="mixed_bfloat16"), stop_below=900.0)
    metrics = {"samples_per_s": {"median": 812.5, "min": 800.0, "max": 830.0, "cv": 0.01, "n": 5},
               "ms_per_step": 39.4, "batch_size": 32, "loss_curve": [2.3, float("nan")], "final_loss": None,
               "stopped_early": {"after": "the warm-up", "stop_below": 900.0}, "compile_s": 1.5}
    sent = new_record(spec, Status.OK, metrics=metrics, notes=["stopped after the warm-up"],
                      monitor={"cpu_percent_mean": 180.0}, rewrite={"changes": []})
    text = decode(encode(sent.to_dict()))
    assert text is not None
    record = TrialRecord.from_dict(text)
    assert record.status is Status.OK and record.spec == spec and record.spec.config.precision == "mixed_bfloat16"
    assert record.throughput == 812.5 and record.metrics is not None
    assert record.metrics.loss_curve == (2.3, None)  # NaN travels as null, as the record's JSON holds it
    assert record.metrics.stopped_early == {"after": "the warm-up", "stop_below": 900.0}
    assert record.metrics.other == {"compile_s": 1.5} and record.notes == ("stopped after the warm-up",)
    assert record.monitor == {"cpu_percent_mean": 180.0} and record.extra == {"rewrite": {"changes": []}}
    back = record.to_dict()
    assert back["metrics"] == text["metrics"] and list(back["metrics"]) == list(text["metrics"])  # a null stays, in place
    assert {k: v for k, v in back.items() if k != "metrics"} == {k: v for k, v in text.items() if k != "metrics"}
    assert list(back) == list(text) and json.dumps(back) == json.dumps(text)  # the stored text, byte for byte
    assert TrialRecord.from_dict(back) == record
    failed = new_record(spec, Status.OOM, reason="out of memory")
    assert failed.throughput is None and failed.metrics is None and failed.reason == "out of memory"
    assert Metrics.from_dict({"samples_per_s": {"median": 5.0}}).samples_per_s.n == 1  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="unknown status"):
        TrialRecord.from_dict({**text, "status": "fine"})


def test_unknown_values_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown trial mode"):
        TrialSpec(model="tiny", mode="sprint")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Expected `status` to be a Status, such as Status.OK. Received: 'ok'"):
        new_record(TrialSpec(model="tiny"), "ok")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Received: 'fine'"):
        new_record(TrialSpec(model="tiny"), "fine")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        DataRef("ftp", "x")  # type: ignore[arg-type]


def _strings(nodes: list[ast.expr]) -> list[tuple[int, str]]:
    found = []
    for side in nodes:
        if isinstance(side, ast.IfExp):
            found += _strings([side.body, side.orelse])
            continue
        items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
        found += [(item.lineno, item.value) for item in items
                  if isinstance(item, ast.Constant) and isinstance(item.value, str)]
    return found


def _named(target: ast.expr) -> str:
    return target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""


def _compared_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string constant compared with == / != / in, or given to a status, mode, verdict or kind
    (assigned, as a keyword or as a Step's first argument); a docstring's examples are not code."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            found += _strings([node.left, *node.comparators])
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_named(target) in FIELDS for target in targets):
                found += _strings([node.value])
        elif isinstance(node, ast.Call):
            found += _strings([k.value for k in node.keywords if k.arg in FIELDS])
            if _named(node.func) == "Step" and node.args:
                found += _strings([node.args[0]])
    return found


def test_no_module_in_core_compares_a_bare_string_where_an_enum_exists() -> None:
    values = {member.value: type(member).__name__ for enum in ENUMS for member in enum}
    offenders = []
    for path in sorted(CORE.glob("*.py")):
        for line, text in _compared_strings(ast.parse(path.read_text())):
            if text in values:
                offenders.append(f"{path.name}:{line}: {text!r} (use {values[text]})")
    assert not offenders, offenders


def _names_a_phase(node: ast.expr) -> bool:
    """`phase`, `x.purpose`, `trial["phase"]`, `attrs.get("phase")`: an expression that holds a phase."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        return _named(node) in PHASE_FIELDS
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in PHASE_FIELDS
    return (isinstance(node, ast.Call) and _named(node.func) == "get" and bool(node.args)
            and isinstance(node.args[0], ast.Constant) and node.args[0].value in PHASE_FIELDS)


def _phase_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string constant compared with a phase, or given where a phase or purpose goes: assigned,
    stored under its key, as a keyword, a default, a `.get("phase", ...)` fallback or a call's phase argument."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(map(_names_a_phase, [node.left, *node.comparators])):
            found += _strings([node.left, *node.comparators])
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(map(_names_a_phase, targets)):
                found += _strings([node.value])
        elif isinstance(node, ast.Dict):
            found += _strings([v for k, v in zip(node.keys, node.values, strict=True)
                               if isinstance(k, ast.Constant) and k.value in PHASE_FIELDS])
        elif isinstance(node, ast.arguments):
            given = node.posonlyargs + node.args
            pairs = [*zip(given[len(given) - len(node.defaults):], node.defaults, strict=True),
                     *zip(node.kwonlyargs, node.kw_defaults, strict=True)]
            found += _strings([d for a, d in pairs if d is not None and a.arg in PHASE_FIELDS])
        elif isinstance(node, ast.Call):
            found += _strings([k.value for k in node.keywords if k.arg in PHASE_FIELDS])
            position = PHASE_ARGS.get(_named(node.func))
            if position is not None and len(node.args) > position:
                found += _strings([node.args[position]])
            if _names_a_phase(node):  # attrs.get("phase", "sampler")
                found += _strings(node.args[1:])
    return found


def _names_a_kind(node: ast.expr) -> bool:
    """`status`, `record.status`, `row["verdict"]`, `attrs.get("mode")`: an expression that holds a status, mode,
    verdict or kind."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        return _named(node) in FIELDS
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in FIELDS
    return (isinstance(node, ast.Call) and _named(node.func) == "get" and bool(node.args)
            and isinstance(node.args[0], ast.Constant) and node.args[0].value in FIELDS)


def _kind_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string constant compared with a status, mode, verdict or kind, or given to one: assigned, stored
    under its key in a dict literal, as a keyword or as a Step's first argument. Outside core, a string compared
    with anything else ("function" as a column's name) is not one of these."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(map(_names_a_kind, [node.left, *node.comparators])):
            found += _strings([node.left, *node.comparators])
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(map(_names_a_kind, targets)):
                found += _strings([node.value])
        elif isinstance(node, ast.Dict):
            found += _strings([v for k, v in zip(node.keys, node.values, strict=True)
                               if isinstance(k, ast.Constant) and k.value in FIELDS])
        elif isinstance(node, ast.Call):
            found += _strings([k.value for k in node.keywords if k.arg in FIELDS])
            if _named(node.func) == "Step" and node.args:
                found += _strings([node.args[0]])
    return found


LAYERS = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def test_the_layers_scanned_are_every_package() -> None:
    assert {"api", "cli", "core", "machine", "measure", "report", "reproduce", "search", "trial"} <= set(LAYERS)


@pytest.mark.parametrize("layer", LAYERS)
def test_no_module_gives_or_compares_a_bare_status_mode_verdict_or_kind(layer: str) -> None:
    values = {member.value: type(member).__name__ for enum in ENUMS for member in enum}
    offenders = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for line, text in _kind_strings(ast.parse(path.read_text())):
            if text in values:
                offenders.append(f"{path.relative_to(PACKAGE)}:{line}: {text!r} (use {values[text]})")
    assert not offenders, offenders


@pytest.mark.parametrize("layer", LAYERS)
def test_no_module_gives_or_compares_a_bare_phase_string(layer: str) -> None:
    values = {member.value for member in Phase}
    offenders = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for line, text in _phase_strings(ast.parse(path.read_text())):
            if text in values:
                offenders.append(f"{path.relative_to(PACKAGE)}:{line}: {text!r} (use Phase)")
    assert not offenders, offenders


def _phase_params() -> dict[str, set[int]]:
    """Each function's, method's or dataclass's name in the package, and the positions (`self` not counted)
    where it takes a phase or purpose."""
    found: dict[str, set[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [a.arg for a in node.args.posonlyargs + node.args.args]
                names = names[1:] if names[:1] in (["self"], ["cls"]) else names
            elif isinstance(node, ast.ClassDef):
                names = [n.target.id for n in node.body
                         if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
            else:
                continue
            found.setdefault(node.name, set()).update(i for i, name in enumerate(names) if name in PHASE_FIELDS)
    return found


def test_each_call_the_phase_scan_reads_exists_and_takes_its_phase_where_it_looks() -> None:
    params = _phase_params()
    missing = sorted(name for name in PHASE_ARGS if name not in params)
    assert not missing, f"PHASE_ARGS names what the package no longer defines: {missing}"
    wrong = sorted(f"{name}: position {position}, but takes a phase at {sorted(params[name])}"
                   for name, position in PHASE_ARGS.items() if position not in params[name])
    assert not wrong, wrong


def test_a_phase_travels_as_its_text_and_keeps_a_stored_decision_s_id() -> None:
    a, b = TrialConfig(), TrialConfig(jit_compile=True)
    assert decision_id(Phase.COMBINE, a, b) == decision_id("combine", a, b) == "658c1441"  # the id before Phase
    assert json.dumps({"phase": Phase.BATCH_SIZE}) == '{"phase": "batch_size"}'
    assert Phase("sampler") is Phase.SAMPLER and f"{Phase.VERIFY:>9}" == "   verify"
    assert {Phase.BUNDLE: "bundled"}.get("bundle") == "bundled"  # a stored purpose finds its member
