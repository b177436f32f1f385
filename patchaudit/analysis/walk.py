"""A read-only walk of a libcst tree: the hook calls of `module.visit`, in its order, with no node rebuilt.

libcst's traversal rebuilds every node it passes (each `_visit_and_replace_children` calls the
node's constructor and its validation), even for a visitor that changes nothing. This walk reads
the order in which each node type visits its fields from that method's own source, once per
process, and calls the same `visit_<Type>`, `leave_<Type>` and `visit_<Type>_<field>` hooks on the
same nodes in the same order. Whitespace and operator subtrees are passed over whole when no hook
names a type that can occur in them. Where the order cannot be read, `walker` answers None and
the caller visits with libcst.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence

import libcst as cst
from libcst import MaybeSentinel

__all__ = ["Walker", "nodes", "walker"]

Hook = Callable[[cst.CSTNode], None]

# The helpers of libcst._nodes.internal that visit one field: each calls the attribute hooks
# around the field, even an empty one (None, MaybeSentinel.DEFAULT, an empty sequence).
_VISITS = frozenset(
    {
        "visit_required",
        "visit_optional",
        "visit_sentinel",
        "visit_sequence",
        "visit_iterable",
        "visit_body_sequence",
        "visit_body_iterable",
    }
)


class _Unreadable(Exception):
    """A node type whose visiting order is not a plain constructor call of visit helpers."""


def _concrete(base: type) -> Iterator[type]:
    """`base` and every class below it that libcst can build."""
    seen: set[type] = set()
    todo = [base]
    while todo:
        kind = todo.pop()
        if kind in seen:
            continue
        seen.add(kind)
        todo.extend(kind.__subclasses__())
        if not inspect.isabstract(kind):
            yield kind


def _order(kind: type[cst.CSTNode]) -> tuple[tuple[str, bool], ...]:
    """(field, silent when None) in the order `kind._visit_and_replace_children` visits them.

    A field is silent when None where the method calls no visit helper for a None value (an
    f-string's `format_spec`): no attribute hook runs for it then.
    """
    function = _definition(kind._visit_and_replace_children)
    body = list(function.body)
    last = body.pop()
    if isinstance(last, ast.Return) and isinstance(last.value, ast.Name) and last.value.id == "self":
        return ()  # a leaf: nothing below it is visited
    named = body[-1] if body else None
    if (  # `ret = Node(...)` then `return ret`
        isinstance(last, ast.Return)
        and isinstance(last.value, ast.Name)
        and isinstance(named, ast.Assign)
        and [ast.dump(t) for t in named.targets] == [ast.dump(ast.Name(last.value.id, ast.Store()))]
    ):
        last = ast.Return(named.value)
        body.pop()
    aliases: dict[str, str] = {}
    for stmt in body:  # `names = self.names`
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Attribute)
            and isinstance(stmt.value.value, ast.Name)
            and stmt.value.value.id == "self"
        ):
            raise _Unreadable(kind.__name__)
        aliases[stmt.targets[0].id] = stmt.value.attr
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Call) and not last.value.args):
        raise _Unreadable(kind.__name__)
    fields = []
    for keyword in last.value.keywords:
        calls = [
            n
            for n in ast.walk(keyword.value)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id.startswith("visit")
        ]
        if not calls:
            continue
        for call in calls:
            if not _visits_field(call, keyword.arg, aliases):
                raise _Unreadable(kind.__name__)
        value = keyword.value
        silent = isinstance(value, ast.IfExp) and isinstance(value.orelse, ast.Constant) and value.orelse.value is None
        if not (silent or isinstance(value, ast.Call) or (isinstance(value, ast.IfExp) and len(calls) == 2)):
            raise _Unreadable(kind.__name__)
        fields.append((typing.cast(str, keyword.arg), silent))
    return tuple(fields)


_DEFINITIONS: dict[str, dict[int, ast.FunctionDef]] = {}


def _definition(method: Callable[..., object]) -> ast.FunctionDef:
    """The definition of a method of a libcst node class, read from its module's source.

    Each module is parsed once (a few modules define every node type), not each method's lines
    found and parsed on their own, which took most of the table's time."""
    code = getattr(method, "__code__", None)
    if code is None:
        raise _Unreadable(getattr(method, "__qualname__", repr(method)))
    found = _DEFINITIONS.get(code.co_filename)
    if found is None:
        module = ast.parse("".join(linecache.getlines(code.co_filename)))  # as inspect reads it
        found = _DEFINITIONS[code.co_filename] = {}
        for cls in module.body:
            for member in cls.body if isinstance(cls, ast.ClassDef) else ():
                if isinstance(member, ast.FunctionDef):
                    found[min([member.lineno, *(d.lineno for d in member.decorator_list)])] = member
    function = found.get(code.co_firstlineno)
    if function is None or function.name != code.co_name:
        raise _Unreadable(code.co_name)
    return function


def _visits_field(call: ast.Call, name: str | None, aliases: Mapping[str, str]) -> bool:
    """Whether `call` is `visit_x(self, "name", self.name, visitor)` (or the field through a local)."""
    if not isinstance(call.func, ast.Name) or call.func.id not in _VISITS or len(call.args) != 4 or call.keywords:
        return False
    parent, label, value, visitor = call.args
    read = (
        value.attr
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "self"
        else aliases.get(value.id)
        if isinstance(value, ast.Name)
        else None
    )
    return (
        isinstance(parent, ast.Name)
        and parent.id == "self"
        and isinstance(label, ast.Constant)
        and label.value == name == read
        and isinstance(visitor, ast.Name)
        and visitor.id == "visitor"
    )


def _classes(hint: object) -> set[type] | None:
    """The node types a field's annotation admits; None where it names something unresolved."""
    if isinstance(hint, type):
        if issubclass(hint, cst.CSTNode):
            return set(_concrete(hint))
        return set()
    if isinstance(hint, typing.ForwardRef | str):
        return None
    found: set[type] = set()
    for arg in typing.get_args(hint):
        inner = _classes(arg)
        if inner is None:
            return None
        found |= inner
    return found


class _Table:
    """Every libcst node type's visiting order, and the node types each field admits."""

    def __init__(self) -> None:
        kinds = list(_concrete(cst.CSTNode))
        self.orders = {kind: _order(kind) for kind in kinds}
        self.admits: dict[tuple[type, str], frozenset[type] | None] = {}
        for kind in kinds:
            hints = _hints(kind)
            for name, _ in self.orders[kind]:
                found = _classes(hints[name]) if hints is not None and name in hints else None
                self.admits[kind, name] = frozenset(found) if found is not None else None
        self.unseen: dict[frozenset[str], frozenset[type]] = {}

    def passed_over(self, kind: type, field: str, hidden: frozenset[type]) -> bool:
        """Whether everything `field` of `kind` admits is hidden."""
        admitted = self.admits[kind, field]
        return admitted is not None and admitted <= hidden

    def hidden(self, names: frozenset[str]) -> frozenset[type]:
        """The node types under which no type named in `names` can occur (nor they themselves)."""
        found = self.unseen.get(names)
        if found is None:
            seen = {kind for kind in self.orders if kind.__name__ in names}
            grown = True
            while grown:  # a type is seen when a field of it admits a seen type (or anything)
                grown = False
                for kind, order in self.orders.items():
                    if kind not in seen and any(
                        (admitted := self.admits[kind, name]) is None or not admitted.isdisjoint(seen)
                        for name, _ in order
                    ):
                        seen.add(kind)
                        grown = True
            found = self.unseen[names] = frozenset(self.orders) - seen
        return found


def _hints(kind: type) -> dict[str, object] | None:
    try:
        return typing.get_type_hints(kind)
    except Exception:  # an annotation that does not resolve: every field of this type is walked
        return None


_TABLE: list[_Table | None] = []


def _table() -> _Table | None:
    if not _TABLE:
        try:
            _TABLE.append(_Table())
        except (_Unreadable, OSError, TypeError, SyntaxError):  # no source, or a shape not read here
            _TABLE.append(None)
    return _TABLE[0]


class _Plan(typing.NamedTuple):
    visits: tuple[Hook, ...]
    leaves: tuple[Hook, ...]
    fields: tuple[str, ...]  # walked in order, with no attribute hook
    hooked: tuple[tuple[str, bool, tuple[Hook, ...], tuple[Hook, ...]], ...] | None  # with attribute hooks


class Walker:
    """Calls the hooks of batched visitors over a tree, as `module.visit` would."""

    def __init__(self, table: _Table, methods: Mapping[str, Sequence[Hook]]) -> None:
        self.table = table
        self.methods = methods
        # A subtree is passed over whole where no hook names a type that can occur in it.
        self.skip = table.hidden(frozenset(name.split("_")[1] for name in methods))
        self.plans: dict[type, _Plan] = {}
        self.spent = False  # walked, its hooks let go (see walk)

    def _plan(self, kind: type) -> _Plan:
        order = self.table.orders.get(kind)
        if order is None:
            raise TypeError(f"no visiting order for {kind.__name__}")
        name = kind.__name__
        hooks = {
            field: (
                tuple(self.methods.get(f"visit_{name}_{field}", ())),
                tuple(self.methods.get(f"leave_{name}_{field}", ())),
            )
            for field, _ in order
        }
        hooked = None
        if any(before or after for before, after in hooks.values()):
            hooked = tuple((field, silent, *hooks[field]) for field, silent in order)
        plan = _Plan(
            visits=tuple(self.methods.get(f"visit_{name}", ())),
            leaves=tuple(self.methods.get(f"leave_{name}", ())),
            fields=tuple(field for field, _ in order if not self.table.passed_over(kind, field, self.skip)),
            hooked=hooked,
        )
        self.plans[kind] = plan
        return plan

    def walk(self, root: cst.CSTNode, gates: Mapping[int, Walker] | None = None) -> None:
        """Call the hooks over `root`; at and below a node named in `gates` (by id), the hooks of the
        walker given there instead, until a node below names another.

        A walker walks once: it and the walkers in `gates` let go of their hooks when the walk ends."""
        if self.spent:
            raise RuntimeError("a walker walks once; make another for the next walk")
        closures: dict[int, Callable[[cst.CSTNode], None]] = {}
        used: list[Walker] = []

        def closure(walker: Walker) -> Callable[[cst.CSTNode], None]:
            found = closures.get(id(walker))
            if found is None:
                found = closures[id(walker)] = walker._visitor(gates or None, closure)
                used.append(walker)
            return found

        try:
            closure(self)(root)
        finally:
            # Each visit closure calls itself, a cycle only the collector frees. Dropping the hooks
            # it reaches leaves that cycle small: the visitors, and the trees they hold, go at once.
            closures.clear()
            for each in used:
                each.plans.clear()
                each.methods = {}
                each.spent = True

    def _visitor(
        self,
        gates: Mapping[int, Walker] | None,
        closure: Callable[[Walker], Callable[[cst.CSTNode], None]],
    ) -> Callable[[cst.CSTNode], None]:
        plans = self.plans
        skip = self.skip
        make = self._plan
        sentinel = MaybeSentinel.DEFAULT

        def visit(node: cst.CSTNode) -> None:
            if gates is not None:
                other = gates.get(id(node))
                if other is not None and other is not self:
                    closure(other)(node)
                    return
            plan = plans.get(node.__class__)
            if plan is None:
                plan = make(node.__class__)
            for method in plan.visits:
                method(node)
            if plan.hooked is None:
                for field in plan.fields:
                    child = getattr(node, field)
                    kind = child.__class__
                    if kind is tuple or kind is list:
                        for each in child:
                            if each.__class__ not in skip:
                                visit(each)
                    elif child is not None and child is not sentinel and kind not in skip:
                        visit(child)
            else:
                for field, silent, before, after in plan.hooked:
                    child = getattr(node, field)
                    if silent and child is None:
                        continue
                    for method in before:
                        method(node)
                    kind = child.__class__
                    if kind is tuple or kind is list:
                        for each in child:
                            if each.__class__ not in skip:
                                visit(each)
                    elif child is not None and child is not sentinel and kind not in skip:
                        visit(child)
                    for method in after:
                        method(node)
            for method in plan.leaves:
                method(node)

        return visit


def walker(methods: Mapping[str, Sequence[Hook]]) -> Walker | None:
    """A walker for these hooks, or None where libcst's node types could not be read."""
    table = _table()
    return Walker(table, methods) if table is not None else None


_UNDER: dict[frozenset[type] | None, tuple[dict[type, tuple[str, ...]], frozenset[type]]] = {}


def nodes(root: cst.CSTNode, kinds: tuple[type, ...] | None = None, opaque: tuple[type, ...] = ()) -> list[cst.CSTNode]:
    """The nodes of these types under `root`, itself included, in the order `root.visit` meets them
    (every node where kinds is None); subtrees that cannot hold one are not entered, nor what is
    below a node of an `opaque` type (met itself, as a visitor whose `visit_Lambda` returns False)."""
    table = _table()
    if table is None:
        return _visited(root, kinds, opaque)
    key = frozenset(kinds) if kinds is not None else None
    plan = _UNDER.get(key)
    if plan is None:
        hidden = table.hidden(frozenset(kind.__name__ for kind in (kinds if kinds is not None else table.orders)))
        fields = {
            kind: tuple(f for f, _ in order if not table.passed_over(kind, f, hidden))
            for kind, order in table.orders.items()
        }
        plan = _UNDER[key] = (fields, hidden)
    fields, hidden = plan
    out: list[cst.CSTNode] = []
    wanted = kinds if kinds is not None else cst.CSTNode
    sentinel = MaybeSentinel.DEFAULT

    # Depth first, children in field order, by a stack of its own: a recursive closure would be a
    # cycle that keeps `out`, and the trees under it, until the collector runs.
    todo = [root]
    while todo:
        node = todo.pop()
        if isinstance(node, wanted):
            out.append(node)
        if opaque and isinstance(node, opaque):
            continue
        below: list[cst.CSTNode] = []
        for field in fields[node.__class__]:
            child = getattr(node, field)
            kind = child.__class__
            if kind is tuple or kind is list:
                below.extend(each for each in child if each.__class__ not in hidden)
            elif child is not None and child is not sentinel and kind not in hidden:
                below.append(child)
        below.reverse()
        todo.extend(below)
    return out


def _visited(root: cst.CSTNode, kinds: tuple[type, ...] | None, opaque: tuple[type, ...] = ()) -> list[cst.CSTNode]:
    """`nodes` through libcst's own traversal."""
    out: list[cst.CSTNode] = []
    wanted = kinds if kinds is not None else cst.CSTNode

    class _All(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, wanted):
                out.append(node)
            return not isinstance(node, opaque)

    root.visit(_All())
    return out
