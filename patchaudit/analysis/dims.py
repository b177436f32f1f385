"""Which dimension of the tensor it came from a shape index of a reshaped tensor names.

`q = x.view(-1, heads, dim)` then `q.shape[0]`, `q.size(-3)` or `len(q)` is the token dimension of
`x` (the `-1` the view infers); `q.shape[1]` is `heads`, a size the code fixes. A negative index is
resolved against the view's arity when the call spells it; `unsqueeze`, `flatten`, `transpose` and
`permute` with constant dims shift the dimensions as they do at run time, and methods that keep the
shape (`contiguous`, `to`, `float`, `clone`) keep them. Pure functions over libcst nodes; what a
local holds comes from the caller (`values_of`, as in `analysis.values`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

__all__ = ["asked", "viewed", "FIXED"]

ValuesOf = Callable[[cst.Name], Sequence[cst.BaseExpression]]
# What `viewed` answers for a dimension the view fixes to a size (`q.shape[1]` of `view(-1, 16, 128)`).
FIXED = cst.Name("__fixed_size__")

_RESHAPES = frozenset({"view", "reshape"})
_KEEPS = frozenset({"contiguous", "to", "float", "half", "bfloat16", "clone", "detach", "type", "cuda", "cpu"})
# The methods whose result's dimensions `viewed` reads back to the tensor called on (or to a size given).
SHAPED = _RESHAPES | _KEEPS | {"unsqueeze", "flatten", "transpose", "swapaxes", "permute"}


def _integer(node: cst.BaseExpression | None) -> int | None:
    if isinstance(node, cst.Integer):
        return node.evaluated_value
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _integer(node.expression)
        return -inner if inner is not None else None
    return None


def asked(node: cst.BaseExpression) -> tuple[cst.Name | cst.Call, int] | None:
    """(the tensor, the index) a count reads: `q.shape[i]`, `q.size(i)`, `q.size()[i]`, `len(q)`;
    the tensor a local or a call (`x.view(-1, d).shape[0]`)."""
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        index = _integer(node.slice[0].slice.value)
        owner = node.value
        if isinstance(owner, cst.Call) and not owner.args and isinstance(owner.func, cst.Attribute):
            owner = owner.func if owner.func.attr.value == "size" else owner
        if isinstance(owner, cst.Attribute) and owner.attr.value in ("shape", "size"):
            return (owner.value, index) if isinstance(owner.value, _OWNERS) and index is not None else None
        return None
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value == "size" and len(node.args) == 1:
        index = _integer(node.args[0].value)
        return (func.value, index) if isinstance(func.value, _OWNERS) and index is not None else None
    if isinstance(func, cst.Name) and func.value == "len" and len(node.args) == 1:
        owner = node.args[0].value
        return (owner, 0) if isinstance(owner, _OWNERS) else None
    return None


_OWNERS = (cst.Name, cst.Call)


def _shape_of(base: cst.BaseExpression, index: int) -> cst.Subscript:
    number: cst.BaseExpression = cst.Integer(str(abs(index)))
    if index < 0:
        number = cst.UnaryOperation(operator=cst.Minus(), expression=number)
    shape = cst.Attribute(value=base, attr=cst.Name("shape"))
    return cst.Subscript(value=shape, slice=[cst.SubscriptElement(slice=cst.Index(value=number))])


def _sizes(call: cst.Call) -> list[cst.BaseExpression] | None:
    """The sizes a `view`/`reshape` call gives, one per dimension (`view(-1, h, d)`, `view((n, -1))`)."""
    args = call.args
    if any(a.star or a.keyword for a in args):
        return None
    if len(args) == 1 and isinstance(args[0].value, cst.Tuple | cst.List):
        elements = args[0].value.elements
        if any(isinstance(e, cst.StarredElement) for e in elements):
            return None
        return [e.value for e in elements]
    return [a.value for a in args]


def _through(call: cst.Call, index: int) -> tuple[cst.BaseExpression, int] | cst.BaseExpression | None:
    """What dimension `index` of `call`'s result is: (the tensor called on, its index), a size
    the call gives (`num_tokens`, `16`), or None where the call does not say."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    method, base = func.attr.value, func.value
    numbers = [_integer(a.value) for a in call.args]
    if method in _KEEPS:
        return base, index
    if method in _RESHAPES:
        sizes = _sizes(call)
        if not sizes or not -len(sizes) <= index < len(sizes):
            return None
        j = index % len(sizes)
        size = sizes[j]
        if _integer(size) == -1:
            return (base, 0) if j == 0 else None  # the rows a view infers: the tokens of what it views
        return size
    new = numbers[0] if len(numbers) == 1 else None
    if method == "unsqueeze" and new is not None and new >= 0 and index >= 0:
        return cst.Integer("1") if index == new else (base, index if index < new else index - 1)
    given = [n for n in numbers if n is not None and n >= 0]
    if method == "flatten" and index >= 0 and len(given) == len(numbers) <= 2:
        start = given[0] if given else 0
        if index <= start:
            return base, index  # the first merged dimension starts with the one it had
        return (base, index + given[1] - start) if len(given) == 2 else None
    if method in ("transpose", "swapaxes") and len(numbers) == 2 and None not in numbers and index >= 0:
        a, b = numbers
        return base, (b if index == a else a if index == b else index)  # type: ignore[return-value]
    if method == "permute" and numbers and None not in numbers and 0 <= index < len(numbers):
        return base, numbers[index]  # type: ignore[return-value]
    return None


def viewed(
    node: cst.BaseExpression, values_of: ValuesOf | None, sized: Callable[[cst.BaseExpression], bool]
) -> cst.BaseExpression | None:
    """The expression a shape index of a reshaped local stands for: `x.shape[0]` for `q.size(-3)`
    after `q = x.view(-1, 16, 128)`, the size given (`num_tokens` for `q.shape[0]` after `q =
    x.reshape(num_tokens, -1)`), `FIXED` for a size the code fixes (`16`, `self.num_heads`: `sized`
    says which names are such sizes); None where the local is no reshape or the call does not say."""
    found = asked(node)
    if found is None or values_of is None:
        return None
    owner, index = found
    values = values_of(owner) if isinstance(owner, cst.Name) else [owner]
    if not values or not isinstance(values[-1], cst.Call):
        return None
    where = _through(values[-1], index)
    if where is None:
        return None
    if isinstance(where, tuple):
        base, j = where
        if isinstance(base, cst.Name) and base.deep_equals(owner) and j == index:
            return None  # `x = x.contiguous()`: the same dimension of the same name
        return _shape_of(base, j)
    literal = _integer(where)
    if literal is not None or sized(where):
        return FIXED
    return where
