"""A test as the comparisons it stands for: a flag computed once and tested later is its comparison.

`is_probe = n == 5` then `if is_probe:` tests `n == 5`; `hit = (n <= 4) and rank == 0` then
`if hit and step > 3:` tests `(n <= 4) and rank == 0 and step > 3`; `self._probe = n == 5` then
`if not self._probe:` tests `not n == 5`. Rules that weigh a test by the comparisons in it (a
token-count window, a folded constant) ask `expanded` first, so where a comparison is written
does not change what the test means.

Only a name or an attribute whose last value before the test is a comparison, a `not`, an
`and`/`or` of such, or `bool(...)` of one is replaced; a flag from a call (`is_decode =
self.decoding()`) stays as it is. Pure functions over libcst nodes; what a name holds comes from
the caller (`values_of`, as in `analysis.values`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

__all__ = ["expanded", "assigned_in", "key", "BOOLEAN"]

# The values a flag stands for: comparisons and their combinations.
BOOLEAN = (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation)
FlagValues = Callable[[cst.Name | cst.Attribute], Sequence[cst.BaseExpression]]
Inline = Callable[[cst.Call], "cst.BaseExpression | None"]
_DEPTH = 4


def expanded(
    test: cst.BaseExpression, values_of: FlagValues, depth: int = 0, inline: Inline | None = None
) -> cst.BaseExpression:
    """`test` with every flag it reads replaced by the comparison last assigned to it (the same
    node when it reads none); `inline`: what a call of a short helper of the module returns, in
    the caller's terms (`_want_dump(n)` with `def _want_dump(k): return k in (3, 5)` is `n in (3, 5)`)."""
    if depth > _DEPTH:
        return test
    again = lambda n: expanded(n, values_of, depth + 1, inline)  # noqa: E731
    if isinstance(test, cst.Call) and inline is not None and not _builtin(test):
        returned = inline(test)
        inner = again(returned) if returned is not None else None
        return _bracketed(inner) if isinstance(inner, BOOLEAN) else test
    if isinstance(test, cst.BooleanOperation):
        left, right = again(test.left), again(test.right)
        if left is test.left and right is test.right:
            return test
        return test.with_changes(left=_bracketed(left), right=_bracketed(right))
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = again(test.expression)
        return test if inner is test.expression else test.with_changes(expression=_bracketed(inner))
    if isinstance(test, cst.NamedExpr):
        inner = again(test.value)  # `if (probe := n == 5):`
        return inner if isinstance(inner, BOOLEAN) else test
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "bool":
        if len(test.args) == 1 and isinstance(test.args[0].value, (*BOOLEAN, cst.Name, cst.Attribute)):
            inner = again(test.args[0].value)
            return inner if isinstance(inner, BOOLEAN) else test
        return test
    if isinstance(test, cst.Name | cst.Attribute):
        values = values_of(test)
        value = values[-1] if values else None
        if isinstance(value, cst.Call | cst.Name | cst.Attribute):
            inner = again(value)  # `flag = bool(n == 5)`, `flag = other_flag`
            return inner if isinstance(inner, BOOLEAN) else test
        if isinstance(value, BOOLEAN) and not (
            isinstance(value, cst.UnaryOperation) and not isinstance(value.operator, cst.Not)
        ):
            return _bracketed(again(value))
    return test


def _builtin(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Name) and call.func.value in ("bool", "any", "all", "isinstance", "len")


def _bracketed(node: cst.BaseExpression) -> cst.BaseExpression:
    """The node in brackets when it is an `and`/`or`, so it reads the same where it is put."""
    if isinstance(node, cst.BooleanOperation) and not node.lpar:
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return node


def key(node: cst.Name | cst.Attribute) -> str:
    """`probe`, `self._probe`: how a flag is named."""
    return cst.helpers.get_full_name_for_node(node) or ""


def assigned_in(statements: Sequence[cst.BaseStatement]) -> dict[str, list[cst.BaseExpression]]:
    """The values simple statements of a block assign to names and attributes (`hit = n <= 4`)."""
    out: dict[str, list[cst.BaseExpression]] = {}
    for line in statements:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for small in line.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target = small.targets[0].target
                if isinstance(target, cst.Name | cst.Attribute):
                    out.setdefault(key(target), []).append(small.value)
    return out
