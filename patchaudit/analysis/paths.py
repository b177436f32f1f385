"""The ast side of fixed paths: where a path an expression fixes starts (`fixed_path_ast`, as
`values.fixed_path` reads libcst), whether nodes spell such a start (`spells_path`), and the names
through which a module may hand one to a statement (`path_names`, a table the statement filters read)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable

from patchaudit.analysis.trees import assigned_names, bound_through, called_name, statements

__all__ = ["TEMP_DIR", "TEMP_DIR_CALLS", "TEMP_PLACES", "fixed_path_ast", "path_names", "spells_path", "temp_only"]


# The shared temp directory (not `mkdtemp`/`mkstemp`: a fresh place each call is how code that
# means to write a temp file does it), labelled so that no rule mistakes it for a literal /tmp.
TEMP_DIR_CALLS = ("gettempdir", "gettempdirb", "mktemp")
TEMP_DIR = "$TMPDIR"
TEMP_PLACES = ("/tmp", "/var/tmp", "/dev/shm", TEMP_DIR)


def fixed_path_ast(
    node: ast.expr | None, depth: int = 0, bound: Callable[[ast.expr], str | None] | None = None
) -> str | None:
    """The literal start of a path an expression fixes (the ast side of `values.fixed_path`).

    `bound` gives the path a module or class constant or an instance attribute holds."""
    if node is None or depth > 8:
        return None
    if bound is not None and isinstance(node, ast.Name | ast.Attribute):
        return bound(node)
    if isinstance(node, ast.Call) and called_name(node.func) in TEMP_DIR_CALLS:
        return TEMP_DIR  # the temp directory: a fixed place, whatever TMPDIR names
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        first = node.values[0] if node.values else None
        if isinstance(first, ast.FormattedValue) and bound is not None:
            return fixed_path_ast(first.value, depth + 1, bound)  # `f"{DUMP_DIR}/x.pt"`
        return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod | ast.Div):
        return fixed_path_ast(node.left, depth + 1, bound)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return temp_only(fixed_path_ast(node.values[-1], depth + 1, bound))  # `path or "/tmp/d"`
    if isinstance(node, ast.Call) and len(node.args) == 2 and _env_lookup(node.func):
        # `os.getenv("D", "/tmp/d")`; a bare temp directory (`os.getenv("PROFILE_DIR", "/tmp")`) is
        # the usual documented default of an output setting, not a place a patch picked.
        default = temp_only(fixed_path_ast(node.args[1], depth + 1))
        return None if default is None or default.rstrip("/") in TEMP_PLACES else default
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("format", "joinpath", "with_suffix", "with_name"):
            return fixed_path_ast(func.value, depth + 1, bound)
        name = called_name(func)
        if name in ("join", "Path", "PurePath", "str", "fspath", "abspath", "expanduser") and node.args:
            return fixed_path_ast(node.args[0], depth + 1, bound)
        if bound is not None and isinstance(func, ast.Name | ast.Attribute):
            return bound(node)  # a helper that returns a fixed path
    return None


def spells_path(nodes: Iterable[ast.AST]) -> bool:
    """Whether nodes spell what a fixed path starts from: a string that starts with `/` or `~`, a
    home (`Path.home()`), or the temp directory (`tempfile.gettempdir()`)."""
    for node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(("/", "~")):
            return True
        if isinstance(node, ast.Call) and called_name(node.func) in ("home", *TEMP_DIR_CALLS):
            return True
    return False


# Where a fixed path starts in source text: a string that starts with `/` or `~`, a home, the
# temp directory (a superset of spells_path, read off the text).
_PATH_START = re.compile(rb"[\"'][/~]|\b(?:home|gettempdirb?|mktemp)\s*\(")
_WORD = re.compile(rb"\w+")


def path_names(tree: ast.Module, source: bytes) -> frozenset[str]:
    """The names through which a fixed path may reach a statement of this module: each name or
    attribute assigned, anywhere, where the assignment's text spells one (a string that starts with
    `/` or `~`, a home, the temp directory) or names another such name, and each function whose
    text does (a helper that returns a path). A superset of what `values.fixed_path` follows
    (locals, module and class constants, attributes, helpers), for a statement filter; read from
    the statements' lines, not their expressions."""
    if _PATH_START.search(source) is None:
        return frozenset()  # no line of the module spells a path, so no statement's lines do
    lines = source.splitlines(keepends=True)
    entries: list[tuple[frozenset[str], bytes]] = []
    for stmt in statements(tree.body):
        names = assigned_names(stmt) if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign) else set()
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(stmt.name)
        if names:
            entries.append((frozenset(names), b"".join(lines[stmt.lineno - 1 : stmt.end_lineno or stmt.lineno])))
    found: set[str] = set()
    left: list[tuple[frozenset[str], frozenset[str]]] = []
    for bound, text in entries:
        if _PATH_START.search(text):
            found.update(bound)
        else:
            left.append((bound, frozenset(w.decode() for w in _WORD.findall(text))))
    # `_FIX = os.path.join(_BASE, "fix")` after `_BASE = "/mnt/k2"`: through names
    return bound_through(found, left)


def _env_lookup(func: ast.expr) -> bool:
    """`os.getenv`, `os.environ.get` (by spelling: a default is read the same whatever the import)."""
    name = called_name(func)
    return name == "getenv" or (name == "get" and "environ" in ast.unparse(func))


def temp_only(path: str | None) -> str | None:
    """A fallback destination (`path or "/tmp/d"`, `os.getenv("D", "/tmp/d")`), when it is a temp
    place: a debug destination even when the variable is real (a fallback elsewhere is a
    documented default)."""
    return path if path is not None and path.startswith(TEMP_PLACES) else None
