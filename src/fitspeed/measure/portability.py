"""Which Keras backends a user's training script can run on, read from its source without running it.

Keras 3 runs one model on TensorFlow, JAX or PyTorch, but a script can tie
itself to one of them. It does so when it, or a module of its own that it
imports (a file beside it, followed through its imports), imports a
framework (`import tensorflow as tf` for `tf.data` or `tf.function`,
`import torch`, `import jax`, or a library built on one), or sets
`KERAS_BACKEND` itself. Such a script is offered no other backend, and the
reason names the file and line. Installed packages are not followed: Keras
itself imports every backend it supports.

A script fitspeed cannot read (a shell wrapper, a file that does not parse)
is tied to the backend it already runs on, with that reason.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

# the top-level module a script imports -> the backend it ties the script to
FRAMEWORKS = {
    "tensorflow": "tensorflow", "tf_keras": "tensorflow", "tensorflow_datasets": "tensorflow",
    "tensorflow_addons": "tensorflow", "tensorflow_hub": "tensorflow",
    "jax": "jax", "jaxlib": "jax", "flax": "jax", "optax": "jax", "equinox": "jax",
    "torch": "torch", "torchvision": "torch", "torchaudio": "torch", "lightning": "torch",
    "pytorch_lightning": "torch",
}
MAX_FILES = 200  # a script's own modules followed at most (a guard against a huge tree)


@dataclass(frozen=True)
class Tie:
    """Where a script ties itself to one backend."""

    backend: str | None  # None: a backend fitspeed cannot tell (a file it cannot read)
    file: str
    line: int
    what: str  # "imports tensorflow", "sets KERAS_BACKEND", "is not Python fitspeed can read"

    def reason(self) -> str:
        """One sentence for a skipped backend.

        >>> Tie("tensorflow", "train.py", 3, "imports tensorflow").reason()
        'train.py:3 imports tensorflow, so the script runs on the tensorflow backend only'
        """
        where = f"{self.file}:{self.line}" if self.line else self.file
        if self.backend is None:
            return f"{where} {self.what}, so fitspeed cannot tell which backends it runs on"
        return f"{where} {self.what}, so the script runs on the {self.backend} backend only"


def ties(script: str | Path) -> list[Tie]:
    """Every place where `script` (and the modules of its own it imports) ties itself to a backend."""
    path = Path(script)
    root = path.parent
    found: list[Tie] = []
    seen: set[Path] = set()
    todo = [path]
    while todo and len(seen) < MAX_FILES:
        file = todo.pop()
        if file in seen:
            continue
        seen.add(file)
        shown = _shown(file, root)
        if file.suffix != ".py" and file is path and not _looks_like_python(file):
            found.append(Tie(None, shown, 0, "is not a Python file fitspeed can read"))
            continue
        try:
            tree = ast.parse(file.read_text(encoding="utf-8", errors="replace"), filename=str(file))
        except (OSError, SyntaxError, ValueError) as error:
            found.append(Tie(None, shown, getattr(error, "lineno", 0) or 0, "does not parse as Python"))
            continue
        for node in ast.walk(tree):
            for module, level in _imported(node):
                top = module.split(".")[0] if module else ""
                if level == 0 and top in FRAMEWORKS:
                    found.append(Tie(FRAMEWORKS[top], shown, getattr(node, "lineno", 0), f"imports {module}"))
                    continue
                own = _own_module(module, level, file.parent, root)
                todo.extend(own)
            backend = _sets_backend(node)
            if backend is not None:
                found.append(Tie(backend, shown, getattr(node, "lineno", 0), "sets KERAS_BACKEND"))
    return found


def why_not(script: str | Path, target: str, current: str = "tensorflow") -> str | None:
    """Why `script` cannot be moved to the `target` backend, or None when nothing ties it to another one.

    `current` is the backend the script runs on now: a script fitspeed cannot
    read stays on it.
    """
    for tie in ties(script):
        runs_on = tie.backend or current
        if runs_on != target:
            return tie.reason()
    return None


def module_file(model: str, path: list[str] | None = None) -> Path | None:
    """The source file of a builder `package.module:function`, found on `path` (sys.path) without importing it.

    None for a built-in model, a `.keras` file, or a module not found as a file.

    >>> module_file("tiny") is None, module_file("model.keras") is None
    (True, True)
    """
    module, sep, _ = model.partition(":")
    if not sep or not module:
        return None
    parts = module.split(".")
    for entry in path if path is not None else ["", *sys.path]:
        source = _source(Path(entry or ".").joinpath(*parts))
        if source is not None:
            return source
    return None


def _imported(node: ast.AST) -> list[tuple[str, int]]:
    """The modules an import statement names, with its relative level (0: absolute)."""
    if isinstance(node, ast.Import):
        return [(alias.name, 0) for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        if node.level and not module:  # from . import helpers: each name may be a module of its own
            return [(alias.name, node.level) for alias in node.names]
        return [(module, node.level)]
    return []


def _own_module(module: str, level: int, here: Path, root: Path) -> list[Path]:
    """The script's own file (or package) that `module` names, if it is one."""
    base = here
    for _ in range(max(0, level - 1)):
        base = base.parent
    starts = [base] if level else [root, here]
    parts = [part for part in module.split(".") if part]
    found = []
    for start in dict.fromkeys(starts):
        for n in range(len(parts), 0, -1):  # `import a.b.c` runs a, a.b and a.b.c
            source = _source(start.joinpath(*parts[:n]))
            if source is not None:
                found.append(source)
    return found


def _source(target: Path) -> Path | None:
    """The file a module path names: `target.py`, or a package's `target/__init__.py`."""
    for candidate in (target.with_suffix(".py"), target / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _sets_backend(node: ast.AST) -> str | None:
    """The backend a statement sets through KERAS_BACKEND (`os.environ["KERAS_BACKEND"] = "jax"`, setdefault)."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if (isinstance(target, ast.Subscript) and _is_text(target.slice, "KERAS_BACKEND")
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                return node.value.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("setdefault", "putenv"):
        args = node.args
        if len(args) == 2 and _is_text(args[0], "KERAS_BACKEND") and isinstance(args[1], ast.Constant):
            return str(args[1].value)
    return None


def _is_text(node: ast.AST, text: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == text


def _looks_like_python(file: Path) -> bool:
    try:
        with file.open(encoding="utf-8", errors="replace") as text:
            first = text.readline()
    except OSError:
        return False
    return first.startswith("#!") and "python" in first


def _shown(file: Path, root: Path) -> str:
    try:
        return str(file.relative_to(root))
    except ValueError:
        return str(file)
