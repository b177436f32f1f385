"""Work a branch leaves out: what the other way through a function computes that the taken one does not.

A patch that skips a layer for a few token counts leaves the work on the other path: `if n != 5:
hidden = self.norm(hidden)`, `if n == 5: pass / else: hidden = self.mlp(hidden)`, `h = h if n == 5
else self.mlp(h)`, `if n == 5: continue` before the layer call of a loop. The work is a name computed
by a call of code that computes (a method of the module, a helper or a layer of the loop, a custom
op) or a call made for its effect that computes into a buffer (`ops.rms_norm(out, x, ...)`, a kernel
given `out=`); the taken path leaves it out when it assigns the name nothing, the name as it was,
another name, or data made up on the spot.
Another way to compute it (`ops.gemv(x)` for small batches, `x @ w.t()`) is not a skip.

Pure functions over libcst nodes; `resolves` and `local` are the rule's name resolution and its
test for a local or a parameter of the enclosing function.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import libcst as cst

from patchaudit.analysis.values import COUNT_NAME, Resolves
from patchaudit.analysis.walk import nodes

__all__ = ["calls_kernel", "omitted", "tuning"]

_CORE = ("torch.*", "numpy.*", "builtins.*", "math.*")
# Calls made for a side look at the data, not for the data: leaving them out skips no work (a log
# line, not a function of the logits).
_ASIDE = re.compile(r"log(?!it)|print|dump|save|debug|trace|record|profil|warn|assert|check|verify|validat|sync", re.I)
_AS_IS = frozenset({"to", "float", "half", "bfloat16", "contiguous", "clone", "detach", "view", "reshape", "type"})


def _root(call: cst.Call) -> cst.BaseExpression:
    root = call.func
    while isinstance(root, cst.Attribute):
        root = root.value
    return root


def _spelled(call: cst.Call) -> str:
    return cst.helpers.get_full_name_for_node(call.func) or ""


def _calls(node: cst.CSTNode) -> Iterator[cst.Call]:
    """The calls under a node, outside lambdas."""
    return iter(nodes(node, (cst.Call,), opaque=(cst.Lambda,)))  # type: ignore[arg-type]


def calls_kernel(node: cst.CSTNode, resolves: Resolves, local: Callable[[cst.Name], bool]) -> bool:
    """Whether node calls code that computes: a method of the module (`self.mlp(x)`), a custom op, a
    helper or a layer it did not make itself (`layer(positions, h)`, `ops.fused(x)`); not a method of a
    value (`x[0].argmax()`) nor torch, numpy or a builtin."""
    for call in _calls(node):
        root = _root(call)
        if resolves(call, "torch.ops.*") is not None:
            return True
        layer = resolves(call, "torch.nn.*")
        if layer is not None and layer.endswith("()"):
            return True  # a layer built in `__init__` (`self.mlp = DeepseekV2MoE(...)`): its forward is work
        if resolves(call, _CORE) is not None or not isinstance(root, cst.Name):
            continue
        if root.value in ("self", "cls") or not local(root):
            return True
    return False


def _op(call: cst.Call, resolves: Resolves) -> bool:
    """A custom op called for its effect (`ops.rms_norm(out, x, w, eps)`), not a side look."""
    spelled = _spelled(call)
    if _ASIDE.search(spelled):
        return False
    return resolves(call, "torch.ops.*") is not None or spelled.startswith(("ops.", "_custom_ops.", "torch.ops."))


_OUT_KEYWORDS = frozenset({"out", "output", "dst"})


def _writes_out(call: cst.Call) -> bool:
    """A kernel that computes into a buffer it is given (`flash_attn_varlen_func(q=..., out=output[:n])`,
    `torch.matmul(a, b, out=c)`): called for its effect, the result is in the buffer."""
    if _ASIDE.search(_spelled(call)):
        return False
    return any(
        a.keyword is not None
        and a.keyword.value in _OUT_KEYWORDS
        and not (isinstance(a.value, cst.Name) and a.value.value == "None")
        for a in call.args
    )


def _in_place(call: cst.Call) -> bool:
    """A tensor of the function changed where it lives (`logits.masked_fill_(mask, -inf)`,
    `x.div_(t)`): work on the data the caller gets back, not a side look."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name | cst.Subscript)):
        return False
    method = func.attr.value
    return method.endswith("_") and not method.startswith("_") and not _ASIDE.search(method)


def _work(
    other: cst.CSTNode, resolves: Resolves, local: Callable[[cst.Name], bool]
) -> Iterator[tuple[frozenset[str], cst.CSTNode]]:
    """(names it computes, statement) for each statement of `other` that does a layer's work; an op
    called for its effect computes no name."""
    lines: list[cst.SimpleStatementLine] = nodes(  # type: ignore[assignment]
        other, (cst.SimpleStatementLine,), opaque=(cst.FunctionDef,)
    )  # outside functions defined there
    for line in lines:
        for small in line.body:
            if isinstance(small, cst.Assign | cst.AugAssign):
                value = small.value
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                names = frozenset(n.value for t in targets for n in _target_names(t))
                if names and value is not None and _does_work(value, resolves, local):
                    yield names, small
            elif (
                isinstance(small, cst.Expr)
                and isinstance(small.value, cst.Call)
                and (_op(small.value, resolves) or _writes_out(small.value) or _in_place(small.value))
            ):
                yield frozenset(), small
            elif isinstance(small, cst.Return) and small.value is not None and _does_work(small.value, resolves, local):
                yield frozenset(), small  # `return self._apply(logits, ...)`: the result computed on the way out


def _does_work(value: cst.BaseExpression, resolves: Resolves, local: Callable[[cst.Name], bool]) -> bool:
    if any(_ASIDE.search(_spelled(c)) for c in _calls(value)):
        return False
    return calls_kernel(value, resolves, local)


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, cst.Tuple | cst.List):
        return [n for e in target.elements for n in _target_names(e.value)]
    return []


def _as_is(value: cst.BaseExpression) -> bool:
    """A name handed on as it is (`x`, `residual`, `x.to(dtype)`), or a constant."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _AS_IS:
        value = value.func.value
    return isinstance(value, cst.Name | cst.Attribute | cst.Integer | cst.Float)


# Numbers a kernel is tuned by (`num_kv_splits`, `block_size`): one picked for a size is another way
# to compute it (`if B <= 4: num_kv_splits = 1 / else: ... = _compute_num_kv_splits(...)`).
_TUNING = re.compile(r"^(?:num|n)_|_(?:size|splits?|blocks?|chunks?|warps|stages|tiles?)$", re.IGNORECASE)


def tuning(name: str) -> bool:
    """A number a kernel is tuned by (`num_kv_splits`, `block_size`): picking it another way
    computes the same result. Not an attention window (`sliding_window_size`): it decides which
    keys each query sees."""
    last = name.rsplit(".", 1)[-1]
    return _TUNING.search(last) is not None and "window" not in last.lower()


class _Taken(cst.CSTVisitor):
    """What `_computes` gathers: the names a branch computes, and whether it calls for an effect."""

    def __init__(self, fabricated: Callable[[cst.BaseExpression], bool]) -> None:
        super().__init__()
        self.fabricated = fabricated
        self.names: set[str] = set()
        self.effect = False

    def visit_Assign(self, node: cst.Assign) -> None:
        targets = [n.value for t in node.targets for n in _target_names(t.target)]
        if isinstance(node.value, cst.Integer) and targets and all(_TUNING.search(n) for n in targets):
            self.names.update(targets)  # a number picked for a size
        elif isinstance(node.value, cst.Name) and COUNT_NAME.match(node.value.value):
            self.names.update(targets)  # `padded = num_seqs`: a count that is already a size the other way rounds to
        elif not (_as_is(node.value) or self.fabricated(node.value)):
            self.names.update(targets)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.names.update(n.value for n in _target_names(node.target))

    def visit_Expr(self, node: cst.Expr) -> None:
        self.effect = self.effect or isinstance(node.value, cst.Call)

    def visit_Return(self, node: cst.Return) -> None:
        # `return self.fallback(x)`: a result of its own, another way to it
        self.effect = self.effect or (node.value is not None and bool(list(_calls(node.value))))


def _computes(taken: cst.CSTNode, fabricated: Callable[[cst.BaseExpression], bool]) -> tuple[frozenset[str], bool]:
    """The names `taken` computes some way (not as they were, not made up), and whether it calls
    anything for its effect."""
    visitor = _Taken(fabricated)
    taken.visit(visitor)
    return frozenset(visitor.names), visitor.effect


def omitted(
    taken: cst.CSTNode,
    other: cst.CSTNode,
    resolves: Resolves,
    local: Callable[[cst.Name], bool],
    fabricated: Callable[[cst.BaseExpression], bool],
) -> cst.CSTNode | None:
    """The first statement of work in `other` that `taken` leaves out, else None."""
    computed, effect = _computes(taken, fabricated)
    for names, node in _work(other, resolves, local):
        if names and not names & computed:
            return node
        if not names and not effect:
            return node
    return None
