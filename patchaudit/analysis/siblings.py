"""The modules a file imports from its own package, read where they are installed.

A check a patch moved out of a function may live on in another module of the same package
(`from vllm.model_executor.layers.utils import validate_head(...)`). `Siblings` resolves an
import of the scanned file (absolute or relative, at module level or inside a function) to the
installed file of a module under the same top-level package, reads it once with a bounded read
below the distribution's directory (never through a link) and parses it; `function` then gives
the named top-level function of that module, following one re-export (`from .utils import f` in
a package's `__init__`). Anything that cannot be read or parsed resolves to None.
"""

from __future__ import annotations

import ast
import os

from patchaudit.fs.beneath import read_below
from patchaudit.fs.safefs import Cap, UnreadableFile

__all__ = ["Siblings", "imported_names"]

# (location, module) -> (its tree, whether it is a package's __init__), per process
_CACHE: dict[tuple[str, str], tuple[ast.Module, bool] | None] = {}
_CACHE_MAX = 256


def imported_names(tree: ast.Module, package: str) -> dict[str, tuple[str, str | None]]:
    """Local name -> (absolute module, the attribute imported or None for the module itself), for
    every import of the file, nested ones too (`from .utils import check as c`, `import a.b as m`)."""
    out: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(node.module or "", node.level, package)
            if base is None:
                continue
            for alias in node.names:
                if alias.name != "*":
                    out[alias.asname or alias.name] = (base, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".", 1)[0]
                    out.setdefault(top, (top, None))
    return out


def _absolute(module: str, level: int, package: str) -> str | None:
    if not level:
        return module
    parts = package.split(".") if package else []
    if level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([module] if module else [])) or None


class Siblings:
    """Modules under the same top-level package as the file at `path` (relative to `location`)."""

    def __init__(self, location: str, path: str) -> None:
        self.location = location
        parts = path.split("/")
        self.top = parts[0] if len(parts) > 1 else ""
        self.package = ".".join(parts[:-1])

    def tree(self, module: str) -> ast.Module | None:
        """The parsed installed source of `module`, None when it is not of this package or unreadable."""
        found = self._module(module)
        return found[0] if found is not None else None

    def _module(self, module: str) -> tuple[ast.Module, bool] | None:
        if not self.top or module.split(".", 1)[0] != self.top:
            return None
        key = (self.location, module)
        if key not in _CACHE:
            if len(_CACHE) >= _CACHE_MAX:
                _CACHE.clear()
            _CACHE[key] = self._read(module)
        return _CACHE[key]

    def _read(self, module: str) -> tuple[ast.Module, bool] | None:
        stem = os.path.join(self.location, *module.split("."))
        for candidate, package in ((stem + ".py", False), (os.path.join(stem, "__init__.py"), True)):
            try:
                data = read_below(candidate, Cap.SOURCE)
            except UnreadableFile:
                continue
            try:
                return ast.parse(data), package
            except (SyntaxError, ValueError, RecursionError):
                return None
        return None

    def function(self, module: str, name: str) -> tuple[ast.Module, ast.FunctionDef | ast.AsyncFunctionDef] | None:
        """(its module's tree, the function) for `name` (`f` or `Class.f`) defined at the top of
        `module`, or re-exported there from another module of the package (one hop)."""
        found = self._module(module)
        if found is None:
            return None
        tree, package = found
        defined = _defined(tree, name)
        if defined is not None:
            return tree, defined
        head, dot, rest = name.partition(".")
        origin = imported_names(tree, module if package else module.rpartition(".")[0]).get(head)
        if origin is None or origin[1] is None or origin[0] == module:
            return None
        inner = self.tree(origin[0])
        defined = _defined(inner, origin[1] + dot + rest) if inner is not None else None
        return (inner, defined) if inner is not None and defined is not None else None


def _defined(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The top-level function `name`, or the method `Class.name` of a top-level class."""
    owner, _, method = name.rpartition(".")
    body: list[ast.stmt] = tree.body
    if owner:
        cls = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == owner), None)
        body = cls.body if cls is not None else []
    return next((s for s in body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == method), None)
