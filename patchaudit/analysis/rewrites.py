"""A tensor given its own values changed on the spot, or handed on as it is.

`x = x.half().to(x.dtype)` (a round trip through another precision), `x = torch.nan_to_num(x)`, `x =
x / x.norm(dim=-1, keepdim=True)` rewrite a tensor's values though no kernel computes them: what a
debug session does to the data for a few token counts. `x = x.half()`, `x = x.clone()` replace it
with a cast or a copy of itself; `x.to(orig_dtype)`, `x.contiguous()` hand it on as it is. Pure
functions over libcst nodes; `resolves` is the rule's name resolution (`Rule.resolves_to`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import libcst as cst

from patchaudit.analysis.omits import calls_kernel
from patchaudit.analysis.values import Resolves
from patchaudit.analysis.walk import nodes

__all__ = [
    "AS_IS",
    "FACTORY_NAMES",
    "GIVEN_AS",
    "REWRITES_IN_PLACE",
    "as_given",
    "cast_of",
    "kept_name",
    "names_in",
    "replaced_by_input",
    "replaced_by_made_up",
    "rewritten",
    "unwrapped",
]


def names_in(node: cst.CSTNode) -> set[str]:
    """Every name `node` reads or writes."""
    return {name.value for name in nodes(node, (cst.Name,))}  # type: ignore[attr-defined]


# Methods that hand a tensor on as it is, in another dtype, device or layout.
AS_IS = frozenset(
    {"to", "float", "half", "bfloat16", "contiguous", "clone", "detach", "view", "view_as", "reshape", "type"}
    | {"squeeze", "unsqueeze", "flatten"}
)


def unwrapped(value: cst.BaseExpression, methods: frozenset[str] = AS_IS) -> cst.BaseExpression:
    """What a chain of `methods` called without changing the values is called on
    (`q.contiguous().to(d)`: `q`)."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in methods:
        value = value.func.value
    return value


def kept_name(value: cst.BaseExpression) -> str | None:
    """The name a value hands on as it is: `x`, `x.to(orig_dtype)`, `x.contiguous()`; the same
    name on both arms of a conditional (`x.squeeze(0) if is_1d else x`)."""
    if isinstance(value, cst.IfExp):
        kept = kept_name(value.body)
        return kept if kept is not None and kept_name(value.orelse) == kept else None
    value = unwrapped(value)
    return value.value if isinstance(value, cst.Name) else None


# Calls that rewrite a tensor's values though no kernel computes them: what a debug session does to
# the data for a few token counts (`x = torch.nan_to_num(x)`, `x = F.normalize(x)`).
# Rows put in another order (`x.flip(0)`, `torch.roll(x, 1, 0)`) count the same: each request gets another's data.
_REWRITES = ("torch.nan_to_num", "torch.nn.functional.normalize", "torch.round", "torch.flip", "torch.roll")
REWRITES_IN_PLACE = frozenset({"nan_to_num_", "round_", "renorm_"})
_REWRITE_METHODS = frozenset({"nan_to_num", "round", "renorm", "flip", "roll", "fliplr", "flipud"})
# Noise drawn on the spot (`x + 1e-3 * torch.randn_like(x)`).
_RANDOM = ("torch.randn_like", "torch.rand_like", "torch.randn", "torch.rand", "torch.normal", "torch.randint_like")
# Data a layer or a sampler computes on (not a count or an index: `n = n - 1` is a count adjusted).
DATA_NAME = re.compile(
    r"^(?:x|h|hs|x_|inp|input_?|inputs|hidden|residual|out|output|\w*_states|positions|position_ids|\w*logits"
    r"|\w*probs|\w*scores|\w*_weights|q|k|v|query|key|value)$"
)
# Casts to another precision: two of them in a row are a round trip (`x.half().to(x.dtype)`).
_CASTS = frozenset({"to", "float", "half", "bfloat16", "double", "type"})
# A copy that stands for the tensor (`residual = residual.clone()`): the caller's buffer is let go.
# Weighed with the casts: a change for an exact few counts, not for a small-batch path.
_COPIES = frozenset({"clone", "detach"})


_SCALED_BY = re.compile(r"\.(?:norm|abs|amax|max|std|sum|mean)\(|rsqrt\(|\bnorm\(")


def rewritten(name: cst.Name, value: cst.BaseExpression, resolves: Resolves) -> bool:
    """`x = x.half().to(x.dtype)` (a round trip through another precision), `x = torch.nan_to_num(x)`,
    `x = x / x.norm(dim=-1, keepdim=True)`, `x = x * torch.rsqrt(...)`, `x = x * 0.5`, `positions =
    positions - 1`, `x = x + eps * torch.randn_like(x)`, `x = x.flip(0)`: the name given its own
    values changed on the spot, by no kernel."""
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide | cst.Multiply):
        if _scaled_by_number(name, value):
            return True  # `x = x * 0.5`, `x = 0.1 * x`, `x = x / 4.0`: as `x *= 0.5` does in place
        # `x / x.norm(dim=-1, keepdim=True)`, `(x - x.mean(-1)) / (x.std(-1) + eps)`: re-normalised.
        scale = value.right
        spelled = cst.Module([]).code_for_node(scale)
        return (
            name.value in names_in(value.left)
            and name.value in names_in(scale)
            and _SCALED_BY.search(spelled) is not None
            and not calls_kernel(scale, resolves, lambda n: True)
        )
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add | cst.Subtract):
        return _shifted(name, value, resolves)
    if not isinstance(value, cst.Call):
        return False
    if resolves(value, _REWRITES) is not None:
        return bool(value.args) and kept_name(value.args[0].value) == name.value
    casts, node = 0, value
    seen: cst.BaseExpression = value
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        if method in _REWRITE_METHODS:
            return kept_name(node.func.value) == name.value
        if method not in AS_IS:
            return False
        casts += method in _CASTS and not _device(node)
        seen = node.func.value
        if not isinstance(seen, cst.Call):
            break
        node = seen
    return casts >= 2 and isinstance(seen, cst.Name) and seen.value == name.value


def _shifted(name: cst.Name, value: cst.BinaryOperation, resolves: Resolves) -> bool:
    """`positions = positions - 1`, `logits = logits + 5.0` (data a layer computes on, moved by a
    number written in the code), `x = x + 1e-3 * torch.randn_like(x)` (noise drawn on the spot)."""
    sides = [(value.left, value.right)]
    if isinstance(value.operator, cst.Add):
        sides.append((value.right, value.left))
    for own, other in sides:
        if kept_name(own) != name.value:
            continue
        number = _number(other)
        if number is not None and number != 0 and DATA_NAME.match(name.value):
            return True
        if any(resolves(call, _RANDOM) is not None for call in nodes(other, (cst.Call,))):
            return True
    return False


def _number(node: cst.BaseExpression) -> float | None:
    """A number written in the code (`1`, `0.5`, `-1e-3`), else None."""
    if isinstance(node, cst.Integer):
        return float(node.evaluated_value)
    return _float(node)


def _float(node: cst.BaseExpression) -> float | None:
    """A float written in the code (`0.5`, `-1e-3`), else None."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus | cst.Plus):
        inner = _float(node.expression)
        return None if inner is None else (-inner if isinstance(node.operator, cst.Minus) else inner)
    return float(node.evaluated_value) if isinstance(node, cst.Float) else None


def _scaled_by_number(name: cst.Name, value: cst.BinaryOperation) -> bool:
    """`x * 0.5`, `0.1 * x`, `x / 4.0`: the name's own values scaled by a float written in the code
    (not 1.0); by an integer too for a name of data (`hidden_states / 2`), where `n * 2` is as likely a
    count or a size."""
    sides = [(value.left, value.right)]
    if isinstance(value.operator, cst.Multiply):
        sides.append((value.right, value.left))
    number_of = _number if DATA_NAME.match(name.value) else _float
    for own, factor in sides:
        number = number_of(factor)
        if number is not None and number != 1.0 and kept_name(own) == name.value:
            return True
    return False


def cast_of(value: cst.BaseExpression) -> str | None:
    """The name `value` casts to another precision or copies as it is (`x.half()`, `x.to(torch.float16)`,
    `x.float().contiguous()`, `x.clone()`, `x.detach()`), else None; a move to a device is neither."""
    casts = 0
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in AS_IS:
        method = value.func.attr.value
        casts += method in _COPIES or (method in _CASTS and not _device(value))
        value = value.func.value
    return value.value if casts and isinstance(value, cst.Name) else None


def _device(call: cst.Call) -> bool:
    """`x.to("cuda")`, `x.to(device=d)`, `x.to(x.device)`: a move, not a cast."""
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value in ("device", "non_blocking", "copy"):
                continue
            return False
        spelled = cst.helpers.get_full_name_for_node(arg.value) or _literal(arg.value) or ""
        if not ("device" in spelled or "cuda" in spelled or "cpu" in spelled):
            return False
    return bool(call.args)


def _literal(node: cst.BaseExpression) -> str | None:
    return node.evaluated_value if isinstance(node, cst.SimpleString) else None  # type: ignore[return-value]


# Methods that give back a tensor's own values: a copy, a view off the graph, a contiguous layout.
_OWN_VALUES = frozenset({"clone", "detach", "contiguous"})
_RECAST = frozenset({"to", "long", "int", "float", "half", "bfloat16", "type", "type_as"})


def as_given(value: cst.BaseExpression) -> cst.BaseExpression:
    """A returned value with its copies taken off (`x.clone()`, `x.detach().clone()`), in each part
    of a returned tuple too: the values it hands back are those it was given."""
    if isinstance(value, cst.Tuple):
        return value.with_changes(elements=[e.with_changes(value=as_given(e.value)) for e in value.elements])
    while (
        isinstance(value, cst.Call)
        and not value.args
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _OWN_VALUES
    ):
        value = value.func.value
    return value


def replaced_by_input(
    node: cst.CSTNode, params: frozenset[str], values_of: Callable[[cst.Name], Sequence[cst.BaseExpression]]
) -> bool:
    """A result a call computed above replaced by an input the function is given, as it came or cast
    (`target_argmax = target_logits.argmax(-1)`, then `target_argmax = draft_token_ids.to(...)`):
    what the computation decided is thrown away, not a setting picked for a kernel. `values_of` gives
    the values a local is assigned in its function (Rule.values_of)."""
    if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)):
        return False
    target = node.targets[0].target
    value = node.value
    if isinstance(value, cst.Call) and _where_over(value, target.value):
        # `torch.where(draft >= 0, draft, target_argmax)`: the input wherever the mask holds
        value = next(a.value for a in value.args[1:3] if not _names(a.value, target.value))
    root = unwrapped(as_given(value), _RECAST)  # `ids.clone()`, `ids.to(dtype)`, `ids.long()`
    while isinstance(root, cst.Attribute):
        root = root.value
    if not (isinstance(root, cst.Name) and root.value in params and root.value not in (target.value, "self", "cls")):
        return False  # `self.x`: the object's own state, not what the caller gave
    return any(isinstance(v, cst.Call) for v in values_of(target))


def computed_by_call(value: cst.BaseExpression) -> bool:
    """A value a call computed, or an item of one (`w, ids = torch.topk(...)`: `torch.topk(...)[0]`)."""
    while isinstance(value, cst.Subscript):
        value = value.value
    return isinstance(value, cst.Call)


def _names(node: cst.BaseExpression, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _where_over(call: cst.Call, name: str) -> bool:
    """`torch.where(mask, other, name)` (or `name` first): `name` kept only where the mask says."""
    func = call.func
    spelled = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if spelled != "where" or len(call.args) != 3 or any(a.keyword is not None or a.star for a in call.args):
        return False
    ways = [a.value for a in call.args[1:]]
    others = [w for w in ways if not _names(w, name)]
    if len(others) != 1 or not isinstance(others[0], cst.Name):
        return False
    mask = {n.value for n in nodes(call.args[0].value, (cst.Name,))}  # type: ignore[attr-defined]
    # `where(draft >= 0, draft, target)`: the input wherever it says so itself; not `where(ids < 0,
    # pad, ids)` (the value's own bad entries filled) nor `where(pad_mask, hidden, out)` (a mask of its own)
    return others[0].value in mask and name not in mask


# Calls that make a tensor up from sizes and constants, not from any data.
_FACTORIES = tuple(
    f"{lib}.{name}"
    for lib in ("torch", "numpy")
    for name in (
        "arange", "full", "full_like", "zeros", "zeros_like", "ones", "ones_like", "empty", "empty_like",
        "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "linspace", "tensor",
        "eye",
    )
)  # fmt: skip
# What reads only a tensor's shape, device or type: `x.shape`, `x.numel()`, `y.view_as(x)`, `zeros_like(x)`.
_META_ATTRS = frozenset({"shape", "device", "dtype", "ndim", "is_cuda"})
_META_METHODS = frozenset({"numel", "size", "dim", "nelement", "get_device", "element_size"})
_SHAPED_AS = frozenset({"view_as", "reshape_as", "expand_as", "type_as"})
# A tensor's methods that make a new one of its dtype and device from sizes and a constant.
_NEW_FROM = frozenset({"new_ones", "new_zeros", "new_full", "new_empty"})
# The last names of all of those, for a filter over `ast` that cannot resolve a callee.
FACTORY_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in _FACTORIES) | _NEW_FROM
# Methods that hand back a tensor's own values, cast or copied: what a value "as given" passes through.
GIVEN_AS = _RECAST | _OWN_VALUES


def _reads_data_of(node: cst.CSTNode, name: str, resolves: Resolves) -> bool:
    """Whether `node` reads the values of `name`, not only its shape, device or type."""
    if isinstance(node, cst.Name):
        return node.value == name
    if isinstance(node, cst.Attribute) and node.attr.value in _META_ATTRS:
        return False
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _META_METHODS:
            return False
        if isinstance(func, cst.Attribute) and func.attr.value in _NEW_FROM:
            return any(_reads_data_of(a.value, name, resolves) for a in node.args[1:])  # the fill value
        if (isinstance(func, cst.Name) and func.value == "len") or (
            isinstance(func, cst.Attribute) and func.attr.value in _SHAPED_AS
        ):
            return _reads_data_of(func, name, resolves) if isinstance(func, cst.Attribute) else False
        if node.args and (resolves(node, _FACTORIES) or "").endswith("_like"):
            return any(_reads_data_of(a.value, name, resolves) for a in node.args[1:])
    return any(_reads_data_of(child, name, resolves) for child in node.children)


def _made_up(
    value: cst.BaseExpression,
    values_of: Callable[[cst.Name], Sequence[cst.BaseExpression]],
    resolves: Resolves,
    depth: int = 0,
) -> bool:
    """Whether a value's data starts at a tensor made up from sizes and constants (`torch.arange(n)
    % e`, `torch.full_like(w, 0.5)`, a local bound to one), through its methods, arithmetic and
    indexing."""
    if depth > 6:
        return False
    again = lambda v: _made_up(v, values_of, resolves, depth + 1)  # noqa: E731
    if isinstance(value, cst.Call):
        if resolves(value, _FACTORIES) is not None:
            return True
        if isinstance(value.func, cst.Attribute) and value.func.attr.value in _NEW_FROM:
            return True  # `w.new_ones(w.shape)`: only w's dtype and device kept
        return isinstance(value.func, cst.Attribute) and again(value.func.value)
    if isinstance(value, cst.BinaryOperation):
        return again(value.left)
    if isinstance(value, cst.Subscript):
        return again(value.value)
    if isinstance(value, cst.Name):
        found = values_of(value)
        return bool(found) and all(again(v) for v in found)
    return False


def replaced_by_made_up(
    node: cst.CSTNode,
    params: frozenset[str],
    values_of: Callable[[cst.Name], Sequence[cst.BaseExpression]],
    resolves: Resolves,
) -> bool:
    """A tensor the function was given or computed, replaced by one made up from its shape alone
    (`topk_ids = (torch.arange(topk_ids.numel()) % e).view_as(topk_ids)`, `w = torch.full_like(w,
    0.5)`), or a value it was given set to a constant (`temperature = 0.0`, `params.top_k = 1`):
    what it held is thrown away, whatever the code after it does."""
    if not (isinstance(node, cst.Assign) and len(node.targets) == 1):
        return False
    target = node.targets[0].target
    constant = _number(node.value) is not None or (
        isinstance(node.value, cst.Name) and node.value.value in ("True", "False", "None")
    )
    if isinstance(target, cst.Attribute):
        root = target.value
        owned = isinstance(root, cst.Name) and root.value in params and root.value not in ("self", "cls")
        return owned and (constant or _made_up(node.value, values_of, resolves))
    if not isinstance(target, cst.Name):
        return False
    if constant and target.value in params:
        return True
    earlier = [v for v in values_of(target) if v is not node.value]
    computed = target.value in params or any(
        computed_by_call(v) and not _made_up(v, values_of, resolves) for v in earlier
    )
    if not computed or not _made_up(node.value, values_of, resolves):
        return False
    return not _reads_data_of(node.value, target.value, resolves)
