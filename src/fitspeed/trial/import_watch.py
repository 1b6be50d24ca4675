"""Call back once a module named in advance finishes importing: how the script hook sees `keras` arrive.

`ImportWatch` sits first on `sys.meta_path`. When one of its names is
imported, it finds the module's real spec and wraps the loader, so that the
callback runs right after the module's own code has run, before the importer
gets the module back. The callback runs at most once per import of each name;
every other import is left to the finders after it.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any


class ImportWatch(importlib.abc.MetaPathFinder):
    """Wraps the loader of each module in `after` to call its callback once the module is imported."""

    def __init__(self, after: Mapping[str, Callable[[], None]]) -> None:
        self.after = dict(after)
        self.busy = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.after or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, self.after[name])
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, done: Callable[[], None]) -> None:
        self.inner, self.done = inner, done

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = self.inner
        self.inner.exec_module(module)
        self.done()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
