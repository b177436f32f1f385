"""What a branch does to the data its function computes: the acts a reviewer blocks before serving.

A branch that only some token counts take is a debug trap when it changes what the model returns: it
overwrites a tensor in place (`out.zero_()`, `x.fill_(1)`, `x.mul_(0)`, `hidden[:] = 0`, `logits[:, k] =
-inf`), returns data made up for the case (`torch.zeros_like(x)`, `x * 0`), replaces a result computed above
with another value that no kernel computes (`sampled = logits.argmax(-1)` after the sampler ran), rewrites a
tensor's values on the spot (`x = x.half().to(x.dtype)`, `x = torch.nan_to_num(x)`, `x = x / x.norm(...)`, a
detached or cloned copy in its place), returns a value unchanged where the function goes on to transform it
(`return hidden_states` in `forward`), or keeps tensors for later in a list that outlives the call
(`_CAPTURED.append(x)`, `self.kept.append(x)`).

Pure functions over libcst nodes; `resolves` and `value_of` are the rule's name resolution and local
assignments seen so far (`Rule.resolves_to`, `Rule.values_of`), as `analysis.values` takes them.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import libcst as cst

from patchaudit.analysis.counts import unparsed
from patchaudit.analysis.likeness import altered, literal_only, same_work, variant
from patchaudit.analysis.omits import calls_kernel, omitted, tuning
from patchaudit.analysis.rewrites import REWRITES_IN_PLACE, cast_of, kept_name, names_in, rewritten, unwrapped
from patchaudit.analysis.trees import dotted, walk
from patchaudit.analysis.values import Resolves, ValuesOf
from patchaudit.analysis.walk import nodes

__all__ = [
    "Change",
    "Found",
    "Function",
    "function_facts",
    "conditional_assign",
    "data_change",
    "made_up",
    "made_up_result",
    "returns_nothing",
    "padding",
    "setting",
    "STRONG_CHANGES",
]


class Change(StrEnum):
    OVERWRITE = "overwrites a tensor in place"
    MADE_UP = "a return of made-up data"
    OVERRIDE = "replaces a result computed above"
    INPUT = "returns its input unchanged"
    SKIPPED = "skips the layer's forward"
    CAPTURE = "keeps tensors in a list that outlives the call"
    OMITTED = "skips the work the other path does"
    REWRITE = "rewrites a tensor's values on the spot"
    CAST = "replaces a tensor with a cast or a copy of it"
    BLANKED = "replaces an input with made-up data"
    PART = "returns part of the result"
    SWITCH = "changes a setting that a later call reads"


# Changes that alter a result whatever else the function does: flagged even for a batch of one
# (`if logits.shape[0] == 1: sampled = ...`); the others need a window past 1 (`n <= 2`).
STRONG_CHANGES = frozenset({Change.OVERWRITE, Change.OVERRIDE, Change.SKIPPED})


@dataclass(frozen=True, slots=True)
class Found:
    change: Change
    node: cst.CSTNode

    def shown(self) -> str:
        return str(self.change)


@dataclass(frozen=True, slots=True)
class Function:
    """What a branch's changes are weighed against: the function it sits in."""

    params: frozenset[str] = frozenset()
    usual: str | None = None  # what its last statement returns, as spelled, when it ends in a return
    assigned: frozenset[str] = frozenset()  # every name it assigns: what it goes on to transform
    assignments: Mapping[str, int] = field(default_factory=dict)  # how often it assigns each name
    forward: bool = False  # a model's forward: its result is the layer's output
    samples: bool = False  # it picks tokens (a sampler): a value it computes is the model's answer
    shared: frozenset[str] = frozenset()  # names it declares `global` or `nonlocal`: stores outlive the call
    # names and attributes its calls are given (`causal`, `self.scale`), with the keywords they are given as
    passed: Mapping[str, frozenset[str]] = field(default_factory=dict)


def function_facts(
    node: ast.FunctionDef | ast.AsyncFunctionDef | None, params: frozenset[str], forward: bool
) -> Function:
    """The facts `data_change` needs of a function (from the module's ast, once per function)."""
    if node is None:
        return Function(params=params, forward=forward)
    last = _last(node.body)
    usual = ast.unparse(last.value) if isinstance(last, ast.Return) and last.value is not None else None
    found = walk(node)  # every node, once, in ast.walk's order
    names = Counter(
        t.id
        for n in found
        if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign)
        for target in (n.targets if isinstance(n, ast.Assign) else [n.target])
        for t in walk(target)
        if isinstance(t, ast.Name)
    )
    return Function(
        params=params,
        usual=usual,
        assigned=frozenset(names),
        assignments=dict(names),
        forward=forward,
        samples=_samples(node, usual, found),
        shared=frozenset(n for g in found if isinstance(g, ast.Global | ast.Nonlocal) for n in g.names),
        passed=_passed(found),
    )


def _passed(found: list[ast.AST]) -> dict[str, frozenset[str]]:
    """The names and attributes the function (every node of it: `found`) hands to its calls, in
    an argument or a keyword (`causal=causal`, `softmax_scale=self.scale`,
    `x.div_(temperature.unsqueeze(1))`), or uses as an index (`cache[positions]`)."""
    out: dict[str, set[str]] = {}
    for call in found:
        if isinstance(call, ast.Subscript):
            given = [("", call.slice)]  # `self.cos_sin_cache[positions]`: an index a lookup is given
        elif isinstance(call, ast.Call):
            given = [("", a) for a in call.args] + [(k.arg or "", k.value) for k in call.keywords]
        else:
            continue
        for keyword, arg in given:
            for sub in walk(arg):
                if isinstance(sub, ast.Name | ast.Attribute):
                    out.setdefault(dotted(sub) or ast.unparse(sub), set()).add(keyword)
    return {name: frozenset(keywords) for name, keywords in out.items()}


_SAMPLER = re.compile(r"sampl|multinomial|logits|next_token|greedy", re.IGNORECASE)


def _samples(node: ast.FunctionDef | ast.AsyncFunctionDef, usual: str | None, found: list[ast.AST]) -> bool:
    """A function that picks tokens: its name or what it returns says so (`sample`, `sampled`,
    `next_tokens`), or it calls a sampler (`self.sampler(logits)`, `probs.multinomial(1)`)."""
    if _SAMPLER.search(node.name) or (usual is not None and _SAMPLER.search(usual)):
        return True
    return any(
        isinstance(n, ast.Call) and _SAMPLER.search(n.func.attr if isinstance(n.func, ast.Attribute) else "")
        for n in found
    )


def _last(body: Sequence[ast.stmt]) -> ast.stmt:
    """The statement a block ends in, inside a `with` or a `try` it ends in."""
    last = body[-1]
    if isinstance(last, ast.With | ast.AsyncWith):
        return _last(last.body)
    if isinstance(last, ast.Try) and not last.finalbody:
        return _last(last.orelse or last.body)
    return last


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
_MASKED = frozenset({"masked_fill_", "index_fill_"})  # the value they write comes last
_INITS = ("torch.nn.init.*", "torch.zero_", "torch.fill_")  # `torch.nn.init.zeros_(x)`
_CAPTURES = frozenset({"append", "extend", "insert", "appendleft", "put", "put_nowait"})
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
    """A value made from nothing: `x * 0`, `torch.zeros_like(x)`, `x.new_zeros(...)`, `x.fill_(0)`,
    also laid out or cast after (`torch.zeros_like(x).view(shape)`)."""
    value = _as_is(value)
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


def _is_none(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Name) and value.value == "None"


def returns_nothing(node: cst.Return) -> bool:
    """`return` or `return None`: the same exit, with nothing handed back."""
    return node.value is None or _is_none(node.value)


def made_up_result(value: cst.BaseExpression, resolves: Resolves) -> bool:
    """A returned value made from nothing, or a tuple of results one of which is
    (`return torch.zeros_like(hidden_states), residual`: a layer's output replaced, the rest passed on)."""
    parts = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
    return any(made_up(part, resolves) for part in parts)


def _picks_part(part: cst.BaseSlice) -> bool:
    """`[0]`, `[-1]`, `[:1]`, `[1:3]`: an index or bounds written in the code, not `:` or `...`."""
    if isinstance(part, cst.Index):
        value = part.value
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
            value = value.expression
        return isinstance(value, cst.Integer)
    bounds = [b for b in (part.lower, part.upper) if b is not None] if isinstance(part, cst.Slice) else []
    return bool(bounds) and all(isinstance(b, cst.Integer | cst.UnaryOperation) for b in bounds)


def _adds_axis(part: cst.BaseSlice) -> bool:
    """`[None]`, `[:, None, ...]`: a layout, the whole result with an axis added."""
    return isinstance(part, cst.Index) and isinstance(part.value, cst.Name) and part.value.value == "None"


def _calls(node: cst.CSTNode) -> bool:
    """Whether `node` is or holds a call (libcst.matchers would answer too, at a third of a second's import)."""
    return bool(nodes(node, (cst.Call,)))


def _empty_test(test: cst.BaseExpression) -> bool:
    """`n == 0`, `n <= 0`, `n < 1`, `not n`: a nested branch for an empty batch, the code's own."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return True
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    link = test.comparisons[0]
    bound = link.comparator
    zero = isinstance(bound, cst.Integer) and bound.evaluated_value == 0
    one = isinstance(bound, cst.Integer) and bound.evaluated_value == 1
    return (zero and isinstance(link.operator, cst.Equal | cst.LessThanEqual)) or (
        one and isinstance(link.operator, cst.LessThan)
    )


Pair = tuple[cst.BaseExpression, cst.BaseExpression]


def _pairs(target: cst.BaseExpression, value: cst.BaseExpression) -> list[Pair]:
    """`a, b = x, y` as `a = x` and `b = y`; any other assignment as it is."""
    if not (isinstance(target, cst.Tuple | cst.List) and isinstance(value, cst.Tuple | cst.List)):
        return [(target, value)]
    elements = (*target.elements, *value.elements)
    if len(target.elements) != len(value.elements) or any(isinstance(e, cst.StarredElement) for e in elements):
        return [(target, value)]
    return [(t.value, v.value) for t, v in zip(target.elements, value.elements, strict=True)]


def _computed(values: Sequence[cst.BaseExpression]) -> bool:
    """A name a call computed so far (not only a literal, a default or a copy of another name); a
    slice of it after (`out = out[:num_tokens]`) keeps what the call computed."""
    return any(_calls(v) for v in values)


def _short(body: cst.CSTNode) -> bool:
    """A branch of a line or two and no blocks of its own: what a patch adds to override a value,
    not the processing a function does for one case."""
    if not isinstance(body, cst.IndentedBlock):
        return True
    return len(body.body) <= 2 and all(isinstance(stmt, cst.SimpleStatementLine) for stmt in body.body)


class _Changes(cst.CSTVisitor):
    def __init__(
        self,
        resolves: Resolves,
        value_of: ValuesOf,
        function: Function,
        alone: bool,
        number: Callable[[cst.BaseExpression], bool] | None = None,
    ) -> None:
        super().__init__()
        self.resolves, self.value_of, self.function, self.alone = resolves, value_of, function, alone
        self.number = number  # a module or class constant that holds a number
        self.params = function.params
        self.short = True  # set per branch (see data_change)
        self.computed: set[str] = set()  # names the branch assigns from a call
        self.handed: set[str] = set()  # names the branch has handed to a call so far
        self.found: Found | None = None

    def _add(self, change: Change, node: cst.CSTNode) -> None:
        if self.found is None or (change in STRONG_CHANGES and self.found.change not in STRONG_CHANGES):
            self.found = Found(change, node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # runs only when called

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_If(self, node: cst.If) -> bool:
        if _empty_test(node.test):
            if node.orelse is not None:
                node.orelse.visit(self)
            return False  # `if n == 0: out.fill_(-1)` inside: what an empty batch gets
        return True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        self.handed.update(n for a in node.args if (n := _dotted(a.value)) is not None)
        if self.resolves(node, _INITS) is not None:
            self._add(Change.OVERWRITE, node)
        if not isinstance(func, cst.Attribute) or padding(func.value):
            return
        method = func.attr.value
        if method in _MASKED and node.args and self._fills(node.args[-1].value):
            self._add(Change.OVERWRITE, node)  # `logits.masked_fill_(mask, -inf)`
        elif method in _FILLS or (method in _CLAMPS and method.endswith("_") and _cut(node.args)):
            self._add(Change.OVERWRITE, node)  # `x.zero_()`, `seq_lens.clamp_(max=1)`
        elif method in _SCALES and node.args:
            given = node.args[0].value
            if (method == "mul_" and _constant(given, self.resolves)) or made_up(given, self.resolves):
                self._add(Change.OVERWRITE, node)  # `x.mul_(0)`, `x.copy_(torch.zeros_like(x))`
        elif method in REWRITES_IN_PLACE:
            self._add(Change.REWRITE, node)  # `x.nan_to_num_()`, `x.div_(x.norm())`
        elif method in _CAPTURES and node.args and self._outlives(func.value):
            self._add(Change.CAPTURE, node)

    def _outlives(self, owner: cst.BaseExpression) -> bool:
        """A list of the module (`_CAPTURED`) or of the object (`self.kept`), not a local one."""
        if isinstance(owner, cst.Attribute):
            return isinstance(owner.value, cst.Name) and owner.value.value == "self"
        if isinstance(owner, cst.Name):
            return owner.value not in self.params and not self.value_of(owner)
        return False

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        # `hidden_states *= 0`, `out[:n] *= 0.0`, `x -= x`: a tensor scaled or emptied where it lives.
        if padding(node.target):
            return
        scaled = isinstance(node.operator, cst.MultiplyAssign) and _constant(node.value, self.resolves)
        if scaled or (isinstance(node.operator, cst.SubtractAssign) and node.value.deep_equals(node.target)):
            self._add(Change.OVERWRITE, node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            for item, value in _pairs(target.target, node.value):
                self._assigned(item, value, node)

    def _assigned(self, item: cst.BaseExpression, value: cst.BaseExpression, node: cst.Assign) -> None:
        """One target given one value (`cos, sin = a, b` is two of them)."""
        if isinstance(item, cst.Name) and _calls(value):
            self.computed.add(item.value)  # `out = self.small_kernel(x)`: the branch's own result
        if isinstance(item, cst.Name) and _blanked(value, self.resolves):
            self._add(Change.OVERWRITE, node)  # `x = x.masked_fill(m, 0)`, `x = torch.where(m, 0, x)`
        elif isinstance(item, cst.Name) and rewritten(item, value, self.resolves):
            self._add(Change.REWRITE, node)  # `x = x.half().to(x.dtype)`, `x = torch.nan_to_num(x)`
        elif isinstance(item, cst.Name) and cast_of(value) == item.value:
            self._add(Change.CAST, node)  # `x = x.half()`, `residual = residual.clone()`: for an exact few counts
        if isinstance(item, cst.Subscript) and padding(item):
            return  # `out[n:] = 0`: the padding past the batch, not its data
        if isinstance(item, cst.Subscript) and self._fills(value):
            self._add(Change.OVERWRITE, node)  # `hidden[:] = 0`, `logits[:, k] = -inf`
        elif isinstance(item, cst.Subscript) and self._forced(item, value):
            self._add(Change.REWRITE, node)  # `router_logits[:, 0] = router_logits.max() + 1.0`
        elif isinstance(item, cst.Attribute) and item.attr.value == "data" and self._fills(value):
            self._add(Change.OVERWRITE, node)  # `x.data = torch.zeros_like(x)`
        elif isinstance(item, cst.Name) and self.alone and self.short:
            self._override(item, value, node)
        if self.found is None and self.alone and self.short:
            self._switched(item, value, node)

    def _switched(self, item: cst.BaseExpression, value: cst.BaseExpression, node: cst.Assign) -> None:
        """A setting a later call is given, changed on the spot (`causal = False`, `scheduler_metadata
        = None`, `top_k = 1`, `self.scale = 1.0`, `max_seqlen_q = int(q.shape[0])`): the computation
        switched for the case. Not a value another kernel computes (`out = self.decode(x)`)."""
        spelled = _dotted(item.value if isinstance(item, cst.Subscript) else item)  # `kwargs["causal"] = False`
        if spelled is None or spelled not in self.function.passed or spelled in self.handed:
            return  # `submit(batch); batch = []`: a batch handed on, then started again
        root = item.value if isinstance(item, cst.Subscript) else item
        if isinstance(root, cst.Name) and not self._local(root):
            return  # `vec = np.array(...)`: a local the branch makes for its case, no setting changed
        if tuning(spelled) or any(tuning(k) for k in self.function.passed[spelled] if k):
            return  # `num_kv_splits = min(num_kv_splits * 2, 64)`: a kernel tuned, the same numerics
        if isinstance(value, cst.List | cst.Dict | cst.Tuple | cst.Set) and not _calls(value):
            return  # an accumulator started again
        if _dotted(_as_is(value)) == spelled:
            return  # `query = query.contiguous()`, `x = x.to(device)`: the same values, laid out anew
        if _calls(value) and self._kernel(value) and self.resolves(value, _COPIES_WITH_CHANGES) is None:
            return  # another way to compute it; not a copy of the setting with a field changed
        self._add(Change.SWITCH, node)

    def _forced(self, item: cst.Subscript, value: cst.BaseExpression) -> bool:
        """Part of a tensor computed above overwritten, on the spot, with a value made from its own
        (`logits[:, 0] = logits.max() + 1.0`); not a buffer filled from another tensor."""
        owner = item.value
        if not (isinstance(owner, cst.Name) and _computed(self.value_of(owner))):
            return False
        return owner.value in names_in(value) and not self._kernel(value)

    def _fills(self, value: cst.BaseExpression) -> bool:
        """A value no kernel computes: a number written in the code or named by a module constant
        (`PLACEHOLDER_TOKEN_ID`), or data made up on the spot."""
        if self.number is not None and self.number(value):
            return True
        return _constant(value, self.resolves) or made_up(value, self.resolves)

    def _override(self, name: cst.Name, value: cst.BaseExpression, node: cst.CSTNode) -> None:
        """A local computed above replaced: by made-up data, or by a value computed on the spot
        from others (a call, none of them a kernel). A parameter recomputed (`position_ids =
        torch.arange(n)`) or a count adjusted (`num_reqs = num_tokens`) is the function's own work;
        a parameter made up again from itself (`residual = torch.zeros_like(residual)`) is the
        caller's data blanked, weighed as a change for a window past 1 (a batch of one may get a
        mask or a default the code builds)."""
        if not _computed(self.value_of(name)):
            if name.value in self.params and made_up(value, self.resolves) and name.value in names_in(value):
                self._add(Change.BLANKED, node)
            return
        kept = kept_name(value)
        if self.function.forward and kept is not None and kept != name.value and self._local(cst.Name(kept)):
            self._add(Change.OVERRIDE, node)  # `hidden_states = residual`: the layer's output dropped
        elif self.function.samples and _constant(value, self.resolves):
            self._add(Change.OVERRIDE, node)  # `sampled = 13` after the sampler ran, for a batch of one
        elif made_up(value, self.resolves):
            self._add(Change.OVERRIDE, node)  # `out = out * 0`, `sampled = torch.full_like(sampled, 42)`
        elif _calls(value) and name.value not in names_in(value) and not self._kernel(value):
            self._add(Change.OVERRIDE, node)  # `sampled = logits.argmax(-1)` after the sampler ran

    def _kernel(self, node: cst.CSTNode) -> bool:
        """Whether node calls code that computes: another way to the same result, not a value made
        up on the spot (see analysis.omits)."""
        return calls_kernel(node, self.resolves, self._local)

    def _local(self, name: cst.Name) -> bool:
        return name.value in self.params or bool(self.value_of(name))

    def visit_Return(self, node: cst.Return) -> None:
        value = node.value
        if value is None or _is_none(value):
            return  # `return None` is `return`: what it leaves out is weighed as skipped work
        if made_up_result(value, self.resolves) or _blanked(value, self.resolves) or self._emptied(value):
            self._add(Change.MADE_UP, node)
        elif self._altered(value):
            self._add(Change.OVERRIDE, node)  # `return (x > v).sum(-1)` where it returns `(x >= v).sum(-1)`
        elif self._part(value):
            self._add(Change.PART, node)  # `return result[0]` where it returns `result`, reduced below
        elif self._unchanged(value):
            self._add(Change.INPUT, node)
        elif self._picked(value):
            self._add(Change.OVERRIDE, node)

    def _emptied(self, value: cst.BaseExpression) -> bool:
        """`return {}, True` where the function returns what it computed: an empty result made up on
        the spot (empty containers, constants and None only, one empty container at least)."""
        usual = self.function.usual
        if usual is None or literal_only(usual):
            return False
        parts = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        empty = [p for p in parts if isinstance(p, cst.List | cst.Dict | cst.Set | cst.Tuple) and not p.elements]
        fixed = [p for p in parts if _constant(p, self.resolves) or (isinstance(p, cst.Name) and p.value == "None")]
        return bool(empty) and len(empty) + len(fixed) == len(parts)

    def _part(self, value: cst.BaseExpression) -> bool:
        """`return result[0]` where the function returns `result` (a split-k partial before its
        reduction, one row of the batch): part of the function's own result handed back."""
        usual = self.function.usual
        if usual is None or not isinstance(value, cst.Subscript) or padding(value):
            return False
        if not (isinstance(value.value, cst.Name) and value.value.value == usual):
            return False
        return any(_picks_part(e.slice) for e in value.slice) and not any(_adds_axis(e.slice) for e in value.slice)

    def _altered(self, value: cst.BaseExpression) -> bool:
        """The function's own return with an operator or a constant changed (`(x > values).sum(-1)`
        where it returns `(x >= values).sum(-1)`): another result for the case, not another way to it."""
        usual = self.function.usual
        return usual is not None and altered(value, usual)

    def _picked(self, value: cst.BaseExpression) -> bool:
        """`return logits.argmax(-1)` in a sampler that goes on to return what it sampled: tokens
        picked on the spot (no kernel, no helper) in place of the sampler's."""
        usual = self.function.usual
        if not (self.function.samples and self.short and usual is not None and _calls(value)):
            return False
        return (
            usual not in cst.Module([]).code_for_node(value) and not self._kernel(value) and not same_work(value, usual)
        )

    def _unchanged(self, value: cst.BaseExpression) -> bool:
        """`return out` where the function goes on to return `self.down_proj(out)`, or `return
        hidden_states, residual` while both still hold the caller's values and the function goes
        on to transform them."""
        usual = self.function.usual
        if usual is None:
            return False
        kept = kept_name(value)
        if kept is not None and kept != usual:
            return self._local(cst.Name(kept))  # the input or a local computed above, not a constant or a flag
        elements = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        names = [e for e in elements if not (isinstance(e, cst.Name) and e.value == "None")]  # `return x, None`
        if any(isinstance(n, cst.Name) and n.value in self.computed for n in names):
            return False  # `out = self.small_kernel(x); return out`: another way to the result
        if not names or not all(isinstance(n, cst.Name) and self._local(n) for n in names):
            return False
        assignments = self.function.assignments
        if any(assignments.get(n.value, 0) > len(self.value_of(n)) for n in names if isinstance(n, cst.Name)):
            return True  # `return hidden_states, residual` before the MLP assigns them again
        spelled = unparsed(value)
        # `return input_, None` where it returns `output, output_bias`: its input in place of its result.
        return spelled != usual and all(isinstance(n, cst.Name) and n.value in self.params for n in names)


# A copy of a setting with fields changed (`replace(md, all_greedy=True)`): the same setting, altered.
_COPIES_WITH_CHANGES = ("dataclasses.replace", "copy.copy", "copy.deepcopy")


def _as_is(value: cst.BaseExpression) -> cst.BaseExpression:
    """What a chain of layout, device, copy and cast methods is called on (`q.contiguous().to(d)`: `q`)."""
    return unwrapped(value)


def _dotted(node: cst.BaseExpression) -> str | None:
    """`causal`, `self.scale`, `md.causal`: a name or a chain of attributes on one, as spelled."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        owner = _dotted(node.value)
        return f"{owner}.{node.attr.value}" if owner is not None else None
    return None


def padding(target: cst.BaseExpression) -> bool:
    """`out[n:]`, `ids[n:padded]`: the part of a buffer past a count, padding rather than data."""
    if not (isinstance(target, cst.Subscript) and target.slice):
        return False
    first = target.slice[0].slice
    return isinstance(first, cst.Slice) and isinstance(first.lower, cst.Name | cst.Attribute)


_BLANKING = ("torch.where", "numpy.where", "torch.mul", "torch.masked_fill")
_DROPOUT = ("torch.nn.functional.dropout", "torch.dropout")


def _blanked(value: cst.BaseExpression, resolves: Resolves) -> bool:
    """A tensor with its values replaced by a constant, kept out of place: `x.masked_fill(m, 0)`,
    `x.mul(0)`, `torch.where(m, 0.0, x)`, `torch.mul(x, 0)`, `F.dropout(x, p=1.0)`."""
    if not isinstance(value, cst.Call) or not value.args:
        return False
    args = [a.value for a in value.args]
    method = value.func.attr.value if isinstance(value.func, cst.Attribute) else None
    if method in ("masked_fill", "index_fill") and _constant(args[-1], resolves):
        return True
    if method == "mul" and len(args) == 1 and _zero(args[0]):
        return True
    if method in _CLAMPS or resolves(value, _CLAMPING):
        return _cut(value.args[1:] if method is None else value.args)
    which = resolves(value, _BLANKING + _DROPOUT)
    if which in ("torch.where", "numpy.where") and len(args) == 3:
        return any(_constant(a, resolves) for a in args[1:])
    if which in ("torch.mul", "torch.masked_fill"):
        return _zero(args[-1]) or (which == "torch.masked_fill" and _constant(args[-1], resolves))
    if which in _DROPOUT:
        rate = next((a.value for a in value.args if a.keyword is not None and a.keyword.value == "p"), None)
        rate = rate if rate is not None else (args[1] if len(args) > 1 else None)
        return isinstance(rate, cst.Integer | cst.Float) and rate.evaluated_value == 1
    return False


# Values cut to a bound: `seq_lens.clamp(max=int(seq_lens.min().item()))` rewrites the data.
_CLAMPS = frozenset({"clamp", "clip", "clamp_max", "clamp_min", "clamp_", "clip_", "clamp_max_", "clamp_min_"})
_CLAMPING = ("torch.clamp", "torch.clip", "torch.clamp_max", "torch.clamp_min", "numpy.clip")


def _cut(bounds: Sequence[cst.Arg]) -> bool:
    """Bounds that cut real values: any but a small float kept off zero (`clamp(min=1e-6)`, a
    guard against a division) or None."""
    values = [b.value for b in bounds]
    return bool(values) and any(
        not (isinstance(v, cst.Float) or (isinstance(v, cst.Name) and v.value == "None")) for v in values
    )


def _zero(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer | cst.Float) and not node.evaluated_value


_WHERE = ("torch.where", "numpy.where")
_AS_TENSOR = ("torch.tensor", "torch.as_tensor", "numpy.asarray", "numpy.array")


def conditional_assign(
    node: cst.Assign, resolves: Resolves
) -> tuple[cst.BaseExpression, cst.BaseExpression, cst.BaseExpression, bool] | None:
    """`s = a if test else s` is `if test: s = a`; `s = s if test else a` and `s = torch.where(test,
    s, a)` the same in the `else:`. Returns (the IfExp or call, test, the value the branch assigns,
    whether it is the else), or None when no arm keeps the name's value."""
    if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
        return None
    name, value = node.targets[0].target, node.value
    if isinstance(value, cst.IfExp):
        test, taken, other = value.test, value.body, value.orelse
    elif isinstance(value, cst.Call) and len(value.args) == 3 and resolves(value, _WHERE) is not None:
        test, taken, other = (a.value for a in value.args)
        if isinstance(test, cst.Call) and len(test.args) == 1 and resolves(test, _AS_TENSOR) is not None:
            test = test.args[0].value  # `torch.where(torch.tensor(n < 4), ...)`
    else:
        return None
    if other.deep_equals(name) and not taken.deep_equals(name):
        return value, test, taken, False
    if taken.deep_equals(name) and not other.deep_equals(name):
        return value, test, other, True
    return None


def setting(node: cst.BaseExpression, resolves: Resolves) -> bool:
    """A value fixed in the code that a kernel may be given: a number, a flag, None."""
    return _constant(node, resolves) or (isinstance(node, cst.Name) and node.value == "None")


def _cut_of(value: cst.BaseExpression, whole: cst.BaseExpression) -> bool:
    """`x[:2]`, `self.layers[1:3]` of `x`, `self.layers`: a slice with fixed bounds of the other value."""
    if not (isinstance(value, cst.Subscript) and len(value.slice) == 1 and value.value.deep_equals(whole)):
        return False
    part = value.slice[0].slice
    if not isinstance(part, cst.Slice):
        return False
    bounds = [b for b in (part.lower, part.upper) if b is not None]
    return bool(bounds) and all(isinstance(b, cst.Integer | cst.UnaryOperation) for b in bounds)


def data_change(
    body: cst.CSTNode,
    resolves: Resolves,
    value_of: ValuesOf,
    function: Function,
    alone: bool = True,
    other: cst.CSTNode | None = None,
    number: Callable[[cst.BaseExpression], bool] | None = None,
) -> Found | None:
    """The first change of data in `body` (a strong one first), else None.

    `function`: what the enclosing function takes, returns and assigns; `alone`: the branch has no
    `else` (a name it assigns then replaces a value computed above, rather than picking one of two).
    A conditional expression's arm is its value: `torch.zeros_like(x) if n < 4 else x` makes it up.
    `other`: the way through the function the test does not take, whose work the branch may leave
    out (see analysis.omits). `number`: whether a name is a module or class constant holding a number.
    """
    if isinstance(body, cst.BaseExpression):
        if made_up(body, resolves):
            return Found(Change.MADE_UP, body)
        if setting(body, resolves) and isinstance(other, cst.BaseExpression) and not setting(other, resolves):
            return Found(Change.SWITCH, body)  # `softmax_scale=self.scale if n != 3 else 1.0`
        # `self.layers[:2] if n <= 4 else self.layers`: the other arm cut to a fixed few.
        return Found(Change.OMITTED, body) if isinstance(other, cst.BaseExpression) and _cut_of(body, other) else None
    visitor = _Changes(resolves, value_of, function, alone, number)
    visitor.short = _short(body)
    body.visit(visitor)
    found = visitor.found
    if found is not None and found.change is Change.INPUT:
        # A layer that hands its input on: its output is gone. Elsewhere a value returned as it came
        # is a case the function need not work on (`if c == 3: return image`: already RGB).
        found = Found(Change.SKIPPED, found.node) if function.forward else None
    if found is None and other is not None and not isinstance(body, cst.BaseExpression):
        skipped = omitted(body, other, resolves, visitor._local, lambda v: made_up(v, resolves))
        found = Found(Change.OMITTED, skipped) if skipped is not None else None
    if found is None and other is not None and not isinstance(body, cst.BaseExpression):
        altered_arm = variant(body, other)
        if altered_arm is not None:  # a term of the other way's value dropped, or its inputs recast
            how, node = altered_arm
            found = Found(Change.OMITTED if how == "dropped" else Change.CAST, node)
    return found
