"""What a piece of code is for, as far as a write rule needs to know: a test, a script, a product.

A debug dump is write-only code in a library: nobody reads the file it writes, and it sits in
code a server runs. Upstream code writes to fixed paths for other reasons, and these questions
tell the two apart by what the code does, not by where the file lies:

- `is_test_module`: the module defines tests (a `test_*` function, a `Test*` class or a
  `...TestCase` subclass at module level): its writes serve the test run, not a server;
- `is_script`: the module has a module-level `if __name__ == "__main__":` (a command);
- `announced(func, name)`: the function tells its user the path (`print(f"Writing {path}")`);
- `handed_on(func, name)`: the function returns the path or passes it to a call that uses the
  file (a script it writes and then runs, a log a child process gets), not only to the writer,
  a message or `os.path`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from patchaudit.analysis.names import Scope

__all__ = [
    "is_test_module",
    "is_script",
    "function_at",
    "announced",
    "handed_on",
    "with_target",
    "reached_from",
    "wraps_step",
]

_REPORTING = frozenset({"print", "debug", "info", "warning", "warn", "error", "exception", "critical", "log"})
# Calls that take a path without using the file: messages, path arithmetic, the writers themselves.
_NOT_A_USE = frozenset(
    {"str", "repr", "len", "format", "fspath", "join", "dirname", "basename", "exists", "isfile", "isdir"}
    | {"makedirs", "mkdir", "abspath", "realpath", "expanduser", "Path", "open", "save", "dump", "savez"}
    | {"savez_compressed", "savetxt", "save_file", "tofile", "write", "write_text", "write_bytes", "FileHandler"}
)


def is_test_module(tree: ast.Module) -> bool:
    """Whether the module defines tests at its top level, or imports pytest (a test suite's helpers)."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Import) and any(a.name.split(".")[0] == "pytest" for a in stmt.names):
            return True
        if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").split(".")[0] == "pytest":
            return True
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name.startswith("test_"):
            return True
        if isinstance(stmt, ast.ClassDef):
            bases = [_last(b) for b in stmt.bases]
            if stmt.name.startswith("Test") or any(b.endswith("TestCase") for b in bases):
                return True
    return False


def is_script(tree: ast.Module) -> bool:
    """Whether the module runs as a command (`if __name__ == "__main__":` at its top level)."""
    for stmt in tree.body:
        test = stmt.test if isinstance(stmt, ast.If) else None
        if (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
        ):
            return True
    return False


def function_at(tree: ast.Module, scope: Scope) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function a scope path names (None at module level or in a lambda)."""
    body: list[ast.stmt] = tree.body
    found: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for kind, name in scope:
        if kind == "lambda":
            return found
        match = next((s for s in _definitions(body) if s.name == name), None)
        if match is None:
            return None
        if isinstance(match, ast.FunctionDef | ast.AsyncFunctionDef):
            found = match
        body = match.body
    return found


def _definitions(body: list[ast.stmt]) -> list[ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef]:
    """The classes and functions a body defines, also under its `if`, `try`, `with` and loops
    (a helper defined inside `if len(batch) > n:`), not inside other definitions."""
    found: list[ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef] = []
    for stmt in body:
        if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(stmt)
            continue
        for field in ("body", "orelse", "finalbody"):
            found += _definitions(getattr(stmt, field, []))
        for handler in getattr(stmt, "handlers", []):
            found += _definitions(handler.body)
        for case in getattr(stmt, "cases", []):
            found += _definitions(case.body)
    return found


def announced(func: ast.AST, name: str) -> bool:
    """Whether a print or log call of the function names `name`."""
    return any(_last(call.func) in _REPORTING and _names(call, name) for call in _calls(func))


def handed_on(func: ast.AST, name: str, writer: str) -> bool:
    """Whether the function returns `name` or passes it to a call that uses the file.

    `writer`: the name the write's own callee is spelled with (`s` for `s(x, path)`); one call
    of it is the write itself.
    """
    for node in ast.walk(func):
        if isinstance(node, ast.Return) and node.value is not None and _mentions(node.value, name):
            return True
    for call in _calls(func):
        callee = _last(call.func)
        if callee in _REPORTING or callee in _NOT_A_USE or not _names(call, name):
            continue
        if callee == writer:
            writer = ""  # the write itself
            continue
        return True
    return False


def with_target(func: ast.AST, name: str) -> bool:
    """Whether `name` is bound by a `with <call> as name` in the function (a file object it opened)."""
    for node in ast.walk(func):
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                target = item.optional_vars
                if isinstance(target, ast.Name) and target.id == name and isinstance(item.context_expr, ast.Call):
                    return True
    return False


def _calls(func: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(func) if isinstance(node, ast.Call)]


def _names(call: ast.Call, name: str) -> bool:
    return any(_mentions(arg, name) for arg in [*call.args, *(k.value for k in call.keywords)])


def _mentions(node: ast.AST, name: str) -> bool:
    """Whether `name` is read in node, outside any nested call (a call is judged on its own)."""
    if isinstance(node, ast.Name):
        return node.id == name
    if isinstance(node, ast.Call):
        return _last(node.func) in ("str", "fspath") and any(_mentions(a, name) for a in node.args)
    return any(_mentions(child, name) for child in ast.iter_child_nodes(node))


def _last(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call) and _last(node.func) == "partial" and node.args:
        return _last(node.args[0])  # `partial(torch.save)(x, path)` calls `save`
    return ""


_HOT: list[tuple[ast.Module, frozenset[tuple[str, str]]]] = []  # the last module asked about


def reached_from(tree: ast.Module, hot: Callable[[str], bool]) -> frozenset[tuple[str, str]]:
    """The methods (class, name) of the module's classes that a method named `hot` (a forward, a
    step) runs through `self.name(...)`, at any depth: `forward` -> `_get_logits` ->
    `_gather_logits`. They run on every step as surely as the forward does. Once per module."""
    if _HOT and _HOT[0][0] is tree:
        return _HOT[0][1]
    found: set[tuple[str, str]] = set()
    for cls in (s for s in tree.body if isinstance(s, ast.ClassDef)):
        methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)}
        todo = [name for name in methods if hot(name)]
        seen = set(todo)
        while todo:
            for node in ast.walk(methods[todo.pop()]):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "self"
                    and node.func.attr in methods
                    and node.func.attr not in seen
                ):
                    seen.add(node.func.attr)
                    todo.append(node.func.attr)
        found.update((cls.name, name) for name in seen if not hot(name))
    _HOT[:] = [(tree, frozenset(found))]
    return _HOT[0][1]


_WRAPS: list[tuple[ast.Module, frozenset[str]]] = []  # the last module asked about


def wraps_step(tree: ast.Module, hot: Callable[[str], bool]) -> frozenset[str]:
    """The module-level functions that decorate a function named `hot` (a forward, a step), as
    `@_timer` or `@_timer(...)`, or put around one at module level (`Impl.forward =
    _watch(Impl.forward)`, `forward = _watch(forward)`): the wrapper they return runs on every
    step. Once per module."""
    if _WRAPS and _WRAPS[0][0] is tree:
        return _WRAPS[0][1]
    own = {s.name for s in tree.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and hot(node.name):
            for decorator in node.decorator_list:
                called = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(called, ast.Name) and called.id in own:
                    found.add(called.id)
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
            continue
        wrapper = stmt.value.func
        named = [
            t.attr if isinstance(t, ast.Attribute) else t.id if isinstance(t, ast.Name) else "" for t in stmt.targets
        ]
        if isinstance(wrapper, ast.Name) and wrapper.id in own and any(hot(n) for n in named):
            found.add(wrapper.id)
    _WRAPS[:] = [(tree, frozenset(found))]
    return _WRAPS[0][1]
