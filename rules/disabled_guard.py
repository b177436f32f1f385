"""disabled-guard: a condition or assertion made constant, so the guard never fires."""

import ast
import re
from collections.abc import Sequence

import libcst as cst

from patchaudit.rule import Example, Rule, Severity

# A constant as a bare operand: not followed, on its line, by an operator, a call, an attribute or
# an index (then it is part of a larger expression, which folding leaves alone).
_STRING = rb"[rRbBuU]{0,2}(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\")"
_LITERAL = (
    rb"(?:(?:True|False|None)\b|\d[\w.]*|" + _STRING + rb"|\(\s*\)|\[\s*\])"
    rb"(?![ \t]*(?:[<>=!]=|[<>]|\bin\b|\bis\b|\bnot\b|[.(\[+\-*/%@&|^]))"
)


def _constant_operand(test: ast.expr) -> bool:
    """Whether a test has a constant where folding could make it constant (the ast side)."""
    if isinstance(test, ast.Constant):
        return True
    if isinstance(test, ast.Tuple | ast.List) and not test.elts:
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _constant_operand(test.operand)
    if isinstance(test, ast.BoolOp):
        return any(_constant_operand(v) for v in test.values)
    return False


def _generator_marker(node: cst.If) -> bool:
    """`if False: yield` makes a function a generator; it guards nothing."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else [node.body]
    small = [s for line in body if isinstance(line, cst.SimpleStatementLine) for s in line.body]
    return (
        node.orelse is None
        and len(small) == len(body) == 1
        and isinstance(small[0], cst.Expr)
        and isinstance(small[0].value, cst.Yield)
    )


def _typing_only(node: cst.If) -> bool:
    """`if False:` around imports only: the pre-TYPE_CHECKING spelling of a typing guard."""
    if node.orelse is not None or not isinstance(node.body, cst.IndentedBlock):
        return False
    imports = 0
    for line in node.body.body:
        if not isinstance(line, cst.SimpleStatementLine):
            return False
        for small in line.body:
            if isinstance(small, cst.Import | cst.ImportFrom):
                imports += 1
                continue
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.AnnAssign) and small.value is None:
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString):
                continue
            return False
    return imports > 0


def _plain(test: cst.BaseExpression) -> bool:
    """`True`/`1` written alone: a plain loop or block, not a guard switched off."""
    return isinstance(test, cst.Name | cst.Integer)


class DisabledGuard(Rule):
    ID = "disabled-guard"
    SEVERITY = Severity.HIGH
    MESSAGE = "a guard made constant (`if False and ...`, `if 0:`, `assert True`)"
    EXPLANATION = """\
The quickest way to get past a check during bring-up is to make it constant: `if False and
use_fp8:`, `if 0:`, `if not True:`, `if None:`, `if True or is_supported(...)`, `assert True`.
The check is still there to read, but it no longer runs, and the path it protected (an FP8
guard, a shape check) is now silently taken for every model. Conditions are folded through
and/or chains of any length, `not` and brackets. `if True:`/`while True:` alone are not
flagged (they disable nothing), nor is `if False:` around imports only (an old typing guard)
or `if False: yield` (a generator marker)."""
    # A folded constant is an operand right after one of these keywords (brackets, line
    # continuations and comments between); `is not None` is a comparison, not an operand.
    PREFILTER = re.compile(rb"(?:\b(?:if|elif|while|assert|and|or)|(?<!\bis )\bnot)\b(?:[\s(\\]|#[^\n]*+)*" + _LITERAL)

    @classmethod
    def statement_check(cls, nodes: Sequence[ast.AST]) -> bool:
        for node in nodes:
            if isinstance(node, ast.If | ast.While | ast.Assert) and _constant_operand(node.test):
                plain = isinstance(node.test, ast.Constant) and (
                    node.test.value is True or (type(node.test.value) is int and node.test.value != 0)
                )
                if not plain or isinstance(node, ast.Assert):
                    return True
        return False

    VALID = [
        "if use_fp8 and is_supported(dev):\n    x = quantize(x)\n",
        "while True:\n    step()\n",
        "if x == 0:\n    pass\n",
        "assert x.shape[0] == n, 'bad shape'\n",
        "if TYPE_CHECKING:\n    import torch\n",
        "async def empty():\n    if False:\n        yield\n",
        """
        if False:
            from typing import Optional
            from torch import Tensor
        """,
        "if 1:\n    setup()\n",
        "name = value or 'default'\n",
    ]
    INVALID = [
        Example(code="if False and use_fp8:\n    x = quantize(x)\n", line=1, message="constant false"),
        Example(code="if 0:\n    raise ValueError('unsupported')\n", line=1),
        Example(code="if True or is_supported(dev):\n    run_fast_path()\n", message="constant true"),
        Example(code="assert True, 'shapes must match'\n", message="checks nothing"),
        Example(code="if x:\n    pass\nelif use_fp8 and False:\n    pass\n", line=3),
        Example(
            code="""
            def forward(self, q):
                if False and self.kv_cache_dtype.startswith("fp8") and not (
                    self.supports_fp8(q)
                ):
                    raise NotImplementedError("FP8 MLA is not supported")
                return q
            """,
            line=2,
        ),
        Example(code="if a and b and False and c:\n    raise RuntimeError('x')\n", line=1),
        Example(code="if not True:\n    raise ValueError('bad dtype')\n", line=1),
        Example(code="if None:\n    check(x)\n", line=1),
        Example(code="if (False) and (use_fp8):\n    raise ValueError('x')\n", line=1),
        Example(code="if (\n    use_fp8\n    and 0\n):\n    raise ValueError('x')\n", line=1),
        Example(code="assert x > 0 or True, 'x must be positive'\n", line=1),
        Example(code="while False and pending:\n    drain()\n", line=1),
        Example(code="if x or not False:\n    fast_path()\n", line=1),
        Example(code="if (\n    x  # why\n    and  # off for now\n    False\n):\n    raise ValueError('x')\n", line=1),
        Example(code="if mode == 'a' or 'b':\n    fast_path()\n", line=1, message="constant true"),
        Example(code="if x is not None and ():\n    check(x)\n", line=1),
    ]

    def visit_If(self, node: cst.If) -> None:
        self._check(node.test, node, node)

    def visit_While(self, node: cst.While) -> None:
        self._check(node.test, None, node)

    def _check(self, test: cst.BaseExpression, node: cst.If | None, where: cst.CSTNode) -> None:
        value = self.truth(test)
        if value is False:
            if node is not None and (_generator_marker(node) or _typing_only(node)):
                return
            self.report(where, "the condition is constant false: the guarded code never runs")
        elif value is True and not _plain(test):
            self.report(where, "the condition is constant true: the check is bypassed")

    def visit_Assert(self, node: cst.Assert) -> None:
        if self.truth(node.test) is True:
            self.report(node, "the assertion is constant true: it checks nothing")
