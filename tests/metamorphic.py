"""Semantics-preserving rewrites of Python source, for metamorphic tests of the hazard rules.

Each rewrite takes a module's source and a seeded `random.Random`, and returns the same program
spelled another way (or None when it has nowhere to apply). `variants()` chains a few of them.
"""

from __future__ import annotations

import ast
import builtins
import random
import re
from collections.abc import Callable, Iterator

from patchaudit.rule import COUNT_NAME

Rewrite = Callable[[str, random.Random], str | None]
_FRESH = iter(range(10**9))


def _fresh(stem: str) -> str:
    return f"_{stem}{next(_FRESH)}"


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def _out(tree: ast.Module) -> str:
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def rename(code: str, rng: random.Random) -> str | None:
    """Rename one local variable of a function (not a count's name, not a parameter)."""
    tree = _parse(code)
    if tree is None:
        return None
    candidates = []
    for func in _functions(tree):
        params = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
        stored = {
            n.id
            for n in ast.walk(func)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in params
        }
        nested = any(isinstance(n, ast.Global | ast.Nonlocal) for n in ast.walk(func))
        candidates += [(func, name) for name in stored if not COUNT_NAME.match(name) and not nested]
    if not candidates:
        return None
    func, old = rng.choice(sorted(candidates, key=lambda c: (c[0].lineno, c[1])))
    new = _fresh("v")
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and node.id == old:
            node.id = new
    return _out(tree)


def alias_import(code: str, rng: random.Random) -> str | None:
    """`import torch` -> `import torch as _m1`, every use renamed."""
    tree = _parse(code)
    if tree is None:
        return None
    imports = [
        (stmt, alias)
        for stmt in tree.body
        if isinstance(stmt, ast.Import)
        for alias in stmt.names
        if alias.asname is None and "." not in alias.name
    ]
    if not imports:
        return None
    _stmt, alias = rng.choice(imports)
    new = _fresh("m")
    old = alias.name
    if any(isinstance(n, ast.Name) and n.id == old and isinstance(n.ctx, ast.Store) for n in ast.walk(tree)):
        return None
    alias.asname = new
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == old:
            node.id = new
    return _out(tree)


def _call_statements(tree: ast.Module) -> list[tuple[list[ast.stmt], int, ast.Call]]:
    """(body, index, call) for each expression statement that is a plain call, in any body."""
    out = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list):
                continue
            for index, stmt in enumerate(body):
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                    func = stmt.value.func
                    if isinstance(func, ast.Name | ast.Attribute) and not any(
                        isinstance(a, ast.Starred) for a in stmt.value.args
                    ):
                        out.append((body, index, stmt.value))
    return out


def via_partial(code: str, rng: random.Random) -> str | None:
    """`f(a, b)` -> `functools.partial(f)(a, b)`."""
    tree = _parse(code)
    calls = _call_statements(tree) if tree is not None else []
    if tree is None or not calls:
        return None
    _body, _index, call = rng.choice(calls)
    partial = ast.Attribute(value=ast.Name(id="functools", ctx=ast.Load()), attr="partial", ctx=ast.Load())
    call.func = ast.Call(func=partial, args=[call.func], keywords=[])
    tree.body.insert(0, ast.Import(names=[ast.alias(name="functools")]))
    return _out(tree)


def via_lambda(code: str, rng: random.Random) -> str | None:
    """`f(a, b)` -> `_l = lambda *a, **k: f(*a, **k)` then `_l(a, b)`."""
    tree = _parse(code)
    calls = _call_statements(tree) if tree is not None else []
    if tree is None or not calls:
        return None
    body, index, call = rng.choice(calls)
    name = _fresh("l")
    lam = ast.parse(f"{name} = lambda *a, **k: F(*a, **k)").body[0]
    lam.value.body.func = call.func  # type: ignore[attr-defined]
    call.func = ast.Name(id=name, ctx=ast.Load())
    body.insert(index, lam)
    return _out(tree)


def via_helper(code: str, rng: random.Random) -> str | None:
    """A call statement moved into a module-level helper taking the names it reads."""
    tree = _parse(code)
    calls = _call_statements(tree) if tree is not None else []
    if tree is None or not calls:
        return None
    body, index, call = rng.choice(calls)
    module_names = {
        a.asname or a.name.split(".")[0]
        for s in tree.body
        if isinstance(s, ast.Import | ast.ImportFrom)
        for a in s.names
    }
    module_names |= {s.name for s in tree.body if isinstance(s, ast.FunctionDef | ast.ClassDef)}
    module_names |= {t.id for s in tree.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)}
    names = {n.id for n in ast.walk(call) if isinstance(n, ast.Name)}
    reads = sorted(names - module_names - set(dir(builtins)) - {"__name__", "__file__"})
    if "locals" in {n.id for n in ast.walk(call) if isinstance(n, ast.Name)}:
        return None
    name = _fresh("helper")
    helper = ast.parse(f"def {name}({', '.join(reads)}):\n    pass").body[0]
    helper.body = [ast.Expr(value=call)]  # type: ignore[attr-defined]
    body[index] = ast.Expr(value=ast.parse(f"{name}({', '.join(reads)})", mode="eval").body)
    position = max((i + 1 for i, s in enumerate(tree.body) if isinstance(s, ast.Import | ast.ImportFrom)), default=0)
    tree.body.insert(position, helper)
    return _out(tree)


def _ifs(tree: ast.Module) -> list[ast.If]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.If)]


def invert(code: str, rng: random.Random) -> str | None:
    """`if t: A` (no else) -> `if not (t): pass` / `else: A`."""
    tree = _parse(code)
    # A constant test is left alone: `if not False:` is itself a disabled guard's spelling.
    ifs = [n for n in _ifs(tree) if not n.orelse and not isinstance(n.test, ast.Constant)] if tree is not None else []
    if tree is None or not ifs:
        return None
    node = rng.choice(ifs)
    node.orelse = node.body
    node.body = [ast.Pass()]
    node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    return _out(tree)


_FLIP = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}


def _compares(tree: ast.Module) -> list[ast.Compare]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _FLIP]


def yoda(code: str, rng: random.Random) -> str | None:
    """`a == 5` -> `5 == a`; `a < b` -> `b > a`."""
    tree = _parse(code)
    found = _compares(tree) if tree is not None else []
    if tree is None or not found:
        return None
    node = rng.choice(found)
    node.left, node.comparators = node.comparators[0], [node.left]
    node.ops = [_FLIP[type(node.ops[0])]()]
    return _out(tree)


def chained(code: str, rng: random.Random) -> str | None:
    """`a == 5` -> `5 <= a <= 5`."""
    tree = _parse(code)
    found = [
        n
        for n in (_compares(tree) if tree is not None else [])
        if isinstance(n.ops[0], ast.Eq)
        and isinstance(n.comparators[0], ast.Constant)
        and type(n.comparators[0].value) is int
    ]
    if tree is None or not found:
        return None
    node = rng.choice(found)
    number = node.comparators[0]
    node.left, node.ops, node.comparators = number, [ast.LtE(), ast.LtE()], [node.left, ast.Constant(number.value)]
    return _out(tree)


def walrus(code: str, rng: random.Random) -> str | None:
    """`if x.shape[0] == 5:` -> `if (_w1 := x.shape[0]) == 5:`."""
    tree = _parse(code)
    found = []
    for node in _ifs(tree) if tree is not None else []:
        test = node.test
        if isinstance(test, ast.Compare) and not isinstance(test.left, ast.Constant | ast.NamedExpr):
            found.append(test)
    if tree is None or not found:
        return None
    test = rng.choice(found)
    test.left = ast.NamedExpr(target=ast.Name(id=_fresh("w"), ctx=ast.Store()), value=test.left)
    return _out(tree)


def hoist(code: str, rng: random.Random) -> str | None:
    """An integer constant (>= 2) of a comparison becomes a module-level constant."""
    tree = _parse(code)
    found = [
        (n, i)
        for n in (ast.walk(tree) if tree is not None else [])
        if isinstance(n, ast.Compare)
        for i, c in enumerate(n.comparators)
        if isinstance(c, ast.Constant) and type(c.value) is int and c.value >= 2
    ]
    if tree is None or not found:
        return None
    node, index = rng.choice(found)
    name = _fresh("K").upper()
    value = node.comparators[index].value  # type: ignore[attr-defined]
    node.comparators[index] = ast.Name(id=name, ctx=ast.Load())
    position = max((i + 1 for i, s in enumerate(tree.body) if isinstance(s, ast.Import | ast.ImportFrom)), default=0)
    tree.body.insert(position, ast.parse(f"{name} = {value}").body[0])
    return _out(tree)


def _wrap(code: str, rng: random.Random, make: Callable[[list[ast.stmt]], ast.stmt], needs: str) -> str | None:
    tree = _parse(code)
    funcs = _functions(tree) if tree is not None else []
    if tree is None or not funcs:
        return None
    func = rng.choice(funcs)
    if any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(func)):
        return None
    func.body = [make(func.body)]
    if needs:
        tree.body.insert(0, ast.parse(needs).body[0])
    return _out(tree)


def no_grad(code: str, rng: random.Random) -> str | None:
    """A function's body inside `with torch.no_grad():`."""
    item = ast.parse("torch.no_grad()", mode="eval").body
    return _wrap(code, rng, lambda body: ast.With(items=[ast.withitem(context_expr=item)], body=body), "import torch")


def in_try(code: str, rng: random.Random) -> str | None:
    """A function's body inside `try: ... except Exception: raise`."""
    handler = ast.ExceptHandler(type=ast.Name(id="Exception", ctx=ast.Load()), name=None, body=[ast.Raise()])
    return _wrap(code, rng, lambda body: ast.Try(body=body, handlers=[handler], orelse=[], finalbody=[]), "")


def padded(code: str, rng: random.Random) -> str | None:
    """Unrelated code around the example."""
    pad = "import logging\n_log = logging.getLogger(__name__)\n\ndef _unrelated(a):\n    return a + 1\n\n"
    return pad + code if rng.random() < 0.5 else code + "\n\n" + pad


REWRITES: dict[str, Rewrite] = {
    "rename": rename,
    "alias-import": alias_import,
    "partial": via_partial,
    "lambda": via_lambda,
    "helper": via_helper,
    "invert-else": invert,
    "yoda": yoda,
    "chained": chained,
    "walrus": walrus,
    "hoist-constant": hoist,
    "no-grad": no_grad,
    "try": in_try,
    "padded": padded,
}


def variants(code: str, rng: random.Random, count: int) -> Iterator[tuple[str, str]]:
    """Up to `count` (classes applied, variant) pairs: one rewrite each, then chains of two or three."""
    names = list(REWRITES)
    for name in names:
        out = REWRITES[name](code, rng)
        if out is not None and out != code:
            yield name, out
    for _ in range(max(0, count - len(names))):
        chain = rng.sample(names, rng.randint(2, 3))
        current: str | None = code
        for name in chain:
            nxt = REWRITES[name](current, rng) if current is not None else None
            current = nxt if nxt is not None else current
        if current is not None and current != code:
            yield "+".join(chain), current


def one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text)[:200]
