"""Environment variables set by startup hooks: `import` lines of `.pth` files and sitecustomize /
usercustomize modules in a site directory that assign `os.environ` (read, never run)."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator, Sequence

from patchaudit.analysis.lines import source_lines
from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped_text
from patchaudit.procs.unitfile import Origin, Setting

HOOK_MODULES = ("sitecustomize.py", "usercustomize.py")


def hook_settings(site_dirs: Sequence[str]) -> list[Setting]:
    """Every constant assignment to os.environ in the startup hooks of `site_dirs`, in the order site.py runs them."""
    found: list[Setting] = []
    for site in site_dirs:
        try:
            names = sorted(os.listdir(site))
        except OSError:
            continue
        for name in names:
            path = os.path.join(site, name)
            if name.endswith(".pth"):
                found.extend(_pth(path))
            elif name in HOOK_MODULES:
                found.extend(_module(path))
    return found


def _read(path: str) -> str | None:
    try:
        return read_capped_text(path, Cap.PTH)
    except UnreadableFile:
        return None


def _pth(path: str) -> Iterator[Setting]:
    text = _read(path)
    if text is None:
        return
    for number, line in enumerate(source_lines(text), start=1):  # as site.py numbers them
        if line.startswith(("import ", "import\t")):
            yield from _settings(line, path, number)


def _module(path: str) -> Iterator[Setting]:
    text = _read(path)
    if text is not None:
        yield from _settings(text, path, 1)


def _settings(code: str, path: str, first_line: int) -> Iterator[Setting]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        for name, value, only_if_unset in _assigned(node):
            where = f"{path}:{first_line + getattr(node, 'lineno', 1) - 1}"
            yield Setting(name=name, value=value, origin=Origin.HOOK, where=where, only_if_unset=only_if_unset)


def _is_environ(node: ast.AST) -> bool:
    """`os.environ` or a bare `environ` (from os import environ)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


def _text(node: ast.AST | None) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return f"<computed: {ast.unparse(node)}>" if node is not None else ""


def _assigned(node: ast.AST) -> Iterator[tuple[str, str, bool]]:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Subscript) and _is_environ(target.value):
                key = target.slice
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    yield key.value, _text(node.value), False
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        func = node.func
        args = node.args
        first = args[0] if args else None
        name = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
        if _is_environ(func.value) and func.attr == "setdefault" and name and len(args) > 1:
            yield name, _text(args[1]), True
        elif _is_environ(func.value) and func.attr == "update":
            for kw in node.keywords:
                if kw.arg:
                    yield kw.arg, _text(kw.value), False
            if isinstance(first, ast.Dict):
                for k, v in zip(first.keys, first.values, strict=True):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        yield k.value, _text(v), False
        elif isinstance(func.value, ast.Name) and func.value.id == "os" and func.attr == "putenv" and name:
            yield name, _text(args[1] if len(args) > 1 else None), False
