"""Which statements of a module can no longer run, and why: the reachability view over `ast`.

A statement is blocked when, in a block on its way up to its function, a statement above it
always leaves (`return`, `raise`, `continue`, `break`, or an `if`/`with`/`try` all of whose ways
out leave), or when an `if` above it leaves on a test the process environment decides
(`if os.environ.get("SKIP"): return`, also through a name bound to such a read: a local, a name
imported from a settings module, an attribute, class-level name or `global` set from one, a
function returning one through its locals) or that folds to
true (`if True:`, a name bound once to a true literal). Comparing the blocked statements of the
installed and pristine trees tells a guard made dead from one that always was. `off_by_default`
tells a condition that holds only when a setting nobody set is switched on.
"""

from __future__ import annotations

import ast
import copy
import math
import re

__all__ = ["blocked_lines", "never_fires", "neutered", "off_by_default"]

_ENV_WORDS = ("environ", "getenv", "envs")
_CHECKISH = re.compile(r"^_*(?:check|validate|verify|assert|ensure)")


def _exits(stmt: ast.stmt) -> bool:
    """Whether control never reaches the statement after `stmt`."""
    if isinstance(stmt, ast.Return | ast.Raise | ast.Continue | ast.Break):
        return True
    if isinstance(stmt, ast.If):
        return bool(stmt.orelse) and _body_exits(stmt.body) and _body_exits(stmt.orelse)
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return _body_exits(stmt.body)
    if isinstance(stmt, ast.Try | ast.TryStar):
        return _body_exits(stmt.finalbody) or (
            _body_exits(stmt.body) and all(_body_exits(h.body) for h in stmt.handlers)
        )
    return False


def _body_exits(body: list[ast.stmt]) -> bool:
    return any(_exits(stmt) for stmt in body)


def _reads_env(expr: ast.AST, tainted: set[str]) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.Name) and (node.id in _ENV_WORDS or node.id in tainted):
            return True
        if isinstance(node, ast.Attribute) and (node.attr in _ENV_WORDS or node.attr in tainted):
            return True
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id.endswith("envs"):
            return True
    return False


def _bindings(body: list[ast.stmt]) -> dict[str, list[ast.expr]]:
    """Plain names -> the values bound to them in `body` (nested blocks too, not nested definitions)."""
    out: dict[str, list[ast.expr]] = {}
    stack = list(body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(stmt.value)
        elif isinstance(stmt, ast.AnnAssign | ast.AugAssign) and isinstance(stmt.target, ast.Name):
            out.setdefault(stmt.target.id, []).append(stmt.value or ast.Constant(None))
        for field in ("body", "orelse", "finalbody", "handlers"):
            stack.extend(getattr(stmt, field, []))
    return out


def _statements(body: list[ast.stmt], owner: str) -> list[tuple[str, ast.stmt]]:
    """Every statement under `body`, nested definitions too, with the function it runs in."""
    out: list[tuple[str, ast.stmt]] = []
    stack = [(owner, stmt) for stmt in reversed(body)]
    while stack:
        where, stmt = stack.pop()
        out.append((where, stmt))
        inner = stmt.name if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) else where
        children = [*getattr(stmt, "body", []), *getattr(stmt, "orelse", []), *getattr(stmt, "finalbody", [])]
        children += [s for h in getattr(stmt, "handlers", []) for s in h.body]
        children += [s for c in getattr(stmt, "cases", []) for s in c.body]
        stack.extend((inner, child) for child in reversed(children))
    return out


def _env_imports(tree: ast.Module) -> set[str]:
    """Names the module binds by import to the environment or a settings module read from it:
    `from vllm.envs import VLLM_X`, `import vllm.envs as E`, `from os import environ as ENV`."""
    out: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module:
            if stmt.module.rsplit(".", 1)[-1] == "envs":
                out.update(a.asname or a.name for a in stmt.names if a.name != "*")
            elif stmt.module == "os":
                out.update(a.asname or a.name for a in stmt.names if a.name in ("environ", "getenv"))
        elif isinstance(stmt, ast.Import):
            out.update(a.asname for a in stmt.names if a.asname and a.name.rsplit(".", 1)[-1] == "envs")
    return out


def _local_env(owner: ast.FunctionDef | ast.AsyncFunctionDef, tainted: set[str]) -> set[str]:
    """The module's tainted names and the function's locals bound to a read of the environment."""
    local = set(tainted)
    bound = _bindings(owner.body)
    for _ in range(2):
        local.update(name for name, values in bound.items() if any(_reads_env(v, local) for v in values))
    return local


def _env_members(statements: list[tuple[str, ast.stmt]], tainted: set[str]) -> set[str]:
    """Functions that return a read of the environment, and attributes, class-level names and
    `global`s bound to one (`self.skip = ...`), also through a local or a function found so."""
    functions = {s.name: s for _, s in statements if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
    shared = {name for _, s in statements if isinstance(s, ast.Global) for name in s.names}
    first = _env_pass(statements, functions, shared, tainted)
    return first | _env_pass(statements, functions, shared, tainted | first)  # what reads a name found first


def _env_pass(
    statements: list[tuple[str, ast.stmt]],
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    shared: set[str],
    known: set[str],
) -> set[str]:
    out: set[str] = set()
    seen: dict[str, set[str]] = {}  # a function's locals, worked out once and only if needed
    for owner, stmt in statements:
        if isinstance(stmt, ast.Return) and stmt.value is not None and owner in functions:
            names, value = [owner], stmt.value
        elif isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [t.attr for t in targets if isinstance(t, ast.Attribute)]
            names += [t.id for t in targets if isinstance(t, ast.Name) and (not owner or t.id in shared)]
            value = stmt.value
        else:
            continue
        if not names:
            continue
        if owner in functions and owner not in seen:
            seen[owner] = _local_env(functions[owner], known)
        if _reads_env(value, seen.get(owner, known)):
            out.update(names)
    return out


class _Scope:
    def __init__(self, body: list[ast.stmt], outer: _Scope | None, imported: set[str] | None = None) -> None:
        bound = _bindings(body)
        self.tainted: set[str] = set(outer.tainted) if outer else set(imported or ())
        self.true: set[str] = set(outer.true) if outer else set()
        for _ in range(2):  # a name read from one bound to the environment
            for name, values in bound.items():
                if any(_reads_env(v, self.tainted) for v in values):
                    self.tainted.add(name)
        self.false: set[str] = set(outer.false) if outer else set()
        for name, values in bound.items():
            self.true.discard(name)
            self.false.discard(name)
            if len(values) == 1 and isinstance(values[0], ast.Constant):
                (self.true if values[0].value else self.false).add(name)

    def pinned(self, stmt: ast.stmt) -> _Scope:
        """The scope after `stmt`: a name or `self.x` just set to a literal (`ok = True` right above
        `if not ok: raise`) reads as that literal until it is set again."""
        targets = _targets(stmt)
        if not targets:
            return self
        out = copy.copy(self)
        out.true, out.false = set(self.true), set(self.false)
        out.true.difference_update(targets)
        out.false.difference_update(targets)
        value = stmt.value if isinstance(stmt, ast.Assign) and len(targets) == 1 else None
        if isinstance(value, ast.Constant):
            (out.true if value.value else out.false).update(targets)
        elif isinstance(value, ast.List | ast.Tuple | ast.Set) and all(_falsy(e) for e in value.elts):
            out.false.update(targets)  # `unsupported = []`: `any(unsupported)` never holds
        return out

    def truth(self, test: ast.expr) -> bool | None:
        """True/False when a test is a literal, a name bound once to one (or just set to one), or
        an and/or/not of those that folds; None otherwise."""
        if isinstance(test, ast.Constant):
            return bool(test.value)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.truth(test.operand)
            return None if inner is None else not inner
        if isinstance(test, ast.BoolOp):
            values = [self.truth(v) for v in test.values]
            decisive = isinstance(test.op, ast.Or)  # `or`: one true decides; `and`: one false does
            if decisive in values:
                return decisive
            return None if None in values else not decisive
        if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id in ("any", "len"):
            if len(test.args) == 1 and not test.keywords and self.truth(test.args[0]) is False:
                return False  # `any(x)`, `len(x)` of an empty or all-false collection
            return None
        key = _key(test)
        if key is not None and key in self.true:
            return True
        if key is not None and key in self.false:
            return False
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            return False  # true only for a type checker, never at run time
        return None

    def bypass(self, stmt: ast.stmt) -> str | None:
        """Why an `if` with one way out that leaves is taken regardless of the checked values, if it is."""
        if not isinstance(stmt, ast.If) or _body_exits(stmt.body) == _body_exits(stmt.orelse):
            return None
        leaving = stmt.body if _body_exits(stmt.body) else stmt.orelse
        if any(isinstance(s, ast.Raise) for s in leaving):
            return None  # a guard of its own, not a way around one
        if _reads_env(stmt.test, self.tainted):
            return "an exit gated on the environment"
        if self.truth(stmt.test) is (leaving is stmt.body):
            return "an exit whose condition is constant"
        return None


def _falsy(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and not node.value


def _key(node: ast.AST) -> str | None:
    """`name` or `self.attr`: what `pinned` can follow."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


def _targets(stmt: ast.stmt) -> set[str]:
    """Keys (`_key`) that a statement sets, anywhere inside it (not in nested definitions)."""
    if isinstance(stmt, ast.Assign):
        found = {_key(t) for t in stmt.targets}
        if not isinstance(stmt.value, ast.Constant):
            found |= {_key(n.target) for n in ast.walk(stmt.value) if isinstance(n, ast.NamedExpr)}
        return {k for k in found if k is not None}
    if isinstance(stmt, ast.AugAssign | ast.AnnAssign):
        key = _key(stmt.target)
        return {key} if key is not None else set()
    if isinstance(stmt, ast.If | ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith | ast.Try | ast.TryStar):
        out: set[str] = set()
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.NamedExpr | ast.For | ast.AsyncFor):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                out.update(k for k in map(_key, targets) if k is not None)
        return out
    return set()


def blocked_lines(tree: ast.Module) -> dict[int, tuple[int, str]]:
    """Line of each statement that cannot run -> (line of what stops it, how)."""
    out: dict[int, tuple[int, str]] = {}

    def walk(body: list[ast.stmt], scope: _Scope, blocker: tuple[int, str] | None, local: bool = False) -> None:
        for stmt in body:
            if blocker is not None:
                out.setdefault(stmt.lineno, blocker)
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                walk(stmt.body, _Scope(stmt.body, scope), None, True)
                continue
            if isinstance(stmt, ast.ClassDef):
                walk(stmt.body, scope, None)
                continue
            never = None if blocker is not None else _never_runs(stmt, scope)
            for field in ("body", "orelse", "finalbody"):
                walk(getattr(stmt, field, []), scope, never if field == "body" and never else blocker, local)
            if isinstance(stmt, ast.If) and blocker is None and scope.truth(stmt.test) is True:
                walk(stmt.orelse, scope, (stmt.lineno, "its condition is always true"), local)
            for handler in getattr(stmt, "handlers", []):
                walk(handler.body, scope, blocker, local)
            for case in getattr(stmt, "cases", []):
                walk(case.body, scope, blocker, local)
            if blocker is None:
                if _exits(stmt):
                    blocker = (stmt.lineno, f"`{ast.unparse(stmt).splitlines()[0][:40]}` above always leaves")
                else:
                    why = scope.bypass(stmt)
                    if why is not None:
                        blocker = (stmt.lineno, why)
                scope = scope.pinned(stmt) if local else scope  # in a function, statements run in order

    module = _Scope(tree.body, None, _env_imports(tree))
    statements = _statements(tree.body, "")
    module.tainted |= _env_members(statements, module.tainted)
    rebound = {name for _, stmt in statements if isinstance(stmt, ast.Global) for name in stmt.names}
    module.true -= rebound  # `global FLAG` in a function: the flag is not a constant
    module.false -= rebound
    walk(tree.body, module, None)
    return out


def _never_runs(stmt: ast.stmt, scope: _Scope) -> tuple[int, str] | None:
    """(line, why) when the body of an `if`/`while`/`for` never runs: a false test, an empty loop."""
    if isinstance(stmt, ast.If | ast.While) and scope.truth(stmt.test) is False:
        return stmt.lineno, "its condition is always false"
    if isinstance(stmt, ast.For | ast.AsyncFor):
        it = stmt.iter
        empty = isinstance(it, ast.List | ast.Tuple | ast.Set) and not it.elts
        empty = empty or (isinstance(it, ast.Constant) and not it.value)
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and it.args:
            bound = it.args[0] if len(it.args) == 1 else None
            empty = empty or (isinstance(bound, ast.Constant) and bound.value in (0, False))
        if empty:
            return stmt.lineno, "it loops over nothing"
    return None


def neutered(tree: ast.Module) -> dict[str, int]:
    """Names of functions replaced by a stand-in (`self.check_x = lambda *a: None`, `_validate = None`) -> the line."""
    out: dict[str, int] = {}
    for _, node in _statements(tree.body, ""):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Lambda | ast.Constant):
            continue
        if isinstance(node.value, ast.Constant) and node.value.value is not None:
            continue
        for target in node.targets:
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
            if name and (isinstance(node.value, ast.Lambda) or _CHECKISH.search(name)):
                out.setdefault(name, node.lineno)
    return out


_HUGE = 1e6


def number(node: ast.expr) -> float | None:
    """A numeric literal, `10**9`, `2 ** 31 - 1`, `1 << 30`, `float("inf")`, `math.inf`, `sys.maxsize`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = number(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Attribute) and node.attr in ("inf", "maxsize"):
        return math.inf
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and node.args:
        arg = node.args[0]
        return math.inf if isinstance(arg, ast.Constant) and str(arg.value).lstrip("+-") == "inf" else None
    if isinstance(node, ast.BinOp):
        left, right = number(node.left), number(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Pow) and abs(right) <= 400:
            return math.inf if abs(left) > 1 and right > 300 else left**right
        if isinstance(node.op, ast.LShift) and 0 <= right <= 400:
            return left * 2.0**right
        if isinstance(node.op, ast.Mult | ast.Add | ast.Sub):
            return (
                left * right
                if isinstance(node.op, ast.Mult)
                else left + right
                if isinstance(node.op, ast.Add)
                else left - right
            )
    return None


def never_fires(condition: str) -> bool:
    """Whether a condition (source text) compares a value with a bound no real size reaches (`x > 1e9`,
    `n >= -(1 << 30)`): as an `if` test it never holds, as an assert it always does."""
    try:
        tree = ast.parse(condition, mode="eval")
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
            isinstance(op, ast.Gt | ast.GtE | ast.Lt | ast.LtE) for op in node.ops
        ):
            values = [number(v) for v in (node.left, *node.comparators)]
            if any(v is not None and abs(v) >= _HUGE for v in values):
                return True
    return False


def _switch(node: ast.expr) -> tuple[str, bool] | None:
    """`getattr(obj, "name", default)`, `options.get("name", default)` -> (name, whether the default is true)."""
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    func, args = node.func, node.args
    if isinstance(func, ast.Name) and func.id == "getattr" and len(args) == 3:
        key, default = args[1], args[2]
    elif isinstance(func, ast.Attribute) and func.attr == "get" and len(args) == 2:
        key, default = args
    else:
        return None
    if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(default, ast.Constant):
        return key.value, bool(default.value)
    return None


def off_by_default(condition: str, pristine: str) -> bool:
    """Whether a condition holds only when a setting the pristine code never names is switched on:
    `getattr(config, "strict_checks", False)`, `not getattr(cfg, "skip_checks", True)`; as the test
    of a guard that replaced the pristine one, it keeps the guard off unless someone sets it."""
    try:
        test = ast.parse(condition, mode="eval").body
    except SyntaxError:
        return False
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    switch = _switch(test.operand if isinstance(test, ast.UnaryOp) and negated else test)
    return switch is not None and switch[1] is negated and switch[0] not in pristine
