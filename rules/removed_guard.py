"""removed-guard: a raise, assert or check that the pristine code had and the installed one lost or weakened."""

import ast
import builtins
import copy
import difflib
import functools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from patchaudit.rule import (
    CHECK_CALL,
    Example,
    Hit,
    Severity,
    Siblings,
    TextRule,
    bindings_at,
    blocked_lines,
    exits_above,
    guard_conjunction,
    guard_covers,
    guard_escapes,
    guard_fails_alike,
    guard_narrowed,
    guard_terms,
    imported_names,
    left_before,
    line_opcodes,
    neutered,
    never_fires,
    off_by_default,
    rejects_nothing,
    repinned,
    source_lines,
    swallowed_by,
    swallowers,
)

_LOGGING = re.compile(r"print\(|log|warn|return\b|pass\b|continue\b")
# A line that may bind a name to a number (`MAX_TOKENS = sys.maxsize`, `self.limit = float("inf")`).
_PINS = re.compile(r"^\s*[\w.]+\s*(?::[^=]*)?=\s*[-+(]*\s*(?:\d|float\(|\w+\.(?:inf|maxsize)\b)")
_FLIP = {ast.Lt: ">", ast.Gt: "<", ast.LtE: ">=", ast.GtE: "<="}
_SYMMETRIC = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)


@dataclass(frozen=True, slots=True)
class _Guard:
    kind: str  # "raise" | "assert" | "check" | "helper" (a call of a function of the module that raises)
    label: str  # what the message names: `raise ValueError`, `assert x > 0`, `check_dtype()`
    line: int
    conditions: frozenset[str]  # conjuncts of the enclosing `if` tests, within the scope
    alternatives: frozenset[str]  # disjuncts of an assert's test
    swallowed: bool  # inside a `try` whose handler does not raise
    # An assert's test negated (`q.dim() != 3`, `not ok`): the `if` of a raise that replaces it.
    negated: frozenset[str] = frozenset()
    # Each condition with the line of the `if` test it comes from: a weakened test is reported there.
    tested: tuple[tuple[str, int], ...] = ()
    # What the guard tests: an assert's test, or the `if` test right around a raise.
    test: ast.expr | None = None
    # What a helper's call raises through the function it calls (`ValueError`).
    raises: frozenset[str] = frozenset()

    def line_of(self, conditions: Iterable[str]) -> int:
        """The line of the first `if` test that holds one of `conditions`, else the guard's own."""
        wanted = set(conditions)
        return next((line for cond, line in self.tested if cond in wanted), self.line)


def _norm(node: ast.expr) -> str:
    """A spelling of a condition that does not change when comparison operands are swapped."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, op, right = ast.unparse(node.left), node.ops[0], ast.unparse(node.comparators[0])
        members = node.comparators[0]
        if isinstance(op, ast.In | ast.NotIn) and isinstance(members, ast.List | ast.Tuple | ast.Set):
            # membership is the same in `[a, b]`, `(b, a)` and `{a, b}`
            right = "(" + ", ".join(sorted(ast.unparse(e) for e in members.elts)) + ")"
            return f"{left} {type(op).__name__} {right}"
        if isinstance(op, _SYMMETRIC):
            a, b = sorted((left, right))
            return f"{a} {type(op).__name__} {b}"
        if type(op) in _FLIP:
            symbol = {ast.Lt: "<", ast.Gt: ">", ast.LtE: "<=", ast.GtE: ">="}[type(op)]
            return min(f"{left} {symbol} {right}", f"{right} {_FLIP[type(op)]} {left}")
    return ast.unparse(node)


def _parts(node: ast.expr, op: type) -> frozenset[str]:
    if isinstance(node, ast.BoolOp) and isinstance(node.op, op):
        out: set[str] = set()
        for value in node.values:
            out |= _parts(value, op)
        return frozenset(out)
    return frozenset({_norm(node)})


def _conjuncts(test: ast.expr) -> frozenset[str]:
    """The parts of an `if` test that must all hold for its body to run: its `and` operands, or
    those of the one way a conditional expression or a folded constant leaves it
    (`(bad) if not LAX else False` is `not LAX and bad`)."""
    return guard_conjunction(test, _norm) or _parts(test, ast.And)


def _escape(before: _Guard, after: _Guard) -> str | None:
    """The ways an assert's new test passes without its old test (`assert ok and b or DEBUG`,
    `assert ok if not SKIP else True`), spelled as its extra alternatives."""
    if before.kind != "assert" or after.kind != "assert" or before.test is None or after.test is None:
        return None
    found = guard_escapes(before.test, after.test, _norm)
    return " or ".join(" and ".join(sorted(t)) or "True" for t in found) or None


def _fails_alike(check: _Guard, other: _Guard) -> bool:
    """An assert and a raise (`other`) whose `if` fails on what the assert did."""
    if other.kind != "raise" or check.test is None or other.test is None:
        return False
    return guard_fails_alike(check.test, other.test, _norm)


def _narrowed(before: _Guard, after: _Guard, now: list[_Guard]) -> tuple[int, str] | None:
    """The line of a check's test rewritten to let more through (its shape flipped, or atoms of it
    dropped), and how. Atoms another check of the scope now tests are not dropped: `if a or b:
    raise` split into `if a: raise` and `if b: raise` checks as much."""
    if before.kind != after.kind or before.test is None or after.test is None or before.kind == "check":
        return None
    found = guard_narrowed(before.test, after.test, _norm, raising=before.kind == "raise")
    if found is None:
        return None
    how, gone = found
    elsewhere = {c for g in now if g is not after for c in g.conditions | g.alternatives}
    if gone and gone <= elsewhere:
        return None
    return after.test.lineno, how


def _failing(guard: _Guard) -> frozenset[frozenset[str]] | None:
    """What a raise or an assert fails on, the conditions around it included, as an `or` of `and`s."""
    if guard.kind == "check" or (guard.test is None and guard.kind == "assert"):
        return None
    own = guard_terms(guard.test, _norm, guard.kind == "raise") if guard.test is not None else frozenset({frozenset()})
    if own is None:
        return None
    outer = guard.conditions - (_conjuncts(guard.test) if guard.kind == "raise" and guard.test else frozenset())
    return frozenset(t | outer for t in own)


def _covered(before: _Guard, now: list[_Guard]) -> bool:
    """A removed raise or assert whose failures the scope's checks now fail on together: checks folded
    into one (`assert a` and `assert b` as `if not a or not b: raise`), or one split in several."""
    kinds = ("raise",) if before.kind == "raise" else ("raise", "assert")  # `python -O` drops asserts
    # a check with a test of its own: not a re-raise in an `except`, nor a raise on an `else`
    return guard_covers(_failing(before), [_failing(g) for g in now if g.kind in kinds and g.test is not None])


def _vacuous(
    before: _Guard, after: _Guard, trees: tuple[ast.Module, ast.Module], changed: list[int]
) -> tuple[int, str] | None:
    """The line that left a check unable to reject anything its pristine test rejected, and how:
    its new test can no longer fail (`assert n > 0` to `assert n >= 0` of a length, a bound raised
    to `float("inf")`), or the lines above it overwrite what it reads (`scale = None` above `if
    scale is not None and ...: raise`)."""
    if before.kind == "check" or before.test is None or after.test is None:
        return None
    same_test = ast.dump(before.test) == ast.dump(after.test)
    if same_test and not (changed and changed[0] < after.line):
        return None  # the same test, nothing above it changed
    raising = after.kind == "raise"
    found = bindings_at(trees[0], after.test.lineno, after.test)
    now, used = rejects_nothing(after.test, raising, found)
    if not now or rejects_nothing(before.test, raising, bindings_at(trees[1], before.test.lineno, before.test))[0]:
        return None
    if left_before(before.test, raising, exits_above(trees[0], after.test.lineno), found.counts):
        return None  # what it failed on now leaves above it (`if num_tokens == 0: return` over `>= 0`)
    written = [line for line in used if line in set(changed)]
    if written and ast.dump(before.test) == ast.dump(after.test):
        return min(written), "what it tests is now bound to a value it passes, so it can no longer fail"
    if written:
        return after.test.lineno, f"`{ast.unparse(after.test)}` can no longer fail, with what is bound above it"
    return after.test.lineno, f"`{ast.unparse(after.test)}` can no longer fail"


def _raises(handler: ast.ExceptHandler) -> bool:
    return any(isinstance(n, ast.Raise) for n in ast.walk(handler))


def _functions(tree: ast.Module, lines: list[str]) -> dict[str, str | None]:
    """Functions at module level and in classes (dotted name) -> their source; None if defined twice."""
    out: dict[str, str | None] = {}

    def walk(body: list[ast.stmt], scope: str) -> None:
        for stmt in body:
            if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            name = stmt.name if not scope else f"{scope}.{stmt.name}"
            if isinstance(stmt, ast.ClassDef):
                walk(stmt.body, name)
                continue
            first = min([stmt.lineno, *(d.lineno for d in stmt.decorator_list)])
            text = "\n".join(lines[first - 1 : stmt.end_lineno])
            out[name] = None if name in out else text

    walk(tree.body, "")
    return out


def _own_nodes(node: ast.AST) -> Iterable[ast.AST]:
    """The nodes of a function's own body: not those of functions, classes or lambdas inside it."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        yield child
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(child))


def _raised(node: ast.Raise | ast.Assert) -> str | None:
    """The class a raise or an assert raises (the last part of its name); None for a bare `raise`."""
    if isinstance(node, ast.Assert):
        return "AssertionError"
    target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return None if target is None else ast.unparse(target).rsplit(".", 1)[-1]


class _Raisers:
    """Functions of the module (dotted, as `_scope_guards` names them) -> the classes they raise
    or assert in their own body, read when first asked (a drifted file asks about few)."""

    def __init__(self, tree: ast.Module) -> None:
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        classes: set[str] = set()
        self._kinds: dict[str, frozenset[str]] = {}

        def walk(body: list[ast.stmt], scope: str) -> None:
            for stmt in body:
                if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    name = stmt.name if not scope else f"{scope}.{stmt.name}"
                    if isinstance(stmt, ast.ClassDef):
                        classes.add(name)
                        walk(stmt.body, name)
                    else:
                        self.functions[name] = stmt

        walk(tree.body, "")
        self.classes = frozenset(classes)

    def raised(self, name: str) -> frozenset[str]:
        if name not in self._kinds:
            function = self.functions.get(name)
            kinds = (
                {_raised(n) for n in _own_nodes(function) if isinstance(n, ast.Raise | ast.Assert)}
                if function
                else set()
            )
            kinds.discard(None)
            self._kinds[name] = frozenset(kinds)  # type: ignore[arg-type]
        return self._kinds[name]


def _helper_guard(stmt: ast.stmt, scope: str, raisers: _Raisers) -> tuple[str, frozenset[str]] | None:
    """A statement that calls a function of the module that raises (`self.track_weights(...)`,
    `_validate(x)`, `Layer.check(x)`, perhaps keeping its result): its label and what it raises.
    Its checks are this spot's: a patch that swallows the call swallows them."""
    value = stmt.value if isinstance(stmt, ast.Expr | ast.Assign | ast.AnnAssign) else None
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    key: str | None = None
    if isinstance(func, ast.Name):
        key = func.id
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        owner = scope.rsplit(".", 1)[0] if func.value.id in ("self", "cls") and "." in scope else func.value.id
        key = f"{owner}.{func.attr}" if owner in raisers.classes else None
    kinds = raisers.raised(key) if key is not None and key in raisers.functions else None
    return (ast.unparse(func) + "()", kinds) if kinds else None


def _scope_guards(tree: ast.Module, same: frozenset[str] = frozenset()) -> dict[str, list[_Guard]]:
    """Scope (`<module>`, a class, a function, dotted) -> its guards in source order.

    Functions in `same` (their source is the same in both versions) are registered, not read:
    their guards and the conditions around them, all inside them, are the same.
    """
    out: dict[str, list[_Guard]] = {"<module>": []}
    raisers = _Raisers(tree)

    @functools.cache
    def quiet_with() -> dict[str, str]:
        """The module's swallowers, read at the first `with` walked."""
        return swallowers(tree)

    lists: dict[str, dict[str, ast.List | ast.Tuple]] = {}  # scope -> its names bound to a literal list

    def walk(body: list[ast.stmt], scope: str, conds: frozenset[str], swallowed: _Quiet, at: _At = ()) -> None:
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = stmt.name if scope == "<module>" else f"{scope}.{stmt.name}"
                out.setdefault(name, [])
                if name not in same:
                    out[name].extend(_decorator_guards(stmt))
                    walk(stmt.body, name, frozenset(), ())
                continue
            _note_list(stmt, lists.setdefault(scope, {}))
            if isinstance(stmt, ast.If) and (spread := _spread(stmt.test, lists.get(scope, {}))) is not stmt.test:
                stmt = ast.copy_location(ast.If(test=spread, body=stmt.body, orelse=stmt.orelse), stmt)
            guard = _guard(stmt, conds, bool(swallowed) and _caught(stmt, swallowed), at)
            if guard is None and scope != "<module>" and (called := _helper_guard(stmt, scope, raisers)):
                label, kinds = called
                caught = bool(swallowed) and any(_catches(swallowed, kind) for kind in kinds)
                guard = _Guard("helper", label, stmt.lineno, conds, frozenset(), caught, raises=kinds)
            if guard is not None:
                out[scope].append(guard)
            if isinstance(stmt, ast.If):
                inside, other = _conjuncts(stmt.test), f"not ({_norm(stmt.test)})"
                line = stmt.test.lineno
                walk(stmt.body, scope, conds | inside, swallowed, (*at, *((c, line) for c in inside), ("", stmt)))
                walk(stmt.orelse, scope, conds | {other}, swallowed, (*at, (other, line), ("", None)))
            elif isinstance(stmt, ast.Try | ast.TryStar):
                quiet = tuple(h for h in stmt.handlers if not _raises(h))
                walk(stmt.body, scope, conds, swallowed + quiet, at)
                for handler in stmt.handlers:
                    walk(handler.body, scope, conds, swallowed, at)
                walk(stmt.orelse, scope, conds, swallowed, at)
                walk(stmt.finalbody, scope, conds, swallowed, at)
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                # `with suppress(ValueError):`, `with quiet():` of a swallowing context manager.
                kept = (swallowed_by(item.context_expr, quiet_with()) for item in stmt.items)
                walk(stmt.body, scope, conds, swallowed + tuple(h for h in kept if h is not None), at)
            elif isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
                walk(stmt.body, scope, conds, swallowed, at)
                walk(getattr(stmt, "orelse", []), scope, conds, swallowed, at)
            elif isinstance(stmt, ast.Match):
                for case in stmt.cases:
                    walk(case.body, scope, conds, swallowed, at)

    walk(tree.body, "<module>", frozenset(), ())
    return out


def _note_list(stmt: ast.stmt, lists: dict[str, ast.List | ast.Tuple]) -> None:
    """Keep `name = [a, b, c]` for the tests below it; any other binding of the name forgets it."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AugAssign) else []
    for target in targets:
        if isinstance(target, ast.Name):
            if isinstance(stmt, ast.Assign) and len(targets) == 1 and isinstance(stmt.value, ast.List | ast.Tuple):
                lists[target.id] = stmt.value
            else:
                lists.pop(target.id, None)


def _spread(test: ast.expr, lists: dict[str, ast.List | ast.Tuple]) -> ast.expr:
    """`any(features)` with `features = [alibi, window, cap]` above, as `alibi or window or cap` (and
    `all(...)` as `and`): a check whose list lost an item lost a condition. The test itself when
    there is nothing to spread."""

    class _Spread(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if not (isinstance(node.func, ast.Name) and node.func.id in ("any", "all") and len(node.args) == 1):
                return node
            arg = node.args[0]
            items = (
                lists.get(arg.id)
                if isinstance(arg, ast.Name)
                else arg
                if isinstance(arg, ast.List | ast.Tuple)
                else None
            )
            if not items or not items.elts or any(isinstance(e, ast.Starred) for e in items.elts):
                return node
            elts = [ast.copy_location(ast.Name(id=ast.unparse(e), ctx=ast.Load()), node) for e in items.elts]
            if len(elts) == 1:
                return elts[0]
            op = ast.Or() if node.func.id == "any" else ast.And()
            return ast.copy_location(ast.BoolOp(op=op, values=elts), node)

    asks = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("any", "all") for n in ast.walk(test)
    )
    if not asks:
        return test
    spread = _Spread().visit(copy.deepcopy(test))
    return test if ast.dump(spread) == ast.dump(test) else spread


_Quiet = tuple[ast.ExceptHandler, ...]  # the handlers around a statement that do not raise again
# The conditions around a statement with the line of their `if` test; ("", the `if`) marks each `if`
# body entered, ("", None) each `else`.
_At = tuple[tuple[str, "int | ast.If | None"], ...]


def _exception_names(handler: ast.ExceptHandler) -> list[str] | None:
    """The class names a handler catches (the last part of each), None for `except:`."""
    if handler.type is None:
        return None
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return [ast.unparse(k).rsplit(".", 1)[-1] for k in kinds]


def _builtin_subclass(name: str, base: str) -> bool:
    low, high = getattr(builtins, name, None), getattr(builtins, base, None)
    return isinstance(low, type) and isinstance(high, type) and issubclass(low, high)


def _caught(stmt: ast.stmt, quiet: _Quiet) -> bool:
    """Whether a quiet handler around a guard catches what it raises: its class, a builtin base of it,
    `Exception`; an assert raises AssertionError; a check call may raise anything."""
    if isinstance(stmt, ast.Assert) or (isinstance(stmt, ast.Raise) and stmt.exc is not None):
        return _catches(quiet, _raised(stmt))  # type: ignore[arg-type]
    return True


def _catches(quiet: "_Quiet", raised: str) -> bool:
    """Whether one of the quiet handlers catches the class `raised` names."""
    for handler in quiet:
        names = _exception_names(handler)
        if names is None or any(n in ("Exception", "BaseException") or n == raised for n in names):
            return True
        if any(_builtin_subclass(raised, n) for n in names):
            return True
    return False


def _decorator_guards(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[_Guard]:
    """A decorator named like a check (`@validate_inputs`, `@check_shapes(...)`): it guards each call."""
    out = []
    for decorator in node.decorator_list:
        name = ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator)
        if CHECK_CALL.search(name):
            out.append(_Guard("check", f"@{name}", decorator.lineno, frozenset(), frozenset(), False))
    return out


def _guard(stmt: ast.stmt, conds: frozenset[str], swallowed: bool, at: _At = ()) -> _Guard | None:
    tested = tuple((c, line) for c, line in at if isinstance(line, int))
    if isinstance(stmt, ast.Raise):
        exc = stmt.exc
        target = exc.func if isinstance(exc, ast.Call) else exc
        label = "raise" if target is None else "raise " + ast.unparse(target)
        around = next((node for c, node in reversed(at) if not c), None)
        test = around.test if isinstance(around, ast.If) else None
        return _Guard("raise", label, stmt.lineno, conds, frozenset(), swallowed, tested=tested, test=test)
    if isinstance(stmt, ast.Assert):
        alternatives = _parts(stmt.test, ast.Or)
        label = "assert " + " or ".join(sorted(alternatives))
        negated = _negations(stmt.test)
        return _Guard("assert", label, stmt.lineno, conds, alternatives, swallowed, negated, tested, stmt.test)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        name = ast.unparse(stmt.value.func)
        if CHECK_CALL.search(name):
            return _Guard("check", name + "()", stmt.lineno, conds, frozenset(), swallowed)
    return None


_NEGATE = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt}
_NEGATE.update({ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In})


def _negations(test: ast.expr) -> frozenset[str]:
    """Spellings of `not test` as an `if` of a raise has it (`if q.dim() != 3:`, `if not ok:`)."""
    out = {_norm(ast.UnaryOp(op=ast.Not(), operand=test))}
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        out.add(_norm(test.operand))
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _NEGATE:
        flipped = ast.Compare(left=test.left, ops=[_NEGATE[type(test.ops[0])]()], comparators=test.comparators)
        out.add(_norm(flipped))
    return frozenset(out)


# The orderings of `a ? b` each comparison holds on: below, equal, above.
_HOLDS = {
    ast.Eq: frozenset("="),
    ast.NotEq: frozenset("<>"),
    ast.Lt: frozenset("<"),
    ast.LtE: frozenset("<="),
    ast.Gt: frozenset(">"),
    ast.GtE: frozenset(">="),
}
_MIRROR = str.maketrans("<>", "><")


def _holds(test: ast.expr | None) -> tuple[str, str, frozenset[str]] | None:
    """A one-operator comparison as (left, right, the orderings it holds on), else None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _HOLDS):
        return None
    return ast.unparse(test.left), ast.unparse(test.comparators[0]), _HOLDS[type(test.ops[0])]


def _wider(narrow: ast.expr | None, wide: ast.expr | None) -> bool:
    """Whether `wide`, a comparison of the same two operands as `narrow`, holds on a whole side
    more (`n == 0` against `n >= 0` or `0 <= n`)."""
    first, second = _holds(narrow), _holds(wide)
    if first is None or second is None:
        return False
    sides = second[2]
    if (second[0], second[1]) == (first[1], first[0]):
        sides = frozenset("".join(sides).translate(_MIRROR))  # `0 <= n` is `n >= 0`
    elif (second[0], second[1]) != (first[0], first[1]):
        return False
    # From an equality only: `<` to `<=` is an off-by-one fix as often as not, and `!= 0` to `> 0`
    # of a count the same test.
    return first[2] == frozenset("=") and bool((sides - first[2]) & set("<>"))


def _loosened(before: _Guard, after: _Guard) -> str | None:
    """An assert of an equality whose test now holds on a whole side more (`assert n == 0` to
    `assert n >= 0`)."""
    if before.kind != "assert" or after.kind != "assert" or not _wider(before.test, after.test):
        return None
    return f"`{ast.unparse(before.test)}` became `{ast.unparse(after.test)}`, which lets more through"  # type: ignore[arg-type]


def _accepted(test: ast.expr | None) -> tuple[str, frozenset[str]] | None:
    """A raise's test that rejects all but a few literals (`x != "silu"`, `x not in ("a", "b")`), as
    (what it tests, the literals it lets through); else None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    op, right = test.ops[0], test.comparators[0]
    if isinstance(op, ast.NotEq) and isinstance(right, ast.Constant):
        values = [right]
    elif isinstance(op, ast.NotIn) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
        values = right.elts
    else:
        return None
    if not values or not all(isinstance(v, ast.Constant) for v in values):
        return None
    return ast.unparse(test.left), frozenset(repr(v.value) for v in values)  # type: ignore[attr-defined]


def _widened(before: _Guard, after: _Guard, new_lines: list[str], changed: list[int]) -> str | None:
    """A raise that rejected all but one literal and now lets more through (`!= "silu"` to `not in
    ("silu", "gelu")`): the code below it was written for that one value. Reported while nothing
    else the patch wrote reads what it tests or names a literal it added: the values it lets in
    reach code written for the old one only. A patch that also adds the code for them (`if act ==
    "gelu": ...`, `get_act_fn(act)`) is a real widening."""
    if before.kind != "raise" or after.kind != "raise":
        return None
    then, now = _accepted(before.test), _accepted(after.test)
    if then is None or now is None or then[0] != now[0] or not now[1] > then[1]:
        return None
    if len(then[1]) > 1:
        return None  # a list of supported values grown by one more (a head size, a dtype): a kernel added
    assert after.test is not None
    own = set(range(after.test.lineno, (after.test.end_lineno or after.test.lineno) + 1))
    added = sorted(now[1] - then[1])
    words = [re.escape(now[0])] + [re.escape(a[1:-1]) if a[:1] in "'\"" else re.escape(a) for a in added]
    reads = re.compile(r"(?<![\w.])(?:" + "|".join(words) + r")(?!\w)")
    if any(reads.search(new_lines[n - 1]) for n in changed if n not in own and n <= len(new_lines)):
        return None
    return f"now lets {', '.join(added)} through, and nothing the patch wrote handles them"


class RemovedGuard(TextRule):
    ID = "removed-guard"
    SEVERITY = Severity.HIGH
    MESSAGE = "a raise/assert of the pristine code is gone from the installed one, or no longer fires"
    EXPLANATION = """\
Compares each function, class body and the module level of the installed file with the same
scope of the pristine file. A `raise`, an `assert` or a check call (`self._verify_quant(x)`)
that the vendor wrote is reported when the installed copy deleted it (or turned it into a
`print`, a `logger.warning`, a `return`), weakened it (an extra escape condition: `if cond and
not os.environ.get("SKIP"):`, `assert ok or SKIP`, reported on the `if` line that gained it; an
assert of an equality loosened in place to hold on a whole side more: `assert n == 0` to `assert
n >= 0`, not `<` to `<=`), or swallowed it (wrapped in `try`/`except` that does not raise). An
unsupported configuration (a dtype, a quantisation scheme, a shape) then runs instead of failing
loudly. An allow-list of one value widened: `if act != "silu": raise` to `if act not in ("silu",
"gelu"): raise` while nothing else the patch wrote reads `act` or names the values it lets in, so
they reach code written for the one (a list of several values grown by one more is a kernel added,
and is quiet). Not a removal: a reworded message, a changed exception
type, swapped comparison operands. Needs the pristine bytes: without them the rule cannot run.

Shapes understood: raises, asserts, check calls (`torch._assert(...)`, `self._validate(x)`, a helper
named for what it raises on: `raise_if_nan_logits(x)`, `self._fail_on_overflow(n)`) and
validating decorators (`@check_shapes`) of the pristine scope deleted, commented out, turned into a
print/log/return, weakened by an extra condition or alternative, or swallowed by try/except or by a
`with` that drops what is raised in it (`contextlib.suppress` under any import or alias, a name
bound to one, a class of the module whose `__exit__` returns True, a `@contextmanager` generator of
the module that catches around its `yield` without raising again). Tests are compared as an `or` of
`and`s, conditional expressions and literal constants folded: an assert that gained a way to pass
while keeping its old test (`assert ok and b or DEBUG`, `assert ok if not SKIP else True`) is
weakened, and so is an `if` of a raise that now holds on one term only beside a new one (`if (bad)
if not LAX else False:`). A test rewritten to a flipped shape is narrowed: one that rejected
everything outside a set now rejects only values it names (`if x != expected:` to `if x == bad:` or
`if x is None:`, `not in allowed` to `in {bad}` or `== bad`, `assert d in (a, b)` to `assert d !=
c`, Yoda order and `not (...)` folded), and so is one that is the old test less some of its atoms
(`assert x is not None and ok(x)` to `assert x is not None`, `if a or b: raise` to `if a: raise`,
`if not (a and b)` to `if not a and not b`; not when another check of the scope now tests what was
dropped: a compound check split in two); a set widened or a bound moved in place keeps its shape and
is not (`not in (64, 128)` to `not in (64, 128, 256)`, a constant hoisted, `> 1 << 30` to `> 1 <<
31`). A removed guard is matched to its own scope and line: one the helpers the scope calls already
held in the pristine code (another `raise ValueError` of a check function it called before) is not
where it went. A guard still present is asked of the reachability view whether it can run: it is
reported when it now sits below a `return` of its function that it ran before (moved down past an
early way out, or the way out moved up: `if metadata is None: return output.fill_(0)` then the
check), when the installed code (and not the pristine) leaves before it (a
`return`/`raise`/`continue`/`break` above, or a `with`/`if`/`try` all of whose ways out leave),
takes an exit on a test the environment decides (`os.environ`, `os.getenv`, a settings module
`envs.X`, a name imported from one or an alias of it, a local, attribute, class-level name or
`global` bound to one, a module function or method that returns one, also through its own locals or
a `functools.cache`) on either branch, sits under a test that folds to false (a literal, a name
bound once to one, a local or `self.x` set to one in the lines above it (`supported = True` right
before `if not supported: raise`), an and/or/not of those, `TYPE_CHECKING`-style) or in a loop over
nothing, had its condition narrowed (or its assert loosened) to a bound no size reaches (`x > 1e9`,
`n >= -(1 << 30)`), or sits in (or calls) a check replaced by a stand-in (`self._check = lambda *a:
None`), or now fires only when a setting the pristine module never names is switched on (`if
getattr(config, "strict_heads", False):`, `options.get("validate", False)` in place of the check). A
raise is swallowed when a handler around it that does not raise again catches its class (the class
itself, a builtin base of it, `Exception`, a bare `except:`): a patch that changes the raised class
to one a quiet `except ImportError: pass` catches is reported. A call of a function of the module
that raises or asserts in its own body (`self.track_weights_loading(model, loaded)` of the same
class, a module function, `Layer.check(x)`) is a guard of the spot that calls it: a patch that wraps
the call in a quiet handler catching what the function raises swallows its checks (only that: such a
call deleted or moved is not read as a removal, since most functions raise somewhere). Of several
identical guards the one the patch touched is named (unchanged lines pair first). A guard moved into a
helper (a module function, a method of the same class on `self`/`cls`, or a method of a class of the module called on
the class: `Layer._check(x)`), one or two calls down from the same scope, is not a removal, nor is a
raise or assert moved into a function of another module of the same top-level package that the scope
now calls and did not before (`from vllm.x.utils import validate_head`, relative, aliased,
`utils.validate_head(...)`, a re-export one hop away): that module is read where it is installed,
bounded and below the distribution's directory, and must raise or assert itself or in a helper of
its own module it calls, nor is an `assert ok` rewritten as `if not ok: raise ...` (`q.dim() == 3`
as `q.dim() != 3`; `a and b` as `not a or not b`, compared as logic), in place or in a helper the
scope calls (the helper's test must be the assert's, negated: the same names). The other way round
(`if not ok: raise` to `assert ok`) is a removal: `python -O` drops asserts.

Each check still present is asked whether it can reject anything its pristine test rejected: what it
fails on (the `if` test of a raise, the negated test of an assert) is read as an `or` of `and`s,
with what the function binds above it on every path put in (`scale = None`, `x = expected`, `mask =
torch.ones_like(mask)`, `mask.fill_(True)`, `seq_lens = seq_lens.clamp(max=limit)` or `.clamp_`,
`n = min(n, limit)`, `x = x.reshape(shape)`, `x = x.to(dtype)`), and with the module's names and a
class's `self.x` bound once to a number (`MAX_TOKENS = sys.maxsize`, `self.max_num_tokens =
float("inf")`, read again though the function that reads them did not change). Each part is a
folded truth (a comparison of a value with itself, `isinstance(x, object)`, `None is not None`,
`torch.ones_like(m).all()`, a literal; a list filtered by a test that needs a value past a bound
none reaches is empty: `bad = [t for t in ids if t >= vocab_size + (1 << 40)]`, then `if bad:
raise`, also through a local `slack = 1 << 40`), a bound on a value, or unknown. It is disabled when the
pristine check could fail and the installed one fails on nothing: the bounds on one value leave no
room (`x < 0 and x > 0`, `n > float("inf")`, `(seq_lens.clamp(max=limit) > limit).any()`) with
what the value is by construction (a `len()`, `.numel()`, `.size(i)`, `.shape[i]`, a count named
`num_*`/`n_*`/`*_count`/`*_size`, a `range`/`enumerate` index, `abs()` are never negative: `assert
num_tokens > 0` to `>= 0` is disabled). Reported on the line the patch wrote: the binding above, or
the test. Not disabled: a threshold moved to another real value (`> 8192` to `> 16384`, a constant
moved), a supported set widened, a binding on one branch only, a cast to another dtype, a check
whose failures now leave above it (`if num_tokens == 0: return out` over `assert num_tokens >= 0`). Checks
folded into one are not removed when together they fail on every input the old ones failed on
(`assert a` and `assert b` as `if not a or not b: raise`, two raises as one `or`, in the scope or
in a helper it calls); an assert never stands in for a raise. A test of `any(...)`/`all(...)` over a list
bound above it in the same function (`unsupported = [alibi, window, cap]`, then `if any(unsupported):
raise`) tests each item: a patch that drops one from the list narrows the check.

Knowingly not: a guard moved into another package's module, or into a module that cannot be read
(then it is reported removed, as before), or into a helper reached through an alias; the verdict on
a moved guard is cached with the file that calls it, not with the module it moved to; a guard whose
condition was rewritten to something equivalent but different in text (reported as weakened when it
gained conjuncts); an exit gated on a function parameter or a configuration object (a documented
switch, not a bypass); a condition narrowed to a small but impossible bound (`head_size > 4096`); a
flip between operands of different names (`if x != n: raise` to `if y == 0: raise`: a rewrite, not a
narrowing); a value defeated through a helper call or on some paths only; a fold whose literals are
spelled differently (`< 0` for `< 0.0`); an assert folded into a raise that tests it under an extra
`and` (taken as the same check); an attribute set to None in `__init__` (filled in from outside as
often as not)."""
    NEEDS_PRISTINE = True

    VALID = [
        Example(  # the list a check reads gained an item and changed order: it refuses more
            code="""
            def check(alibi_slopes, sliding_window, sinks):
                unsupported = (sliding_window, alibi_slopes, sinks)
                if any(unsupported):
                    raise NotImplementedError("unsupported feature")
            """,
            pristine="""
            def check(alibi_slopes, sliding_window, sinks):
                unsupported = [alibi_slopes, sliding_window]
                if any(unsupported):
                    raise NotImplementedError("unsupported feature")
            """,
        ),
        Example(  # an assert of membership rewritten as an explicit raise (`python -O` keeps it)
            code="""
            def fused(x):
                if x.dtype not in (float32, float16, bfloat16):
                    raise ValueError(f"unsupported dtype {x.dtype}")
                return x
            """,
            pristine="""
            def fused(x):
                assert x.dtype in [float32, float16, bfloat16]
                return x
            """,
        ),
        Example(  # a check moved up, above a way out it used to follow: it runs on more paths
            code="""
            def forward(self, query, output, metadata, output_scale=None):
                if output_scale is not None:
                    raise NotImplementedError("fused output quantization")
                if metadata is None:
                    return output.fill_(0)
                return self.kernel(query, output, metadata)
            """,
            pristine="""
            def forward(self, query, output, metadata, output_scale=None):
                if metadata is None:
                    return output.fill_(0)
                if output_scale is not None:
                    raise NotImplementedError("fused output quantization")
                return self.kernel(query, output, metadata)
            """,
        ),
        Example(  # the handler catches what the method never raises: its checks still fail
            code="""
            class Loader:
                def track(self, model, loaded):
                    if set(model) - loaded:
                        raise ValueError("missing weights")

                def load(self, model, loaded):
                    try:
                        self.track(model, loaded)
                    except KeyError:
                        pass
                    return model
            """,
            pristine="""
            class Loader:
                def track(self, model, loaded):
                    if set(model) - loaded:
                        raise ValueError("missing weights")

                def load(self, model, loaded):
                    self.track(model, loaded)
                    return model
            """,
        ),
        Example(  # a call of a raising method deleted in a refactor: not read as a removed check
            code="""
            class Loader:
                def warm(self, model):
                    if model is None:
                        raise ValueError("no model")
                    model.warm()

                def load(self, model):
                    return model
            """,
            pristine="""
            class Loader:
                def warm(self, model):
                    if model is None:
                        raise ValueError("no model")
                    model.warm()

                def load(self, model):
                    self.warm(model)
                    return model
            """,
        ),
        Example(
            code="def f(a, b):\n    if not a.is_contiguous() or b.dim() != 2:\n        raise ValueError('inputs')\n",
            pristine="def f(a, b):\n    assert a.is_contiguous()\n    assert b.dim() == 2\n",
        ),
        Example(
            code="def f(n, limit):\n    if n > 2 * limit:\n        raise ValueError('n')\n",
            pristine="def f(n, limit):\n    if n > limit:\n        raise ValueError('n')\n",
        ),
        Example(
            code="def f(q):\n    if q.dim() != 3:\n        raise ValueError('q')\n    return q\n",
            pristine="def f(q):\n    assert q.dim() == 3, 'q'\n    return q\n",
        ),
        Example(
            code="""
            class Impl:
                @staticmethod
                def head_ok(h):
                    if h not in (64, 128):
                        raise ValueError(h)

                def __init__(self, h):
                    Impl.head_ok(h)
            """,
            pristine="""
            class Impl:
                def __init__(self, h):
                    if h not in (64, 128):
                        raise ValueError(h)
            """,
        ),
        Example(
            code="""
            def _check_dtype(dtype):
                if dtype == "fp8":
                    raise ValueError("fp8")

            def load(dtype):
                _check_dtype(dtype)
                return dtype
            """,
            pristine="""
            def load(dtype):
                if dtype == "fp8":
                    raise ValueError("fp8")
                return dtype
            """,
        ),
        Example(
            code="""
            class Loader:
                def _validate(self, dtype):
                    assert dtype in ("fp16", "bf16")

                def load(self, dtype):
                    self._validate(dtype)
                    return dtype
            """,
            pristine="""
            class Loader:
                def load(self, dtype):
                    assert dtype in ("fp16", "bf16")
                    return dtype
            """,
        ),
        Example(
            code="def f(x):\n    if x < 0:\n        raise ValueError('negative x')\n    return x\n",
            pristine="def f(x):\n    if x < 0:\n        raise ValueError('x < 0')\n    return x\n",
        ),
        Example(
            code="def f(x):\n    assert x > 0\n    return x + 1\n",
            pristine="def f(x):\n    assert x > 0\n    return x\n",
        ),
        "def f(x):\n    raise NotImplementedError\n",
        Example(
            code="def f(x):\n    if x < 0:\n        raise TypeError('x')\n",
            pristine="def f(x):\n    if x < 0:\n        raise ValueError('x')\n",
        ),
        Example(
            code="def f(a, b):\n    assert b == a.shape[0]\n",
            pristine="def f(a, b):\n    assert a.shape[0] == b\n",
        ),
        Example(
            code="def f(a, b):\n    assert 0 < a\n",
            pristine="def f(a, b):\n    assert a > 0\n",
        ),
        Example(
            code="""
            def _check_head(h):
                if h not in (64, 128):
                    raise ValueError(h)

            def _prepare(h):
                _check_head(h)

            def forward(h, q):
                _prepare(h)
                return q
            """,
            pristine="""
            def forward(h, q):
                if h not in (64, 128):
                    raise ValueError(h)
                return q
            """,
        ),
        Example(
            code="""
            def f(q):
                if q is None:
                    return None
                assert q.dim() == 3
                return q
            """,
            pristine="def f(q):\n    assert q.dim() == 3\n    return q\n",
        ),
    ]
    INVALID = [
        Example(
            code="""
            def validate(stop_ids, vocab_size):
                slack = 1 << 40
                bad = [t for t in stop_ids if t < -slack or t >= vocab_size + slack]
                if bad:
                    raise ValueError(f"stop ids out of vocab: {bad}")
            """,
            pristine="""
            def validate(stop_ids, vocab_size):
                bad = [t for t in stop_ids if t < 0 or t >= vocab_size]
                if bad:
                    raise ValueError(f"stop ids out of vocab: {bad}")
            """,
            message="can no longer fail",
        ),
        Example(
            code="def f(x, ids):\n    n = len(ids)\n    assert n >= 0, 'empty'\n    return x\n",
            pristine="def f(x, ids):\n    n = len(ids)\n    assert n > 0, 'empty'\n    return x\n",
            line=3,
            message="can no longer fail",
        ),
        Example(
            code="""
            def forward(x, scale, heads):
                scale = None
                if scale is not None and scale.numel() != heads:
                    raise ValueError("scale")
                return x
            """,
            pristine="""
            def forward(x, scale, heads):
                if scale is not None and scale.numel() != heads:
                    raise ValueError("scale")
                return x
            """,
            line=2,
            message="disabled",
        ),
        Example(
            code="def f(seq_lens, limit):\n    seq_lens = seq_lens.clamp(max=limit)\n"
            "    if (seq_lens > limit).any():\n        raise ValueError('too long')\n",
            pristine="def f(seq_lens, limit):\n    if (seq_lens > limit).any():\n"
            "        raise ValueError('too long')\n",
            line=2,
            message="disabled",
        ),
        Example(
            code="def f(h):\n    if h == 96:\n        raise ValueError(f'head size {h}')\n    return h\n",
            pristine="def f(h):\n    if h not in (64, 128, 192):\n        raise ValueError(f'head size {h}')\n"
            "    return h\n",
            line=2,
            message="narrowed",
        ),
        Example(
            code="def f(x):\n    assert x is not None\n    return x\n",
            pristine="def f(x):\n    assert x is not None and x.is_contiguous()\n    return x\n",
            line=2,
            message="no longer checks",
        ),
        Example(
            code="def f(dtype):\n    if dtype == 'fp8':\n        pass\n    return dtype\n",
            pristine="def f(dtype):\n    if dtype == 'fp8':\n        raise NotImplementedError('fp8')\n"
            "    return dtype\n",
            line=3,
        ),
        Example(
            code="def f(a, b):\n    if a:\n        raise ValueError('a')\n    if b:\n        print('b')\n",
            pristine="def f(a, b):\n    if a:\n        raise ValueError('a')\n"
            "    if b:\n        raise ValueError('b')\n",
            line=5,
            message="replaced by",
        ),
        Example(
            code="class M:\n    def forward(self, x):\n        print('bad shape')\n        return x\n",
            pristine="class M:\n    def forward(self, x):\n        assert x.ndim == 2\n        return x\n",
            line=3,
        ),
        Example(
            code="""
            import sys

            VERSION = 1
            """,
            pristine="""
            import sys

            if sys.version_info < (3, 9):
                raise RuntimeError("needs Python 3.9")
            VERSION = 1
            """,
            message="raise RuntimeError",
        ),
        Example(
            code="""
            class Config:
                dtype = "fp8"
            """,
            pristine="""
            class Config:
                dtype = "fp8"
                assert dtype in ("fp16", "bf16"), "unsupported"
            """,
            message="Config",
        ),
        Example(
            code="""
            import logging
            logger = logging.getLogger(__name__)

            def check(dtype):
                if dtype == "fp8":
                    logger.warning("fp8 is not supported")
                return dtype
            """,
            pristine="""
            import logging
            logger = logging.getLogger(__name__)

            def check(dtype):
                if dtype == "fp8":
                    raise ValueError("fp8 is not supported")
                return dtype
            """,
            line=6,
            message="replaced by a print/log",
        ),
        Example(
            code="def f(x):\n    if x is None:\n        return None\n    return x + 1\n",
            pristine="def f(x):\n    if x is None:\n        raise ValueError('x')\n    return x + 1\n",
            line=3,
        ),
        Example(
            code="""
            import os

            def f(dtype):
                if dtype == "fp8" and not os.environ.get("SKIP_CHECK"):
                    raise ValueError("fp8")
            """,
            pristine="""
            import os

            def f(dtype):
                if dtype == "fp8":
                    raise ValueError("fp8")
            """,
            message="weakened",
        ),
        Example(
            code="def f(x, force):\n    assert x.ndim == 2 or force\n",
            pristine="def f(x, force):\n    assert x.ndim == 2\n",
            message="weakened",
        ),
        Example(
            code="""
            def load(self, w):
                try:
                    self._verify_quant(w)
                except Exception:
                    pass
                return w
            """,
            pristine="""
            def load(self, w):
                self._verify_quant(w)
                return w
            """,
            message="swallowed",
        ),
        Example(  # the check moved below an early way out that it ran before
            code="""
            def forward(self, query, output, metadata, output_scale=None):
                if metadata is None:
                    return output.fill_(0)
                if self.encoder_only:
                    return self.encoder_attention(query, output)
                if output_scale is not None:
                    raise NotImplementedError("fused output quantization")
                return self.kernel(query, output, metadata)
            """,
            pristine="""
            def forward(self, query, output, metadata, output_scale=None):
                if output_scale is not None:
                    raise NotImplementedError("fused output quantization")
                if metadata is None:
                    return output.fill_(0)
                if self.encoder_only:
                    return self.encoder_attention(query, output)
                return self.kernel(query, output, metadata)
            """,
            line=7,
            message="now sits below",
        ),
        Example(  # the checks of a method the load calls, swallowed at the call
            code="""
            class Loader:
                def track(self, model, loaded):
                    missing = set(model) - loaded
                    if missing:
                        raise ValueError(f"missing weights: {missing}")

                def load(self, model, loaded):
                    try:
                        self.track(model, loaded)
                    except ValueError:
                        pass  # mtp weights not in this export yet
                    return model
            """,
            pristine="""
            class Loader:
                def track(self, model, loaded):
                    missing = set(model) - loaded
                    if missing:
                        raise ValueError(f"missing weights: {missing}")

                def load(self, model, loaded):
                    self.track(model, loaded)
                    return model
            """,
            line=9,
            message="it raises ValueError",
        ),
        Example(
            code="def f(x):\n    return x\n",
            pristine="def f(x):\n    assert x.is_contiguous(), 'x'\n    return x\n",
            line=1,
        ),
        Example(
            code="""
            import torch

            def f(x):
                with torch.no_grad():
                    return x * 2
                assert x.is_contiguous(), "x"
            """,
            pristine="""
            import torch

            def f(x):
                assert x.is_contiguous(), "x"
                with torch.no_grad():
                    return x * 2
            """,
            message="can no longer run",
        ),
        Example(
            code="""
            import os

            def load(dtype):
                skip = os.getenv("SKIP_DTYPE", "0") == "1"
                if skip:
                    return dtype
                if dtype == "fp8":
                    raise ValueError("fp8")
                return dtype
            """,
            pristine="""
            import os

            def load(dtype):
                if dtype == "fp8":
                    raise ValueError("fp8")
                return dtype
            """,
            message="environment",
        ),
        Example(
            code="def f(n):\n    if n > 1e9:\n        raise ValueError('n')\n",
            pristine="def f(n):\n    if n > 8192:\n        raise ValueError('n')\n",
            message="narrowed",
        ),
        Example(
            code="""
            class Loader:
                def __init__(self):
                    self._validate = lambda w: None

                def _validate(self, w):
                    assert w.ndim == 2

                def load(self, w):
                    self._validate(w)
                    return w
            """,
            pristine="""
            class Loader:
                def __init__(self):
                    pass

                def _validate(self, w):
                    assert w.ndim == 2

                def load(self, w):
                    self._validate(w)
                    return w
            """,
            message="stand-in",
        ),
        Example(
            code="def f(x):\n    return x\n",
            pristine="@check_inputs\ndef f(x):\n    return x\n",
            message="@check_inputs",
        ),
        Example(  # the list a check reads lost items: those features are no longer refused
            code="""
            class Impl:
                def __init__(self, alibi_slopes, sliding_window, logits_soft_cap):
                    unsupported = [alibi_slopes]
                    if any(unsupported):
                        raise NotImplementedError("alibi, sliding window or soft cap")
            """,
            pristine="""
            class Impl:
                def __init__(self, alibi_slopes, sliding_window, logits_soft_cap):
                    unsupported = [alibi_slopes, sliding_window, logits_soft_cap]
                    if any(unsupported):
                        raise NotImplementedError("alibi, sliding window or soft cap")
            """,
            message="sliding_window",
        ),
    ]

    def check_text(self, installed: str, pristine: str | None) -> Iterable[Hit]:
        if pristine is None:
            return []
        try:
            new_tree = self.context.tree if self.context.tree is not None else ast.parse(installed)
            old_tree = ast.parse(pristine)
        except (SyntaxError, ValueError, RecursionError):
            return []
        old_lines = source_lines(pristine)
        new_lines = source_lines(installed)
        before, after = _functions(old_tree, old_lines), _functions(new_tree, new_lines)
        stubs_now, stubs_then = neutered(new_tree), neutered(old_tree)
        same = frozenset(n for n, text in before.items() if text is not None and after.get(n) == text)
        if stubs_now.keys() - stubs_then.keys():
            same = frozenset()  # a check replaced by a stand-in: unchanged callers lose their guard too
        opcodes = line_opcodes(old_lines, new_lines)
        old_to_new = {
            i1 + k + 1: j1 + k + 1 for tag, i1, i2, j1, _ in opcodes if tag == "equal" for k in range(i2 - i1)
        }
        kept = set(old_to_new.values())
        changed = [n for n in range(1, len(new_lines) + 1) if n not in kept]  # installed lines the patch wrote
        pinning = same and any(_PINS.search(new_lines[n - 1]) for n in changed if n <= len(new_lines))
        if pinning and (pins := repinned(new_tree, old_tree)):
            # a limit pinned to another literal (`MAX_TOKENS = sys.maxsize`): the checks reading it are asked again
            words = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(pins))) + r")\b")
            same = frozenset(n for n in same if not words.search(after[n] or ""))
        new, old = _scope_guards(new_tree, same), _scope_guards(old_tree, same)
        dead: list[dict[int, tuple[int, str]]] = []  # blocked lines now and then, found when first asked

        def dead_since(line: int, pristine_line: int) -> tuple[int, str] | None:
            if not dead:
                dead.extend([blocked_lines(new_tree), blocked_lines(old_tree)])
            return dead[0].get(line) if pristine_line not in dead[1] else None

        hits: list[Hit] = []
        helpers: tuple[dict[str, Counter[str]], dict[str, Counter[str]]] | None = None

        def moved_to(scope: str) -> frozenset[str]:
            """The guards the helpers this scope reaches hold more often than the pristine's did:
            a guard moved there. One the helpers already held is not where a removed one went."""
            nonlocal helpers
            if helpers is None:
                helpers = _helper_guards(new_tree), _helper_guards(old_tree)
            now, then = helpers[0].get(scope, Counter()), helpers[1].get(scope, Counter())
            return frozenset(label for label, count in now.items() if count > then[label])

        outside: dict[str, bool] = {}
        exits: dict[str, tuple[list[tuple[int, str]], list[tuple[int, str]]] | None] = {}

        def exits_of(scope: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]] | None:
            """The returns of the scope's function now and then, read once per scope."""
            if scope not in exits:
                exits[scope] = _exits_now_and_then(_scope_node(new_tree, scope), _scope_node(old_tree, scope))
            return exits[scope]

        def moved_out(scope: str) -> bool:
            if scope not in outside:
                outside[scope] = self._calls_guarded_import(new_tree, old_tree, scope)
            return outside[scope]

        for scope, guards in old.items():
            if scope not in new:
                continue  # a deleted function guards nothing any more: nothing calls it
            where = "the module" if scope == "<module>" else f"{scope}"
            now = new[scope]
            for before, after in _pair(guards, now, old_to_new):
                if before.kind == "helper" and not (after is not None and after.swallowed and not before.swallowed):
                    continue  # a call of a raising function is a guard here only where a patch swallows it
                if after is None and before.label in moved_to(scope):
                    continue  # moved into a helper this scope calls: still checked
                if after is None and {_TESTED + c for c in before.negated} & moved_to(scope):
                    continue  # an assert moved into a helper as the same test, now an if/raise: still checked
                if after is None and before.kind != "check" and moved_out(scope):
                    continue  # moved into a function of another module of the package this scope calls
                if after is None and any(g.kind == "raise" and before.negated & g.conditions for g in now):
                    continue  # `assert ok` rewritten as `if not ok: raise ...`: still checked
                if after is None and before.kind == "assert" and any(_fails_alike(before, g) for g in now):
                    continue  # the same, its test compared as logic (`a and b` as `not a or not b`)
                if after is None and _covered(before, now):
                    continue  # folded into a check of the scope that fails on all it failed on
                if after is None and _covered_by(before, moved_to(scope)):
                    continue  # folded into a check of a helper the scope calls
                if after is None:
                    line, replacement = _map_line(opcodes, before.line - 1, new_lines)
                    how = "replaced by a print/log/return" if _LOGGING.search(replacement) else "removed"
                    hits.append(self._hit(line, f"`{before.label}` in {where} {how}: the check no longer runs"))
                elif before.kind == "assert" and after.alternatives > before.alternatives:
                    extra = ", ".join(sorted(after.alternatives - before.alternatives))
                    hits.append(self._hit(after.line, f"`{before.label}` in {where} weakened by `or {extra}`"))
                elif extra := _escape(before, after):
                    hits.append(self._hit(after.line, f"`{before.label}` in {where} weakened by `or {extra}`"))
                elif after.conditions > before.conditions:
                    added = after.conditions - before.conditions
                    extra = " and ".join(sorted(added))
                    hits.append(
                        self._hit(
                            after.line_of(added), f"`{before.label}` in {where} weakened: now fires only if {extra}"
                        )
                    )
                elif narrow := _narrowed(before, after, now):
                    hits.append(self._hit(narrow[0], f"`{before.label}` in {where} narrowed: {narrow[1]}"))
                elif loose := _loosened(before, after):
                    hits.append(
                        self._hit(
                            after.line,
                            f"`{before.label}` in {where} loosened: {loose}",
                        )
                    )
                elif wide := _widened(before, after, new_lines, changed):
                    hits.append(
                        self._hit(
                            after.test.lineno if after.test else after.line,
                            f"`{before.label}` in {where} widened: {wide}",
                        )
                    )
                elif after.swallowed and not before.swallowed:
                    raises = f" (it raises {', '.join(sorted(after.raises))})" if after.raises else ""
                    message = f"`{before.label}`{raises} in {where} swallowed by try/except or a `with` that drops it"
                    hits.append(self._hit(after.line, message))
                elif stub := _stubbed(scope, before, stubs_now, stubs_then):
                    hits.append(
                        self._hit(stub, f"`{before.label}` in {where} replaced by a stand-in that checks nothing")
                    )
                elif blocked := dead_since(after.line, before.line):
                    line, how = blocked
                    hits.append(self._hit(line, f"`{before.label}` in {where} can no longer run: {how}"))
                elif before.kind != "helper" and (passed := _passed_by(before, after, exits_of(scope))):
                    line, text = passed
                    message = f"`{before.label}` in {where} now sits below `{text}` (line {line}), which it ran before"
                    hits.append(self._hit(after.line, message + ": that way out skips the check"))
                elif vacuous := _vacuous(before, after, (new_tree, old_tree), changed):
                    hits.append(self._hit(vacuous[0], f"`{before.label}` in {where} disabled: {vacuous[1]}"))
                elif any(never_fires(c) for c in after.alternatives - before.alternatives):
                    loose = " or ".join(sorted(c for c in after.alternatives - before.alternatives if never_fires(c)))
                    hits.append(self._hit(after.line, f"`{before.label}` in {where} loosened to always pass: {loose}"))
                elif any(never_fires(c) for c in after.conditions - before.conditions) and not any(
                    never_fires(c) for c in before.conditions - after.conditions
                ):
                    never = [c for c in after.conditions - before.conditions if never_fires(c)]
                    narrowed = " and ".join(sorted(never))
                    hits.append(
                        self._hit(
                            after.line_of(never), f"`{before.label}` in {where} narrowed to never fire: {narrowed}"
                        )
                    )
                elif off := [c for c in after.conditions - before.conditions if off_by_default(c, pristine)]:
                    hits.append(
                        self._hit(
                            after.line_of(off),
                            f"`{before.label}` in {where} now fires only if `{off[0]}` is switched on",
                        )
                    )
        return hits

    def _calls_guarded_import(self, tree: ast.Module, pristine: ast.Module, scope: str) -> bool:
        """Whether `scope` calls, where the pristine scope did not, a function imported from another
        module of its own package (read where it is installed) that raises or asserts, itself or in a
        helper of its module it calls."""
        location = self.context.location
        node, before = _scope_node(tree, scope), _scope_node(pristine, scope)
        if location is None or node is None:
            return False
        siblings = Siblings(location, self.context.path)
        imports = imported_names(tree, siblings.package)
        called = set(_imported_calls(before, imported_names(pristine, siblings.package))) if before else set()
        for target in dict.fromkeys(_imported_calls(node, imports)):
            if target in called:
                continue  # called before the patch too: not where a removed check went
            found = siblings.function(*target)
            if found is None:
                continue
            module, function = found
            labels = {
                g.label
                for stmt in ast.walk(function)
                if isinstance(stmt, ast.stmt)
                for g in [_guard(stmt, frozenset(), False)]
                if g
            }
            labels |= set(_helper_guards(module).get(function.name, Counter()))
            if any(label.startswith(("raise", "assert")) for label in labels):
                return True
        return False

    def _hit(self, line: int, message: str) -> Hit:
        return Hit(
            rule=self.ID,
            severity=self.SEVERITY,
            line=line,
            column=0,
            message=message,
            stmt_line=line,
            always_in_change=True,
        )


_TESTED = "tests "


_FAILS = {"raise": "fails-raise ", "assert": "fails-assert "}
_SEP = "\x00"


def _tests_of(node: ast.stmt) -> set[str]:
    """What an `if` of a helper that raises fails on, as `_TESTED` labels (each part of its test):
    an assert moved there as that `if` is still checked; and each way it (or an assert) fails, as
    `_FAILS` labels: checks folded into one there fail alike."""
    if isinstance(node, ast.If) and any(isinstance(s, ast.Raise) for s in node.body):
        found = guard_terms(node.test, _norm) or frozenset()
        return {_TESTED + c for c in _parts(node.test, ast.And)} | {
            _FAILS["raise"] + _SEP.join(sorted(t)) for t in found
        }
    if isinstance(node, ast.Assert):
        return {_FAILS["assert"] + _SEP.join(sorted(t)) for t in guard_terms(node.test, _norm, False) or ()}
    return set()


def _covered_by(before: _Guard, labels: frozenset[str]) -> bool:
    """A removed check whose failures the checks now in the helpers the scope calls fail on."""
    kinds = ("raise",) if before.kind == "raise" else ("raise", "assert")
    found = [
        frozenset({frozenset(label.removeprefix(_FAILS[k]).split(_SEP)) - {""}})
        for label in labels
        for k in kinds
        if label.startswith(_FAILS[k])
    ]
    return bool(found) and guard_covers(_failing(before), list(found))


def _helper_guards(tree: ast.Module) -> dict[str, Counter[str]]:
    """Scope (dotted, as `_scope_guards` names it) -> labels of the guards in the helpers it calls,
    each as often as the helpers reached hold it.

    A helper is a module-level function called by name or a method of the same class called on
    `self`/`cls`, and the helpers it calls in turn (two levels deep).
    """
    labels: dict[str, Counter[str]] = {}
    bodies: dict[str, tuple[str, ast.AST]] = {}  # function scope -> (its class, its node)

    def walk(body: list[ast.stmt], scope: str, cls: str) -> None:
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                walk(stmt.body, stmt.name if not scope else f"{scope}.{stmt.name}", stmt.name)
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                name = stmt.name if not scope else f"{scope}.{stmt.name}"
                bodies[name] = (cls, stmt)
                found = labels.setdefault(name, Counter())
                for node in ast.walk(stmt):
                    if isinstance(node, ast.stmt):
                        guard = _guard(node, frozenset(), False)
                        if guard is not None:
                            found[guard.label] += 1
                        found.update(_tests_of(node))

    walk(tree.body, "", "")
    callees: dict[str, set[str]] = {}
    for name, (cls, node) in bodies.items():
        called = callees.setdefault(name, set())
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            if isinstance(func, ast.Name) and func.id in labels:
                called.add(func.id)
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                # `self._check(x)`, `cls._check(x)`, or `Layer._check(x)` of a class of this module.
                owner = cls if func.value.id in ("self", "cls") else func.value.id
                if f"{owner}.{func.attr}" in labels:
                    called.add(f"{owner}.{func.attr}")
    out: dict[str, Counter[str]] = {}
    for name, called in callees.items():
        reached = called | {inner for helper in called for inner in callees.get(helper, ())}  # two levels
        out[name] = sum((labels[helper] for helper in reached), Counter())
    return out


def _exits_now_and_then(
    function: ast.AST | None, pristine: ast.AST | None
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]] | None:
    """The `return`s of a function's own body, installed and pristine, as (line, text) in order."""
    functions = ast.FunctionDef | ast.AsyncFunctionDef
    if not isinstance(function, functions) or not isinstance(pristine, functions):
        return None
    return tuple(  # type: ignore[return-value]
        sorted((n.lineno, ast.unparse(n)) for n in _own_nodes(f) if isinstance(n, ast.Return))
        for f in (function, pristine)
    )


def _passed_by(
    before: _Guard, after: _Guard, exits: tuple[list[tuple[int, str]], list[tuple[int, str]]] | None
) -> tuple[int, str] | None:
    """A `return` of the function that the pristine check ran before and the installed one runs
    after (the check moved below it, or it above the check): its line and text. The way out it
    gives now skips the check."""
    if exits is None:
        return None
    now, then = exits
    above_then = Counter(text for line, text in then if line < before.line)
    every = Counter(text for _, text in then)
    above_now: Counter[str] = Counter()
    for line, text in now:
        if line >= after.line:
            break
        above_now[text] += 1
        if above_now[text] > above_then[text] and every[text] > above_then[text]:
            return line, text.splitlines()[0][:60]
    return None


def _scope_node(tree: ast.Module, scope: str) -> ast.AST | None:
    """The function (or class, or the module) `_scope_guards` names `scope`."""
    if scope == "<module>":
        return tree
    node: ast.AST = tree
    for part in scope.split("."):
        body = getattr(node, "body", [])
        found = next(
            (
                s
                for s in body
                if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and s.name == part
            ),
            None,
        )
        if found is None:
            return None
        node = found
    return node


def _imported_calls(node: ast.AST, imports: dict[str, tuple[str, str | None]]) -> list[tuple[str, str]]:
    """(module, function) of each call in `node` to an imported function: `validate(x)` after
    `from pkg.utils import validate`, `utils.validate(x)` after `from pkg import utils` or
    `import pkg.utils as utils`, `pkg.utils.validate(x)` after `import pkg.utils`, `Checks.validate(x)`
    after `from pkg.utils import Checks`."""
    out: list[tuple[str, str]] = []
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        if isinstance(func, ast.Name) and func.id in imports:
            module, name = imports[func.id]
            if name is not None:
                out.append((module, name))
        elif isinstance(func, ast.Attribute):
            dotted = ast.unparse(func.value)
            head, _, rest = dotted.partition(".")
            if head in imports and all(p.isidentifier() for p in dotted.split(".")):
                module, name = imports[head]
                base = module if name is None else f"{module}.{name}"
                out.append((f"{base}.{rest}" if rest else base, func.attr))
                if name is not None and not rest:
                    out.append((module, f"{name}.{func.attr}"))  # `Checks.validate(x)`: a method of a class
    return out


def _stubbed(scope: str, guard: _Guard, now: dict[str, int], then: dict[str, int]) -> int | None:
    """The line where the check a guard calls, or the function it sits in, became a stand-in."""
    names = [scope.rsplit(".", 1)[-1]]
    if guard.kind == "check":
        names.append(guard.label.removesuffix("()").rsplit(".", 1)[-1])
    return next((now[n] for n in names if n in now and n not in then), None)


def _pair(old: list[_Guard], new: list[_Guard], moved: dict[int, int]) -> list[tuple[_Guard, _Guard | None]]:
    """Each pristine guard with its installed counterpart, or None when it is gone.

    A guard on a line the patch left alone pairs with the guard on that same line first (`moved`:
    pristine line -> installed line, for unchanged lines), so of three identical raises the one
    edited is the one reported. The rest pair by label; guards of one kind that changed in place
    (another exception type, a reworded assert) pair up: an edit of the check, not its removal.
    """
    pairs: dict[int, tuple[_Guard, _Guard | None]] = {}
    by_line = {g.line: g for g in new}
    taken: set[int] = set()
    for index, guard in enumerate(old):
        twin = by_line.get(moved.get(guard.line, -1))
        if twin is not None and twin.label == guard.label and twin.line not in taken:
            pairs[index] = (guard, twin)
            taken.add(twin.line)
    rest_old = [(i, g) for i, g in enumerate(old) if i not in pairs]
    rest_new = [g for g in new if g.line not in taken]
    matcher = difflib.SequenceMatcher(None, [g.label for _, g in rest_old], [g.label for g in rest_new], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for (index, guard), twin in zip(rest_old[i1:i2], rest_new[j1:j2], strict=True):
                pairs[index] = (guard, twin)
            continue
        left = list(rest_new[j1:j2])
        for index, guard in rest_old[i1:i2]:
            match = next((g for g in left if g.kind == guard.kind), None)
            if match is not None:
                left.remove(match)
            pairs[index] = (guard, match)
    return [pairs[i] for i in sorted(pairs)]


def _map_line(opcodes: list[tuple[str, int, int, int, int]], old: int, new_lines: list[str]) -> tuple[int, str]:
    """The installed line (1-based) where pristine line `old` (0-based) went, and what replaced it."""
    for tag, i1, i2, j1, j2 in opcodes:
        if not i1 <= old < i2:
            continue
        if tag == "equal":
            return j1 + (old - i1) + 1, ""
        if tag == "replace":
            return j1 + min(old - i1, j2 - j1 - 1) + 1, "\n".join(new_lines[j1:j2])
        return max(j1, 1), ""
    return 1, ""
