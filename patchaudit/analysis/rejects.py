"""Whether a check can still reject anything: its failing condition as constraints on the values it tests.

A guard is disabled as often by what its test now says as by what it is handed. `assert n > 0`
turned into `assert n >= 0` on a length, `if x > limit:` raised to `float("inf")`, `if x < 0 and
x > 0:`, `isinstance(x, object)`, a value compared with itself: the test can no longer fail. And a
test left alone fails on nothing once the lines above it overwrite what it reads on every path:
`scale = None` above `if scale is not None and scale.numel() != n: raise`, `x = expected` above
`assert x == expected`, `mask = torch.ones_like(mask)` above `if not mask.all(): raise`, `seq_lens
= seq_lens.clamp(max=limit)` above `if (seq_lens > limit).any(): raise`.

The failing condition (the `if` test of a raise, the negated test of an assert) is read as an
`or` of `and`s of atoms (`guards.terms`) after the straight-line bindings above the check are put
in for the names they bind. Each atom is a folded truth, a bound on a value (a comparison with a
number, or with a bound the value is known to keep: `clamp(max=limit)` against `limit`), a
`None`-ness, or unknown. A conjunction fails on nothing when one of its atoms folds to false or the
bounds on one value leave no room, with what the value is by construction: a `len()`, `.numel()`,
`.size(i)`, `.shape[i]`, a count (`num_*`, `*_count`), a `range`/`enumerate` index, `abs()` are
never negative; nothing reaches `float("inf")` or `sys.maxsize`. Unknown atoms can hold: the
answer errs towards "can still reject".

Pure functions over `ast`; the facts of a function are built once per (tree, line) asked.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from patchaudit.analysis.guards import terms
from patchaudit.analysis.per_file import per_file
from patchaudit.analysis.reach import number
from patchaudit.analysis.trees import called_name

__all__ = ["Bindings", "bindings_at", "exits_above", "left_before", "rejects_nothing", "repinned"]

# A count by its name: `num_tokens`, `n_heads`, `block_count`, `total_len`.
_COUNT = re.compile(r"^(?:num|n|total)_\w+$|^\w+_(?:count|len|size|num)s?$|^(?:count|numel|size|length)$")
# Calls and methods whose value is never negative.
_SIZE_METHODS = frozenset({"numel", "nelement", "size", "dim", "ndimension", "element_size", "count", "__len__"})
_SIZE_CALLS = frozenset({"len", "abs"})
_SIZE_ATTRS = frozenset({"ndim", "itemsize", "nbytes"})
# Tensors made of true (ones) or false (zeros) values.
_ONES = frozenset({"ones", "ones_like", "new_ones"})
_ZEROS = frozenset({"zeros", "zeros_like", "new_zeros"})
_FINITE = frozenset({"nan_to_num", "nan_to_num_"})
_REDUCTIONS = frozenset({"max", "min", "amax", "amin"})
_MAX_ATOMS = 24


_Fact = tuple[ast.expr, tuple[int, ...]]  # a value, and the lines that bound it (through what it reads)


@dataclass(frozen=True, slots=True)
class Bindings:
    """What the lines above a check bind: name -> (value, lines), and names never negative there."""

    values: dict[str, _Fact]
    counts: frozenset[str]
    pinned: dict[str, _Fact]  # module names and `self.x` bound once to a literal: put in after `values`


_EMPTY = Bindings({}, frozenset(), {})


# -- the bindings above a line -----------------------------------------------------------------


def _key(node: ast.AST) -> str | None:
    """The spelling of a target a fact may be kept on: `x`, `self.x`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _assigned(stmt: ast.AST) -> set[str]:
    """Every name or `obj.attr` a statement (and what it holds) may bind."""
    out: set[str] = set()
    for node in ast.walk(stmt):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(
            node, ast.AugAssign | ast.AnnAssign | ast.NamedExpr | ast.For | ast.AsyncFor | ast.comprehension
        ):
            targets = [node.target]
        elif isinstance(node, ast.With | ast.AsyncWith):
            targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_"):
            targets = [node.func.value]  # `x.clamp_(...)`: changed in place
        for target in targets:
            for part in ast.walk(target):
                key = _key(part)
                if key is not None:
                    out.add(key)
    return out


def _in_place(call: ast.expr) -> tuple[str, ast.expr] | None:
    """`x.clamp_(max=m)` as the binding `x = x.clamp(max=m)`, `x.fill_(1)` as `x = ones_like(x)`."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return None
    owner, method = call.func.value, call.func.attr
    key = _key(owner)
    if key is None or not method.endswith("_"):
        return None
    if method in ("clamp_", "clip_", "nan_to_num_"):
        plain = ast.Call(
            func=ast.Attribute(value=owner, attr=method[:-1], ctx=ast.Load()), args=call.args, keywords=call.keywords
        )
        return key, plain
    if method == "fill_" and call.args and isinstance(call.args[0], ast.Constant):
        kind = "ones_like" if call.args[0].value else "zeros_like"
        made = ast.Call(func=ast.Name(id=kind, ctx=ast.Load()), args=[owner], keywords=[])
        return key, made
    return None


def _loop_counts(stmt: ast.For | ast.AsyncFor) -> set[str]:
    """Names a `for` binds to a `range(...)` index (of non-negative bounds) or an `enumerate` index."""
    it, target = stmt.iter, stmt.target
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)):
        return set()
    if it.func.id == "enumerate" and len(it.args) == 1 and not it.keywords:
        first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else None
        return {first.id} if isinstance(first, ast.Name) else set()
    if it.func.id == "range" and len(it.args) <= 2 and isinstance(target, ast.Name):
        start = number(it.args[0]) if len(it.args) == 2 else 0.0
        return {target.id} if start is not None and start >= 0 else set()
    return set()


def _walk_to(body: list[ast.stmt], line: int, values: dict[str, _Fact], counts: set[str]) -> bool:
    """Follow the statements above `line` (in `body`), keeping what they bind on every path to it;
    True once the statement holding `line` is reached."""
    for stmt in body:
        if stmt.lineno > line:
            return False
        holds = stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)
        if holds and not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return _enter(stmt, line, values, counts)
        if holds:
            return False  # a nested function: its own bindings, none asked for here
        _bind(stmt, values, counts)
    return False


def _mentions(value: ast.expr, values: dict[str, _Fact]) -> bool:
    return bool(values) and any(_key(n) in values for n in ast.walk(value) if isinstance(n, ast.Name | ast.Attribute))


def _forget(names: set[str], values: dict[str, _Fact], counts: set[str]) -> None:
    for name in names:
        values.pop(name, None)
        counts.discard(name)
    # a fact whose value reads a name now rebound says nothing any more
    for key, (value, _) in list(values.items()):
        if any(_key(n) in names for n in ast.walk(value) if isinstance(n, ast.Name | ast.Attribute)):
            values.pop(key, None)


def _plain(stmt: ast.stmt) -> list[tuple[str, ast.expr]] | None:
    """(target, value) of each name a plain binding binds: `x = v`, `x: T = v`, `a, b = c, d`."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target, value = stmt.target, stmt.value
    else:
        return None
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        keys = [_key(t) for t in target.elts]
        if any(k is None for k in keys) or any(isinstance(v, ast.Starred) for v in value.elts):
            return None
        return [(k, v) for k, v in zip(keys, value.elts, strict=True) if k is not None]
    key = _key(target)
    return None if key is None else [(key, value)]


def _touches_self(stmt: ast.stmt) -> bool:
    """Whether a statement calls a method of `self` or hands `self` to a call."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call):
            func = node.func
            owner = func.value if isinstance(func, ast.Attribute) else None
            if isinstance(owner, ast.Name | ast.Attribute) and ast.unparse(owner).split(".")[0] == "self":
                return True
            if any(isinstance(a, ast.Name) and a.id == "self" for a in node.args):
                return True
    return False


def _bind(stmt: ast.stmt, values: dict[str, _Fact], counts: set[str]) -> None:
    """What one statement passed on the way binds (a plain assignment, an in-place clamp or fill);
    anything else it may bind is forgotten."""
    pairs = _plain(stmt)
    if pairs is None and isinstance(stmt, ast.Expr) and (found := _in_place(stmt.value)) is not None:
        pairs = [found]
    if pairs is None:
        _forget(_assigned(stmt), values, counts)
    made = [
        (key, *(_substituted(value, values) if _mentions(value, values) else (value, []))) for key, value in pairs or ()
    ]
    if _touches_self(stmt):
        # a method may change what an attribute holds
        _forget({k for k in values if "." in k}, values, counts)
    for key, value, used in made:
        _forget({key}, values, counts)
        values[key] = (value, (stmt.lineno, *used))


def _enter(stmt: ast.stmt, line: int, values: dict[str, _Fact], counts: set[str]) -> bool:
    """Step into the compound statement that holds `line` (the statement itself when it is the check)."""
    if isinstance(stmt, ast.If):
        inside = stmt.body and stmt.body[0].lineno <= line <= (stmt.body[-1].end_lineno or line)
        _walk_to(stmt.body if inside else stmt.orelse, line, values, counts)
        return True
    if isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
        _forget(_assigned(stmt), values, counts)
        if isinstance(stmt, ast.For | ast.AsyncFor):
            counts.update(_loop_counts(stmt))
        _walk_to(stmt.body, line, values, counts)
        return True
    if isinstance(stmt, ast.With | ast.AsyncWith):
        _forget({k for i in stmt.items if i.optional_vars for k in _assigned(i.optional_vars)}, values, counts)
        _walk_to(stmt.body, line, values, counts)
        return True
    if isinstance(stmt, ast.Try | ast.TryStar):
        if stmt.body and stmt.body[0].lineno <= line <= (stmt.body[-1].end_lineno or line):
            _walk_to(stmt.body, line, values, counts)
        else:
            values.clear()  # a handler, else or finally: reached from anywhere in the body
        return True
    return True


def _scope_body(tree: ast.Module, line: int) -> tuple[list[ast.stmt], ast.ClassDef | None]:
    """The body of the innermost function holding `line` (the module's when none does), and the
    class it is a method of."""
    body, found, owner = tree.body, tree.body, None
    cls: ast.ClassDef | None = None
    while True:
        inner = next(
            (
                s
                for s in body
                if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and s.lineno <= line <= (s.end_lineno or s.lineno)
            ),
            None,
        )
        if inner is None:
            return found, owner
        body = inner.body
        if isinstance(inner, ast.ClassDef):
            cls = inner
        else:
            found, owner, cls = inner.body, cls, None


def _constant(value: ast.expr) -> bool:
    """A literal a setting is pinned to: a number (`float("inf")`, `sys.maxsize`, `1 << 62`), None, a bool."""
    return (isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, bool))) or (
        number(value) is not None
    )


def _pinned(stores: list[tuple[str, ast.expr | None, int]]) -> dict[str, _Fact]:
    """Of (name, value or None when not a plain binding, line), the names bound once, to a number
    (not to None: an attribute set to None in `__init__` is as often filled in from outside)."""
    return _bound_once(stores, lambda value: number(value) is not None)


def _bound_once(stores: list[tuple[str, ast.expr | None, int]], kept: Callable[[ast.expr], bool]) -> dict[str, _Fact]:
    """Of (name, value or None when not a plain binding, line), the names bound once, to a value `kept`."""
    seen = Counter(name for name, _, _ in stores)
    return {
        name: (value, (line,)) for name, value, line in stores if seen[name] == 1 and value is not None and kept(value)
    }


@per_file(16)
def _top_literals(tree: ast.Module) -> dict[str, _Fact]:
    """Names the module's top level binds to a literal, each once there (`MAX_TOKENS = sys.maxsize`)."""
    stores: list[tuple[str, ast.expr | None, int]] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            stores.append((stmt.targets[0].id, stmt.value, stmt.lineno))
    return _bound_once(stores, _constant)


@per_file(16)
def _stored(tree: ast.Module) -> dict[str, int]:
    """How often each name is bound anywhere in the module (a `global` counts as a binding)."""
    seen: dict[str, int] = {}
    for node in ast.walk(tree):
        names = node.names if isinstance(node, ast.Global) else []
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names = [node.id]
        for name in names:
            seen[name] = seen.get(name, 0) + 1
    return seen


def _module_constants(tree: ast.Module, wanted: set[str] | None = None) -> dict[str, _Fact]:
    """Names of the module bound once, at its top level, to a literal, and nowhere else; of those
    `wanted` only (the whole module is read only when one is)."""
    top = {k: v for k, v in _top_literals(tree).items() if wanted is None or k in wanted}
    return {k: v for k, v in top.items() if _stored(tree).get(k) == 1} if top else {}


@per_file(16)
def _instance_constants(cls: ast.ClassDef) -> dict[str, _Fact]:
    """`self.x` bound once in all the methods of a class, to a number (`self.max_num_tokens = 1 << 62`)."""
    stores: list[tuple[str, ast.expr | None, int]] = []
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    stores.append((f"self.{target.attr}", node.value if len(node.targets) == 1 else None, node.lineno))
        elif isinstance(node, ast.AugAssign | ast.AnnAssign) and (key := _key(node.target)) and key.startswith("self."):
            stores.append((key, None, node.lineno))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            return {}  # `setattr(self, name, v)`: any attribute may change
    return _pinned(stores)


def _pinned_texts(tree: ast.Module) -> dict[str, str]:
    """Every module name and `self.x` pinned to a literal, with the literal's text."""
    out = {name: ast.unparse(value) for name, (value, _) in _module_constants(tree).items()}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            out.update({name: ast.unparse(value) for name, (value, _) in _instance_constants(node).items()})
    return out


def repinned(tree: ast.Module, pristine: ast.Module) -> frozenset[str]:
    """The module names and `self.x` (their last part) a patch pinned to another literal: the
    checks that read them are asked again, though their own function did not change."""
    now, then = _pinned_texts(tree), _pinned_texts(pristine)
    return frozenset(name.rsplit(".", 1)[-1] for name, text in now.items() if then.get(name) != text)


def bindings_at(tree: ast.Module, line: int, test: ast.expr) -> Bindings:
    """What holds at `line` for `test`: what the statements of the function holding it bind on
    every path to it (straight-line assignments, in-place clamps and fills, loop indices), and the
    module's names and the class's `self.x` bound once to a literal that it reads, through those
    or itself, and the function does not bind."""
    body, cls = _scope_body(tree, line)
    values: dict[str, _Fact] = {}
    counts: set[str] = set()
    _walk_to(body, line, values, counts)
    read = {_key(n) for e in (test, *(v for v, _ in values.values())) for n in ast.walk(e)}
    wanted = {k for k in read if k is not None}
    pinned = _module_constants(tree, wanted)
    if cls is not None and any(k.startswith("self.") for k in wanted):
        pinned = pinned | {k: v for k, v in _instance_constants(cls).items() if k in wanted}
    if pinned and body is not tree.body:
        local = set().union(*(_assigned(stmt) for stmt in body))
        pinned = {k: v for k, v in pinned.items() if k not in local}
    if not (values or counts or pinned):
        return _EMPTY
    return Bindings(values, frozenset(counts), pinned)


def _leaves(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Return | ast.Raise | ast.Continue | ast.Break)


def exits_above(tree: ast.Module, line: int) -> list[ast.expr]:
    """The tests of the `if`s without `else` that leave (return, raise, continue, break) on the
    path to `line` in its function: past them, each is false (`if num_tokens == 0: return out`)."""
    out: list[ast.expr] = []
    body = _scope_body(tree, line)[0]
    while body:
        inner: list[ast.stmt] = []
        for stmt in body:
            if stmt.lineno > line:
                break
            if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
                if isinstance(stmt, ast.If | ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith):
                    branch = stmt.body if not isinstance(stmt, ast.If) or not stmt.orelse else []
                    inner = branch if branch and branch[0].lineno <= line else []
                break
            if isinstance(stmt, ast.If) and not stmt.orelse and _leaves(stmt.body):
                out.append(stmt.test)
        body = inner
    return out


def left_before(test: ast.expr, raising: bool, exits: list[ast.expr], counts: frozenset[str]) -> bool:
    """Whether every input a check fails on now leaves before it reaches the check: its failing
    condition cannot hold with each exit's test false."""
    atoms: list[ast.expr] = []

    def spelling(node: ast.expr) -> str:
        atoms.append(node)
        return str(len(atoms) - 1)

    failing = terms(test, spelling, raising)
    passed = [terms(e, spelling, False) for e in exits]
    kept = [next(iter(p)) for p in passed if p is not None and len(p) == 1]  # `not (a or b)`: `not a and not b`
    if not failing or not kept or len(atoms) > _MAX_ATOMS:
        return False
    assumed = frozenset().union(*kept)
    return not any(_satisfiable([atoms[int(a)] for a in term | assumed], counts) for term in failing)


# -- putting bindings in -----------------------------------------------------------------------


_DTYPES = {"half": "torch.float16", "bfloat16": "torch.bfloat16", "float": "torch.float32"}


def _made_as(node: ast.Attribute) -> ast.expr | None:
    """What a tensor was just made to be: `x.reshape(shape).shape` is `shape`, `x.to(dtype).dtype`
    is `dtype`, `x.half().dtype` is `torch.float16`."""
    call = node.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return None
    method, args = call.func.attr, call.args
    if node.attr == "shape" and method in ("view", "reshape", "expand") and len(args) == 1 and not call.keywords:
        return args[0] if isinstance(args[0], ast.Name | ast.Attribute) else None
    if node.attr == "dtype" and method == "to":
        dtype = next((k.value for k in call.keywords if k.arg == "dtype"), args[0] if len(args) == 1 else None)
        return dtype if isinstance(dtype, ast.Attribute) else None
    if node.attr == "dtype" and method in _DTYPES and not args:
        return ast.parse(_DTYPES[method], mode="eval").body
    return None


class _Put(ast.NodeTransformer):
    def __init__(self, values: dict[str, _Fact]) -> None:
        self.values = values
        self.used: list[int] = []

    def _put(self, node: ast.expr) -> ast.expr | None:
        key = _key(node)
        if key is not None and key in self.values and isinstance(getattr(node, "ctx", None), ast.Load):
            value, lines = self.values[key]
            self.used.extend(lines)
            return value
        return None

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return self._put(node) or node

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        found = self._put(node)
        if found is not None:
            return found
        self.generic_visit(node)
        return _made_as(node) or node

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        # `a < b < c` as `a < b and b < c`
        operands = [node.left, *node.comparators]
        pairs: list[ast.expr] = [
            ast.Compare(left=operands[i], ops=[op], comparators=[operands[i + 1]]) for i, op in enumerate(node.ops)
        ]
        return ast.BoolOp(op=ast.And(), values=pairs)


def _substituted(test: ast.expr, values: dict[str, _Fact]) -> tuple[ast.expr, list[int]]:
    put = _Put(values)
    copied = ast.parse(ast.unparse(test), mode="eval").body
    return put.visit(copied), put.used


# -- atoms as constraints ----------------------------------------------------------------------

# A bound: a number, or the spelling of an expression (comparable only with the same spelling).
# A bound: a number, or an expression's spelling with a number added (`limit - 1` is ("limit", -1.0)),
# comparable only with a bound of the same spelling.
_Bound = float | tuple[str, float]
_Constraint = tuple[str, list[tuple[_Bound, bool]], list[tuple[_Bound, bool]]]  # subject, lows, highs


def _method(node: ast.expr) -> tuple[ast.expr, str] | None:
    """`x.all()` -> (x, "all"); `torch.all(x)` -> (x, "all")."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    func = node.func
    if not node.args:
        return func.value, func.attr
    if isinstance(func.value, ast.Name) and func.value.id in ("torch", "np", "numpy") and len(node.args) == 1:
        return node.args[0], func.attr
    return None


def _made(node: ast.expr) -> str | None:
    """The name of the factory a tensor comes from: `torch.ones_like(m)` -> "ones_like"."""
    if isinstance(node, ast.Call):
        func = node.func
        return called_name(func) or None
    return None


def _stripped(node: ast.expr) -> ast.expr:
    """`bool(e)`, `e.item()` as `e`."""
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "bool" and node.args:
            node = node.args[0]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "item":
            node = node.func.value
        else:
            return node


def _truth(atom: ast.expr, counts: frozenset[str]) -> bool | None:
    """A test that folds, for every value it could see: True, False, or None (it depends)."""
    atom = _stripped(atom)
    if isinstance(atom, ast.Constant):
        return bool(atom.value)
    if isinstance(atom, ast.UnaryOp) and isinstance(atom.op, ast.Not):
        held = _truth(atom.operand, counts)
        return None if held is None else not held
    if isinstance(atom, ast.Call) and isinstance(atom.func, ast.Name) and atom.func.id == "isinstance":
        if len(atom.args) == 2 and isinstance(atom.args[1], ast.Name) and atom.args[1].id == "object":
            return True
        return None
    found = _method(atom)
    if found is not None and found[1] in ("all", "any"):
        inner, how = _stripped(found[0]), found[1]
        made = _made(inner)
        if made in _ONES:
            return True
        if made in _ZEROS:
            return False
        if made == "isfinite" and isinstance(inner, ast.Call) and inner.args and _made(inner.args[-1]) in _FINITE:
            return True
        if isinstance(inner, ast.Compare):
            holds = _satisfiable([inner], counts)
            if not holds:
                return False
            if how == "all" and not _satisfiable([_negate(inner)], counts):
                return True
        return None
    if isinstance(atom, ast.Compare) and len(atom.ops) == 1:
        return _compare_truth(atom)
    if isinstance(atom, ast.ListComp | ast.SetComp) and len(atom.generators) == 1 and atom.generators[0].ifs:
        # `[t for t in ids if t < -slack or t >= vocab + slack]` (slack huge): always empty, so false
        ifs = atom.generators[0].ifs
        return False if _never_holds(ifs[0] if len(ifs) == 1 else ast.BoolOp(op=ast.And(), values=ifs)) else None
    return None


_HUGE = 1e6  # a bound no real size, id or count reaches (as `reach.never_fires` reads one)
_ABOVE = (ast.Gt, ast.GtE)
_BELOW = (ast.Lt, ast.LtE)


def _past_reach(atom: ast.expr) -> bool:
    """`x > 1e9`, `x >= vocab_size + (1 << 40)`, `x < -(1 << 40)`: a value held past a bound it never reaches."""
    if not (isinstance(atom, ast.Compare) and len(atom.ops) == 1):
        return False
    op, sides = atom.ops[0], (_bound(atom.left), _bound(atom.comparators[0]))
    for bound, above in ((sides[1], isinstance(op, _ABOVE)), (sides[0], isinstance(op, _BELOW))):
        step = bound if isinstance(bound, float) else bound[1]
        if isinstance(op, _ABOVE + _BELOW) and (step >= _HUGE if above else step <= -_HUGE):
            return True
    return False


def _never_holds(condition: ast.expr) -> bool:
    """Whether a filter's condition holds for no value: each way it can hold needs a value past a
    bound none reaches."""
    atoms: list[ast.expr] = []

    def spelling(node: ast.expr) -> str:
        atoms.append(node)
        return str(len(atoms) - 1)

    holding = terms(condition, spelling)
    if not holding or len(atoms) > _MAX_ATOMS:
        return False
    return all(any(_past_reach(atoms[int(a)]) for a in term) for term in holding)


def _compare_truth(atom: ast.Compare) -> bool | None:
    left, op, right = atom.left, atom.ops[0], atom.comparators[0]
    if isinstance(left, ast.Constant) and isinstance(right, ast.Constant):
        try:
            return bool(eval(compile(ast.Expression(atom), "<test>", "eval"), {"__builtins__": {}}))  # noqa: S307
        except Exception:  # noqa: BLE001 - a comparison of two literals that raises folds to nothing
            return None
    if isinstance(op, ast.In | ast.NotIn) and isinstance(right, ast.Tuple | ast.List | ast.Set):
        if any(ast.dump(left) == ast.dump(e) for e in right.elts):
            return isinstance(op, ast.In)  # `torch.float16 in (torch.float16, ...)`
        return None
    none = isinstance(right, ast.Constant) and right.value is None
    if isinstance(op, ast.Is | ast.IsNot) and none and _never_none(left):
        return isinstance(op, ast.IsNot)
    if ast.dump(left) == ast.dump(right) and not _draws(left):
        if isinstance(op, ast.Eq | ast.LtE | ast.GtE | ast.Is):
            return True
        if isinstance(op, ast.NotEq | ast.Lt | ast.Gt | ast.IsNot):
            return False  # a NaN aside: a check of a value against itself is a check of nothing
    return None


_DRAWS = re.compile(r"rand|random|time|perf_counter|next|pop|read|recv|get_nowait")


def _draws(node: ast.expr) -> bool:
    """Whether an expression calls something that gives another value each time (`torch.rand`, `next`)."""
    return any(isinstance(n, ast.Call) and _DRAWS.search(ast.unparse(n.func)) for n in ast.walk(node))


def _never_none(node: ast.expr) -> bool:
    """A value that is never None: a literal other than None, a container display, a factory call."""
    if isinstance(node, ast.Constant):
        return node.value is not None
    if isinstance(node, ast.List | ast.Tuple | ast.Dict | ast.Set | ast.JoinedStr):
        return True
    return _made(node) in _ONES | _ZEROS


_MIRROR: dict[type, type] = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq}
_NEGATE: dict[type, type] = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt}
_NEGATE.update({ast.Eq: ast.NotEq, ast.NotEq: ast.Eq})


def _negate(node: ast.Compare) -> ast.expr:
    kind = _NEGATE.get(type(node.ops[0]))
    if kind is None:
        return ast.UnaryOp(op=ast.Not(), operand=node)
    return ast.Compare(left=node.left, ops=[kind()], comparators=node.comparators)


def _bound(node: ast.expr) -> _Bound:
    value = number(node)
    if value is not None:
        return value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        step = number(node.right)
        if step is not None:
            return ast.unparse(node.left), step if isinstance(node.op, ast.Add) else -step
    return ast.unparse(node), 0.0


def _never_negative(node: ast.expr, counts: frozenset[str]) -> bool:
    """A size by construction: a count's name, a loop index, `x.ndim`, `x.shape[i]`, `len()`, `.numel()`."""
    if isinstance(node, ast.Name):
        return node.id in counts or bool(_COUNT.match(node.id))
    if isinstance(node, ast.Attribute):
        return bool(_COUNT.match(node.attr)) or node.attr in _SIZE_ATTRS
    if isinstance(node, ast.Subscript):
        return _sizes(node.value)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id in _SIZE_CALLS
        return isinstance(func, ast.Attribute) and func.attr in _SIZE_METHODS
    return False


def _domain(subject: ast.expr, counts: frozenset[str]) -> tuple[list[tuple[_Bound, bool]], list[tuple[_Bound, bool]]]:
    """Bounds a value keeps by construction: (lows, highs), each (bound, strict)."""
    lows: list[tuple[_Bound, bool]] = []
    highs: list[tuple[_Bound, bool]] = []
    node = _stripped(subject)
    if _never_negative(node, counts):
        lows.append((0.0, False))
        if (upper := _first_rows(node)) is not None:
            highs.append((_bound(upper), False))  # `len(x[:limit])`, `x[:limit].shape[0]`
    elif isinstance(node, ast.Call):
        func = node.func
        made = _made(node)
        if isinstance(func, ast.Attribute) and func.attr in _REDUCTIONS and not node.args:
            return _domain(func.value, counts)  # the largest of values that keep a bound keeps it
        if made in _SMALLER | _LARGER and len(node.args) == 2 and not node.keywords:
            for arg in node.args:
                (highs if made in _SMALLER else lows).append((_bound(arg), False))
        elif (clamp := _clamp(node)) is not None:
            low, high = clamp
            if low is not None:
                lows.append((_bound(low), False))
            if high is not None:
                highs.append((_bound(high), False))
    return lows, highs


_SMALLER = frozenset({"min", "minimum", "fmin"})
_LARGER = frozenset({"max", "maximum", "fmax"})


def _first_rows(node: ast.expr) -> ast.expr | None:
    """The `limit` of `len(x[:limit])`, `x[:limit].shape[0]`, `x[:limit].size(0)`: a length that cannot pass it."""
    sliced: ast.expr | None = None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and node.args:
        sliced = node.args[0]
    elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        sliced = node.value.value if _is_zero(node.slice) else None
    elif isinstance(node, ast.Call) and _made(node) == "size" and len(node.args) == 1 and _is_zero(node.args[0]):
        sliced = node.func.value if isinstance(node.func, ast.Attribute) else None
    if not isinstance(sliced, ast.Subscript):
        return None
    part = sliced.slice.elts[0] if isinstance(sliced.slice, ast.Tuple) and sliced.slice.elts else sliced.slice
    if isinstance(part, ast.Slice) and part.step is None and (part.lower is None or _is_zero(part.lower)):
        return part.upper
    return None


def _is_zero(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


def _sizes(node: ast.expr) -> bool:
    """`x.shape`, `x.size()`: what indexes into sizes."""
    return (isinstance(node, ast.Attribute) and node.attr == "shape") or _made(node) == "size"


def _clamp(call: ast.Call) -> tuple[ast.expr | None, ast.expr | None] | None:
    """(min, max) of `x.clamp(min=a, max=b)`, `torch.clamp(x, a, b)`, `x.clip(max=b)`."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in ("clamp", "clip")):
        return None
    args = list(call.args)
    if isinstance(func.value, ast.Name) and func.value.id in ("torch", "np", "numpy"):
        args = args[1:]
    low = args[0] if args else None
    high = args[1] if len(args) > 1 else None
    for keyword in call.keywords:
        if keyword.arg in ("min", "a_min"):
            low = keyword.value
        elif keyword.arg in ("max", "a_max"):
            high = keyword.value
    if isinstance(low, ast.Constant) and low.value is None:
        low = None
    if isinstance(high, ast.Constant) and high.value is None:
        high = None
    return low, high


def _constraint(atom: ast.expr, counts: frozenset[str]) -> _Constraint | None:
    """A comparison of a value with a bound as (subject, lows, highs), its domain included."""
    atom = _stripped(atom)
    if not (isinstance(atom, ast.Compare) and len(atom.ops) == 1):
        return None
    op, left, right = type(atom.ops[0]), atom.left, atom.comparators[0]
    if op not in _MIRROR:
        return None
    if number(left) is not None and number(right) is None:
        left, right, op = right, left, _MIRROR[op]
    lows, highs = _domain(left, counts)
    bound = _bound(right)
    if op in (ast.Gt, ast.GtE, ast.Eq):
        lows.append((bound, op is ast.Gt))
    if op in (ast.Lt, ast.LtE, ast.Eq):
        highs.append((bound, op is ast.Lt))
    return ast.unparse(left), lows, highs


def _empty(lows: list[tuple[_Bound, bool]], highs: list[tuple[_Bound, bool]]) -> bool:
    """Whether no value lies above every low and below every high (bounds compared when both are
    numbers or both offsets of the same spelling; nothing reaches infinity)."""
    for low, strict in lows:
        if low == math.inf:
            return True
        for high, strict_high in highs:
            if high == -math.inf:
                return True
            if isinstance(low, float) and isinstance(high, float):
                apart = high - low
            elif isinstance(low, tuple) and isinstance(high, tuple) and low[0] == high[0]:
                apart = high[1] - low[1]
            else:
                continue
            if apart < 0 or (apart == 0 and (strict or strict_high)):
                return True
    return False


def _unequal(atom: ast.expr) -> ast.Compare | None:
    """`x != c` as its comparison, else None."""
    atom = _stripped(atom)
    if isinstance(atom, ast.Compare) and len(atom.ops) == 1 and isinstance(atom.ops[0], ast.NotEq):
        return atom
    return None


def _satisfiable(atoms: list[ast.expr], counts: frozenset[str], splits: int = 3) -> bool:
    """Whether all of `atoms` can hold at once (`x != c` tried as `x < c`, then as `x > c`)."""
    for atom in atoms if splits else ():
        compare = _unequal(atom)
        if compare is None:
            continue
        rest = [a for a in atoms if a is not atom]
        sides = (ast.Compare(left=compare.left, ops=[op()], comparators=compare.comparators) for op in (ast.Lt, ast.Gt))
        return any(_satisfiable([*rest, side], counts, splits - 1) for side in sides)
    bounds: dict[str, tuple[list[tuple[_Bound, bool]], list[tuple[_Bound, bool]]]] = {}
    for atom in atoms:
        if _truth(atom, counts) is False:
            return False
        found = _constraint(atom, counts)
        if found is None:
            continue
        subject, lows, highs = found
        kept = bounds.setdefault(subject, ([], []))
        kept[0].extend(lows)
        kept[1].extend(highs)
    return not any(_empty(lows, highs) for lows, highs in bounds.values())


def rejects_nothing(test: ast.expr, raising: bool, bindings: Bindings = _EMPTY) -> tuple[bool, list[int]]:
    """Whether a check fails on no value it can see (`raising`: it fails when `test` holds, an `if`
    of a raise; else when it does not, an assert), and the lines of the bindings that made it so."""
    put, used = _substituted(test, bindings.values)
    if bindings.pinned:
        put, more = _substituted(put, bindings.pinned)
        used += more
    atoms: list[ast.expr] = []

    def spelling(node: ast.expr) -> str:
        atoms.append(node)
        return str(len(atoms) - 1)

    failing = terms(put, spelling, raising)
    if failing is None or len(atoms) > _MAX_ATOMS:
        return False, []
    if any(_satisfiable([atoms[int(a)] for a in term], bindings.counts) for term in failing):
        return False, []
    return True, sorted(set(used))
