"""The one analysis of a module that every rule asks: names, helpers, constants.

Built from the file's `ast` (always whole, even where the engine hands libcst a reduced copy) and
computed lazily, so a rule that never asks costs nothing:

- `names`: what a name stands for (`names.NameTable`: imports, aliases, `getattr`, `partial`,
  lambdas, subclasses);
- `helper(name, scope)`: what a function or method defined in this module calls, one level deep
  (`def _dump(t, path): torch.save(t, path)`; then `_dump(x, "/tmp/x")` is a dump at the call
  site);
- `constant(name, scope)`: the value of a module- or class-level name bound once to a literal
  (`DEBUG_TOKENS = 5`, `class C: N = 5` read as `C.N` or `self.N`).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass, field

from patchaudit.analysis import instances
from patchaudit.analysis.names import NameTable, Scope, canonical, ref_of_ast
from patchaudit.analysis.paths import TEMP_DIR, fixed_path_ast
from patchaudit.analysis.trees import called_name, statements, walk

__all__ = [
    "Inner",
    "Helper",
    "ModuleAnalysis",
    "short_helper_names",
    "short_helpers",
    "NOT_CONSTANT",
    "constant_value",
]

NOT_CONSTANT = object()


@dataclass(frozen=True, slots=True)
class Inner:
    """A call inside a helper: what it may resolve to, and its positional and keyword arguments."""

    names: frozenset[str]
    args: tuple[ast.expr, ...]
    keywords: tuple[tuple[str, ast.expr], ...]
    line: int
    callee: ast.expr | None = None  # what the call runs, as written (`dbg.set_trace`)

    def arg(self, position: int, keyword: str) -> ast.expr | None:
        for name, value in self.keywords:
            if name == keyword:
                return value
        return self.args[position] if len(self.args) > position else None


@dataclass(slots=True)
class Helper:
    """A function of this module: its parameters (in order) and, once asked, the calls it makes."""

    name: str
    params: tuple[str, ...]
    is_method: bool
    node: ast.FunctionDef | ast.AsyncFunctionDef
    scope: Scope
    _calls: tuple[Inner, ...] | None = None
    _own: tuple[tuple[Inner, ...], tuple[tuple[ast.Call, Helper], ...]] | None = None  # own calls; helpers called


_SHORT_HELPER = 3  # statements of a helper whose returned value a caller may read as its own


@dataclass(slots=True)
class ModuleAnalysis:
    tree: ast.Module
    names: NameTable
    _helpers: dict[Scope, dict[str, Helper]] | None = None
    _constants: dict[Scope, dict[str, object]] | None = None
    _bindings: instances.Bindings | None = None
    _constructions: dict[str, list[ast.Call]] | None = None
    _lambdas: dict[int, Helper] = field(default_factory=dict)

    @classmethod
    def build(cls, tree: ast.Module, names: NameTable) -> ModuleAnalysis:
        return cls(tree=tree, names=names)

    def bindings(self) -> instances.Bindings:
        """The module's classes and what its names, class names and `self.X` are bound to."""
        if self._bindings is None:
            self._bindings = instances.Bindings.build(self.tree, self.names)
        return self._bindings

    # -- helpers -------------------------------------------------------------------------------

    def helpers(self) -> dict[Scope, dict[str, Helper]]:
        """Scope (the module `()`, or a class) -> the functions defined directly in it."""
        if self._helpers is None:
            self._helpers = {}
            self._collect(self.tree.body, ())
        return self._helpers

    def _collect(self, body: list[ast.stmt], scope: Scope) -> None:
        for stmt in body:
            if isinstance(stmt, ast.ClassDef) and not scope:
                self._collect(stmt.body, (("class", stmt.name),))
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = scope + (("def", stmt.name),)
                a = stmt.args
                params = tuple(p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs])
                is_method = bool(scope) and bool(params) and params[0] in ("self", "cls")
                table = self._helpers.setdefault(scope, {})  # type: ignore[union-attr]
                table[stmt.name] = Helper(stmt.name, params[1:] if is_method else params, is_method, stmt, inner)

    def calls(self, helper: Helper) -> tuple[Inner, ...]:
        """The calls a helper's body makes, each with what it may resolve to (computed once).

        A call of another helper of the module brings that helper's calls along (up to three
        levels): `_dump` calling `_write` calling `torch.save` calls `torch.save`, its arguments
        seen as `_dump` passes them (`_write(t, "/tmp/x")` then `torch.save(t, dest)`: `"/tmp/x"`).
        The answer is the same whichever helper is asked first: a helper reached again below
        itself brings nothing more, and a helper's own calls are what is kept between questions.
        """
        if helper._calls is None:
            helper._calls = self._through(helper, 0, (helper,))
        return helper._calls

    def _through(self, helper: Helper, depth: int, path: tuple[Helper, ...]) -> tuple[Inner, ...]:
        """A helper's own calls and, below `depth` 2, those of the helpers it calls (not on `path`)."""
        if helper._own is None:
            made = [node for node in walk(helper.node) if isinstance(node, ast.Call)]
            called = [(call, self.helper(self._unwrapped(call.func, helper.scope), helper.scope)) for call in made]
            helper._own = (tuple(self._calls(made, helper.scope)), tuple((c, h) for c, h in called if h is not None))
        own, helpers = helper._own
        if depth >= 2:
            return own
        deeper: list[Inner] = []
        for call, inner in helpers:
            if all(inner is not seen for seen in path):
                given = instances.arguments(inner.node, inner.params, call)
                deeper.extend(_bound(c, given) for c in self._through(inner, depth + 1, (*path, inner)))
        return own + tuple(deeper)

    def _calls(self, made: list[ast.Call], scope: Scope) -> list[Inner]:
        """Each call of a helper's body (`made`, in ast.walk's order) with what it may resolve to."""
        out = []
        for node in made:
            callee = self._unwrapped(node.func, scope)
            raw = self.names.resolve(ref_of_ast(callee), scope)
            found = raw | {canonical(q) for q in raw}
            if not found and isinstance(callee, ast.Attribute):
                found = frozenset({"." + callee.attr})  # a method of something unknown
            keywords = tuple((k.arg, k.value) for k in node.keywords if k.arg is not None)
            out.append(Inner(frozenset(found), tuple(node.args), keywords, node.lineno, node.func))
        return out

    def _unwrapped(self, func: ast.expr, scope: Scope) -> ast.expr:
        """What `functools.partial(f, ...)(...)` runs: f."""
        if not (isinstance(func, ast.Call) and func.args) or isinstance(func.args[0], ast.Starred):
            return func
        return func.args[0] if "functools.partial" in self.names.resolve(ref_of_ast(func.func), scope) else func

    def helper(self, func: ast.expr | None, scope: Scope) -> Helper | None:
        """The helper a call's callee names: `name(...)` (a module function) or `self.name(...)`."""
        hidden = isinstance(func, ast.Name) and any(
            func.id in self.names.bindings.get(scope[:i], {}) for i in range(1, len(scope) + 1)
        )
        if isinstance(func, ast.Name) and not hidden:
            found = self.helpers().get((), {}).get(func.id)
            if found is not None:
                return found
        if isinstance(func, ast.Attribute) and instances.is_self_like(func.value):
            found = self.method_of(scope, func.attr)
            if found is not None:
                return found
        # A class of the module, an instance of one, or an instance's method.
        found_method = instances.method(self.names, self.bindings(), func, scope) if func is not None else None
        if found_method is None:
            return self._lambda(func, scope) if func is not None else None
        owner, name = found_method
        return self.method_of((("class", owner),), name)

    def _lambda(self, func: ast.expr, scope: Scope) -> Helper | None:
        """A lambda a name or a class attribute is bound to (`_dump = lambda t, p: torch.save(t, p)`,
        `_dump = staticmethod(lambda ...)`), as a helper whose body returns the lambda's."""
        if isinstance(func, ast.Name):
            values = self.names.values(func.id, scope)
        elif isinstance(func, ast.Attribute) and instances.is_self_like(func.value):
            values = self.names.class_values(func.attr, scope)
        else:
            return None
        for value, where in values:
            method = True
            if isinstance(value, ast.Call) and len(value.args) == 1 and called_name(value.func) == "staticmethod":
                value, method = value.args[0], False
            if isinstance(value, ast.Lambda):
                return self._lambda_helper(value, where, method and bool(where) and where[-1][0] == "class")
            made = self._made_by(value)
            if made is not None:
                return made
        return None

    def _made_by(self, value: ast.expr) -> Helper | None:
        """The function a call of a module function returns (`_trace = _make_writer(root)`, where
        `_make_writer` defines `_write` and returns it): a closure run as a helper."""
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
            return None
        if id(value) in self._lambdas:
            return self._lambdas[id(value)]  # the closure of this call, already read
        factory = self.helpers().get((), {}).get(value.func.id)
        made = _returned_function(factory.node) if factory is not None else None
        if factory is None or made is None:
            return None
        if isinstance(made, ast.Lambda):
            return self._lambda_helper(made, factory.scope, False)
        a = made.args
        params = tuple(p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs])
        given = dict(zip(factory.params, value.args, strict=False))
        given.update({k.arg: k.value for k in value.keywords if k.arg is not None})
        # `_make_dumper("/tmp/x")`: the closure's free names are what the factory was given
        made = _bound_free(made, {n: v for n, v in given.items() if isinstance(v, ast.Constant)}, params)
        found = Helper(made.name, params, False, made, factory.scope + (("def", made.name),))
        self._lambdas[id(value)] = found
        return found

    def _lambda_helper(self, node: ast.Lambda, where: Scope, is_method: bool) -> Helper:
        found = self._lambdas.get(id(node))
        if found is None:
            body = ast.copy_location(ast.Return(value=node.body), node.body)
            func = ast.FunctionDef(name="<lambda>", args=node.args, body=[body], decorator_list=[], returns=None)
            func = ast.copy_location(func, node)
            a = node.args
            params = tuple(p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs])
            found = Helper("<lambda>", params[1:] if is_method else params, is_method, func, where + (("lambda", ""),))
            self._lambdas[id(node)] = found
        return found

    def method_of(self, scope: Scope, name: str) -> Helper | None:
        """The method `name` that `self.name` runs in `scope`: the enclosing class's own, else the
        first of its bases in this module that defines it (in a function outside any class that
        takes `self`, a helper cut out of a method, the first class of the module defining it)."""
        table = self.helpers()
        chain = self.names.class_chain(scope)
        if not chain and any(kind == "def" for kind, _ in scope):
            chain = [(("class", c),) for c in sorted(self.bindings().classes)]  # a function taking `self`
        return next((h for c in chain if (h := table.get(c, {}).get(name))), None)

    def bound_path(self, node: ast.expr, scope: Scope, depth: int = 0) -> str | None:
        """The literal start of the path `NAME`, `Class.NAME` or `self.NAME` holds, when bound once,
        or that `helper(...)` returns."""
        if isinstance(node, ast.Call):
            return self.returned_path(node.func, scope, depth) if depth <= 4 else None
        value = instances.bound_value(self.names, self.bindings(), node, scope)
        if value is None or depth > 4:
            return None
        found = fixed_path_ast(value, bound=lambda n: self.bound_path(n, (), depth + 1))
        owner = instances.owner_of(self.names, self.bindings(), node, scope) if found is None else None
        if owner is not None and not isinstance(value, ast.BoolOp):
            # `self.path = path` (or `Path(path)`, `os.path.join(path, "x")`) in `__init__`; not the
            # last resort of a chain (`envs.X or cfg.dir or path`): the operator's settings come first
            init = owner[0]

            def given(n: ast.expr) -> str | None:
                param = self.constructed_path(n.id, init, depth) if isinstance(n, ast.Name) else None
                return param or self.bound_path(n, (), depth + 1)

            found = fixed_path_ast(value, bound=given)
        return found

    def constructed_path(self, param: str, scope: Scope, depth: int = 0) -> str | None:
        """The literal start of the path the constructor's parameter `param` gets when the class
        enclosing `scope` is built in this module: its default (`def __init__(self, path="/tmp/d")`),
        or what a construction passes (`Recorder("/tmp/x")`, `Recorder(path=tempfile.mkdtemp())`,
        a subclass's construction included). None when no construction here fixes one."""
        init = self.method_of(scope, "__init__")
        if init is None or param not in init.params:
            return None
        again = lambda n: self.bound_path(n, (), depth + 1)  # noqa: E731
        default = instances.default_of(init.node, param)
        found = _temp_place(default) or fixed_path_ast(default, bound=again) if default is not None else None
        if found is not None:
            return found
        owner = init.scope[:-1]
        for call in self.constructions(owner):
            given = instances.arguments(init.node, init.params, call).get(param)
            found = _temp_place(given) or fixed_path_ast(given, bound=again) if given is not None else None
            if found is not None:
                return found
        return None

    def constructions(self, owner: Scope) -> list[ast.Call]:
        """The calls that build the class `owner` or a subclass of it in this module (`Cls(...)`
        anywhere in the file; one walk of the module, kept)."""
        if self._constructions is None:
            classes = self.bindings().classes
            self._constructions = {}
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes:
                    self._constructions.setdefault(node.func.id, []).append(node)
        return [
            call
            for name, calls in self._constructions.items()
            if owner in self.names.class_chain((("class", name),))
            for call in calls
        ]

    def helper_spans(self) -> dict[str, list[tuple[int, int]]]:
        """Function and method name -> the lines of each definition (for prefilters)."""
        out: dict[str, list[tuple[int, int]]] = {}
        for table in self.helpers().values():
            for name, helper in table.items():
                node = helper.node
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                out.setdefault(name, []).append((first, node.end_lineno or node.lineno))
        for body in [self.tree.body, *(c.body for c in self.tree.body if isinstance(c, ast.ClassDef))]:
            for stmt in body:  # `_dump = lambda t, p: ...`, `_dump = staticmethod(lambda ...)`: run as helpers
                if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                    continue
                target, value = stmt.targets[0], stmt.value
                if isinstance(value, ast.Call) and len(value.args) == 1 and called_name(value.func) == "staticmethod":
                    value = value.args[0]
                if isinstance(value, ast.Lambda) and isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append((stmt.lineno, stmt.end_lineno or stmt.lineno))
                elif isinstance(target, ast.Name) and (made := self._made_by(value)) is not None:
                    # `_trace = _make_writer(root)`: the closure it returns runs as a helper
                    node = made.node
                    out.setdefault(target.id, []).append((node.lineno, node.end_lineno or node.lineno))
        return out

    def returned_path(self, func: ast.expr, scope: Scope, depth: int = 0) -> str | None:
        """The literal start of the path a helper of the module returns, when every `return` fixes one
        (`def _path(name): return "/tmp/d/" + name`)."""
        helper = self.helper(func, scope)
        if helper is None:
            return None
        found: list[str | None] = []
        for node in ast.walk(helper.node):
            if isinstance(node, ast.Return):
                found.append(fixed_path_ast(node.value, bound=lambda n: self.bound_path(n, helper.scope, depth + 1)))
        return found[0] if found and None not in found else None

    def returned_value(self, func: ast.expr, scope: Scope) -> tuple[Helper, ast.expr] | None:
        """The one value a short helper of the module returns (`def _ntok(x): return x.shape[0]`),
        with the helper (its parameters name what the call passes), else None."""
        helper = self.helper(func, scope)
        if helper is None or len(helper.node.body) > _SHORT_HELPER:
            return None
        returns = [n for n in ast.walk(helper.node) if isinstance(n, ast.Return)]
        if len(returns) != 1 or returns[0].value is None:
            return None
        return helper, returns[0].value

    def partials(self, func: ast.expr, scope: Scope) -> list[ast.Call]:
        """The `functools.partial(...)` calls a name or `self.X` is bound to."""
        if isinstance(func, ast.Name):
            values = self.names.values(func.id, scope)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            owners = self.names.instance_scopes(func.attr, scope)
            values = [v for owner in owners for v in self.names.values("self." + func.attr, owner)]
            values = values or self.names.class_values(func.attr, scope)  # a class attribute
        else:
            return []
        out = []
        for value, where in values:
            if isinstance(value, ast.Call) and "functools.partial" in self.names.resolve(ref_of_ast(value.func), where):
                out.append(value)
        return out

    def instance_spans(self) -> dict[str, list[tuple[int, int]]]:
        """Class names and names bound to instances -> the lines of the class (for prefilters)."""
        return instances.class_spans(self.tree, self.bindings())

    def instance_aliases(self) -> dict[str, frozenset[str]]:
        """Attribute name -> what `self.name` is bound to in some class (`self.bp = pdb.set_trace`,
        or a class attribute `bp = pdb.set_trace`)."""
        out: dict[str, frozenset[str]] = {}
        for scope, table in self.names.bindings.items():
            if len(scope) == 1 and scope[0][0] == "class":
                for key in table:
                    if key.startswith("self."):
                        attr = key.removeprefix("self.")
                        out[attr] = out.get(attr, frozenset()) | self.names.lookup(key, scope)
                    elif found := self.names.resolve_class_attr(key, scope):
                        out[key] = out.get(key, frozenset()) | found  # `_save = partial(torch.save, ...)`
        return out

    # -- constants -----------------------------------------------------------------------------

    def constants(self) -> dict[Scope, dict[str, object]]:
        """Module and class names bound exactly once, to a literal number, string, bool or None, or a
        tuple or set of integers (as a frozenset)."""
        if self._constants is None:
            counts: dict[tuple[Scope, str], int] = {}
            bodies: list[tuple[Scope, list[ast.stmt]]] = [((), self.tree.body)]
            bodies += [((("class", s.name),), s.body) for s in self.tree.body if isinstance(s, ast.ClassDef)]
            values: dict[tuple[Scope, str], object] = {}
            for scope, body in bodies:
                for stmt in body:
                    target: ast.expr | None = None
                    value: ast.expr | None = None
                    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                        target, value = stmt.targets[0], stmt.value
                    elif isinstance(stmt, ast.AnnAssign) and not scope:
                        # In a class body an annotated default is a field (dataclasses, pydantic):
                        # every instance may hold its own value.
                        target, value = stmt.target, stmt.value
                    elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                        counts[(scope, stmt.target.id)] = 2  # a field: never a constant
                    if isinstance(target, ast.Name):
                        key = (scope, target.id)
                        counts[key] = counts.get(key, 0) + 1
                        values[key] = constant_value(value) if value is not None else NOT_CONSTANT
            self._constants = {}
            for (where, name), found in values.items():
                # Rebound anywhere else (a loop, `global`, an import): not a constant.
                if (
                    counts[(where, name)] == 1
                    and found is not NOT_CONSTANT
                    and len(self.names.bindings.get(where, {}).get(name, ())) == 1
                ):
                    self._constants.setdefault(where, {})[name] = found
        return self._constants

    def constant(self, node: ast.expr | None, scope: Scope) -> object:
        """The value of `NAME`, `Class.NAME` or `self.NAME` when it is such a constant."""
        table = self.constants()
        if isinstance(node, ast.Name):
            if any(node.id in self.names.bindings.get(scope[:i], {}) for i in range(1, len(scope) + 1)):
                return NOT_CONSTANT
            return table.get((), {}).get(node.id, NOT_CONSTANT)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner = node.value.id
            if owner in ("self", "cls"):
                classes = [s for s in scope if s[0] == "class"]
                return table.get((classes[-1],), {}).get(node.attr, NOT_CONSTANT) if classes else NOT_CONSTANT
            return table.get((("class", owner),), {}).get(node.attr, NOT_CONSTANT)
        return NOT_CONSTANT


def short_helper_names(tree: ast.Module) -> frozenset[str]:
    """The names of the functions of the module and of its classes whose one returned value a
    caller may read as its own (ModuleAnalysis.returned_value): at most three statements, one
    `return` with a value. A superset (a name any scope may hide), for a statement filter."""
    return frozenset(short_helpers(tree))


def short_helpers(tree: ast.Module) -> dict[str, list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.expr]]]:
    """short_helper_names, each with its definitions (a method's name may be several) and the one
    value each returns."""
    out: dict[str, list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.expr]]] = {}
    bodies = [tree.body, *(s.body for s in tree.body if isinstance(s, ast.ClassDef))]
    for body in bodies:
        for stmt in body:
            if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) or len(stmt.body) > _SHORT_HELPER:
                continue
            returns = [n for n in statements(stmt.body) if isinstance(n, ast.Return)]
            if len(returns) == 1 and returns[0].value is not None:
                out.setdefault(stmt.name, []).append((stmt, returns[0].value))
    return out


# What ast.literal_eval reads besides a constant: containers, a sign, a complex sum, `set()`.
_LITERAL_SHAPES = (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.UnaryOp, ast.BinOp, ast.Call)


def constant_value(node: ast.expr) -> object:
    """What a literal holds as a module or class constant: a number, string, bool or None, or a
    tuple, list or set of integers as a frozenset; else NOT_CONSTANT."""
    if isinstance(node, ast.Constant):
        value = node.value  # what literal_eval gives, without its closures (each call leaves a cycle)
    elif not isinstance(node, _LITERAL_SHAPES):
        return NOT_CONSTANT  # a name, a call, an attribute...: literal_eval would refuse it
    else:
        try:
            value = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return NOT_CONSTANT
    if isinstance(value, tuple | list | set | frozenset) and value and all(type(v) is int for v in value):
        return frozenset(value)  # `DEBUG_LENS = (5, 9)`, `[5, 9]`: a set of counts a membership test may name
    return value if isinstance(value, bool | int | float | str | type(None)) else NOT_CONSTANT


def _temp_place(node: ast.expr | None) -> str | None:
    """`tempfile.mkdtemp()` given as a place to keep files: a temp directory the code made for them."""
    return TEMP_DIR if isinstance(node, ast.Call) and called_name(node.func) == "mkdtemp" else None


def _bound(inner: Inner, given: dict[str, ast.expr]) -> Inner:
    """A call inside a called helper, its parameters replaced by what the caller passes."""
    if not given:
        return inner
    swap = lambda e: given.get(e.id, e) if isinstance(e, ast.Name) else e  # noqa: E731
    keywords = tuple((name, swap(value)) for name, value in inner.keywords)
    return Inner(inner.names, tuple(swap(a) for a in inner.args), keywords, inner.line, inner.callee)


def _bound_free(function: ast.FunctionDef, given: dict[str, ast.expr], params: tuple[str, ...]) -> ast.FunctionDef:
    """A closure with the free names its factory was given as constants put in (a copy; the module's
    tree is left as it is). Names the closure binds itself are its own."""
    own = set(params) | {
        n.id for n in ast.walk(function) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    given = {name: value for name, value in given.items() if name not in own}
    if not given:
        return function

    class _Put(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            value = given.get(node.id)
            return ast.copy_location(ast.Constant(value.value), node) if value is not None else node  # type: ignore[attr-defined]

    return _Put().visit(copy.deepcopy(function))


def _returned_function(node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef | ast.Lambda | None:
    """The function a factory returns: a lambda, or a function it defines in its own body (also
    inside a `with`, a `try` or an `if` of it)."""
    own = list(_own_statements(node.body))
    defined = {s.name: s for s in own if isinstance(s, ast.FunctionDef)}
    for stmt in own:
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            if isinstance(stmt.value, ast.Lambda):
                return stmt.value
            if isinstance(stmt.value, ast.Name) and stmt.value.id in defined:
                return defined[stmt.value.id]
    return None


def _own_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A function's statements, into its blocks but not into the functions and classes it defines."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for block in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, block, None)
            if isinstance(inner, list):
                yield from _own_statements(inner)
        for handler in getattr(stmt, "handlers", ()):
            yield from _own_statements(handler.body)
