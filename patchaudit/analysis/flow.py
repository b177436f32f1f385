"""A control-flow view of a block for the rules that ask whether a check can still fire.

Pure functions over libcst nodes: which statements of a block are dead after an unconditional
`return`/`raise`, whether a statement holds a guard (`raise`, `assert`, a check call), whether a
`with contextlib.suppress(...)` or a `try/except: pass` swallows the guards in it, and whether
an `if` is an early return gated on the process environment.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import libcst as cst

from patchaudit.analysis.walk import nodes

__all__ = [
    "CHECK_CALL",
    "FILLERS",
    "guard_in",
    "dead_after",
    "swallowing_handler",
    "env_gated_exit",
    "CATCH_ALL",
]

Resolves = Callable[[cst.CSTNode, Sequence[str] | str], str | None]
# A call that is a check by its name: `self._verify_quant(x)`, `check_dtype(d)`, or named for what it
# raises on (`raise_if_nan_logits(x)`, `self._fail_on_overflow(n)`).
CHECK_CALL = re.compile(
    r"(?:^|\.)_*(?:check|validate|verify|assert|ensure|(?:raise|fail|error|abort)_(?:if|on|unless|when)_)\w*$"
)
CATCH_ALL = ("builtins.Exception", "builtins.BaseException")


class _Guards(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: cst.CSTNode | None = None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a nested definition runs elsewhere

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Raise(self, node: cst.Raise) -> None:
        self.found = self.found or node

    def visit_Assert(self, node: cst.Assert) -> None:
        self.found = self.found or node

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            name = cst.helpers.get_full_name_for_node(node.value.func) or ""
            if CHECK_CALL.search(name):
                self.found = self.found or node


def guard_in(nodes: Sequence[cst.CSTNode]) -> cst.CSTNode | None:
    """The first raise, assert or check call among nodes (not inside nested definitions)."""
    visitor = _Guards()
    for node in nodes:
        node.visit(visitor)
        if visitor.found is not None:
            return visitor.found
    return None


def _small(stmt: cst.BaseStatement) -> list[cst.BaseSmallStatement]:
    return list(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else []


def dead_after(body: Sequence[cst.BaseStatement]) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """(the unconditional `return`/`raise`, the first guard after it) when a guard is dead code."""
    for index, stmt in enumerate(body):
        smalls = _small(stmt)
        ender = next((s for s in smalls if isinstance(s, cst.Return | cst.Raise | cst.Continue | cst.Break)), None)
        if ender is not None:
            guard = guard_in(list(body[index + 1 :]))
            return (ender, guard) if guard is not None else None
    return None


def _quiet(body: cst.BaseSuite, gives_up: bool = False) -> bool:
    """A handler body that only swallows: `pass`, `...`, `continue`, a print or a log call;
    `gives_up`: a `return` of nothing may end it too (`logger.debug(e); return None`)."""
    if isinstance(body, cst.SimpleStatementSuite):
        smalls = list(body.body)
    else:
        statements = [stmt for stmt in body.body if isinstance(stmt, cst.SimpleStatementLine)]
        if len(statements) != len(body.body):
            return False
        smalls = [s for stmt in statements for s in stmt.body]
    leave = smalls[-1] if smalls else None
    if gives_up and isinstance(leave, cst.Return):
        nothing = leave.value is None or (isinstance(leave.value, cst.Name) and leave.value.value == "None")
        if not (nothing or _made_up_output(leave.value)):
            return False
        smalls = smalls[:-1]
    for small in smalls:
        if isinstance(small, cst.Pass | cst.Continue):
            continue
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Ellipsis | cst.SimpleString):
            continue
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            name = cst.helpers.get_full_name_for_node(small.value.func) or ""
            if re.search(r"(?:^|\.)(?:print|debug|info|warning|warn|exception|error)(?:_once)?$", name):
                continue
        return False
    return True


# Tensors made up in place of a result: `return torch.zeros_like(x)` serves zeros as the output.
FILLERS = frozenset({"zeros", "zeros_like", "empty", "empty_like", "ones", "ones_like", "full", "full_like"})
FILLERS |= {"new_zeros", "new_empty", "new_ones", "new_full"}


def _made_up_output(value: cst.BaseExpression | None) -> bool:
    if not isinstance(value, cst.Call):
        return False
    name = cst.helpers.get_full_name_for_node(value.func) or ""
    return name.rsplit(".", 1)[-1] in FILLERS


def swallowing_handler(
    node: cst.Try, resolves: Resolves, *, gives_up: bool = False, catches: Sequence[str] = CATCH_ALL
) -> cst.ExceptHandler | None:
    """The `except:`/`except Exception:` (or another of `catches`) of a try whose body only swallows
    what it catches; `gives_up`: or ends in a `return` of nothing (`logger.debug(e); return None`) or
    of a tensor made up in place of the result (`return torch.zeros_like(x)`)."""
    for handler in node.handlers:
        caught = handler.type
        catch_all = caught is None or resolves(caught, catches) is not None
        if catch_all and _quiet(handler.body, gives_up):
            return handler
    return None


_ENV = ("os.environ", "os.environ.get", "os.getenv", "os.environ.__contains__")


def _only_pass(body: cst.BaseSuite) -> bool:
    if isinstance(body, cst.SimpleStatementSuite):
        return all(isinstance(s, cst.Pass) for s in body.body)
    lines = list(body.body)
    return all(
        isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, cst.Pass) for s in stmt.body) for stmt in lines
    )


def env_gated_exit(node: cst.If, resolves: Resolves) -> bool:
    """`if os.environ.get("SKIP"): return`: an early exit that the process environment decides."""
    test = node.test
    inverted = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
    if (
        isinstance(node.orelse, cst.Else)
        and isinstance(test, cst.UnaryOperation)
        and inverted
        and _only_pass(node.body)
    ):
        # `if not os.environ.get("X"): pass` / `else: return`: the same exit, inverted.
        flipped = node.with_changes(test=test.expression, body=node.orelse.body, orelse=None)
        return env_gated_exit(flipped, resolves)
    if node.orelse is not None:
        return False
    if isinstance(node.body, cst.SimpleStatementSuite):
        smalls = list(node.body.body)
    elif all(isinstance(stmt, cst.SimpleStatementLine) for stmt in node.body.body):
        smalls = [s for stmt in node.body.body for s in _small(stmt)]  # type: ignore[arg-type]
    else:
        return False
    # `return`, perhaps after a few plain statements (`self.x = y`): no raise on the way out.
    if not smalls or not isinstance(smalls[-1], cst.Return) or any(isinstance(s, cst.Raise) for s in smalls):
        return False
    return any(_reads_env(sub, resolves) for sub in nodes(node.test, _ENV_READS))


_ENV_READS = (cst.Attribute, cst.Call, cst.Subscript, cst.Comparison)


def _reads_env(node: cst.CSTNode, resolves: Resolves) -> bool:
    """`envs.X` (a project's settings module read from the environment), `os.getenv(...)`,
    `os.environ[...]`, `"X" in os.environ`."""
    if isinstance(node, cst.Attribute):
        base = cst.helpers.get_full_name_for_node(node.value) or ""
        return base.rsplit(".", 1)[-1] == "envs"
    if isinstance(node, cst.Call):
        return resolves(node, _ENV) is not None
    if isinstance(node, cst.Subscript):
        return resolves(node.value, "os.environ") is not None
    return isinstance(node, cst.Comparison) and any(
        isinstance(t.operator, cst.In) and resolves(t.comparator, "os.environ") is not None for t in node.comparisons
    )
