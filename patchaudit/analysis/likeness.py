"""How a value a branch gives stands to another the function computes.

A branch taken for a few token counts may give what the function gives anyway by another road (a
fast path for one row: `torch.argmax(logits[0], ...)` beside `logits.argmax(dim=-1).view(-1)`), or
something else dressed as it: the function's own return with an operator or a constant changed, the
other way's value with a term dropped (`self.mlp(x)` for `self.mlp(x) + residual`), or the other
way's call made on its inputs cast to another precision. analysis.changes asks these questions of a
branch's returns and of its arms.

Pure functions over libcst nodes and `ast.unparse` spellings.
"""

from __future__ import annotations

import ast
from typing import Literal

import libcst as cst

from patchaudit.analysis.rewrites import AS_IS, cast_of, names_in
from patchaudit.analysis.walk import nodes

__all__ = ["altered", "literal_only", "same_work", "variant"]


def altered(value: cst.BaseExpression, usual: str) -> bool:
    """`value` is `usual` (a return as `ast.unparse` spells it) with an operator or a constant changed:
    `(x > values).sum(-1)` against `(x >= values).sum(-1)`; not the same expression. `usual` must
    compute something (a call): a table of numbers picked per size (`return (2, 1024, 2) if wide else
    (2, 2048, 4)` above `return (8, 256, 2) if wide else (4, 512, 2)`) is a size class, not a result."""
    try:
        mine, theirs = (
            ast.parse(cst.Module([]).code_for_node(value).strip(), mode="eval"),
            ast.parse(usual, mode="eval"),
        )
    except SyntaxError:
        return False
    if ast.dump(mine) == ast.dump(theirs) or not any(isinstance(n, ast.Call) for n in ast.walk(theirs)):
        return False
    return _skeleton(mine) == _skeleton(theirs)


def literal_only(spelled: str) -> bool:
    """A return that gives only literals (`return None`, `return {}, False`): nothing computed."""
    try:
        tree = ast.parse(spelled, mode="eval")
    except SyntaxError:
        return True
    return all(
        isinstance(n, ast.expr_context | ast.Constant | ast.Tuple | ast.List | ast.Dict | ast.Set | ast.Expression)
        for n in ast.walk(tree)
    )


def _skeleton(tree: ast.AST) -> str:
    """`tree` with every operator and constant blanked: two values that differ only there match."""
    return ast.dump(_Blank().visit(tree))


class _Blank(ast.NodeTransformer):
    """Every constant (`-1` too) as `0`, every operator as `+`, `==`, `not` or `and`."""

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if isinstance(node.operand, ast.Constant):
            return ast.Constant(0)
        return ast.UnaryOp(op=ast.Not(), operand=self.visit(node.operand))

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant(0)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        return ast.BinOp(left=self.visit(node.left), op=ast.Add(), right=self.visit(node.right))

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        return ast.Compare(
            left=self.visit(node.left),
            ops=[ast.Eq() for _ in node.ops],
            comparators=[self.visit(c) for c in node.comparators],
        )

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        return ast.BoolOp(op=ast.And(), values=[self.visit(v) for v in node.values])


def same_work(value: cst.BaseExpression, usual: str) -> bool:
    """`torch.argmax(logits[0], dim=-1, keepdim=True)` where the function returns
    `logits.argmax(dim=-1).view(-1)`: the same operation on the same data, laid out another way (a
    fast path for one row), not tokens picked some other way."""
    try:
        other = ast.parse(usual, mode="eval")
    except SyntaxError:
        return False
    theirs = {_op_name(n.func) for n in ast.walk(other) if isinstance(n, ast.Call)} - AS_IS - {""}
    ours = {_called(c) for c in nodes(value, (cst.Call,)) if isinstance(c, cst.Call)} - AS_IS - {""}
    data = {n.id for n in ast.walk(other) if isinstance(n, ast.Name)}
    return bool(ours) and ours <= theirs and bool(data & names_in(value))


def _op_name(func: ast.expr) -> str:
    """`argmax` of `torch.argmax` and of `x.argmax`; "" for anything else called."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _called(call: cst.Call) -> str:
    """`_op_name` of a libcst call."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else ""


def _simple_assigns(block: cst.CSTNode) -> dict[str, cst.Assign]:
    """`name = value` statements of a block, at its top level, by name (the last one of each)."""
    inner = block.body if isinstance(block, cst.Else) else block
    lines = inner.body if isinstance(inner, cst.IndentedBlock) else []
    out: dict[str, cst.Assign] = {}
    for line in lines:
        for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            if (
                isinstance(small, cst.Assign)
                and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)
            ):
                out[small.targets[0].target.value] = small
    return out


def variant(taken: cst.CSTNode, other: cst.CSTNode) -> tuple[Literal["dropped", "recast"], cst.Assign] | None:
    """The other way's computation of a name, altered on the taken way: a term dropped (`out =
    self.mlp(x)` where the other way has `out = self.mlp(x) + residual`: "dropped", with the other
    way's statement) or the same call made on its inputs cast to another precision (`self.attn(q.float(),
    k.float(), v.float()).to(q.dtype)` where the other way has `self.attn(q, k, v)`: "recast", with
    the taken way's statement)."""
    theirs = _simple_assigns(other)
    for name, mine in _simple_assigns(taken).items():
        their = theirs.get(name)
        if their is None:
            continue
        value, usual = mine.value, their.value
        dropped = isinstance(usual, cst.BinaryOperation) and not isinstance(value, cst.BinaryOperation)
        if dropped and (usual.left.deep_equals(value) or usual.right.deep_equals(value)):  # type: ignore[attr-defined]
            return "dropped", their  # a term of the other way's sum or product left out
        if _recast(value, usual):
            return "recast", mine
    return None


def _recast(value: cst.BaseExpression, usual: cst.BaseExpression) -> bool:
    """`f(q.float(), k).to(q.dtype)` against `f(q, k)`: the same call, some inputs cast first."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in AS_IS:
        value = value.func.value  # the cast back of the result
    if not (isinstance(value, cst.Call) and isinstance(usual, cst.Call) and value.func.deep_equals(usual.func)):
        return False
    if len(value.args) != len(usual.args):
        return False
    cast = False
    for mine, theirs in zip(value.args, usual.args, strict=True):
        if mine.deep_equals(theirs):
            continue
        if not (isinstance(theirs.value, cst.Name) and cast_of(mine.value) == theirs.value.value):
            return False
        cast = True
    return cast
