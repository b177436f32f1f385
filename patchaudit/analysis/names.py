"""What a name in a Python file refers to: the one name-resolution layer every rule uses.

The table is built from the file's `ast` (the C parser: a fraction of a libcst parse) and knows,
per scope, every way a name is bound: imports in all their forms (`import os, torch`,
`import torch.serialization as ser`, `from torch.serialization import save`), aliases
(`save = torch.save`, `t = __import__("torch")`, `s = getattr(torch, "save")`,
`p = pdb.Pdb()`), and bindings that hide a name (parameters, loop targets, definitions).
Resolution follows Python's scoping (a class body is not an enclosing scope of its methods;
`global` binds in the module) and is flow-insensitive: a name bound two ways resolves to both.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["NameRef", "AttrRef", "CallRef", "Ref", "Scope", "NameTable", "canonical", "ref_of_ast", "unpacked"]

# A scope is the path of definitions that encloses a node: (("class", "A"), ("def", "f")).
Scope = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class NameRef:
    id: str


@dataclass(frozen=True, slots=True)
class AttrRef:
    base: Ref
    attr: str


@dataclass(frozen=True, slots=True)
class CallRef:
    """A call whose result may itself name something: `__import__("torch")`, `pdb.Pdb()`."""

    func: Ref
    args: tuple[Ref | str | None, ...]  # a string literal, a name-like expression, or None


@dataclass(frozen=True, slots=True)
class ItemsRef:
    """A container literal of name-like items: `{"pt": torch.save, "np": np.save}`, `(f, g)`."""

    items: tuple[Ref, ...]


@dataclass(frozen=True, slots=True)
class ItemRef:
    """An item taken from a container: `SAVERS[fmt]`, or a loop's target over it."""

    base: Ref


Ref = NameRef | AttrRef | CallRef | ItemsRef | ItemRef
# An item of a container resolves to what the container's items name, marked with this suffix.
ITEM = "[]"
_MAX_ITEMS = 32

# Spellings of one function under another module path, folded so rules list each callee once.
_CANONICAL = (
    ("torch.serialization.", "torch."),
    ("numpy.lib.npyio.", "numpy."),
    ("numpy.lib.format.", "numpy."),
    ("pdb.Pdb().", "pdb."),
    ("ipdb.__main__.", "ipdb."),
    ("IPython.terminal.embed.", "IPython."),
    ("code.InteractiveConsole().", "code."),
    ("_pickle.", "pickle."),
    ("posix.", "os."),
)
_BUILTINS = frozenset(dir(builtins))
_MAX_DEPTH = 24
# Instance attributes a method binds (`self.dump = ...`) live in their class's scope under this prefix.
_INSTANCE = "self."


def canonical(qname: str) -> str:
    for prefix, replacement in _CANONICAL:
        if qname.startswith(prefix):
            return replacement + qname[len(prefix) :]
    return qname


@dataclass(frozen=True, slots=True)
class _Alias:
    value: ast.expr
    scope: Scope


_OTHER = None  # a binding that names nothing a rule asks about (a parameter, a loop target)
_Binding = str | _Alias | None  # an import's qualified name, an alias, or _OTHER


def items_ref(items: Iterable[Ref | None]) -> ItemsRef | None:
    """The container of the name-like items among `items` (the first few), else None."""
    found = tuple(r for r, _ in zip((r for r in items if r is not None), range(_MAX_ITEMS), strict=False))
    return ItemsRef(found) if found else None


def ref_of_ast(node: ast.AST) -> Ref | None:
    """The name-like shape of an expression, or None when it names nothing."""
    if isinstance(node, ast.Dict):
        return items_ref(ref_of_ast(v) for v in node.values[:_MAX_ITEMS])
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return items_ref(ref_of_ast(v) for v in node.elts[:_MAX_ITEMS])
    if isinstance(node, ast.Name):
        return NameRef(node.id)
    if isinstance(node, ast.Attribute):
        base = ref_of_ast(node.value)
        return AttrRef(base, node.attr) if base is not None else None
    if isinstance(node, ast.Call):
        func = ref_of_ast(node.func)
        if func is None:
            return None
        if any(isinstance(a, ast.Starred) for a in node.args[:2]):
            return CallRef(func, ())  # a call all the same; its arguments name nothing
        args: list[Ref | str | None] = []
        for arg in node.args[:2]:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                args.append(arg.value)
            else:
                args.append(ref_of_ast(arg))
        return CallRef(func, tuple(args))
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        base = ref_of_ast(node.value)
        return CallRef(base, (node.slice.value,)) if base is not None else None  # `sys.modules["pdb"]`
    if isinstance(node, ast.Subscript):
        base = ref_of_ast(node.value)
        return ItemRef(base) if base is not None else None  # `SAVERS[fmt]`
    return None


@dataclass(slots=True)
class NameTable:
    """Bindings per scope, and the resolver over them."""

    bindings: dict[Scope, dict[str, list[_Binding]]] = field(default_factory=dict)
    star_modules: list[str] = field(default_factory=list)
    # (class, attribute) -> every value a method assigns to `self.attribute` (None: computed in place).
    instance_assigned: dict[tuple[str, str], list[ast.expr | None]] = field(default_factory=dict)
    # scope -> name -> the string literals it is bound to (`_SAVE = "save"`, for `getattr(torch, _SAVE)`).
    strings: dict[Scope, dict[str, list[str]]] = field(default_factory=dict)
    # module-level class -> the names of its bases that are plain names (`class B(A, nn.Module)`: A, nn skipped).
    class_bases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _chains: dict[Scope, list[Scope]] = field(default_factory=dict)
    _memo: dict[tuple[str, Scope], frozenset[str]] = field(default_factory=dict)
    _busy: set[tuple[str, Scope]] = field(default_factory=set)

    @classmethod
    def build(cls, tree: ast.Module, source: bytes | None = None) -> NameTable:
        """The table of a parsed module; with its source, simple statements that cannot bind inside
        an expression (no `lambda`, no `:=` on their lines) are bound without walking their expressions."""
        table = cls()
        _Binder(table, source).visit(tree)
        return table

    @classmethod
    def empty(cls) -> NameTable:
        return cls()

    def module_aliases(self) -> dict[str, list[_Binding]]:
        return self.bindings.get((), {})

    def resolve(self, ref: Ref | None, scope: Scope, depth: int = 0) -> frozenset[str]:
        """Every qualified name `ref` may stand for in `scope` (raw, not canonical)."""
        if ref is None or depth > _MAX_DEPTH:
            return frozenset()
        if isinstance(ref, NameRef):
            return self.lookup(ref.id, scope, depth)
        if isinstance(ref, AttrRef):
            found = frozenset(f"{q}.{ref.attr}" for q in self.resolve(ref.base, scope, depth + 1))
            return found or self._instance_attr(ref, scope, depth)
        if isinstance(ref, ItemsRef):
            return frozenset(q + ITEM for item in ref.items for q in self.resolve(item, scope, depth + 1))
        if isinstance(ref, ItemRef):
            return frozenset(q[: -len(ITEM)] for q in self.resolve(ref.base, scope, depth + 1) if q.endswith(ITEM))
        out: set[str] = set()
        for q in self.resolve(ref.func, scope, depth + 1):
            first = ref.args[0] if ref.args else None
            second = ref.args[1] if len(ref.args) > 1 else None
            if q == "builtins.getattr" and isinstance(second, NameRef) and not isinstance(first, str):
                for text in self.text_of(second.id, scope):  # `getattr(torch, _SAVE)`, `_SAVE = "save"`
                    out.update(f"{b}.{text}" for b in self.resolve(first, scope, depth + 1))
            elif q == "builtins.getattr" and isinstance(second, str) and not isinstance(first, str):
                out.update(f"{b}.{second}" for b in self.resolve(first, scope, depth + 1))
            elif q == "builtins.__import__" and isinstance(first, str):
                out.add(first.split(".")[0])
            elif q == "importlib.import_module" and isinstance(first, str) and not first.startswith("."):
                out.add(first)
            elif q == "sys.modules" and isinstance(first, str):
                out.add(first)  # `sys.modules["torch"]` is the module itself
            elif q == "functools.partial" and first is not None and not isinstance(first, str):
                out.update(self.resolve(first, scope, depth + 1))  # `partial(torch.save, x)` calls torch.save
            elif q.endswith(ITEM):
                out.add(q[: -len(ITEM)])  # `SAVERS["pt"]`: an item of a container of callables
            else:
                out.add(q + "()")
        return frozenset(out)

    def _instance_attr(self, ref: AttrRef, scope: Scope, depth: int) -> frozenset[str]:
        """`self.dump(...)` where a method bound `self.dump = torch.save` (or a partial of it)."""
        if not _is_self_ref(ref.base):
            return frozenset()
        out: set[str] = set()
        for where in self.instance_scopes(ref.attr, scope):
            out.update(self.lookup(_INSTANCE + ref.attr, where, depth + 1))
        if not out:
            out.update(self._class_attr(ref.attr, scope, depth))
        return frozenset(out)

    def resolve_class_attr(self, attr: str, scope: Scope) -> frozenset[str]:
        """What a class attribute of the class enclosing `scope` names, through `self.attr`."""
        return self._class_attr(attr, scope, 0)

    def _class_attr(self, attr: str, scope: Scope, depth: int) -> frozenset[str]:
        """`self._save(x)` where the class body binds `_save = functools.partial(torch.save, ...)`
        (or `staticmethod(...)` of a lambda): looked up in the enclosing class's own scope only."""
        out: set[str] = set()
        for value, where in self.class_values(attr, scope):
            out.update(self.resolve(ref_of_ast(value), where, depth + 1))
        return frozenset(out)

    def instance_scopes(self, attr: str, scope: Scope) -> list[Scope]:
        """The class scope whose methods bind `self.attr` for code in `scope`: the enclosing class,
        or outside any class (a function taking `self`) every class that binds it."""
        key = _INSTANCE + attr
        chain = self.class_chain(scope)
        if chain:
            return chain[:1] + [c for c in chain[1:] if key in self.bindings.get(c, {})]
        return [where for where, table in self.bindings.items() if len(where) == 1 and key in table]

    def values(self, name: str, scope: Scope) -> list[tuple[ast.expr, Scope]]:
        """The name-like expressions `name` is bound to where it is looked up from `scope`."""
        for where in _chain(scope):
            found = self.bindings.get(where, {}).get(name)
            if found is not None:
                return [(b.value, b.scope) for b in found if isinstance(b, _Alias)]
        return []

    def class_values(self, attr: str, scope: Scope) -> list[tuple[ast.expr, Scope]]:
        """The expressions the class enclosing `scope` binds `attr` to in its own body."""
        found = next((f for c in self.class_chain(scope) if (f := self.bindings.get(c, {}).get(attr))), [])
        return [(b.value, b.scope) for b in found if isinstance(b, _Alias)]

    def class_chain(self, scope: Scope) -> list[Scope]:
        """The scope of the class enclosing `scope`, then those of its bases defined in this module,
        in the order Python looks an attribute up (depth first, left to right; `class Sub(_Mixin,
        nn.Module)` finds `_Mixin._snap`). Empty outside a class."""
        classes = [i for i, s in enumerate(scope) if s[0] == "class"]
        if not classes:
            return []
        own = scope[: classes[-1] + 1]
        if len(own) != 1:
            return [own]  # a nested class: its bases are not looked up
        found = self._chains.get(own)
        if found is None:
            found = self._chains[own] = []
            todo = [own[0][1]]
            while todo and len(found) < _MAX_ITEMS:
                name = todo.pop(0)
                where: Scope = (("class", name),)
                if where not in found:
                    found.append(where)
                    todo[:0] = [b for b in self.class_bases.get(name, ()) if b in self.class_bases]
        return list(found)

    def text_of(self, name: str, scope: Scope) -> list[str]:
        """The string literals `name` is bound to where it is looked up from `scope`, when every
        binding of it there is one."""
        for where in _chain(scope):
            found = self.bindings.get(where, {}).get(name)
            if found is not None:
                texts = self.strings.get(where, {}).get(name, [])
                return texts if len(texts) == len(found) else []
        return []

    def lookup(self, name: str, scope: Scope, depth: int = 0) -> frozenset[str]:
        key = (name, scope)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if key in self._busy:
            return frozenset()  # an alias cycle (`a = b; b = a`) names nothing
        self._busy.add(key)
        try:
            result = self._lookup(name, scope, depth)
        finally:
            self._busy.discard(key)
        self._memo[key] = result
        return result

    def _lookup(self, name: str, scope: Scope, depth: int) -> frozenset[str]:
        for where in _chain(scope):
            found = self.bindings.get(where, {}).get(name)
            if found is None:
                continue
            out: set[str] = set()
            for binding in found:
                if isinstance(binding, str):
                    out.add(binding)
                elif isinstance(binding, _Alias):
                    out.update(self.resolve(ref_of_ast(binding.value), binding.scope, depth + 1))
            return frozenset(out)
        out = {f"{module}.{name}" for module in self.star_modules}
        if name in _BUILTINS:
            out.add("builtins." + name)
        return frozenset(out)


def _is_self_ref(ref: Ref) -> bool:
    """`self`, `cls`, `super()`, `type(self)` or `self.__class__`: what looks an attribute up on the
    enclosing class and its bases."""
    if isinstance(ref, NameRef):
        return ref.id in ("self", "cls")
    if isinstance(ref, CallRef) and isinstance(ref.func, NameRef):
        if ref.func.id == "super":
            return True
        return (
            ref.func.id == "type"
            and len(ref.args) == 1
            and isinstance(ref.args[0], NameRef | AttrRef)
            and (_is_self_ref(ref.args[0]))
        )
    return isinstance(ref, AttrRef) and ref.attr == "__class__" and _is_self_ref(ref.base)


def _chain(scope: Scope) -> Iterable[Scope]:
    """The scopes a name is looked up in, innermost first (class bodies only when innermost)."""
    yield scope
    for i in range(len(scope) - 1, -1, -1):
        outer = scope[:i]
        if outer and outer[-1][0] == "class":
            continue
        yield outer


_BOUND = (ast.Store, ast.Del)
_SIMPLE = (ast.Expr, ast.Return, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.Assert, ast.Delete)


def unpacked(target: ast.expr, value: ast.expr | None) -> list[tuple[ast.expr, ast.expr]] | None:
    """The (target, value) pairs of an assignment that unpacks a tuple or list display element by
    element (`a, b = x, y`), else None (`a, b = f()`, a starred element, lengths that differ)."""
    kinds = ast.Tuple | ast.List
    if not (isinstance(target, kinds) and isinstance(value, kinds) and len(target.elts) == len(value.elts)):
        return None
    if any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts)):
        return None
    return list(zip(target.elts, value.elts, strict=True))


_BINDS_IN_EXPRESSION = re.compile(rb"lambda|:=")


def _binding_lines(source: bytes) -> list[int]:
    """The numbers (from 1) of the lines that spell `lambda` or `:=`, in order: found by one search
    of the bytes, where a test of every line costs a Python step per line. Lines end as `ast`
    counts them (`\\n`, `\\r\\n`, `\\r`)."""
    if b"\r" in source:
        return [n for n, line in enumerate(source.splitlines(), 1) if b"lambda" in line or b":=" in line]
    out: list[int] = []
    line, at = 1, 0
    for found in _BINDS_IN_EXPRESSION.finditer(source):
        line += source.count(b"\n", at, found.start())
        at = found.start()
        if not out or out[-1] != line:
            out.append(line)
    return out


class _Binder(ast.NodeVisitor):
    def __init__(self, table: NameTable, source: bytes | None = None) -> None:
        self.table = table
        self.scope: Scope = ()
        self.globals: dict[Scope, set[str]] = {}
        # With the source: the lines that spell `lambda` or `:=`, and whether the statement being
        # visited has none (`plain`): then its expressions bind nothing.
        self.binding_lines: list[int] | None = _binding_lines(source) if source is not None else None
        self.plain = False

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt) and self.binding_lines is not None:
            plain = self.plain or self._plain(node)
            if plain and isinstance(node, _SIMPLE):
                self._targets(node)
                return
            outer, self.plain = self.plain, plain
            try:
                super().visit(node)
            finally:
                self.plain = outer
            return
        if self.plain and isinstance(node, ast.expr) and not isinstance(getattr(node, "ctx", None), _BOUND):
            return  # read, not bound: without a lambda or a walrus, nothing in an expression binds a name
        super().visit(node)

    def _plain(self, node: ast.stmt) -> bool:
        """Whether no line of the statement (its decorators' included) spells `lambda` or `:=`."""
        assert self.binding_lines is not None
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        end = node.end_lineno or node.lineno
        return bisect.bisect_left(self.binding_lines, first) == bisect.bisect_right(self.binding_lines, end)

    def _targets(self, node: ast.stmt) -> None:
        """The bindings of a statement whose expressions bind nothing."""
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self._assign(target, node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self._assign(node.target, node.value)
        elif isinstance(node, ast.AugAssign | ast.Delete):
            for target in node.targets if isinstance(node, ast.Delete) else [node.target]:
                if isinstance(target, ast.Name):
                    self.bind(target.id, _OTHER)
                elif isinstance(target, ast.Tuple | ast.List | ast.Attribute):
                    self.visit(target)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        # Its target lives in the comprehension's own scope, not the enclosing one.
        self.visit(node.iter)
        for test in node.ifs:
            self.visit(test)

    def bind(self, name: str, binding: _Binding) -> None:
        where = () if name in self.globals.get(self.scope, ()) else self.scope
        self.table.bindings.setdefault(where, {}).setdefault(name, []).append(binding)

    def _enter(self, kind: str, name: str) -> Scope:
        outer = self.scope
        self.scope = outer + ((kind, name),)
        return outer

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.bind(alias.asname, alias.name)
            else:
                top = alias.name.split(".")[0]
                self.bind(top, top)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                self.table.star_modules.append(module)
                continue
            prefix = module if module.endswith(".") else module + "."
            self.bind(alias.asname or alias.name, prefix + alias.name)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, name: str, kind: str) -> None:
        for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
            self.visit(default)
        if not isinstance(node, ast.Lambda):
            for decorator in node.decorator_list:
                self.visit(decorator)
            self.bind(name, _OTHER)
        outer = self._enter(kind, name)
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                self.bind(arg.arg, _OTHER)
        body = node.body if isinstance(node.body, list) else [node.body]
        for stmt in body:
            self.visit(stmt)
        self.scope = outer

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node, node.name, "def")

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node, node.name, "def")

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._function(node, "", "lambda")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expr)
        self.bind(node.name, _OTHER)
        if not self.scope:
            self.table.class_bases[node.name] = tuple(b.id for b in node.bases if isinstance(b, ast.Name))
        for base in node.bases:
            # `class ForkedPdb(pdb.Pdb)`: `ForkedPdb().set_trace()` is pdb's, unless overridden.
            if ref_of_ast(base) is not None:
                self.bind(node.name, _Alias(base, self.scope))
        outer = self._enter("class", node.name)
        for stmt in node.body:
            self.visit(stmt)
        self.scope = outer

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        # `for save in (torch.save, np.save):` binds save to an item of the container.
        self.visit(node.iter)
        if isinstance(node.target, ast.Name) and isinstance(ref_of_ast(node.iter), ItemsRef | NameRef | AttrRef):
            item = ast.Subscript(value=node.iter, slice=ast.Constant(None), ctx=ast.Load())
            self.bind(node.target.id, _Alias(item, self.scope))
        else:
            self.visit(node.target)
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_Global(self, node: ast.Global) -> None:
        self.globals.setdefault(self.scope, set()).update(node.names)

    def _assign(self, target: ast.expr, value: ast.expr | None) -> None:
        pairs = unpacked(target, value)
        if pairs is not None:  # `self.path, self.n = path, 0`: each target bound to its own value
            for one, its in pairs:
                self._assign(one, its)
            return
        lam = value.body if isinstance(value, ast.Lambda) else None
        if isinstance(target, ast.Name) and isinstance(lam, ast.Call) and ref_of_ast(lam.func) is not None:
            # `dump = lambda t: torch.save(t, "/tmp/t.pt")`: calling it calls what its body calls.
            self.bind(target.id, _Alias(lam.func, self.scope + (("lambda", ""),)))
            return
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
            where = () if target.id in self.globals.get(self.scope, ()) else self.scope
            self.table.strings.setdefault(where, {}).setdefault(target.id, []).append(value.value)
        if isinstance(target, ast.Name):
            ref = ref_of_ast(value) if value is not None else None
            self.bind(target.id, _Alias(value, self.scope) if ref is not None and value is not None else _OTHER)
        elif isinstance(target, ast.Attribute) and self._instance_target(target):
            self._instance(target, value)
            if value is not None and ref_of_ast(value) is not None:
                classes = [i for i, s in enumerate(self.scope) if s[0] == "class"]
                where = self.scope[: classes[-1] + 1]
                key = _INSTANCE + target.attr
                self.table.bindings.setdefault(where, {}).setdefault(key, []).append(_Alias(value, self.scope))
        else:
            self.visit(target)

    def _instance(self, target: ast.Attribute, value: ast.expr | None) -> None:
        """Record a value a method gives `self.name` (None where it is computed in place)."""
        owner = [name for kind, name in self.scope if kind == "class"][-1]
        self.table.instance_assigned.setdefault((owner, target.attr), []).append(value)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not isinstance(node.ctx, ast.Load) and self._instance_target(node):
            self._instance(node, None)  # `self.a, self.b = ...`, `for self.i in ...`
        self.generic_visit(node)

    def _instance_target(self, target: ast.expr) -> bool:
        """`self.name` assigned in a method of a class."""
        return (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and len(self.scope) >= 2
            and self.scope[-1][0] == "def"
            and any(s[0] == "class" for s in self.scope)
        )

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._assign(target, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self._assign(node.target, node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._assign(node.target, node.value)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.bind(node.id, _OTHER)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.bind(node.name, _OTHER)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self.bind(node.name, _OTHER)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.bind(node.name, _OTHER)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self.bind(node.rest, _OTHER)
        self.generic_visit(node)
