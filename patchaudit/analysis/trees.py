"""Plain reads of an ast tree: every node as a list (what `list(ast.walk(root))` gives, in the same
order, less the expression contexts, at under half its cost), every statement, a dotted name as
written, the last name of a callee, the names an assignment's targets spell, and names bound
through one another."""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable, Sequence
from itertools import compress

__all__ = ["assigned_names", "bound_through", "called_name", "dotted", "full_name", "of_types", "statements", "walk"]

# Fields that hold an identifier, a string, a number or a constant in every node type (Python's
# ASDL grammar): never a node, so the walk does not read them. And `ctx`: the Load, Store or Del of
# a name, an attribute, a subscript or a display, one shared node each that says only what its
# parent's place already does (read as `node.ctx` where it matters); a third of a walk's nodes.
_PLAIN_FIELDS = frozenset(
    {"id", "attr", "arg", "name", "module", "asname", "type_comment", "kind", "level", "is_async", "conversion"}
    | {"rest", "kwd_attrs", "ctx"}
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def walk(root: ast.AST) -> list[ast.AST]:
    """`list(ast.walk(root))` without the expression contexts: breadth first, each node's fields in
    their declared order."""
    found = [root]
    for node in found:  # grows while it is read
        kind = type(node)
        fields = _FIELDS.get(kind)
        if fields is None:
            plain = _PLAIN_FIELDS | ({"value"} if kind is ast.Constant else set())
            fields = _FIELDS[kind] = tuple(f for f in kind._fields if f not in plain)
        for name in fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                found.extend([item for item in value if isinstance(item, ast.AST)])
            elif isinstance(value, ast.AST):
                found.append(value)
    return found


def of_types(nodes: Sequence[ast.AST], kinds: Collection[type]) -> list[ast.AST]:
    """The nodes whose type is one of `kinds`, in their order: one pass in C, where a loop that
    skips the rest (most of a walk's nodes, for a question about branches or calls) costs a
    Python step per node."""
    return list(compress(nodes, map(kinds.__contains__, map(type, nodes))))


def statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every statement of a body at any depth (the bodies of functions, classes, branches, loops,
    handlers and cases), without walking a single expression: a fraction of `walk`'s cost where
    only statements matter (assignments, definitions, returns)."""
    found = list(body)
    for stmt in found:  # grows while it is read
        for part in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, part, None)
            if isinstance(inner, list):
                found.extend(s for s in inner if isinstance(s, ast.stmt))
        for handler in getattr(stmt, "handlers", ()):
            found.extend(handler.body)
        for case in getattr(stmt, "cases", ()):
            found.extend(case.body)
    return found


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a name or a chain of attributes over one (what `ast.unparse` writes), else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def full_name(node: ast.expr) -> str | None:
    """What `libcst.helpers.get_full_name_for_node` gives of the same code, read on the ast: a name,
    an attribute (`f().x` is `None.x`), a call's callee, a subscript's value (`x[0]` is `x`); else None.
    A statement filter asks it to key what a rule keys by that helper."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{full_name(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return full_name(node.func)
    return full_name(node.value) if isinstance(node, ast.Subscript) else None


def called_name(func: ast.expr) -> str:
    """The last name of a callee as written (`torch.nan_to_num` -> "nan_to_num", `open` -> "open"),
    else "" (a call of a call, a subscript)."""
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def assigned_names(stmt: ast.Assign | ast.AnnAssign | ast.AugAssign) -> set[str]:
    """The names and attributes an assignment's targets spell (`self.env = ...`: self and env)."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return {
        part.id if isinstance(part, ast.Name) else part.attr
        for target in targets
        for part in walk(target)
        if isinstance(part, ast.Name | ast.Attribute)
    }


def bound_through(
    found: set[str], binds: Iterable[tuple[frozenset[str], frozenset[str]]], reached: frozenset[str] = frozenset()
) -> frozenset[str]:
    """`found`, grown by the names of each binding (names bound, names its value spells) whose value
    spells one of `found` or of `reached`, until none is left to add: names bound to something
    through one another, at any depth."""
    binds = list(binds)
    grew = True
    while grew:
        grew = False
        for bound, spelled in binds:
            if not bound <= found and not spelled.isdisjoint(found | reached):
                found |= bound
                grew = True
    return frozenset(found)
