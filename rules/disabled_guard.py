"""disabled-guard: a condition or assertion made constant, so the guard never fires."""

import re

import libcst as cst

from patchaudit.rule import Example, Rule, Severity


def _const(node: cst.BaseExpression) -> bool | None:
    """True/False for `True`, `False`, `1`, `0` (also parenthesised), else None."""
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    if isinstance(node, cst.Integer) and node.value in ("0", "1"):
        return node.value == "1"
    return None


def _disabled(test: cst.BaseExpression) -> str | None:
    """How a test was made constant, or None if it was not."""
    if _const(test) is False:
        return "the condition is constant false: the guarded code never runs"
    if isinstance(test, cst.BooleanOperation):
        left, right = _const(test.left), _const(test.right)
        if isinstance(test.operator, cst.And) and False in (left, right):
            return "`False and ...` makes the condition constant false"
        if isinstance(test.operator, cst.Or) and True in (left, right):
            return "`True or ...` makes the condition constant true"
    return None


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


class DisabledGuard(Rule):
    ID = "disabled-guard"
    SEVERITY = Severity.HIGH
    MESSAGE = "a guard made constant (`if False and ...`, `if 0:`, `assert True`)"
    EXPLANATION = """\
The quickest way to get past a check during bring-up is to make it constant: `if False and
use_fp8:`, `if 0:`, `if True or is_supported(...)`, `assert True`. The check is still there to
read, but it no longer runs, and the path it protected (an FP8 guard, a shape check) is now
silently taken for every model. `if True:`/`while True:` alone are not flagged: they disable
nothing."""
    PREFILTER = (
        re.compile(rb"if[ \t(]*(?:False|0)[ \t)]*(?::|and\b)"),
        re.compile(rb"if[ \t(]*(?:True|1)[ \t)]+or\b"),
        re.compile(rb"assert[ \t(]*(?:True|1)\b"),
        re.compile(rb"and[ \t(]+False\b"),
        re.compile(rb"or[ \t(]+True\b"),
    )

    VALID = [
        "if use_fp8 and is_supported(dev):\n    x = quantize(x)\n",
        "while True:\n    step()\n",
        "if x == 0:\n    pass\n",
        "assert x.shape[0] == n, 'bad shape'\n",
        "if TYPE_CHECKING:\n    import torch\n",
        "async def empty():\n    if False:\n        yield\n",
    ]
    INVALID = [
        Example(code="if False and use_fp8:\n    x = quantize(x)\n", line=1),
        Example(code="if 0:\n    raise ValueError('unsupported')\n", line=1),
        Example(code="if True or is_supported(dev):\n    run_fast_path()\n"),
        Example(code="assert True, 'shapes must match'\n"),
        Example(code="if x:\n    pass\nelif use_fp8 and False:\n    pass\n", line=3),
    ]

    def visit_If(self, node: cst.If) -> None:
        reason = _disabled(node.test)
        if reason and not _generator_marker(node):
            self.report(node.test, reason)

    def visit_Assert(self, node: cst.Assert) -> None:
        if _const(node.test) is True or (
            isinstance(node.test, cst.BooleanOperation)
            and isinstance(node.test.operator, cst.Or)
            and True in (_const(node.test.left), _const(node.test.right))
        ):
            self.report(node, "the assertion is constant true: it checks nothing")
