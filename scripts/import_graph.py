"""Print fitspeed's import graph by layer, and check the import rules.

    python scripts/import_graph.py            # the layers, each module's fitspeed imports, then the verdict
    python scripts/import_graph.py --check    # only the verdict (exit 1 on a broken rule)

Every module's imports are read with `ast` (nothing is imported or run), those
inside functions too (a lazy import is still an arrow). The rules:

1. Layers run core -> machine -> {trial, measure} -> search -> report -> reproduce -> console -> cli.
   A module imports fitspeed modules only from its own package and the
   layers before it; trial and measure never import each other.
2. Nothing but trial/ itself and the public API at the package's root
   (`fitspeed/__init__.py`, `__main__.py`, `auto_steps.py`, `api/`) imports
   `fitspeed.trial`: the parent reaches the child only as
   `python -m fitspeed.trial`. No layer imports the root API modules.
3. The public API never imports cli/: what it shares with the command line
   (the workload, option values, a tune's lines, the tables) lives in
   console/, below both. Only `__main__.py`, which is `python -m fitspeed`,
   runs the command line.
4. A framework (keras, tensorflow, jax, torch) is imported at module level
   only in trial/ and `auto_steps.py`; anywhere else only inside a function.
5. matplotlib appears only in report/, rich only in console/ and cli/, optuna
   only in search/.
6. No import circle between modules.

tests/test_layers.py runs these same checks, and plants forbidden imports in
a copy of the package to show that each rule can fail.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "fitspeed"
LAYERS = ("core", "machine", "trial", "measure", "search", "report", "reproduce", "console", "cli")
RANK = {"core": 0, "machine": 1, "trial": 2, "measure": 2, "search": 3, "report": 4, "reproduce": 5, "console": 6,
        "cli": 7}
API = "api"  # the modules at the package's root and in api/: the public surface
COMMAND_LINE_ENTRY = "fitspeed.__main__"  # `python -m fitspeed`: the one public module that runs cli/
FRAMEWORKS = ("keras", "tensorflow", "jax", "torch", "tf_keras")
ONLY_IN = {"matplotlib": ("report",), "rich": ("console", "cli"), "optuna": ("search",)}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # what it imports, dotted (a fitspeed module, or a third-party top-level name)
    line: int
    lazy: bool  # inside a function


def module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    """The layer a dotted fitspeed module belongs to.

    >>> layer_of("fitspeed.trial.data.sources"), layer_of("fitspeed.auto_steps"), layer_of("fitspeed")
    ('trial', 'api', 'api')
    """
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in RANK) else API


def _resolve(node: ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> list[str]:
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    targets = []
    for alias in node.names:
        candidate = f"{prefix}.{alias.name}"
        targets.append(candidate if candidate in known else prefix)
    return targets


def read_imports(package: Path = PACKAGE) -> tuple[list[str], list[Import]]:
    """Every module of the package, and every import statement in it."""
    paths = sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    modules = [module_name(p, package) for p in paths]
    known = set(modules)
    found: list[Import] = []
    for path, module in zip(paths, modules):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        lazy_lines = {id(n) for f in functions for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = _resolve(node, module, path.name == "__init__.py", known)
            else:
                continue
            for target in targets:
                found.append(Import(module, target, node.lineno, id(node) in lazy_lines))
    return modules, found


def _internal(target: str) -> bool:
    return target == "fitspeed" or target.startswith("fitspeed.")


def violations(package: Path = PACKAGE) -> list[str]:
    """Every broken rule, one sentence each, naming the file and line."""
    modules, found = read_imports(package)
    out: list[str] = []
    for item in found:
        here, where = layer_of(item.module), f"{item.module} (line {item.line})"
        top = item.target.split(".")[0]
        if _internal(item.target):
            there = layer_of(item.target)
            if there == API and item.target not in ("fitspeed",) and here != API:
                out.append(f"{where} imports {item.target}: layers never import the public API at the root")
            elif item.target == "fitspeed" and here != API:
                out.append(f"{where} imports the fitspeed package itself: import the module it needs")
            elif there == "trial" and here not in ("trial", API):
                out.append(f"{where} imports {item.target}: the trial child is reached only as "
                           "`python -m fitspeed.trial`")
            elif there == "cli" and here == API and item.module != COMMAND_LINE_ENTRY:
                out.append(f"{where} imports {item.target}: the public API never imports cli/; what they share "
                           "lives below both, in console/")
            elif here != API and there not in (API, here) and RANK[there] >= RANK[here]:
                below = [name for name in LAYERS if RANK[name] < RANK[here]]
                allowed = f"{', '.join(below)} and itself" if below else "itself"
                out.append(f"{where} imports {item.target}: {here}/ may import only {allowed}")
        elif top in FRAMEWORKS and not item.lazy and here != "trial" and item.module != "fitspeed.auto_steps":
            out.append(f"{where} imports {top} at module level: outside trial/, import a framework "
                       "inside the function that needs it")
        elif top in ONLY_IN and here not in ONLY_IN[top]:
            out.append(f"{where} imports {top}, which belongs in {' and '.join(f'{layer}/' for layer in ONLY_IN[top])} "
                       "only")
    out.extend(f"import circle: {' -> '.join(circle)}" for circle in circles(modules, found))
    return out


def graph(modules: list[str], found: list[Import]) -> dict[str, set[str]]:
    """Each module's fitspeed imports (other modules of the package)."""
    known = set(modules)
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for item in found:
        if item.target in known and item.target != item.module:
            edges[item.module].add(item.target)
    return edges


def circles(modules: list[str], found: list[Import]) -> list[list[str]]:
    """Import circles between modules (a package's __init__ importing its own modules does not count)."""
    edges = graph(modules, found)
    for module in list(edges):  # a package importing its own submodules is how re-exports work
        edges[module] = {t for t in edges[module] if not t.startswith(module + ".")}
    seen: set[str] = set()
    found_circles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            circle = path[path.index(node):] + [node]
            if frozenset(circle) not in {frozenset(c) for c in found_circles}:
                found_circles.append(circle)
            return
        if node in seen:
            return
        for target in sorted(edges[node]):
            visit(target, path + [node])
        seen.add(node)

    for module in sorted(edges):
        visit(module, [])
    return found_circles


def print_graph(out: Iterator[str] | None = None) -> None:
    modules, found = read_imports()
    edges = graph(modules, found)
    for layer in (API, *LAYERS):
        members = [m for m in modules if layer_of(m) == layer]
        rank = "public API" if layer == API else f"layer {RANK[layer]}"
        print(f"\n{layer}/  ({rank})")
        for module in members:
            targets = sorted(edges[module])
            arrows = ", ".join(t.removeprefix("fitspeed.") for t in targets) or "-"
            print(f"  {module.removeprefix('fitspeed.') or '__init__':32s} -> {arrows}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="print only the verdict")
    args = parser.parse_args(argv)
    if not args.check:
        print_graph()
    broken = violations()
    print()
    if broken:
        print(f"{len(broken)} broken import rule(s):")
        for line in broken:
            print(f"  {line}")
        return 1
    print("every import rule holds: layers core -> machine -> {trial, measure} -> search -> report -> reproduce -> "
          "console -> cli, the public API never importing cli/, no circle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
