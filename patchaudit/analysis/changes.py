"""What a branch does to the data its function computes: the acts a reviewer blocks before serving.

A branch that only some token counts take is a debug trap when it changes what the model returns:
it overwrites a tensor in place (`out.zero_()`, `x.fill_(1)`, `x.mul_(0)`, `hidden[:] = 0`,
`logits[:, k] = -inf`), returns data made up for the case (`torch.zeros_like(x)`, `x * 0`), replaces
a result computed above with another value that no kernel computes (`sampled = logits.argmax(-1)`
after the sampler ran), returns a value unchanged where the function goes on to transform it
(`return hidden_states` in `forward`), or keeps tensors for later in a list that outlives the call
(`_CAPTURED.append(x)`, `self.kept.append(x)`).

Pure functions over libcst nodes; `resolves` and `value_of` are the rule's name resolution and local
assignments seen so far (`Rule.resolves_to`, `Rule.values_of`), as `analysis.values` takes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import libcst as cst

from patchaudit.analysis.values import Resolves, ValuesOf

__all__ = ["Change", "Found", "data_change", "made_up", "STRONG_CHANGES"]


class Change(StrEnum):
    OVERWRITE = "overwrites a tensor in place"
    MADE_UP = "a return of made-up data"
    OVERRIDE = "replaces a result computed above"
    INPUT = "returns its input unchanged"
    CAPTURE = "keeps tensors in a list that outlives the call"


# Changes that alter a result whatever else the function does: flagged even for a batch of one
# (`if logits.shape[0] == 1: sampled = ...`); the others need a window past 1 (`n <= 2`).
STRONG_CHANGES = frozenset({Change.OVERWRITE, Change.MADE_UP, Change.OVERRIDE})


@dataclass(frozen=True, slots=True)
class Found:
    change: Change
    node: cst.CSTNode

    def shown(self) -> str:
        return str(self.change)


# Tensors made from nothing: what a patch returns in place of the real result.
FABRICATED = tuple(
    f"{m}.{f}"
    for m in ("torch", "numpy")
    for f in (
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "empty",
        "empty_like",
        "full",
        "full_like",
        "rand",
        "rand_like",
        "randn",
        "randn_like",
        "randint",
        "tensor",
    )
)
FABRICATING_METHODS = frozenset({"zero_", "fill_", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor"})
_FILLS = frozenset({"zero_", "fill_", "fill_diagonal_", "normal_", "uniform_", "random_"})
_SCALES = frozenset({"mul_", "copy_"})
_CAPTURES = frozenset({"append", "extend", "insert", "appendleft", "put", "put_nowait"})
_CORE = ("torch.*", "numpy.*", "builtins.*", "math.*")
_INFINITE = ("math.inf", "math.nan", "torch.inf", "torch.nan", "numpy.inf", "numpy.nan")


def _constant(node: cst.BaseExpression, resolves: Resolves) -> bool:
    """A number fixed in the code: `0`, `-1e9`, `float("-inf")`, `-math.inf`, `True`."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus | cst.Plus):
        return _constant(node.expression, resolves)
    if isinstance(node, cst.Integer | cst.Float):
        return True
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return True
    if isinstance(node, cst.Call) and resolves(node, "builtins.float") and len(node.args) == 1:
        return isinstance(node.args[0].value, cst.SimpleString)  # `float("-inf")`
    return isinstance(node, cst.Attribute) and resolves(node, _INFINITE) is not None


def made_up(value: cst.BaseExpression, resolves: Resolves) -> bool:
    """A value made from nothing: `x * 0`, `torch.zeros_like(x)`, `x.new_zeros(...)`, `x.fill_(0)`."""
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        return any(
            isinstance(side, cst.Integer | cst.Float) and not side.evaluated_value for side in (value.left, value.right)
        )
    if not isinstance(value, cst.Call):
        return False
    if resolves(value, FABRICATED) is not None:
        return True
    func = value.func
    return isinstance(func, cst.Attribute) and func.attr.value in FABRICATING_METHODS


def _names(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

    node.visit(_Names())
    return found


def _computed(values: Sequence[cst.BaseExpression]) -> bool:
    """A name whose last value so far was computed (not `None`, a literal or an empty list)."""
    if not values:
        return False
    last = values[-1]
    if isinstance(last, cst.Name) and last.value in ("None", "True", "False"):
        return False
    return not isinstance(last, cst.Integer | cst.Float | cst.SimpleString | cst.List | cst.Tuple | cst.Dict)


class _Changes(cst.CSTVisitor):
    def __init__(
        self,
        resolves: Resolves,
        value_of: ValuesOf,
        params: frozenset[str],
        usual: str | None,
        alone: bool,
    ) -> None:
        super().__init__()
        self.resolves, self.value_of, self.params, self.usual, self.alone = resolves, value_of, params, usual, alone
        self.found: Found | None = None

    def _add(self, change: Change, node: cst.CSTNode) -> None:
        if self.found is None or (change in STRONG_CHANGES and self.found.change not in STRONG_CHANGES):
            self.found = Found(change, node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # runs only when called

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method in _FILLS:
            self._add(Change.OVERWRITE, node)
        elif method in _SCALES and node.args:
            given = node.args[0].value
            if (method == "mul_" and _constant(given, self.resolves)) or made_up(given, self.resolves):
                self._add(Change.OVERWRITE, node)  # `x.mul_(0)`, `x.copy_(torch.zeros_like(x))`
        elif method in _CAPTURES and node.args and self._outlives(func.value):
            self._add(Change.CAPTURE, node)

    def _outlives(self, owner: cst.BaseExpression) -> bool:
        """A list of the module (`_CAPTURED`) or of the object (`self.kept`), not a local one."""
        if isinstance(owner, cst.Attribute):
            return isinstance(owner.value, cst.Name) and owner.value.value == "self"
        if isinstance(owner, cst.Name):
            return owner.value not in self.params and not self.value_of(owner)
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            item = target.target
            if isinstance(item, cst.Subscript) and self._fills(node.value):
                self._add(Change.OVERWRITE, node)  # `hidden[:] = 0`, `logits[:, k] = -inf`
            elif isinstance(item, cst.Name) and self.alone:
                self._override(item, node.value, node)

    def _fills(self, value: cst.BaseExpression) -> bool:
        return _constant(value, self.resolves) or made_up(value, self.resolves)

    def _override(self, name: cst.Name, value: cst.BaseExpression, node: cst.CSTNode) -> None:
        before = self.value_of(name)
        if not _computed(before) and name.value not in self.params:
            return
        if made_up(value, self.resolves) or _constant(value, self.resolves):
            self._add(Change.OVERRIDE, node)  # `out = out * 0`, `sampled = torch.full_like(sampled, 42)`
        elif name.value not in _names(value) and not self._kernel(value):
            self._add(Change.OVERRIDE, node)  # `sampled = logits.argmax(-1)` after the sampler ran

    def _kernel(self, node: cst.CSTNode) -> bool:
        """Whether node calls code that computes (a method of the module, a custom op, a helper):
        another way to the same result, not a value made up on the spot."""
        found = False
        resolves, local = self.resolves, self._local

        class _Calls(cst.CSTVisitor):
            def visit_Call(self, call: cst.Call) -> None:
                nonlocal found
                root = call.func
                while isinstance(root, cst.Attribute):
                    root = root.value
                if resolves(call, "torch.ops.*") is not None:
                    found = True  # a custom op
                elif resolves(call, _CORE) is not None:
                    return  # `torch.argmax`, `int(...)`
                elif not isinstance(root, cst.Name):
                    return  # `x[0].argmax()`, `f(x).item()`: a method of a value
                elif root.value in ("self", "cls") or not local(root):
                    found = True  # `self.decode_kernel(x)`, `ops.fused(x)`, `_helper(x)`

        node.visit(_Calls())
        return found

    def _local(self, name: cst.Name) -> bool:
        return name.value in self.params or bool(self.value_of(name))

    def visit_Return(self, node: cst.Return) -> None:
        value = node.value
        if value is None:
            return
        if made_up(value, self.resolves):
            self._add(Change.MADE_UP, node)
        elif isinstance(value, cst.Name) and self.usual is not None and value.value != self.usual:
            self._add(Change.INPUT, node)


def data_change(
    body: cst.CSTNode,
    resolves: Resolves,
    value_of: ValuesOf,
    params: frozenset[str] = frozenset(),
    usual: str | None = None,
    alone: bool = True,
) -> Found | None:
    """The first change of data in `body` (a strong one first), else None.

    `params`: the enclosing function's parameters; `usual`: what its last statement returns, as
    spelled (`self.down_proj(out)`), when it ends in a return; `alone`: the branch has no `else`
    (a name it assigns then replaces a value computed above, rather than picking one of two).
    """
    visitor = _Changes(resolves, value_of, params, usual, alone)
    body.visit(visitor)
    return visitor.found
