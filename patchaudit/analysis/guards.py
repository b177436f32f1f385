"""What a check's test lets through, and which `with` blocks swallow the exceptions raised in them.

A guard is weakened as often by a new term beside its test as by a deleted line: `assert ok` turned
into `assert ok and shape_ok or DEBUG`, `assert ok if not SKIP else True`, `if bad: raise` turned
into `if (bad) if not LAX else False: raise`. Both sides are read as a disjunction of conjunctions
of their atoms (`and`/`or`/`not`/conditional expressions and literal constants folded), so a term
that lets the check pass without the pristine test holding shows however it is spelled.

A guard is swallowed as often by a context manager as by `try/except: pass`: `contextlib.suppress`
under any import form or alias (`from contextlib import suppress as quiet`), an instance of one
bound to a name, a class of the module whose `__exit__` returns a true constant, or a generator of
the module decorated `@contextmanager` that catches around its `yield` without raising again.

Pure functions over `ast`; `spelling` is the caller's normal form of an atom.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from patchaudit.analysis.trees import dotted, walk

__all__ = [
    "Terms",
    "conjunction",
    "covers",
    "escapes",
    "fails_alike",
    "narrowed",
    "swallowers",
    "swallowed_by",
    "terms",
]

Terms = frozenset[frozenset[str]]  # or of ands of atoms' spellings
Spelling = Callable[[ast.expr], str]
_MAX_TERMS = 16
_NEGATE: dict[type, type] = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt}
_NEGATE.update({ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn})
_NEGATE[ast.NotIn] = ast.In
_ALWAYS: Terms = frozenset({frozenset()})
_NEVER: Terms = frozenset()


def _negated(node: ast.expr) -> ast.expr:
    """`not node`, pushed through a single comparison and a double negation."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return node.operand
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _NEGATE:
        return ast.Compare(left=node.left, ops=[_NEGATE[type(node.ops[0])]()], comparators=node.comparators)
    return ast.UnaryOp(op=ast.Not(), operand=node)


def _product(left: Terms | None, right: Terms | None) -> Terms | None:
    if left is None or right is None or len(left) * len(right) > _MAX_TERMS:
        return None
    return frozenset(a | b for a in left for b in right)


def terms(test: ast.expr, spelling: Spelling, positive: bool = True) -> Terms | None:
    """`test` (or `not test`) as the sets of atoms any one of which, all holding, makes it true;
    None when it grows past a few terms."""
    if isinstance(test, ast.Constant):
        return _ALWAYS if bool(test.value) == positive else _NEVER
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return terms(test.operand, spelling, not positive)
    if isinstance(test, ast.BoolOp):
        parts = [terms(v, spelling, positive) for v in test.values]
        if isinstance(test.op, ast.Or) == positive:
            if any(p is None for p in parts):
                return None
            out = frozenset().union(*parts)  # type: ignore[arg-type]
            return out if len(out) <= _MAX_TERMS else None
        product: Terms | None = _ALWAYS
        for part in parts:
            product = _product(product, part)
        return product
    if isinstance(test, ast.Tuple | ast.List) and test.elts:
        return _ALWAYS if positive else _NEVER  # `assert (ok, "message")`: a tuple is always true
    spread = _any_all(test)
    if spread is not None:
        return terms(ast.BoolOp(op=spread[0], values=spread[1]), spelling, positive)
    if isinstance(test, ast.IfExp):
        taken = _product(terms(test.test, spelling), terms(test.body, spelling, positive))
        other = _product(terms(test.test, spelling, False), terms(test.orelse, spelling, positive))
        if taken is None or other is None or len(taken | other) > _MAX_TERMS:
            return None
        return taken | other
    return frozenset({frozenset({spelling(test if positive else _negated(test))})})


def _any_all(test: ast.expr) -> tuple[ast.boolop, list[ast.expr]] | None:
    """`any([a, b])` as `a or b`, `all((a, b))` as `a and b`: a literal list of two or more tests."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and len(test.args) == 1):
        return None
    items = test.args[0]
    if test.func.id not in ("any", "all") or test.keywords or not isinstance(items, ast.List | ast.Tuple):
        return None
    if len(items.elts) < 2 or any(isinstance(e, ast.Starred) for e in items.elts):
        return None
    return (ast.Or() if test.func.id == "any" else ast.And()), list(items.elts)


def conjunction(test: ast.expr, spelling: Spelling) -> frozenset[str] | None:
    """The atoms of a test that holds on one term only (`a and b`, `(bad) if not LAX else False`), else None."""
    found = terms(test, spelling)
    return next(iter(found)) if found is not None and len(found) == 1 else None


def escapes(before: ast.expr, after: ast.expr, spelling: Spelling) -> list[frozenset[str]]:
    """The terms of an assert's new test that let it pass without the old test holding, when the
    old test is still one of its ways to pass (`assert ok` to `assert ok and b or DEBUG`: `DEBUG`).
    A test rewritten as a whole (`x.dim() == 2` to `x.ndim == 2`) has none: nothing of it is kept."""
    old, new = terms(before, spelling), terms(after, spelling)
    if not old or not new or old == new:
        return []
    kept = [t for t in new if any(o <= t for o in old)]
    if not kept and frozenset() not in new:
        return []  # rewritten as a whole, unless it now always passes
    return sorted((t for t in new if not any(o <= t for o in old)), key=sorted)


# -- context managers that swallow ------------------------------------------------------------

_SUPPRESS = "contextlib.suppress"
_CONTEXTMANAGERS = ("contextlib.contextmanager", "contextlib.asynccontextmanager")
CATCH_ALL = "*"  # a swallower that keeps whatever is raised in it


def _imports(found: list[ast.AST]) -> dict[str, str]:
    """Spelling -> qualified name of the contextlib names the module imports (any form, aliases)."""
    out: dict[str, str] = {}
    for node in found:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "contextlib":
                    out[alias.asname or "contextlib"] = "contextlib"
        elif isinstance(node, ast.ImportFrom) and node.module == "contextlib":
            for alias in node.names:
                out[alias.asname or alias.name] = f"contextlib.{alias.name}"
    return out


def _head(node: ast.expr) -> str | None:
    """The name a dotted spelling starts with (`contextlib` of `contextlib.contextmanager`)."""
    found = dotted(node)
    return found.partition(".")[0] if found is not None else None


def _qualified(node: ast.expr, imports: dict[str, str]) -> str | None:
    spelled = dotted(node)
    if spelled is None:
        return None
    head, dot, rest = spelled.partition(".")
    return imports[head] + dot + rest if head in imports else None


def _exit_swallows(cls: ast.ClassDef) -> bool:
    """A class whose `__exit__` returns a true constant: the exception is dropped."""
    for item in cls.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name in ("__exit__", "__aexit__"):
            return any(
                isinstance(r, ast.Return) and isinstance(r.value, ast.Constant) and bool(r.value.value)
                for r in ast.walk(item)
            )
    return False


def _generator_swallows(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A `@contextmanager` generator that yields inside a `try` a handler of which does not raise."""
    for node in ast.walk(func):
        if not isinstance(node, ast.Try | ast.TryStar):
            continue
        yields = any(isinstance(n, ast.Yield) for stmt in node.body for n in ast.walk(stmt))
        if yields and any(not any(isinstance(n, ast.Raise) for n in ast.walk(h)) for h in node.handlers):
            return True
    return False


def swallowers(tree: ast.Module) -> dict[str, str]:
    """Spelling of a callable or instance -> what it swallows when a `with` enters it:
    `contextlib.suppress` (its arguments name the classes) or CATCH_ALL."""
    found = walk(tree)
    imports = _imports(found)
    out = {name: _SUPPRESS for name, q in imports.items() if q == _SUPPRESS}
    if "contextlib" in imports.values():
        out.update({f"{n}.suppress": _SUPPRESS for n, q in imports.items() if q == "contextlib"})
    for node in found:
        if isinstance(node, ast.ClassDef) and _exit_swallows(node):
            out[node.name] = CATCH_ALL
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.decorator_list and imports:
            decorated = any(_qualified(d, imports) in _CONTEXTMANAGERS for d in node.decorator_list)
            if decorated and _generator_swallows(node):
                out[node.name] = CATCH_ALL
    if not out:
        return out  # nothing swallows, so nothing bound to one does
    heads = {name.partition(".")[0] for name in out}
    for node in found:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if not isinstance(target, ast.Name | ast.Attribute):
            continue
        called = value.func if isinstance(value, ast.Call) else None
        head = _head(called if called is not None else value)
        if head is not None and head not in heads:
            continue  # names nothing that swallows: not worth spelling out
        if called is not None and (kind := out.get(ast.unparse(called))) is not None:
            # `quiet = contextlib.suppress(Exception)`, then `with quiet:`
            out[ast.unparse(target)] = CATCH_ALL if kind == CATCH_ALL else ast.unparse(value)
        elif isinstance(value, ast.Name | ast.Attribute) and (kind := out.get(ast.unparse(value))) is not None:
            out[ast.unparse(target)] = kind  # `quiet = contextlib.suppress`, then `with quiet(Exception):`
        else:
            continue
        heads.add(ast.unparse(target).partition(".")[0])
    return out


def _spelled(node: ast.expr) -> list[str]:
    """How `swallowers` may have recorded what a `with` item names: as written, and a method called
    on `self`/`cls` by its own name."""
    text = ast.unparse(node)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
        return [text, node.attr]
    return [text]


def swallowed_by(item: ast.expr, found: dict[str, str]) -> ast.ExceptHandler | None:
    """The `except` clause a `with` item amounts to, when it swallows: `suppress(A, B)` is
    `except (A, B): pass`, a swallower of the module a bare `except: pass`."""
    call = item if isinstance(item, ast.Call) else None
    kind = next((found[k] for k in _spelled(call.func if call is not None else item) if k in found), None)
    if kind is None:
        return None
    if kind == CATCH_ALL:
        return ast.ExceptHandler(type=None, name=None, body=[ast.Pass()])
    if call is None and kind != _SUPPRESS:
        bound = ast.parse(kind, mode="eval").body  # an instance bound to `suppress(...)`
        call = bound if isinstance(bound, ast.Call) else None
    if call is None or not call.args:
        return None  # `suppress()` keeps nothing
    kinds = ast.Tuple(elts=list(call.args), ctx=ast.Load())
    return ast.ExceptHandler(type=kinds, name=None, body=[ast.Pass()])


# -- a test narrowed by its shape ------------------------------------------------------------

# Comparisons that, as the test of a raise, reject everything outside a set (`x != e`, `x not in
# allowed`): what passes is bounded. Their flips reject only the values they name.
_OUTSIDE = (ast.NotEq, ast.NotIn)
_NAMED = (ast.Eq, ast.In, ast.Is)


def _root(node: ast.expr) -> str | None:
    """The name an operand is read from: `x` of `x.shape[-1]`, `w.dtype`, `len(x)`'s `x`."""
    while True:
        if isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Name):
            node = node.args[0]  # `len(x)`, `type(x)`
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value  # `x.size(0)`, `x.dim()`
        else:
            return node.id if isinstance(node, ast.Name) and node.id not in ("self", "cls") else None


def _subject(node: ast.Compare) -> str | None:
    """What a one-operator comparison tests: the left operand, or the right one of a Yoda test;
    an operand read from `self` counts by its attribute (`self.head_dim`)."""
    for side in (node.left, node.comparators[0]):
        if isinstance(side, ast.Constant | ast.Tuple | ast.List | ast.Set):
            continue
        root = _root(side)
        if root is None and isinstance(side, ast.Attribute) and isinstance(side.value, ast.Name):
            root = f"{side.value.id}.{side.attr}"
        return root
    return None


def _shapes(test: ast.expr, raising: bool, flip: bool = False) -> set[tuple[str, bool]]:
    """(subject, whether the test, as a check, lets only a bounded set pass on it) for each
    one-operator comparison of `test` (through and/or/not). `raising`: the test fails the check
    when it holds (an `if` of a raise), else when it does not (an assert)."""
    if isinstance(test, ast.BoolOp):
        return {s for v in test.values for s in _shapes(v, raising, flip)}
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _shapes(test.operand, raising, not flip)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return set()
    subject = _subject(test)
    op = _NEGATE.get(type(test.ops[0]), type(test.ops[0])) if flip != (not raising) else type(test.ops[0])
    if subject is None or not (issubclass(op, _OUTSIDE) or issubclass(op, _NAMED)):
        return set()
    return {(subject, issubclass(op, _OUTSIDE))}


def fails_alike(check: ast.expr, raises_if: ast.expr, spelling: Spelling) -> bool:
    """Whether `assert check` and `if raises_if: raise` fail on the same inputs, compared as logic
    (`assert x is not None and ok(x)` as `if x is None or not ok(x): raise`)."""
    failing = terms(check, spelling, False)
    return failing is not None and failing == terms(raises_if, spelling)


def covers(failing: Terms | None, others: list[Terms | None]) -> bool:
    """Whether the checks that fail on `others` (each an `or` of `and`s) together fail on every
    input `failing` describes: each of its terms holds one of theirs (`assert a` and `assert b`
    folded into `if not a or not b: raise`, `if x < 0: raise` into `if x < 0 or y < 0: raise`, an
    `assert a and b` split into `if not a: raise` and `if not b: raise`)."""
    if not failing:
        return False
    known = [t for o in others if o for t in o]
    return all(any(o <= term for o in known) for term in failing)


def narrowed(before: ast.expr, after: ast.expr, spelling: Spelling, raising: bool) -> tuple[str, frozenset[str]] | None:
    """How a check's new test lets through what its old one did not, when it was rewritten rather
    than edited, with the atoms of the old test it no longer has: a test that rejected everything
    outside a set now rejects only values it names (`if x != expected: raise` to `if x == bad:
    raise`, `not in allowed` to `in {bad}`), or the new test fails on fewer inputs, spelled with the
    old atoms only (`assert x is not None and ok(x)` to `assert x is not None`; `if a or b: raise`
    to `if a: raise`; `if not (a and b)` to `if not a and not b`). A set widened or a bound moved
    in place (`not in (64, 128)` to `not in (64, 128, 256)`, `> 4096` to `> 8192`) keeps its
    shape: not this."""
    old, new = _shapes(before, raising), _shapes(after, raising)
    for subject, bounded in sorted(old):
        if bounded and (subject, False) in new and (subject, True) not in new:
            return f"it rejected every `{subject}` outside a set, now only the values it names", frozenset()
    fails_old, fails_new = terms(before, spelling, raising), terms(after, spelling, raising)
    said_old, said_new = terms(before, spelling), terms(after, spelling)
    if not (fails_old and fails_new and said_old and said_new) or fails_old == fails_new:
        return None
    if not frozenset().union(*fails_new) <= frozenset().union(*fails_old):
        return None  # a new atom: rewritten, not trimmed
    if not all(any(o <= t for o in fails_old) for t in fails_new):
        return None  # it fails somewhere the old test did not: stricter, or rewritten
    gone = frozenset().union(*said_old) - frozenset().union(*said_new)
    if gone:
        return "it no longer checks " + ", ".join(f"`{a}`" for a in sorted(gone)), gone
    return "it now fails only where all of its parts do", gone
