"""Token, batch and sequence counts: which values are counts, and which small sets a test pins them to.

Rules ask two questions: "is this expression a count?" (`count_of`) and "what number does this name stand
for?" (`local_number`, `instance_numbers`). A count is a dimension of a tensor (`.shape[i]`, `.size(i)`,
unpacked from `.shape`), `.numel()`, `len()`/`sum()` of ids, tokens, sequences or requests, a name of a
count (`num_tokens`, `batch_size`), a call counter (`self._step += 1`), and any of these through local
assignments, casts and arithmetic with a constant (`int(n)`, `n // 1`, `n - 1`), a per-request count
array's sum (`num_scheduled_tokens_np.sum()`), `max(1, n)`, the last offset into a batch
(`query_start_loc[-1]`), the last token's position (`positions[-1] + 1`), and the token dimension
of a reshaped tensor (`q = x.view(-1, h, d)`, then
`q.size(-3)`: see analysis.dims). A feature size (`hidden`, `head_dim`, the last dimension of a tensor
other than ids or positions) is not a count.

Pure functions over libcst nodes and the module's `ast`; those that must know what a call is
take `resolves` and `value_of` as `analysis.values` does.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Container, Sequence

import libcst as cst

from patchaudit.analysis import dims as _views
from patchaudit.analysis import values as _values
from patchaudit.analysis.module import constant_value
from patchaudit.analysis.trees import full_name, statements
from patchaudit.analysis.values import COUNT_NAME, LEN_OF, Resolves, ValuesOf

__all__ = [
    "FEATURE_NAME",
    "MORE_COUNT_NAMES",
    "count_of",
    "unpacked",
    "unparsed",
    "counters",
    "module_counters",
    "instance_numbers",
    "local_number",
    "numeric_names",
    "shape_compared",
    "env_default",
    "env_numbers",
    "element_count",
    "elements_count",
    "len_may_count",
    "THROUGH_NAMES",
]

# Names of sizes fixed by the model or the kernel, never of how many tokens came in.
FEATURE_NAME = re.compile(
    r"hidden|head|dim|vocab|rank|expert|lora|feature|channel|width|embed|intermediate|topk|top_k|"
    r"group|block|page|layer|world|tp_size|pp_size|ep_size|bits|quant|stride|align",
    re.IGNORECASE,
)
# Other names a hurried engineer gives a token, sequence or batch count.
MORE_COUNT_NAMES = re.compile(
    r"^(?:num|n|total)_?(?:toks?|tokens|seqs?|reqs?|requests|prompts|batch)$|"
    r"^(?:bs|bsz|ntok|ntoks|ntokens|nseq|seqlen|seq_length|q_len|kv_len|query_len|num_batched_tokens)$|"
    r"^(?:num|n)_(?:prefills|decodes|running|waiting|scheduled\w*)$|^max_(?:query|seq|prefill|decode)_?(?:len|length)$"
)
# Queues of requests a scheduler keeps: their length counts requests.
QUEUE_NAME = re.compile(r"^_?(?:running|waiting|scheduled\w*|finished\w*|preempted\w*)$")
# Tensors whose dimensions are fixed by the model or the memory layout: weights, caches, scales.
FIXED_OWNER = re.compile(r"cache|weight|scale|bias|kernel|^param|^w\d*$|^w_|_w$", re.IGNORECASE)
# Collections of counts, one per request or sequence (`seq_lens`, `query_lens`).
PLURAL = re.compile(r"(?:lens|lengths|(?<![a-z])counts)(?:_list|_cpu|_np|_tensor|_host)?$")
# A mask or a flag per token (`attention_mask`, `valid`, `is_prefill`): its sum counts the tokens set.
MASK_NAME = re.compile(r"mask|valid|keep|select|active|^is_|nonpad|non_pad", re.IGNORECASE)
# Tensor methods that give a mask (`ids.ne(pad)`), or keep one a mask (`mask.long()`).
_MASKING = frozenset({"ge", "gt", "le", "lt", "eq", "ne", "bool", "isin", "logical_not", "logical_and", "logical_or"})
_KEEPS_MASK = frozenset({"long", "int", "float", "to", "cpu", "flatten", "view", "reshape", "squeeze"})
_TALLIES = frozenset({"sum", "count_nonzero"})
_SUMS = ("builtins.sum", "builtins.max", "builtins.min")
_CASTS = ("builtins.int", "builtins.float", "builtins.round", "math.ceil", "math.floor", "math.trunc", "operator.index")
# Conversions that keep a number as it was: into a tensor or an array (`torch.tensor(n).item()`), or
# a numpy scalar (`np.int64(n)`); keywords (`device=`, `dtype=`) change only where it lives.
_CONVERSIONS = (
    "torch.tensor",
    "torch.as_tensor",
    "torch.scalar_tensor",
    "numpy.array",
    "numpy.asarray",
    "numpy.int64",
    "numpy.int32",
    "numpy.intp",
    "numpy.float32",
    "numpy.float64",
)
# The last names of the casts, conversions and sums count_of reads a count through (`math.ceil(n)`,
# `np.int64(n)`, `torch.tensor(n)`, `builtins.max(n, 1)`), for a statement filter that cannot resolve.
THROUGH_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in (*_CASTS, *_CONVERSIONS, *_SUMS))
# Methods that turn a tensor into a list of the same length (`len(ids.tolist())` is `len(ids)`).
_AS_LIST = frozenset({"tolist", "cpu", "numpy", "flatten", "ravel"})
Inline = Callable[[cst.Call], "cst.BaseExpression | None"]
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Divide)


def _fixed_dim(node: cst.Subscript) -> bool:
    """A dimension no token count sets: any of a weight's, a cache's or a scale's, and the last
    (`x.shape[-1]`) of any tensor other than ids or positions."""
    owner = node.value
    if isinstance(owner, cst.Call):
        owner = owner.func
    base = owner.value if isinstance(owner, cst.Attribute) else owner
    full = cst.helpers.get_full_name_for_node(base) or ""
    name = full.rsplit(".", 1)[-1]
    if FIXED_OWNER.search(name) or (full.startswith("self.") and not LEN_OF.search(name)):
        return True  # a weight, a cache, or a module's own parameter or buffer (`self.w.shape`)
    index = node.slice[0].slice if len(node.slice) == 1 else None
    if not (isinstance(index, cst.Index) and isinstance(index.value, cst.UnaryOperation)):
        return False
    if not (isinstance(index.value.expression, cst.Integer) and index.value.expression.value == "1"):
        return False
    return not LEN_OF.search(name)


def count_of(
    node: cst.BaseExpression,
    resolves: Resolves,
    value_of: ValuesOf | None = None,
    counted: frozenset[str] = frozenset(),
    depth: int = 0,
    inline: Inline | None = None,
) -> str | None:
    """How `node` spells a token/batch count, else None.

    `counted`: the names the module increments by a constant (`counters`), call counters;
    `inline`: what a call of a short helper of the module returns, in the caller's terms.
    """
    if depth > 8:
        return None
    again = lambda n: count_of(n, resolves, value_of, counted, depth + 1, inline)  # noqa: E731
    through = _through(node, resolves)
    if through is not None:
        inner, shown = through
        found = again(inner)
        return shown.format(found) if found is not None else None
    total = _offsets_end(node) or _last_position(node)
    if total is not None:
        return total
    view = _views.viewed(node, value_of, _fixed_size) if depth < 8 else None
    if view is _views.FIXED:
        return None  # `q.shape[1]` of `x.view(-1, 16, 128)`: heads
    if view is not None:
        found = again(view)
        if found is not None:
            return f"{found} (reshaped)"
    if isinstance(node, cst.Call) and resolves(node, _SUMS):
        return _summed(node) or _aggregate(node, again, value_of) or _bounded_by(node, again)
    if isinstance(node, cst.IfExp):
        # `n = x.shape[0] if x.dim() == 2 else x.shape[1]`: a count either way.
        found, other = again(node.body), again(node.orelse)
        return found if found is not None and other is not None else None
    tallied = _tallied(node, resolves, value_of) if isinstance(node, cst.Call) else None
    if tallied is not None:
        return tallied
    if isinstance(node, cst.Call) and len(node.args) == 1 and resolves(node, "builtins.len"):
        spelled = cst.helpers.get_full_name_for_node(node.args[0].value) or ""
        if QUEUE_NAME.match(spelled.rsplit(".", 1)[-1]):
            return f"len({spelled})"  # `len(self.running)`
    if isinstance(node, cst.Subscript) and counted and unparsed(node) in counted:
        return f"{unparsed(node)} (a call counter)"
    if isinstance(node, cst.Subscript) and _fixed_dim(node):
        return None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "size":
        base = cst.helpers.get_full_name_for_node(node.func.value) or ""
        if FIXED_OWNER.search(base.rsplit(".", 1)[-1]):
            return None  # `layer.weight.size(2)`: a weight's shape, not a count
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "numel":
        owner = node.func.value  # `layer.A_log.numel()`: a parameter's size, not a count
        if isinstance(owner, cst.Attribute) and not LEN_OF.search(owner.attr.value):
            return None
        if isinstance(owner, cst.Name) and FIXED_OWNER.search(owner.value):
            return None  # `weight.numel()`
    if _of_offsets(node):
        return None
    if isinstance(node, cst.Name | cst.Attribute):
        spelled = cst.helpers.get_full_name_for_node(node) or ""
        if spelled in counted:
            return f"{spelled} (a call counter)"
        last = spelled.rsplit(".", 1)[-1]
        if FEATURE_NAME.search(last) and not COUNT_NAME.match(last):
            return None
        if MORE_COUNT_NAMES.match(last):
            return last
    if isinstance(node, cst.Name) and not COUNT_NAME.match(node.value):
        for value in reversed(value_of(node) if value_of is not None else ()):
            found = again(value)
            if found is not None:
                return f"{node.value} = {found}"
        return None
    if isinstance(node, cst.NamedExpr):
        found = again(node.value)
        return f"{node.target.value} := {found}" if found is not None and isinstance(node.target, cst.Name) else found
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and value_of is not None:
        # `self._ntok = num_tokens` above in the same function (a `value_of` that knows attributes).
        for value in reversed(value_of(node)):  # type: ignore[arg-type]
            found = again(value)
            if found is not None:
                return f"{_shown(node)} = {found}"
    returned = inline(node) if inline is not None and isinstance(node, cst.Call) else None
    if returned is not None:
        found = again(returned)  # `_ntok(x)` with `def _ntok(t): return t.shape[0]`
        return f"{_shown(node.func)}() = {found}" if found is not None else None  # type: ignore[attr-defined]
    return _values.count_of(node, resolves, value_of, depth)


# Offsets into a batch (`cu_seqlens_q`, `query_start_loc`): one more than the requests they bound.
OFFSETS = re.compile(r"^cu_|start_loc|offsets$|indptr", re.IGNORECASE)


def _fixed_size(node: cst.BaseExpression) -> bool:
    """A size a view gives that the model fixes (`self.num_heads`, `head_dim`, `x.shape[-1]`)."""
    spelled = cst.helpers.get_full_name_for_node(node) or ""
    last = spelled.rsplit(".", 1)[-1]
    if spelled and FEATURE_NAME.search(last) and not COUNT_NAME.match(last):
        return True
    return isinstance(node, cst.Subscript) and _fixed_dim(node)


def _of_offsets(node: cst.BaseExpression) -> bool:
    """`cu_seqlens_q.numel()`, `len(query_start_loc)`, `cu_seqlens.shape[0]`: not a count of tokens."""
    owner: cst.BaseExpression | None = None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        owner = node.func.value if node.func.attr.value in ("numel", "size") else None
    elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len" and node.args:
        owner = node.args[0].value
    elif isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute):
        owner = node.value.value if node.value.attr.value == "shape" else None
    spelled = cst.helpers.get_full_name_for_node(owner) if owner is not None else None
    return spelled is not None and OFFSETS.search(spelled.rsplit(".", 1)[-1]) is not None


# Positions of the tokens in their sequences (`positions`, `position_ids`).
POSITIONS = re.compile(r"^(?:input_)?(?:positions|position_ids|pos_ids)$")


def _last_position(node: cst.BaseExpression) -> str | None:
    """`positions[-1]`, `positions.max()`: the position of the last token, one less than the
    sequence's length (`positions[-1] + 1 == 17` is a prompt of 17 tokens)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and not node.args:
        owner, last = node.func.value, node.func.attr.value in ("max", "amax")
        shown = "{}.max()"
    elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        index = node.slice[0].slice.value
        owner, shown = node.value, "{}[-1]"
        last = isinstance(index, cst.UnaryOperation) and isinstance(index.expression, cst.Integer)
        last = last and index.expression.value == "1"  # type: ignore[attr-defined]
    else:
        return None
    spelled = cst.helpers.get_full_name_for_node(owner) or ""
    return shown.format(spelled) if last and POSITIONS.match(spelled.rsplit(".", 1)[-1]) else None


def _offsets_end(node: cst.BaseExpression) -> str | None:
    """`query_start_loc[-1]`, `cu_seqlens_q[num_reqs]`: the last offset into a batch is its tokens."""
    if not (isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)):
        return None
    index = node.slice[0].slice.value
    last = isinstance(index, cst.UnaryOperation) and isinstance(index.expression, cst.Integer)
    last = last and index.expression.value == "1"  # type: ignore[attr-defined]
    spelled = cst.helpers.get_full_name_for_node(node.value) or ""
    if not (last or (isinstance(index, cst.Name) and COUNT_NAME.match(index.value))):
        return None
    return f"{spelled}[-1]" if spelled and OFFSETS.search(spelled.rsplit(".", 1)[-1]) else None


def _through(node: cst.BaseExpression, resolves: Resolves) -> tuple[cst.BaseExpression, str] | None:
    """The value a cast or constant arithmetic keeps a count in (`int(n)`, `n.item()`, `n // 1`,
    `x.size(dim=0)`), and how to show the result."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC):
        symbol = _OP[type(node.operator)]
        if isinstance(node.right, cst.Integer):
            return node.left, "{} " + f"{symbol} {node.right.value}"
        if isinstance(node.left, cst.Integer):
            return node.right, f"{node.left.value} {symbol} " + "{}"
        if isinstance(node.operator, cst.FloorDivide | cst.Divide):
            # `x.numel() // hidden`, `x.numel() // x.shape[-1]`: elements over a row's size are rows.
            return node.left, "{} " + f"{symbol} ..."
        return None
    if not isinstance(node, cst.Call):
        return None
    if len(node.args) == 1 and not node.args[0].keyword and resolves(node, _CASTS):
        return node.args[0].value, "{}"
    keywords_after = node.args and not node.args[0].keyword and all(a.keyword for a in node.args[1:])
    if keywords_after and resolves(node, _CONVERSIONS):
        return node.args[0].value, "{}"  # `torch.tensor(n, device="cpu")`, `np.int64(n)`
    attribute = _getattr(node, resolves)
    if attribute is not None:
        return attribute, "{}"  # `getattr(attn_metadata, "num_actual_tokens", 0)`
    listed = _listed_len(node, resolves)
    if listed is not None:
        return listed, "{}"
    method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
    if method in ("item", "long", "int") and not node.args:
        return node.func.value, "{}"  # type: ignore[attr-defined]
    given = node.args[0] if len(node.args) == 1 else None
    if method == "size" and given is not None and given.keyword is not None and given.keyword.value == "dim":
        return node.with_changes(args=[cst.Arg(value=given.value)]), "{}"
    return None


def _getattr(node: cst.Call, resolves: Resolves) -> cst.Attribute | None:
    """`getattr(owner, "name")` or `getattr(owner, "name", default)` as `owner.name`."""
    if not (2 <= len(node.args) <= 3 and resolves(node, "builtins.getattr")):
        return None
    name = _values.literal_string(node.args[1].value)
    if name is None or not name.isidentifier():
        return None
    return cst.Attribute(value=node.args[0].value, attr=cst.Name(name))


def _listed_len(node: cst.Call, resolves: Resolves) -> cst.Call | None:
    """`len(ids.tolist())`, `len(list(ids))`: `len(ids)`."""
    if not (len(node.args) == 1 and resolves(node, "builtins.len")):
        return None
    inner = node.args[0].value
    if not isinstance(inner, cst.Call):
        return None
    if isinstance(inner.func, cst.Attribute) and inner.func.attr.value in _AS_LIST and not inner.args:
        return node.with_changes(args=[cst.Arg(value=inner.func.value)])
    if len(inner.args) == 1 and resolves(inner, ("builtins.list", "builtins.tuple")):
        return node.with_changes(args=[cst.Arg(value=inner.args[0].value)])
    return None


# Methods and calls `len` sees through to the collection they list (`len(ids.tolist())` is `len(ids)`).
_LEN_LISTS = _AS_LIST | _values.LISTING_METHODS


def len_may_count(arg: ast.expr, bound: Container[str]) -> bool:
    """Whether count_of could read `len(arg)` as a count, judged on the ast (a superset of its
    answer, for a statement filter): a local in `bound` (count_of follows its values), the rows of a
    view of any tensor (`len(x.view(-1, d))` is `x.shape[0]`: dims.viewed), else only a name of
    tokens, ids, requests or batches (LEN_OF) or a scheduler's queue, as the last name it spells
    (`len(ids.tolist())`, `len(self.running)`, `len(batch[0])`); not `len(parts)` of a parameter."""
    while isinstance(arg, ast.Call):
        func = arg.func
        if isinstance(func, ast.Attribute) and func.attr in _views.SHAPED:
            return True
        if isinstance(func, ast.Attribute) and func.attr in _LEN_LISTS:
            arg = func.value
        elif isinstance(func, ast.Name) and func.id in _values.LISTING_CALLS and arg.args:
            arg = arg.args[0]
        else:
            break
    if isinstance(arg, ast.Name) and arg.id in bound:
        return True
    last = (full_name(arg) or "").rsplit(".", 1)[-1]
    return LEN_OF.search(last) is not None or QUEUE_NAME.match(last) is not None


def _summed(node: cst.Call) -> str | None:
    """`sum(seq_lens)`, `max(num_tokens_per_req)`: a count over requests."""
    if len(node.args) != 1:
        return None
    spelled = cst.helpers.get_full_name_for_node(node.args[0].value) or ""
    last = spelled.rsplit(".", 1)[-1]
    if COUNT_NAME.match(last) or LEN_OF.search(last) or PLURAL.search(last):
        func = cst.helpers.get_full_name_for_node(node.func) or "sum"
        return f"{func}({spelled})"
    return None


def _aggregate(
    node: cst.Call, count: Callable[[cst.BaseExpression], str | None], value_of: ValuesOf | None
) -> str | None:
    """`max(num_scheduled_tokens.values())`, `min(counts)` with `counts = [len(r) for r in reqs]`,
    `sum(x.shape[0] for x in xs)`: an aggregate of counts is one."""
    if len(node.args) != 1:
        return None
    func = cst.helpers.get_full_name_for_node(node.func) or "sum"
    found = elements_count(node.args[0].value, count, value_of)
    return f"{func}({found})" if found is not None else None


def _bounded_by(node: cst.Call, count: Callable[[cst.BaseExpression], str | None]) -> str | None:
    """`max(1, n)`, `min(n, 8)`: a count kept within a constant is the count."""
    if len(node.args) != 2 or any(a.keyword or a.star for a in node.args):
        return None
    first, second = (a.value for a in node.args)
    for bound, value in ((first, second), (second, first)):
        if isinstance(bound, cst.Integer):
            found = count(value)
            if found is not None:
                func = cst.helpers.get_full_name_for_node(node.func) or "max"
                return f"{func}({found}, {bound.value})"
    return None


def elements_count(
    iterable: cst.BaseExpression, count: Callable[[cst.BaseExpression], str | None], value_of: ValuesOf | None
) -> str | None:
    """What each element of a collection counts: `element_count`, also through a local bound to
    one and through a comprehension of counts (`[len(r.prompt_token_ids) for r in reqs]`)."""
    if isinstance(iterable, cst.GeneratorExp | cst.ListComp | cst.SetComp):
        return count(iterable.elt)
    iterable = _unwrapped(iterable)
    found = element_count(iterable, count)
    if found is not None or not (isinstance(iterable, cst.Name) and value_of is not None):
        return found
    for value in reversed(value_of(iterable)):
        if isinstance(value, cst.GeneratorExp | cst.ListComp | cst.SetComp):
            return count(value.elt)
        found = element_count(_unwrapped(value), count)
        if found is not None:
            return found
    return None


# Calls that hold the same elements in another collection: `list(d.values())`, `np.array(lens)`.
_COLLECTIONS = frozenset({"list", "tuple", "sorted", "array", "asarray", "tensor", "as_tensor"})


def _unwrapped(node: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(node, cst.Call) and len(node.args) >= 1 and node.args[0].keyword is None:
        name = (cst.helpers.get_full_name_for_node(node.func) or "").rsplit(".", 1)[-1]
        if name not in _COLLECTIONS or any(a.keyword is None for a in node.args[1:]):
            break
        node = node.args[0].value
    return node


def _tallied(node: cst.Call, resolves: Resolves, value_of: ValuesOf | None) -> str | None:
    """`mask.sum()`, `torch.count_nonzero(ids.ne(pad))`, `torch.numel(positions)`: a count
    reduced from a tensor (the elements of a token tensor, the tokens a mask sets)."""
    if len(node.args) == 1 and not node.args[0].keyword and resolves(node, "torch.numel"):
        owner = node.args[0].value
        method = cst.Call(func=cst.Attribute(value=owner, attr=cst.Name("numel")))
        return count_of(method, resolves, value_of) and f"torch.numel({_shown(owner)})"
    if node.args and any(a.keyword is None for a in node.args):
        if not (len(node.args) == 1 and resolves(node, ("torch.sum", "torch.count_nonzero"))):
            return None  # `x.sum(0)`: a reduction over one dimension, not a scalar
        owner = node.args[0].value
        shown = cst.helpers.get_full_name_for_node(node.func) or "sum"
    elif isinstance(node.func, cst.Attribute) and node.func.attr.value in _TALLIES and not node.args:
        owner, shown = node.func.value, node.func.attr.value
    elif isinstance(node.func, cst.Attribute) and node.func.attr.value in ("max", "min") and not node.args:
        # `seq_lens.max()`, `np.array(counts).min()`: an aggregate of per-request counts.
        found = elements_count(node.func.value, lambda n: count_of(n, resolves, value_of), value_of)
        return f"{found}.{node.func.attr.value}()" if found is not None else None
    else:
        return None
    if _masks(owner, value_of) or _per_request(owner):
        return f"{_shown(owner)}.{shown.rsplit('.', 1)[-1]}()"
    return None


def _per_request(node: cst.BaseExpression) -> bool:
    """Counts one per request (`seq_lens`, `num_scheduled_tokens_np`, `self.query_lens`): their sum
    is the step's tokens."""
    spelled = cst.helpers.get_full_name_for_node(node) or ""
    last = spelled.rsplit(".", 1)[-1]
    return bool(last) and (PLURAL.search(last) is not None or COUNT_NAME.match(last) is not None)


def _masks(node: cst.BaseExpression, value_of: ValuesOf | None, depth: int = 0) -> bool:
    """Whether a tensor is a mask or a flag per token (so its sum counts tokens)."""
    if depth > 4:
        return False
    if isinstance(node, cst.Comparison):
        return True  # `(ids != pad)`
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        return method in _MASKING or (method in _KEEPS_MASK and _masks(node.func.value, value_of, depth + 1))
    if isinstance(node, cst.Name | cst.Attribute):
        spelled = cst.helpers.get_full_name_for_node(node) or ""
        if MASK_NAME.search(spelled.rsplit(".", 1)[-1]):
            return True
        if isinstance(node, cst.Name) and value_of is not None:
            return any(_masks(v, value_of, depth + 1) for v in value_of(node)[-1:])
    return False


def _shown(node: cst.BaseExpression) -> str:
    return cst.helpers.get_full_name_for_node(node) or "..."


_OP = {cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.FloorDivide: "//", cst.Divide: "/"}


def unparsed(node: cst.BaseExpression) -> str | None:
    """The expression as `ast.unparse` writes it (the form `counters` names, one spelling for
    `(a, b)` and `a, b`), None if it does not parse alone."""
    try:
        return ast.unparse(ast.parse(cst.Module([]).code_for_node(node).strip(), mode="eval"))
    except SyntaxError:
        return None


def _dims(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The shape a value holds whole or as a prefix: `x.shape`, `x.size()`, `x.shape[:-1]`, `tuple(x.shape)`."""
    if isinstance(value, cst.NamedExpr):
        return _dims(value.value)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("tuple", "list"):
        return _dims(value.args[0].value) if len(value.args) == 1 else None
    if isinstance(value, cst.Subscript) and len(value.slice) == 1:
        part = value.slice[0].slice
        if isinstance(part, cst.Slice) and part.lower is None and part.step is None:
            return _dims(value.value)
        return None
    if isinstance(value, cst.Attribute) and value.attr.value == "shape":
        return value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "size":
        return value if not value.args else None
    return None


def dim(shape: cst.BaseExpression, index: int) -> cst.Subscript:
    """`shape[index]` as a node (`x.shape[0]`, `x.shape[-1]`)."""
    number: cst.BaseExpression = cst.Integer(str(abs(index)))
    if index < 0:
        number = cst.UnaryOperation(operator=cst.Minus(), expression=number)
    return cst.Subscript(value=shape, slice=[cst.SubscriptElement(slice=cst.Index(value=number))])


def _sliced(value: cst.BaseExpression) -> tuple[cst.BaseExpression, int, int | None] | None:
    """The shape a value holds, with the slice of it taken (`x.shape[-2:]`: (x.shape, -2, None);
    `x.shape[:-1]`: (x.shape, 0, -1); `x.shape`: (x.shape, 0, None))."""
    if isinstance(value, cst.NamedExpr):
        return _sliced(value.value)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("tuple", "list"):
        return _sliced(value.args[0].value) if len(value.args) == 1 else None
    if isinstance(value, cst.Subscript) and len(value.slice) == 1:
        part = value.slice[0].slice
        whole = _dims(value.value)
        if not (isinstance(part, cst.Slice) and part.step is None and whole is not None):
            return None
        lower, upper = _integer(part.lower), _integer(part.upper)
        if (part.lower is not None and lower is None) or (part.upper is not None and upper is None):
            return None
        return whole, lower or 0, upper
    whole = _dims(value)
    return (whole, 0, None) if whole is not None else None


def _integer(node: cst.BaseExpression | None) -> int | None:
    if isinstance(node, cst.Integer):
        return node.evaluated_value
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _integer(node.expression)
        return -inner if inner is not None else None
    return None


def unpacked(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]]:
    """The names a tuple target binds and what each holds: `n, _ = x.shape` binds n to `x.shape[0]`,
    `*_, n, d = x.shape` n to `x.shape[-2]`, `n, d = x.shape[-2:]` n to `x.shape[-2]`, `a, b = p, q`
    binds a to p."""
    if not isinstance(target, cst.Tuple | cst.List):
        return []
    elements = list(target.elements)
    stars = [i for i, e in enumerate(elements) if isinstance(e, cst.StarredElement)]
    if isinstance(value, cst.Tuple | cst.List) and not stars and len(value.elements) == len(elements):
        pairs = [(e.value, v.value) for e, v in zip(elements, value.elements, strict=True)]
        return [(n.value, v) for n, v in pairs if isinstance(n, cst.Name)]
    found = _sliced(value)
    if found is None or len(stars) > 1:
        return []
    shape, lower, upper = found
    if lower < 0 and upper is not None and upper >= 0:
        return []
    star = stars[0] if stars else len(elements)
    out: list[tuple[str, cst.BaseExpression]] = []
    for i, element in enumerate(elements):
        if i == star or not isinstance(element.value, cst.Name):
            continue
        if i < star:
            index = lower + i
            if not stars and len(elements) >= 2 and i == len(elements) - 1 and lower == 0 and upper is None:
                index = -1  # `T, D = x.shape`: D is the last dimension
        else:
            index = (upper if upper is not None else 0) - (len(elements) - i)
            if upper is not None and upper > 0 and index < 0:
                continue
        out.append((element.value.value, dim(shape, index)))
    return out


def shape_compared(shape: cst.BaseExpression, literal: cst.BaseExpression) -> tuple[cst.BaseExpression, int] | None:
    """`x.shape == (5, 7168)`, `x.shape[:1] == (5,)`: the first dimension and the number it equals."""
    whole = _dims(shape)
    if isinstance(literal, cst.NamedExpr):
        literal = literal.value  # `(probe := (5, 7168)) == tuple(x.shape)`
    if whole is None or not isinstance(literal, cst.Tuple | cst.List) or not literal.elements:
        return None
    first = literal.elements[0].value
    if not isinstance(first, cst.Integer):
        return None
    return dim(whole, 0), first.evaluated_value


def _top(tree: ast.Module, name: str) -> ast.stmt | None:
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and stmt.name == name:
            return stmt
    return None


def _incremented(node: ast.AST) -> ast.expr | None:
    """What `n += 1`, `n = n + 1` or `self.n = getattr(self, "n", 0) + 1` increments by a constant."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.value, ast.Constant):
        return node.target
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.BinOp)):
        return None
    target, value = node.targets[0], node.value
    if not (isinstance(value.op, ast.Add) and isinstance(value.right, ast.Constant)):
        return None
    before = value.left
    if _getattr_of(before) and isinstance(target, ast.Attribute):
        before = ast.Attribute(value=before.args[0], attr=str(before.args[1].value))  # type: ignore[attr-defined]
    return target if ast.unparse(before) == ast.unparse(target) else None


def _getattr_of(node: ast.expr) -> bool:
    """`getattr(owner, "name", ...)`."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"):
        return False
    return len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)


def counters(tree: ast.Module, top: str) -> frozenset[str]:
    """The names a module-level function or class `top` increments by a constant: call counters
    (`self._step += 1`, `global N; N += 1`, `self.calls = self.calls + 1`)."""
    stmt = _top(tree, top)
    if stmt is None:
        return frozenset()
    return _counters_in([stmt])


def module_counters(tree: ast.Module) -> frozenset[str]:
    """`counters` of every module-level function and class at once (a superset: a name declared
    `global` anywhere), for a statement filter that cannot ask which one a statement is in."""
    return _counters_in(tree.body)


def _counters_in(body: list[ast.stmt]) -> frozenset[str]:
    out = set()
    walked = statements(body)  # increments and declarations are statements: no expression walked
    shared = {n for node in walked if isinstance(node, ast.Global | ast.Nonlocal) for n in node.names}
    for node in walked:
        target = _incremented(node)
        # A local counts a loop; an attribute, an item (`_STEP[0] += 1`) or a global outlives the
        # call, so it counts calls.
        if isinstance(target, ast.Attribute | ast.Subscript) or (isinstance(target, ast.Name) and target.id in shared):
            out.add(ast.unparse(target))
    return frozenset(out)


def instance_numbers(tree: ast.Module, cls: str) -> dict[str, int]:
    """`self.NAME` bound once in the class's methods, to an integer literal (`self.debug_len = 5`)."""
    stmt = _top(tree, cls)
    if not isinstance(stmt, ast.ClassDef):
        return {}
    seen: dict[str, list[object]] = {}
    for node in statements([stmt]):  # assignments are statements: no expression walked
        targets: Sequence[ast.expr] = ()
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets, value = [node.target], node.value if isinstance(node, ast.AnnAssign) else None
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                literal = value.value if isinstance(value, ast.Constant) and type(value.value) is int else None
                seen.setdefault(target.attr, []).append(literal)
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and type(v[0]) is int}


def numeric_names(tree: ast.Module) -> frozenset[str]:
    """Every name a comparison in this module may read a number from, however often it is bound:
    module and class names bound to an integer or to a tuple, list or set of them (`DEBUG_TOKENS =
    5`, `DEBUG_LENS = (5, 9)`), module names bound to an environment variable's number with a
    default (`int(os.getenv("N", "5"))`), and the attributes a class's methods bind an integer
    literal to (`self.debug_len = 5`). A superset of what `ModuleAnalysis.constant`,
    `env_numbers` and `instance_numbers` resolve, for a statement filter that cannot ask them."""
    out: set[str] = set()
    bodies = [tree.body, *(s.body for s in tree.body if isinstance(s, ast.ClassDef))]
    for body in bodies:
        for stmt in body:
            if not isinstance(stmt, ast.Assign | ast.AnnAssign) or stmt.value is None:
                continue
            if not (_integers(stmt.value) or _env_default_ast(stmt.value) is not None):
                continue
            targets: list[ast.expr] = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            out.update(t.id for t in targets if isinstance(t, ast.Name))
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for node in statements(cls.body):
            if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            mine = [  # `self.debug_len = 5`: the target first, as most assignments bind a local
                t.attr
                for t in targets
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
            ]
            if mine and _integers(node.value):
                out.update(mine)
    return frozenset(out)


def _integers(node: ast.expr) -> bool:
    """An integer literal, or a literal tuple, list or set of them (what a count may be compared with)."""
    value = constant_value(node)
    return type(value) is int or isinstance(value, frozenset)


def local_number(name: cst.Name, value_of: ValuesOf | None) -> int | None:
    """The integer a local name holds when every assignment to it so far is the same literal (`target = 5`)."""
    found = value_of(name) if value_of is not None else ()
    if not found or not all(isinstance(v, cst.Integer) for v in found):
        return None
    numbers = {v.evaluated_value for v in found if isinstance(v, cst.Integer)}
    return numbers.pop() if len(numbers) == 1 else None


_ENV_READS = ("os.environ.get", "os.getenv")


def env_default(node: cst.BaseExpression, resolves: Resolves) -> int | None:
    """The number `int(os.environ.get("DUMP_AT", "5"))` holds wherever the variable is unset."""
    if not (isinstance(node, cst.Call) and len(node.args) == 1 and resolves(node, "builtins.int")):
        return None
    read = node.args[0].value
    if not (isinstance(read, cst.Call) and resolves(read, _ENV_READS)):
        return None
    default = _values.call_arg(read, 1, "default")
    text = _values.literal_string(default) if default is not None else None
    if isinstance(default, cst.Integer):
        return default.evaluated_value
    return int(text) if text is not None and text.strip().isdigit() else None


def env_numbers(tree: ast.Module) -> dict[str, int]:
    """Module-level names bound once to an environment variable's number with a literal default
    (`DUMP_AT = int(os.getenv("DUMP_AT", "5"))`): the number they hold where it is unset."""
    seen: dict[str, list[int | None]] = {}
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        seen.setdefault(stmt.targets[0].id, []).append(_env_default_ast(stmt.value))
    # Spelled as constants are (`DUMP_AT`), as the rules' filters expect.
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and v[0] is not None and k.upper() == k}


def _env_default_ast(node: ast.expr) -> int | None:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and node.args):
        return None
    read = node.args[0]
    if not (isinstance(read, ast.Call) and len(read.args) == 2):
        return None
    if not ast.unparse(read.func).endswith(("environ.get", "getenv")):
        return None
    default = read.args[1]
    value = default.value if isinstance(default, ast.Constant) else None
    if type(value) is int:
        return value
    return int(value) if isinstance(value, str) and value.strip().isdigit() else None


def element_count(
    iterable: cst.BaseExpression, count: Callable[[cst.BaseExpression], str | None], listed: bool = False
) -> str | None:
    """What each element of `iterable` counts, when every element is a count: `seq_lens`,
    `num_scheduled_tokens.values()`, `seq_lens.tolist()`, `(x.shape[0], y.shape[0])`.

    `count` is the rule's `count_of`, for the elements of a literal tuple or list; `listed`: the
    iterable was made a collection by a call (`.values()`, `.tolist()`).
    """
    if isinstance(iterable, cst.Tuple | cst.List) and iterable.elements:
        found = [count(e.value) for e in iterable.elements]
        return f"an element of {found[0]}" if all(found) else None
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute) and not iterable.args:
        if iterable.func.attr.value in ("values", "tolist", "cpu", "numpy"):
            return element_count(iterable.func.value, count, listed=True)
        return None
    spelled = cst.helpers.get_full_name_for_node(iterable) or ""
    last = spelled.rsplit(".", 1)[-1]
    # `num_scheduled_tokens.values()`: a count's name, made a collection by the call.
    return f"an element of {spelled}" if PLURAL.search(last) or (listed and COUNT_NAME.match(last)) else None
