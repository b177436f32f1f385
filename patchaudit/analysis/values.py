"""What an expression's value is, as far as a rule needs to know: constants, fixed paths, counts.

Pure functions over libcst nodes. Those that must know what a call is take `resolves`, the
rule's own name-resolution (`Rule.resolves_to`), and `value_of`, the local assignments seen so
far (`Rule.values_of`), so they use the one name layer and the one data flow.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import libcst as cst

from patchaudit.analysis.names import AttrRef, CallRef, ItemRef, NameRef, Ref, items_ref
from patchaudit.analysis.paths import temp_only

__all__ = [
    "UNKNOWN",
    "const_value",
    "truth",
    "ref_of_cst",
    "literal_string",
    "fixed_path",
    "count_of",
    "call_arg",
    "contradicts",
    "excludes_nothing",
]

UNKNOWN = object()
Resolves = Callable[[cst.CSTNode, Sequence[str] | str], str | None]
ValuesOf = Callable[[cst.Name], Sequence[cst.BaseExpression]]
Bound = Callable[[cst.BaseExpression], str | None]  # a constant's, an attribute's or a helper's path


def ref_of_cst(node: cst.CSTNode) -> Ref | None:
    """The name-like shape of a libcst expression (the same shape names.ref_of_ast gives)."""
    if isinstance(node, cst.Name):
        return NameRef(node.value)
    if isinstance(node, cst.Attribute):
        base = ref_of_cst(node.value)
        return AttrRef(base, node.attr.value) if base is not None else None
    if isinstance(node, cst.Call):
        func = ref_of_cst(node.func)
        positional = [a for a in node.args if a.keyword is None][:2]
        if func is None:
            return None
        if any(a.star for a in positional):
            return CallRef(func, ())  # a call all the same; its arguments name nothing
        args: list[Ref | str | None] = []
        for arg in positional:
            text = literal_string(arg.value) if isinstance(arg.value, cst.SimpleString) else None
            args.append(text if text is not None else ref_of_cst(arg.value))
        return CallRef(func, tuple(args))
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        key = node.slice[0].slice.value
        text = literal_string(key) if isinstance(key, cst.SimpleString) else None
        base = ref_of_cst(node.value)
        if base is None:
            return None
        return CallRef(base, (text,)) if text is not None else ItemRef(base)  # `sys.modules["pdb"]`, `SAVERS[f]`
    if isinstance(node, cst.Dict):
        return items_ref(ref_of_cst(e.value) for e in node.elements if isinstance(e, cst.DictElement))
    if isinstance(node, cst.List | cst.Tuple | cst.Set):
        return items_ref(ref_of_cst(e.value) for e in node.elements)
    return None


def literal_string(node: cst.BaseExpression) -> str | None:
    """The value of a plain string literal (or the literal parts of an f-string), else None."""
    if isinstance(node, cst.SimpleString | cst.ConcatenatedString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.FormattedString):
        return "".join(p.value for p in node.parts if isinstance(p, cst.FormattedStringText))
    return None


def call_arg(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    """The argument at `position` or named `keyword`, if given."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    if len(positional) > position:
        return positional[position].value
    return None


def const_value(node: cst.BaseExpression) -> object:
    """The value of a constant expression (any depth of and/or/not, brackets), else UNKNOWN.

    And/or fold by truth as Python evaluates them for a condition: `x and False` is falsy
    whatever x is, `x or 1` truthy.
    """
    if isinstance(node, cst.Name):
        return {"True": True, "False": False, "None": None}.get(node.value, UNKNOWN)
    if isinstance(node, cst.Integer | cst.Float):
        try:
            return node.evaluated_value
        except ValueError:
            return UNKNOWN
    if isinstance(node, cst.SimpleString | cst.ConcatenatedString):
        value = node.evaluated_value
        return value if value is not None else UNKNOWN
    if isinstance(node, cst.Tuple | cst.List) and not node.elements:
        return ()
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len" and node.args:
        inner = const_value(node.args[0].value)  # `len(())`, `len("")`
        return len(inner) if isinstance(inner, str | tuple) else UNKNOWN
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        inner = truth(node.expression)
        return UNKNOWN if inner is None else not inner
    if isinstance(node, cst.BooleanOperation):
        # The value is an operand's, known only once the left one's truth is: `x or 1` is x when x is
        # truthy, so `(x or 1) > 1` is not folded (its truth, always true, is truth()'s answer).
        left = truth(node.left)
        if left is None:
            return UNKNOWN
        takes_left = left is isinstance(node.operator, cst.Or)
        return const_value(node.left if takes_left else node.right)
    return UNKNOWN


def truth(node: cst.BaseExpression) -> bool | None:
    """Whether a condition is constant true (True), constant false (False), or depends (None)."""
    if isinstance(node, cst.BooleanOperation):
        left, right = truth(node.left), truth(node.right)
        if isinstance(node.operator, cst.And):
            if left is False or right is False:
                return False
            return True if left is True and right is True else None
        if left is True or right is True:
            return True
        return False if left is False and right is False else None
    value = const_value(node)
    return None if value is UNKNOWN else bool(value)


_PATH_CALLS = ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "pathlib.PurePosixPath")
_PASS_THROUGH = (
    "builtins.str",
    "os.fspath",
    "os.path.abspath",
    "os.path.expanduser",
    "os.path.normpath",
    "os.path.realpath",
)


# The shared temp directory, labelled (see analysis.module.TEMP_DIR): `mkdtemp()` is a fresh place.
TEMP_DIR_CALLS = ("tempfile.gettempdir", "tempfile.gettempdirb", "tempfile.mktemp")
TEMP_DIR = "$TMPDIR"


# The home directory of whoever runs the code: `Path.home()`, `"~"`.
HOME_CALLS = ("pathlib.Path.home",)
HOME = "~"


def _under_home(start: str | None, part: str | None) -> str | None:
    """`Path.home() / "k2_hotfix"` starts `~/k2_hotfix`: the directory under the home says whose it is."""
    if start == HOME and part:
        return f"{HOME}/{part.lstrip('/')}"
    return start


def fixed_path(
    node: cst.BaseExpression,
    resolves: Resolves,
    value_of: ValuesOf | None = None,
    depth: int = 0,
    bound: Bound | None = None,
) -> str | None:
    """The literal part of a path that code fixes rather than takes from its caller, else None.

    A path is fixed when it starts with a literal: `"/tmp/x"`, `"/tmp/x_" + s`, `"/tmp/%d" % i`,
    `"/tmp/{}".format(i)`, `f"/tmp/{i}.pt"`, `os.path.join("/tmp", name)`, `Path("/tmp") / name`,
    also through a local name assigned one of these. An absolute literal later in a join fixes it too.
    The shared temp directory (`tempfile.gettempdir()`, `mktemp()`) is `$TMPDIR`; `bound` gives what a
    module or class constant or an instance attribute holds (`DUMP_DIR`, `self.dump_dir`).
    """
    if depth > 8:
        return None
    again = lambda n: fixed_path(n, resolves, value_of, depth + 1, bound)  # noqa: E731
    if isinstance(node, cst.SimpleString | cst.ConcatenatedString):
        return literal_string(node)
    if isinstance(node, cst.FormattedString):
        first = node.parts[0] if node.parts else None
        if isinstance(first, cst.FormattedStringExpression) and bound is not None:
            return again(first.expression)
        return first.value if isinstance(first, cst.FormattedStringText) else None
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Add | cst.Modulo):
            return again(node.left)
        if isinstance(node.operator, cst.Divide):
            right = literal_string(node.right)
            if right is not None and right.startswith("/"):
                return right
            return _under_home(again(node.left), right)
        return None
    if isinstance(node, cst.Call):
        func = node.func
        if resolves(node, TEMP_DIR_CALLS):
            return TEMP_DIR  # the temp directory: a fixed place, whatever TMPDIR names
        if resolves(node, HOME_CALLS):
            return HOME  # `Path.home()`: the home of whoever runs it, as `"~"` is
        if isinstance(func, cst.Attribute) and func.attr.value in ("format", "joinpath", "with_suffix", "with_name"):
            return again(func.value)
        if resolves(node, "os.path.join") and node.args:
            for arg in reversed(node.args[1:]):
                text = literal_string(arg.value)
                if text is not None and text.startswith("/"):
                    return text
            start = again(node.args[0].value)
            return _under_home(start, literal_string(node.args[1].value)) if len(node.args) > 1 else start
        if node.args and resolves(node, _PATH_CALLS + _PASS_THROUGH):
            return again(node.args[0].value)
        return bound(node) if bound is not None else None  # a helper that returns a fixed path
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or):
        return temp_only(again(node.right))  # `envs.VLLM_DUMP or "/tmp/d"`: /tmp unless set
    if isinstance(node, cst.Name) and value_of is not None:
        for value in reversed(value_of(node)):
            found = again(value)
            if found is not None:
                return found
    if isinstance(node, cst.Name | cst.Attribute) and bound is not None:
        return bound(node)
    return None


# Names that hold a token, sequence or batch count: `num_tokens`, `num_actual_tokens`,
# `num_scheduled_tokens`, `batch_size`, `bsz`, `seq_len`...
COUNT_NAME = re.compile(
    r"^(?:num|n|total)_\w*(?:tokens?|seqs|reqs|requests|prompts)$|^num_\w*tokens\w*$|^batch_size$|^bsz$|^seq_lens?$"
)
LEN_OF = re.compile(r"token|ids$|seq|(?<![a-z])req|prompt|batch|^positions$|^hidden_states$|^logits$", re.IGNORECASE)
# Position ids, one per token on the last dimension.
POSITIONS = re.compile(r"^(?:positions|position_ids|pos_ids)$")
# The input or output of a layer, one row per token (`x`, `input_`, `residual`): its next-to-last
# dimension counts tokens as `hidden_states.shape[-2]` does.
TOKEN_MAJOR = re.compile(r"^(?:x|h|hs|x_|inp|input_?|inputs|hidden|residual|out|output|\w*_states)$")
_CASTS = ("builtins.int", "builtins.float", "builtins.len")
_CAST_METHODS = ("item", "long", "int", "tolist")


# What turns a tensor or a shape into a list or a copy of the same length: `len(ids.tolist())` is
# `len(ids)`, `tuple(x.shape)[0]` is `x.shape[0]`.
LISTING_METHODS = frozenset({"tolist", "cpu", "numpy", "detach", "clone", "contiguous"})
LISTING_CALLS = frozenset({"list", "tuple"})


def _listed(node: cst.BaseExpression) -> cst.BaseExpression:
    """The value under conversions that keep its length (`.tolist()`, `.cpu()`, `list(...)`)."""
    while isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in LISTING_METHODS and not node.args:
            node = func.value
        elif isinstance(func, cst.Name) and func.value in LISTING_CALLS and [a.star for a in node.args] == [""]:
            node = node.args[0].value
        else:
            break
    return node


def _small_index(node: cst.BaseExpression) -> bool:
    """An integer index of a dimension, negative ones included (`shape[0]`, `size(-2)`)."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, cst.Integer)


def _rows(owner: cst.BaseExpression, index: cst.BaseExpression) -> str:
    """The owner's name, shown before `.shape[-2]` when the owner is token-major (`hidden_states`,
    `input_ids`, `positions`: their next-to-last dimension counts tokens), and before `.shape[-1]`
    of positions (`[num_tokens]`, or `[3, num_tokens]` for M-RoPE: the last dimension is the tokens), else ""."""
    text = _index_text(index)
    name = (cst.helpers.get_full_name_for_node(owner) or "").rsplit(".", 1)[-1]
    if text == "-1" and POSITIONS.match(name):
        return name
    if text != "-2":
        return ""
    return name if name and (LEN_OF.search(name) or TOKEN_MAJOR.match(name)) else ""


def _index_text(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.expression, cst.Integer):
        return "-" + node.expression.value
    return node.value if isinstance(node, cst.Integer) else "?"


def count_of(
    node: cst.BaseExpression, resolves: Resolves, value_of: ValuesOf | None = None, depth: int = 0
) -> str | None:
    """How `node` spells a token/batch count (`.shape[0]`, `len(ids)`...), else None."""
    if depth > 8:
        return None
    again = lambda n: count_of(n, resolves, value_of, depth + 1)  # noqa: E731
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        index = node.slice[0].slice
        if not (isinstance(index, cst.Index) and _small_index(index.value)):
            return None
        owner = _listed(node.value)  # `tuple(x.shape)[0]` is `x.shape[0]`
        if isinstance(owner, cst.Attribute) and owner.attr.value == "shape":
            return _rows(owner.value, index.value) + f".shape[{_index_text(index.value)}]"
        sized = isinstance(owner, cst.Call) and not owner.args and isinstance(owner.func, cst.Attribute)
        if sized and owner.func.attr.value == "size":  # type: ignore[attr-defined]
            return _rows(owner.func.value, index.value) + f".size()[{_index_text(index.value)}]"  # type: ignore[attr-defined]
        return None
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute):
            if func.attr.value == "size" and len(node.args) == 1 and _small_index(node.args[0].value):
                return _rows(func.value, node.args[0].value) + f".size({_index_text(node.args[0].value)})"
            if func.attr.value == "numel" and not node.args:
                return ".numel()"
            if func.attr.value in _CAST_METHODS and not node.args:
                return again(func.value)
        if len(node.args) == 1:
            name = resolves(node, _CASTS)
            if name == "builtins.len":
                # len() of anything is too common a guard (`len(args) == 2`): only counts of
                # tokens, ids, sequences, requests or batches.
                value = _listed(node.args[0].value)
                arg = cst.helpers.get_full_name_for_node(value) or ""
                if LEN_OF.search(arg.rsplit(".", 1)[-1]):
                    return f"len({arg})"
                if isinstance(value, cst.Name) and value_of is not None:
                    # `ids = batch.input_ids; n = len(ids)` under any local name.
                    for assigned in reversed(value_of(value)):
                        source = cst.helpers.get_full_name_for_node(_listed(assigned)) or ""
                        if source and LEN_OF.search(source.rsplit(".", 1)[-1]):
                            return f"len({arg} = {source})"
                return None
            if name is not None:
                return again(node.args[0].value)
        return None
    if isinstance(node, cst.Name):
        if COUNT_NAME.match(node.value):
            return node.value
        if value_of is not None:
            for value in reversed(value_of(node)):
                found = again(value)
                if found is not None:
                    return f"{node.value} = {found}"
        return None
    if isinstance(node, cst.Attribute) and COUNT_NAME.match(node.attr.value):
        return node.attr.value
    if isinstance(node, cst.NamedExpr):
        found = again(node.value)
        return f"{node.target.value} := {found}" if found is not None and isinstance(node.target, cst.Name) else found
    return None


def _operands(node: cst.BaseExpression, operator: type) -> list[cst.BaseExpression]:
    """The operands of an and/or chain of one kind, brackets and nesting flattened."""
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, operator):
        return _operands(node.left, operator) + _operands(node.right, operator)
    return [node]


_FLIP: dict[type, type] = {cst.LessThan: cst.GreaterThan, cst.GreaterThan: cst.LessThan}
_FLIP |= {cst.LessThanEqual: cst.GreaterThanEqual, cst.GreaterThanEqual: cst.LessThanEqual}


def _subject(node: cst.BaseExpression) -> str | None:
    """What a fact is about: a name (`x`, `self.n`), or the code of anything else (`len(x)`,
    `n.args[0]`: not `n.args`, which `n.args[1]` shares)."""
    if isinstance(node, cst.Name | cst.Attribute):
        return cst.helpers.get_full_name_for_node(node)
    return cst.Module([]).code_for_node(node)


def _fact(node: cst.BaseExpression) -> tuple[str, object] | None:
    """What one operand says about one name: (key, claim). A claim is True/False for a yes/no
    question about the name (is it None, truthy, an instance of A) or (low, high) bounds."""
    negated = False
    while isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        negated, node = not negated, node.expression
    name = cst.helpers.get_full_name_for_node(node) if isinstance(node, cst.Name | cst.Attribute) else None
    if name is not None:
        return f"truth {name}", not negated
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "isinstance":
        if len(node.args) == 2:
            subject = _subject(node.args[0].value)
            kinds = cst.Module([]).code_for_node(node.args[1].value)
            return (f"isinstance {subject} {kinds}", not negated) if subject else None
        return None
    if not isinstance(node, cst.Comparison) or len(node.comparisons) != 1:
        return None
    link = node.comparisons[0]
    left, right = node.left, link.comparator
    op: type = type(link.operator)
    if op in (cst.Is, cst.IsNot) and const_value(right) is None:
        name = _subject(left)
        return (f"none {name}", (op is cst.Is) != negated) if name else None
    if negated:
        return None
    number = const_value(right)
    if type(number) not in (int, float) and op in _FLIP:  # Yoda order: `3 > n`
        left, right, op = right, left, _FLIP[op]
        number = const_value(right)
    name = _subject(left)
    if name is None or type(number) not in (int, float) or op not in (*_FLIP, cst.Equal):
        return None
    at = float(number)  # type: ignore[arg-type]
    bounds: dict[type, tuple[float, float]] = {
        cst.LessThan: (-math.inf, at - 1e-9),
        cst.LessThanEqual: (-math.inf, at),
        cst.GreaterThan: (at + 1e-9, math.inf),
        cst.GreaterThanEqual: (at, math.inf),
    }
    low, high = bounds.get(op, (at, at))
    return f"range {name}", (low, high)


def contradicts(node: cst.BaseExpression) -> bool:
    """Whether an `and` chain says opposite things of one name, so it is never true: `x is None and
    x is not None`, `not a and a`, `isinstance(x, A) and not isinstance(x, A)`, `n > 5 and n < 3`."""
    claims: dict[str, object] = {}
    for operand in _operands(node, cst.And):
        fact = _fact(operand)
        if fact is None:
            continue
        key, claim = fact
        seen = claims.get(key)
        if isinstance(claim, tuple) and isinstance(seen, tuple):
            claim = (max(claim[0], seen[0]), min(claim[1], seen[1]))
            if claim[0] > claim[1]:
                return True
        elif seen is not None and seen != claim:
            return True
        claims[key] = claim
    return False


def excludes_nothing(node: cst.BaseExpression) -> bool:
    """Whether an `or` chain holds a test and its negation (`a or not a`), so it is always true."""
    claims: dict[str, object] = {}
    for operand in _operands(node, cst.Or):
        fact = _fact(operand)
        if fact is None or isinstance(fact[1], tuple):
            continue
        key, claim = fact
        if key in claims and claims[key] != claim:
            return True
        claims[key] = claim
    return False
