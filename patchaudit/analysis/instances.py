"""Objects of the module's own classes, and the paths a module, class or instance binds.

A debug patch often wraps its dump in a small class (`_Dumper("/tmp/d")`, then `_dump(x)` or
`_dump.save(x)`), keeps its directory in a constant (`DUMP_DIR = "/tmp/dsv2"`) or on the
instance (`self.dump_dir = "/tmp/hooks"` in `__init__`), or gives a helper a default
destination (`def _dump(t, path="/tmp/t.pt")`). This module answers, from the file's `ast`:

- `method(names, bindings, callee, scope)`: the method of this module a call runs when the callee is
  a class of the module (its `__init__`), an instance of one (its `__call__`) or a method of an
  instance (`obj.save`, `self.dumper.save`, with `obj = Dumper(...)`, `self.dumper = Dumper()`);
- `bound_value(names, bindings, node, scope)`: the one value a module or class name, or an
  instance attribute, is bound to (what a path is built from);
- `default_of(function, param)`: the default value of a parameter.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from patchaudit.analysis.names import NameTable, Scope, unpacked

__all__ = [
    "Bindings",
    "arguments",
    "class_of",
    "method",
    "bound_value",
    "default_of",
    "class_spans",
    "is_self_like",
    "owner_of",
]


@dataclass(slots=True)
class Bindings:
    """Module-level classes, and the values module names, class names and `self.X` are bound to."""

    classes: set[str] = field(default_factory=set)
    module: dict[str, list[ast.expr | None]] = field(default_factory=dict)
    members: dict[str, dict[str, list[ast.expr | None]]] = field(default_factory=dict)
    instance: dict[str, dict[str, list[ast.expr | None]]] = field(default_factory=dict)

    @classmethod
    def build(cls, tree: ast.Module, names: NameTable) -> Bindings:
        out = cls()
        _bind_body(tree.body, out.module)
        for stmt in tree.body:
            if isinstance(stmt, ast.ClassDef):
                out.classes.add(stmt.name)
                _bind_body(stmt.body, out.members.setdefault(stmt.name, {}))
        for (owner, attr), values in names.instance_assigned.items():
            out.instance.setdefault(owner, {})[attr] = values
        return out


def _assignments(node: ast.AST) -> list[tuple[ast.expr, ast.expr | None]]:
    """(target, value) of a binding statement; None as the value of one that rebinds by computing."""
    if isinstance(node, ast.Assign):
        pairs = unpacked(node.targets[0], node.value) if len(node.targets) == 1 else None
        if pairs is not None:  # `DUMP_DIR, LIMIT = "/tmp/d", 5`
            return list(pairs)
        return [(t, node.value if len(node.targets) == 1 else None) for t in node.targets]
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return [(node.target, node.value)]
    if isinstance(node, ast.AugAssign):
        return [(node.target, None)]
    return []


def _bind_body(body: list[ast.stmt], into: dict[str, list[ast.expr | None]]) -> None:
    for stmt in body:
        for target, value in _assignments(stmt):
            if isinstance(target, ast.Name):
                into.setdefault(target.id, []).append(value)


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def is_self_like(node: ast.expr) -> bool:
    """`self`, `cls`, `super()`, `type(self)` or `self.__class__`: an attribute of it is looked up
    on the enclosing class and its bases."""
    if _is_self(node):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id == "super":
            return True
        return node.func.id == "type" and len(node.args) == 1 and is_self_like(node.args[0])
    return isinstance(node, ast.Attribute) and node.attr == "__class__" and is_self_like(node.value)


def _once(values: list[ast.expr | None] | None) -> ast.expr | None:
    return values[0] if values is not None and len(values) == 1 else None


def _class_in(scope: Scope) -> str | None:
    classes = [name for kind, name in scope if kind == "class"]
    return classes[-1] if classes else None


def class_of(names: NameTable, bindings: Bindings, node: ast.expr, scope: Scope) -> str | None:
    """The class of this module that `node` is an instance of: `Cls(...)`, a name bound to one
    (in the function or the module), or `self.attr` bound to one in a method."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in bindings.classes and not _hidden(names, func.id, scope):
            return func.id
        return None
    if isinstance(node, ast.Name):
        for value, where in names.values(node.id, scope):
            if isinstance(value, ast.Call):
                found = class_of(names, bindings, value, where)
                if found is not None:
                    return found
        return None
    if isinstance(node, ast.Attribute) and _is_self(node.value):
        owner = _class_in(scope)
        for assigned in bindings.instance.get(owner or "", {}).get(node.attr, []):
            if isinstance(assigned, ast.Call) and owner is not None:
                found = class_of(names, bindings, assigned, (("class", owner), ("def", "")))
                if found is not None:
                    return found
    return None


def _hidden(names: NameTable, name: str, scope: Scope) -> bool:
    """Whether a local binding in `scope` hides the module's `name`."""
    return any(name in names.bindings.get(scope[:i], {}) for i in range(1, len(scope) + 1))


def method(names: NameTable, bindings: Bindings, func: ast.expr, scope: Scope) -> tuple[str, str] | None:
    """(class, method) of this module that calling `func` runs (see the module docstring)."""
    if isinstance(func, ast.Name) and func.id in bindings.classes and not _hidden(names, func.id, scope):
        return func.id, "__init__"
    owner = class_of(names, bindings, func, scope)
    if owner is not None:
        return owner, "__call__"
    if isinstance(func, ast.Attribute):
        owner = class_of(names, bindings, func.value, scope)
        if owner is not None:
            return owner, func.attr
    return None


def bound_value(names: NameTable, bindings: Bindings, node: ast.expr, scope: Scope) -> ast.expr | None:
    """The one value `NAME`, `Class.NAME` or `self.NAME` is bound to, else None."""
    if isinstance(node, ast.Name) and not _hidden(names, node.id, scope):
        return _once(bindings.module.get(node.id))
    found = owner_of(names, bindings, node, scope)
    return found[1] if found is not None else None


def owner_of(
    names: NameTable, bindings: Bindings, node: ast.expr, scope: Scope
) -> tuple[Scope, ast.expr | None] | None:
    """The class scope that binds `Class.NAME` or `self.NAME` (the enclosing class or a base of it;
    for `self` outside any class, a function taking it, the first class of the module that binds
    it), with the one value it is bound to there (None when bound more than once)."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        return None
    own = (("class", node.value.id),) if not _is_self(node.value) else scope
    chain = names.class_chain(own) or ([(("class", c),) for c in sorted(bindings.classes)] if own == scope else [])
    for where in chain:
        owner = where[0][1]
        members, assigned = bindings.members.get(owner, {}), bindings.instance.get(owner, {})
        if node.attr in members:
            return where, _once(members[node.attr])
        if _is_self(node.value) and node.attr in assigned:
            return where, _once(assigned[node.attr])
    return None


def default_of(node: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> ast.expr | None:
    """The default value a function gives `param`, or None."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True):
        if arg.arg == param:
            return default
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if arg.arg == param:
            return kw_default
    return None


def class_spans(tree: ast.Module, bindings: Bindings) -> dict[str, list[tuple[int, int]]]:
    """Each module class, and each name or attribute bound to an instance of one (`_dump =
    Dumper()`, `self.dumper = Dumper()`), -> the lines of the class (for prefilters: calling
    the name runs what the class body calls)."""
    spans = {
        stmt.name: (min([stmt.lineno, *(d.lineno for d in stmt.decorator_list)]), stmt.end_lineno or stmt.lineno)
        for stmt in tree.body
        if isinstance(stmt, ast.ClassDef)
    }
    out = {name: [span] for name, span in spans.items()}
    bound = [bindings.module, *bindings.instance.values()]
    for table in bound:
        for name, values in table.items():
            for value in values:
                if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in spans:
                    out.setdefault(name, []).append(spans[value.func.id])
    return out


def arguments(
    node: ast.FunctionDef | ast.AsyncFunctionDef, params: tuple[str, ...], call: ast.Call
) -> dict[str, ast.expr]:
    """Parameter -> the expression `call` passes it (or its default), for the simple cases."""
    out: dict[str, ast.expr] = {}
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    if len(positional) < len(call.args):
        return out  # `f(*args)`: positions unknown
    for index, param in enumerate(params):
        value = next((k.value for k in call.keywords if k.arg == param), None)
        if value is None and index < len(positional):
            value = positional[index]
        if value is None:
            value = default_of(node, param)
        if value is not None:
            out[param] = value
    return out
