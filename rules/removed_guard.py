"""removed-guard: a raise or assert that the pristine function had and the installed one lacks."""

import ast
import difflib
from collections import Counter
from collections.abc import Iterable

from patchaudit.rule import Example, Hit, Rule, Severity

_LOGGING = ("print(", "log", "warn")


def _guard_key(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Raise):
        exc = node.exc
        if exc is None:
            return "raise"
        target = exc.func if isinstance(exc, ast.Call) else exc
        return "raise " + ast.unparse(target)
    if isinstance(node, ast.Assert):
        return "assert " + ast.unparse(node.test)
    return None


def _function_guards(tree: ast.AST) -> dict[str, list[tuple[str, int]]]:
    """Qualified function name -> its guards (key, line), nested functions kept apart."""
    out: dict[str, list[tuple[str, int]]] = {}

    def walk(node: ast.AST, scope: str, func: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{scope}{child.name}"
                out.setdefault(name, [])
                walk(child, name + ".", name)
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{scope}{child.name}.", func)
            else:
                key = _guard_key(child) if isinstance(child, ast.stmt) else None
                if key is not None and func is not None:
                    out[func].append((key, child.lineno))
                walk(child, scope, func)

    walk(tree, "", None)
    return out


class RemovedGuard(Rule):
    ID = "removed-guard"
    SEVERITY = Severity.HIGH
    MESSAGE = "a raise/assert of the pristine function is gone from the installed one"
    EXPLANATION = """\
Compares each function of the installed file with the same function of the pristine file. A
`raise` or `assert` that the vendor wrote and the installed copy no longer has (deleted,
commented out, or turned into a `print`/`logger.warning`) means an unsupported configuration
(a dtype, a quantisation scheme, a shape) now runs instead of failing loudly. Needs the pristine
bytes: without them the rule cannot run. A raise whose message was reworded is not a removal:
raises are compared by exception type, asserts by their condition."""
    USES_LIBCST = False
    NEEDS_PRISTINE = True

    VALID = [
        Example(
            code="def f(x):\n    if x < 0:\n        raise ValueError('negative x')\n    return x\n",
            pristine="def f(x):\n    if x < 0:\n        raise ValueError('x < 0')\n    return x\n",
        ),
        Example(
            code="def f(x):\n    assert x > 0\n    return x + 1\n",
            pristine="def f(x):\n    assert x > 0\n    return x\n",
        ),
        "def f(x):\n    raise NotImplementedError\n",
    ]
    INVALID = [
        Example(
            code="def f(dtype):\n    if dtype == 'fp8':\n        pass\n    return dtype\n",
            pristine="def f(dtype):\n    if dtype == 'fp8':\n        raise NotImplementedError('fp8')\n"
            "    return dtype\n",
            line=3,
        ),
        Example(
            code="def f(a, b):\n    if a:\n        raise ValueError('a')\n    if b:\n        print('b')\n",
            pristine="def f(a, b):\n    if a:\n        raise ValueError('a')\n"
            "    if b:\n        raise ValueError('b')\n",
            line=5,
        ),
        Example(
            code="class M:\n    def forward(self, x):\n        print('bad shape')\n        return x\n",
            pristine="class M:\n    def forward(self, x):\n        assert x.ndim == 2\n        return x\n",
            line=3,
        ),
    ]

    def check_text(self, installed: str, pristine: str | None) -> Iterable[Hit]:
        if pristine is None:
            return []
        try:
            new = _function_guards(ast.parse(installed))
            old = _function_guards(ast.parse(pristine))
        except (SyntaxError, ValueError, RecursionError):
            return []
        old_lines = pristine.splitlines()
        new_lines = installed.splitlines()
        opcodes = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes()
        hits = []
        for func, guards in old.items():
            if func not in new:
                continue
            missing = Counter(k for k, _ in guards) - Counter(k for k, _ in new[func])
            # Of several guards alike (`raise ValueError` twice), the one the patch touched is gone.
            touched = sorted(guards, key=lambda g: not _changed(opcodes, g[1] - 1))
            for key, old_line in touched:
                if missing[key] <= 0:
                    continue
                missing[key] -= 1
                line, replacement = _map_line(opcodes, old_line - 1, new_lines)
                logged = any(token in replacement for token in _LOGGING)
                how = "replaced by a print/log" if logged else "removed"
                hits.append(
                    Hit(
                        rule=self.ID,
                        severity=self.SEVERITY,
                        line=line,
                        column=0,
                        message=f"`{key}` in {func}() {how}: the check no longer runs",
                        stmt_line=line,
                        always_in_change=True,
                    )
                )
        return hits


def _changed(opcodes: list[tuple[str, int, int, int, int]], old: int) -> bool:
    return any(i1 <= old < i2 and tag != "equal" for tag, i1, i2, _, _ in opcodes)


def _map_line(opcodes: list[tuple[str, int, int, int, int]], old: int, new_lines: list[str]) -> tuple[int, str]:
    """The installed line (1-based) where pristine line `old` (0-based) went, and what replaced it."""
    for tag, i1, i2, j1, j2 in opcodes:
        if not i1 <= old < i2:
            continue
        if tag == "equal":
            return j1 + (old - i1) + 1, ""
        if tag == "replace":
            return j1 + min(old - i1, j2 - j1 - 1) + 1, "\n".join(new_lines[j1:j2])
        return max(j1, 1), ""
    return 1, ""
