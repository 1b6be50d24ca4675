"""The phases reach the tuner through `Searcher`'s public names only; no module but tuner.py touches a `_` member.

Read from the code with `ast`; each rule is shown to fail on a planted line.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import fitspeed
from fitspeed.search.searcher import Searcher
from fitspeed.search.tuner import Tuner

PACKAGE = Path(fitspeed.__file__).parent
SEARCH = PACKAGE / "search"


def _members() -> set[str]:
    """The names `Searcher` lists, read from its class body."""
    tree = ast.parse((SEARCH / "searcher.py").read_text())
    (searcher,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Searcher"]
    names = set()
    for node in searcher.body:
        if isinstance(node, ast.FunctionDef):  # a method, or a property
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):  # an attribute
            names.add(node.target.id)
    return names


def _is_tuner(node: ast.expr) -> bool:
    """`tuner` or `self.tuner`: the tuner as a phase holds it."""
    return (isinstance(node, ast.Name) and node.id == "tuner") or (isinstance(node, ast.Attribute)
                                                                   and node.attr == "tuner")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def reaches(source: str, members: set[str] | None = None) -> list[tuple[int, str]]:
    """Each `tuner._x` (or `getattr(tuner, "_x")`) in `source`, and with `members`, each `tuner.x` not among them."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _is_tuner(node.value):
            if _private(node.attr) or (members is not None and node.attr not in members):
                found.append((node.lineno, node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr")
              and len(node.args) >= 2 and _is_tuner(node.args[0]) and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and _private(node.args[1].value)):
            found.append((node.lineno, node.args[1].value))
    return found


def test_the_contract_names_only_public_members_and_the_tuner_has_each_method() -> None:
    members = _members()
    assert {"spent", "config_of", "challenge", "once", "settle", "measure", "ledger", "base"} <= members
    assert [m for m in members if m.startswith("_")] == []
    for name in members:
        if inspect.isfunction(getattr(Searcher, name)):  # a method: the tuner's takes the same parameters
            assert list(inspect.signature(getattr(Tuner, name)).parameters) == list(
                inspect.signature(getattr(Searcher, name)).parameters), name


def test_no_module_but_the_tuner_reaches_into_its_private_members() -> None:
    members = _members()
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == SEARCH / "tuner.py":
            continue
        source = path.read_text()
        phase = "Searcher" in source and path.parent == SEARCH  # a phase: only the contract's names
        bad = reaches(source, members if phase else None)
        if bad:
            found[str(path.relative_to(PACKAGE))] = bad
    assert found == {}


def test_a_planted_reach_into_the_tuner_is_caught() -> None:
    members = _members()
    assert reaches("self.tuner._spent()\n") == [(1, "_spent")]
    assert reaches("x = tuner._config({})\n") == [(1, "_config")]
    assert reaches("getattr(self.tuner, '_once')(unit, a, b)\n") == [(1, "_once")]
    assert reaches("self.tuner.refused.add('x')\n", members) == [(1, "refused")]  # public, but not the contract
    assert reaches("self.tuner.spent(2)\nself.tuner.config_of({}, quiet=True)\n", members) == []
    assert reaches("tuner.__class__\n") == []
