"""token-count-branch: a branch taken only when a token or batch count equals a magic number."""

import ast
import builtins
import functools
import re
from collections.abc import Callable, Mapping, Sequence

import libcst as cst

from patchaudit.rule import (
    COUNT_NAME,
    MORE_COUNT_NAMES,
    OFFSETS,
    PLURAL,
    POSITIONS,
    STRONG_CHANGES,
    THROUGH_NAMES,
    Alias,
    Change,
    Example,
    FileContext,
    Found,
    Rule,
    Severity,
    Statement,
    as_given,
    ast_nodes,
    called_name,
    dotted,
    element_count,
    len_may_count,
    literal_string,
    made_up_result,
    module_counters,
    nodes_under,
    numeric_names,
    of_types,
    one_line,
    padding,
    per_file,
    replaced_by_input,
    returns_nothing,
    setting,
    shape_compared,
    short_helpers,
    unparsed,
)

SIDE_EFFECT_CALLS = (
    "builtins.print",
    "builtins.open",
    "builtins.breakpoint",
    "builtins.exit",
    "builtins.quit",
    "torch.save",
    "numpy.save",
    "numpy.savez",
    "numpy.savetxt",
    "pickle.dump",
    "json.dump",
    "os.system",
    "os.makedirs",
    "os.mkdir",
    "os.remove",
    "os.unlink",
    "os.rename",
    "os.replace",
    "os.kill",
    "os._exit",
    "os.putenv",
    "os.write",
    "subprocess.*",
    "sys.exit",
    "pdb.*",
    "ipdb.*",
    "IPython.*",
    "torch.distributed.breakpoint",
    "logging.*",
    "traceback.print_*",
    "shutil.*",
)
SIDE_EFFECT_METHODS = {"write", "write_text", "write_bytes", "save", "dump", "flush", "tofile"}
_IN_PLACE_FILLS = frozenset({"zero_", "fill_"})
_HELPER_FILLS = (".zero_", ".fill_", ".mul_", ".masked_fill_", "torch.nn.init.*")
_MADE_UP = ("a return of made-up data", "made-up data")
_STATEFUL = frozenset({*_MADE_UP, "object state", "global state", "enclosing state"})
_CHANGES = frozenset(str(c) for c in Change) - {"a return of made-up data"}
_VALIDATION = {"ValueError", "TypeError", "NotImplementedError", "IndexError", "KeyError", "AssertionError"}
LOG_METHODS = {"debug", "info", "warning", "warning_once", "info_once", "error", "critical", "exception"}
_MAGIC = rb"(?:[2-9]|[1-9][0-9_]+|0[xXoObB][0-9a-fA-F_]+)"


# The branch a test without `else` leaves when false.
_NOTHING = cst.IndentedBlock([cst.SimpleStatementLine([cst.Pass()])])


def _passes(body: cst.CSTNode) -> bool:
    """A block that does nothing (`pass`, `...`)."""
    if not isinstance(body, cst.IndentedBlock | cst.SimpleStatementSuite):
        return False
    lines = body.body if isinstance(body, cst.IndentedBlock) else [body]
    if not all(isinstance(line, cst.SimpleStatementLine | cst.SimpleStatementSuite) for line in lines):
        return False
    smalls = [s for line in lines for s in line.body]  # type: ignore[attr-defined]
    return all(
        isinstance(s, cst.Pass) or (isinstance(s, cst.Expr) and isinstance(s.value, cst.Ellipsis)) for s in smalls
    )


# What a branch does that only looks at the data, as a debug session does: a print, a file, a save,
# a debugger. Not a log line (the code's own, at its level), a raise (a check) or process control.
_NOT_LOOKS = re.compile(r"^raise$|log|^os\.|^sys\.|^subprocess|^shutil|^exit|^quit|flush|state$")


def _looks(effect: str | None) -> bool:
    """Whether a small window's effect is a look at the data (`if n <= 4: print(x)`): a trap for a
    few counts, as a branch pinned to one count is."""
    return effect is not None and effect not in _CHANGES and not _NOT_LOOKS.search(effect)


def _pads(callee: ast.expr | None) -> bool:
    """`out[n:].zero_` in a helper: the padding past a count, as `padding` says of the branch's own."""
    if isinstance(callee, ast.Call) and callee.args:
        callee = callee.args[0]  # `functools.partial(out[n:].zero_)()`
    owner = callee.value if isinstance(callee, ast.Attribute) else None
    if not (isinstance(owner, ast.Subscript) and isinstance(owner.slice, ast.Slice)):
        return False
    return isinstance(owner.slice.lower, ast.Name | ast.Attribute)


def _way(other: cst.CSTNode | None) -> cst.CSTNode | None:
    """The way not taken, as work a branch may skip; None for an `elif` chain (one handling per
    case) and for a way that leaves (`return self.fallback(x)`: what follows is the other way)."""
    if isinstance(other, cst.If):
        return None
    block = other.body if isinstance(other, cst.Else) else other
    return None if isinstance(block, cst.BaseSuite) and _leaves(block) else other


def _changes_values(block: cst.CSTNode) -> bool:
    """A block that stores a value (`logits = ...`, `x[i] = ...`) or changes a tensor in place
    (`logits.index_put_(...)`); not one that only calls for an effect (`self._may_reorder(b)`)."""
    for node in nodes_under(block, (cst.Assign, cst.AugAssign, cst.Call)):
        if not isinstance(node, cst.Call):
            return True
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value.endswith("_") and not func.attr.value.startswith("_"):
            return True
    return False


def _does(found: str) -> str:
    """`runs print()`, or a change as it reads (`overwrites a tensor in place`)."""
    return found if found in _CHANGES else f"runs {found}"


def _magic_constant(node: ast.AST) -> bool:
    """A number of 2 or more: `5`, or `5.0` (a count compared with a float literal compares alike)."""
    if not isinstance(node, ast.Constant):
        return False
    value = node.value
    return (type(value) is int or (type(value) is float and value.is_integer())) and value >= 2


_COUNT_METHODS = {
    "size",
    "numel",
    "item",
    "long",
    "int",
    "tolist",
    "len",
    "float",
    "values",
    "cpu",
    "numpy",
    "ceil",
    "floor",
    "sum",  # `mask.sum()`: the tokens a mask sets (the analysis decides)
    "count_nonzero",
}
_OTHER_BUILTINS = frozenset(dir(builtins)) - {"len", "int", "float", "round"}
Values = dict[str, list[ast.expr]]


def _spelled(node: ast.AST) -> str:
    """`ast.unparse(node)`, read straight off a name or a dotted attribute of one (the common case)."""
    found = dotted(node)
    return found if found is not None else ast.unparse(node)


def _count_shaped(node: ast.AST, values: Values, depth: int = 0) -> bool:
    """Whether an operand could be a count: the ast side of `Rule.count_of`, looser.

    A local is followed into the values assigned to it in the same statement, as count_of does.
    A call of a builtin other than len/int/float is taken to be that builtin.
    """
    if depth > 8:
        return True
    if isinstance(node, ast.Name | ast.Attribute | ast.Subscript) and _spelled(node) in values.get(_COUNTERS, ()):
        return True  # `self._step += 1` in the same statement: a call counter
    if isinstance(node, ast.Name):
        if COUNT_NAME.match(node.id) is not None or MORE_COUNT_NAMES.match(node.id) is not None:
            return True
        if PLURAL.search(node.id) is not None:
            return True  # `max(extend_lens_cpu)`: counts, as element_count reads them
        return any(_count_shaped(v, values, depth + 1) for v in values.get(node.id, ()))
    if isinstance(node, ast.Attribute):
        return (
            COUNT_NAME.match(node.attr) is not None
            or MORE_COUNT_NAMES.match(node.attr) is not None
            or node.attr == "shape"
            or PLURAL.search(node.attr) is not None
            or any(_count_shaped(v, values, depth + 1) for v in values.get(_spelled(node), ()))
        )
    if isinstance(node, ast.ListComp | ast.GeneratorExp | ast.SetComp):
        return _count_shaped(node.elt, values, depth + 1)  # `min([len(r) for r in reqs])`
    if isinstance(node, ast.BinOp):
        return _count_shaped(node.left, values, depth + 1) or _count_shaped(node.right, values, depth + 1)
    if isinstance(node, ast.NamedExpr):
        return _count_shaped(node.value, values, depth + 1)
    if isinstance(node, ast.IfExp):
        return _count_shaped(node.body, values, depth + 1) or _count_shaped(node.orelse, values, depth + 1)
    if isinstance(node, ast.Subscript):
        owner = node.value
        last = _spelled(owner).rsplit(".", 1)[-1] if isinstance(owner, ast.Name | ast.Attribute) else ""
        if POSITIONS.match(last) or OFFSETS.search(last):
            return True  # `positions[-1]`: the last token's position; `query_start_loc[-1]`: the tokens
        while isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id in ("tuple", "list"):
            if len(owner.args) != 1:
                break
            owner = owner.args[0]  # `tuple(x.shape)[0]`
        if isinstance(owner, ast.Call):
            owner = owner.func
        return isinstance(owner, ast.Attribute) and owner.attr in ("shape", "size")
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("tuple", "list") and node.args:
            return _count_shaped(node.args[0], values, depth + 1)  # `tuple(x.shape)`
        if isinstance(func, ast.Attribute):
            # `torch.tensor(n).item()`, `np.int64(n)`: a conversion of a count; with the module's short
            # helpers known, only a conversion (`math.ceil(n / 4)`), or a helper count_of inlines
            # (`self._ntok(x)`), not any method given a count (`self.make_uniform(n)`).
            helpers = values.get(_HELPERS)
            if func.attr in _COUNT_METHODS or (helpers is not None and func.attr in helpers):
                return True
            converts = helpers is None or func.attr in _CONVERTING
            if converts and bool(node.args) and _count_shaped(node.args[0], values, depth + 1):
                return True
            # `arr.max()`, `counts.values()`: an aggregate or a view of counts, as count_of reads it.
            last = _spelled(func.value).rsplit(".", 1)[-1] if isinstance(func.value, ast.Name | ast.Attribute) else ""
            if func.attr in ("max", "amax") and POSITIONS.match(last):
                return True  # `positions.max()`: the last token's position
            return func.attr in _AGGREGATES and _count_shaped(func.value, values, depth + 1)
        if isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2:
            name = node.args[1]  # `getattr(md, "num_actual_tokens", 0)`
            return isinstance(name, ast.Constant) and isinstance(name.value, str) and _count_name(name.value)
        if isinstance(func, ast.Name) and func.id in ("min", "max", "abs", "sum"):
            # `max(n, 1) == 1`; `sum(md.query_lens) < 8`: an aggregate of counts, as count_of reads it.
            return any(_count_shaped(a, values, depth + 1) for a in node.args)
        helpers = values.get(_HELPERS)
        if helpers is None or not isinstance(func, ast.Name):
            return not (isinstance(func, ast.Name) and func.id in _OTHER_BUILTINS)
        if func.id == "len":
            return len(node.args) == 1 and len_may_count(node.args[0], values)  # not `len(parts) == 2`
        # Another function's result is a count only as count_of reads it: a short helper of the
        # module or a lambda bound to a local (inlined), a tally (`numel(x)`), or a cast, a
        # conversion or an aggregate of a count (`int(n)`, `np.int64(n)`); not `get_world_size()`.
        return (
            func.id in helpers
            or func.id in values
            or func.id in _TALLY_CALLS
            or any(_count_shaped(a, values, depth + 1) for a in node.args)
        )
    return False


_AGGREGATES = frozenset({"max", "min", "sum", "amax", "amin", "values", "tolist"})
# Functions count_of reads a count through, called as a module's member (`math.ceil(n)`,
# `np.int64(n)`, `torch.tensor(n)`, `builtins.max(n, 1)`): a cast, a conversion, an aggregate.
_CONVERTING = THROUGH_NAMES | {"len", "abs", "amax", "amin", "getattr"}
# Asked for every statement of a file: the file being checked.
_numeric_names = per_file()(numeric_names)
_short_defs = per_file()(short_helpers)


@per_file()  # asked for every statement of a file: the file being checked
def _short_helpers(tree: ast.Module) -> frozenset[str]:
    """short_helper_names, from the definitions already found for the file (one walk)."""
    return frozenset(_short_defs(tree))


_module_counters = per_file()(module_counters)


Defs = Mapping[str, Sequence[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.expr]]]


def _asks_helper(
    node: ast.If | ast.IfExp,
    short: frozenset[str] | None = None,
    assigned: Values | None = None,
    defs: Defs | None = None,
    few: bool = False,
) -> bool:
    """`if _want_dump(n):`, `if not self._probe(x.shape[0]):`, `if ids is not None and _probe(n):`:
    a test that is (or joins with `and`/`or`) a call, not of a builtin, given a count; `short`: the
    helpers whose returned value the rule reads in place of the call (short_helper_names; None: any);
    `assigned`: the statement's flags, read as the rule's `expanded` reads them (`fp8 = _fast(kv,
    H)`, then `if fp8:`); `defs`: the short helpers' definitions (short_helpers), whose returned
    value must then hold a test the rule could weigh (None: any helper may); `few`: as `_magic_test`."""
    return _asks(node.test, short, assigned or {}, 0, defs, few)


def _asks(
    test: ast.expr,
    short: frozenset[str] | None,
    assigned: Values,
    depth: int,
    defs: Defs | None = None,
    few: bool = False,
) -> bool:
    if depth > 4:
        return False
    if isinstance(test, ast.UnaryOp):
        return _asks(test.operand, short, assigned, depth + 1, defs, few)
    if isinstance(test, ast.BoolOp):
        return any(_asks(v, short, assigned, depth + 1, defs, few) for v in test.values)
    if isinstance(test, ast.Name | ast.Attribute):
        return any(_asks(v, short, assigned, depth + 1, defs, few) for v in assigned.get(_spelled(test), ()))
    if not (isinstance(test, ast.Call) and test.args):
        return False
    if isinstance(test.func, ast.Name) and test.func.id in _OTHER_BUILTINS:
        return False
    if short is not None:
        # The helper's returned value, with what the call passes: `k.shape[1] == 16` in it reads
        # the caller's `k`, whatever the argument is named.
        return called_name(test.func) in short and (
            defs is None or _returns_test(test, short, assigned, assigned, defs, few)
        )
    return any(_count_shaped(a, {}) for a in test.args)


def _returns_test(
    call: ast.Call, short: frozenset[str], flags: Values, assigned: Values, defs: Defs, few: bool, depth: int = 0
) -> bool:
    """Whether what the short helper a call names returns could be a test the rule flags once the
    call is read in its place (`expanded`): a comparison `_magic_test` accepts, each parameter
    standing for any argument the call passes (`assigned`: what the caller's names hold) and the
    helper's own locals followed; a call of another such helper that could (three deep; past that,
    any); or a value that reads a flag of the caller (`flags`: `return self._armed`), which the
    rule follows further."""
    found = defs.get(called_name(call.func))
    if found is None:
        return True  # a lambda the statement binds
    if depth > 2:
        return True
    given = [*call.args, *(k.value for k in call.keywords)]
    for helper, value in found:
        arguments = helper.args
        params = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
        own = _assigned(ast_nodes(helper))
        parts = ast_nodes(value)
        spelled = {_spelled(n) for n in parts if isinstance(n, ast.Name | ast.Attribute)}
        free = {n for n in spelled if n.split(".", 1)[0] not in (params - {"self", "cls"}) and n not in own}
        if not free.isdisjoint(flags):
            return True
        values: Values = {**assigned, **own}
        for param in params:
            values[param] = [*values.get(param, ()), *given]
        inner = [n for n in parts if isinstance(n, ast.Call) and called_name(n.func) in short]
        if any(_returns_test(n, short, flags, values, defs, few, depth + 1) for n in inner):
            return True
        if any(_magic_test(n, values, None, None, few) for n in parts if type(n) in _TESTS):
            return True
    return False


def _lambdas(nodes: Sequence[ast.AST]) -> frozenset[str]:
    """The names a statement binds a lambda to."""
    return frozenset(
        t.id
        for n in nodes
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Lambda)
        for t in n.targets
        if isinstance(t, ast.Name)
    )


def _count_name(name: str) -> bool:
    return COUNT_NAME.match(name) is not None or MORE_COUNT_NAMES.match(name) is not None


_COUNTERS = "+="  # the key of the names a statement increments (never a name itself)
# The key of the module's short helpers (never a name itself): with it, `_count_shaped` takes a call
# of a function for a count only as count_of reads one; without it, any call but of a builtin.
_HELPERS = "()"
_TALLY_CALLS = frozenset({"numel", "count_nonzero"})  # `from torch import numel`


def _assigned(nodes: Sequence[ast.AST]) -> Values:
    """What each local of a statement is assigned (a tuple target's names: the whole value), and
    under `_COUNTERS` the names it increments."""
    out: Values = {}
    for node in nodes:
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
            out.setdefault(_COUNTERS, []).append(node.target)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp):
            out.setdefault(_COUNTERS, []).extend(node.targets)  # `n = n + 1`, looser
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name | ast.Attribute):
                    out.setdefault(_spelled(target), []).append(node.value)
                elif isinstance(target, ast.Tuple | ast.List):
                    for element in target.elts:
                        element = element.value if isinstance(element, ast.Starred) else element
                        if isinstance(element, ast.Name | ast.Attribute):
                            out.setdefault(_spelled(element), []).append(node.value)
        elif isinstance(node, ast.comprehension) and isinstance(node.target, ast.Name):
            out.setdefault(node.target.id, []).append(node.iter)  # `any(n == 5 for n in seq_lens)`
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and isinstance(node.target, ast.Name) and node.value:
            out.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            out.setdefault(node.optional_vars.id, []).append(node.context_expr)  # `with open(p) as f`
    out[_COUNTERS] = [_spelled(t) for t in out.get(_COUNTERS, ())]  # type: ignore[misc]
    return out


_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _number_like(node: ast.AST, values: Values | None = None, known: frozenset[str] | None = None) -> bool:
    """A magic constant, or a name that may be a module/class constant (`N`, `self.N`, `-1`), or
    a local or attribute the statement binds to an integer (`target = 5`, `self.debug_len = 5`).

    `known`: the names the module binds a number to (numeric_names; None: any name may be one)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, ast.NamedExpr):
        return _number_like(node.value, values, known)
    if isinstance(node, ast.Name | ast.Attribute):
        # Module and class constants are spelled in capitals (`DEBUG_TOKENS`, `self.TRAP`).
        name = node.id if isinstance(node, ast.Name) else node.attr
        if name.upper() == name and any(c.isalpha() for c in name) and (known is None or name in known):
            return True
        mine = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
        if mine and (known is None or name in known):
            return True  # `self.debug_len`, bound in another method (the analysis decides)
        bound = (values or {}).get(_spelled(node), ())
        return any(isinstance(v, ast.Constant) and type(v.value) is int for v in bound)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
        return any(_magic_constant(a) for a in node.args)  # `min(n, 8) == n`: n bounded by 8
    if isinstance(node, ast.Call):
        text = ast.unparse(node)
        return "environ" in text or "getenv" in text  # `int(os.getenv("N", "5"))`
    return _magic_constant(node)


def _compared(node: ast.Compare, assigned: Values, ops: tuple[type, ...], known: frozenset[str] | None = None) -> bool:
    operands = [node.left, *node.comparators]
    for index, op in enumerate(node.ops):
        a, b = operands[index : index + 2]
        if isinstance(op, ops) and any(
            _number_like(x, assigned, known) and _count_shaped(y, assigned) and not isinstance(y, ast.Constant)
            for x, y in ((a, b), (b, a))
        ):
            return True
    return False


def _bounded(node: ast.Compare, assigned: Values, known: frozenset[str] | None = None, few: bool = False) -> bool:
    """An ordering comparison of a count with any integer or constant-like name.

    `few`: not a plain count against 1 or less (`n > 0`, `len(x) >= 1`), which bounds no window
    that reaches past 1; a quotient or a distance (`n // 8 < 1`, `n - 5 <= 0`) still counts."""
    operands = [node.left, *node.comparators]
    for index, op in enumerate(node.ops):
        a, b = operands[index : index + 2]
        for x, y in ((a, b), (b, a)):
            literal = _literal_int(x)
            if few and literal is not None and literal <= 1 and not _shifted(y):
                continue
            number = (isinstance(x, ast.Constant) and type(x.value) is int) or _number_like(x, assigned, known)
            if isinstance(op, _ORDER) and number and _count_shaped(y, assigned) and not isinstance(y, ast.Constant):
                return True
    return False


def _shifted(count: ast.expr) -> bool:
    """A count side that is more than a count: arithmetic, a walrus, a call of `abs`."""
    return any(
        isinstance(n, ast.BinOp | ast.NamedExpr) or (isinstance(n, ast.Call) and called_name(n.func) == "abs")
        for n in ast.walk(count)
    )


# The nodes _magic_test can accept; those _assigned reads; those whose test _wide reads.
_TESTS = frozenset({ast.Compare, ast.BoolOp, ast.Match, ast.If, ast.IfExp, ast.Call})
_BINDERS = frozenset({ast.AugAssign, ast.Assign, ast.comprehension, ast.AnnAssign, ast.NamedExpr, ast.withitem})
_BRANCHES = frozenset({ast.If, ast.While, ast.IfExp})
_IFS, _ASSIGNS, _ASSERTS = frozenset({ast.If, ast.IfExp}), frozenset({ast.Assign}), frozenset({ast.Assert})
# Calls and stores that change data in place or keep it (see analysis.changes), as the ast spells them.
_CHANGING_METHODS = frozenset({"zero_", "fill_", "mul_", "copy_", "append", "extend", "insert", "appendleft"})


def _one(node: ast.Compare, assigned: Values) -> str | None:
    """A count tested against a batch of one: "one" for `n == 1`, `n <= 1`, `1 >= n`; "many" for
    `n > 1`, `1 < n` (a batch of one is its `else:`)."""
    operands = [node.left, *node.comparators]
    for index, op in enumerate(node.ops):
        for side, (x, y) in enumerate(((operands[index + 1], operands[index]), (operands[index], operands[index + 1]))):
            if isinstance(x, ast.Constant) and x.value == 1 and type(x.value) is int and _count_shaped(y, assigned):
                if isinstance(op, ast.Eq | ast.NotEq | ast.LtE | ast.GtE):
                    return "one"  # `!=`: inverted into `else:`
                return "many" if isinstance(op, (ast.Gt, ast.Lt)[side]) else None
    return None


def _changes_data(body: Sequence[ast.stmt]) -> bool:
    """A body that could change data a function computes: a store, a return, an in-place call."""
    for node in (n for stmt in body for n in ast.walk(stmt)):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.Return):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            if attr in _CHANGING_METHODS or (attr.endswith("_") and not attr.startswith("_")):
                return True  # an in-place method of a tensor (`masked_fill_`, `init.zeros_`)
    return False


def _never_in_window(asserts: Sequence[ast.Assert]) -> frozenset[int]:
    """The nodes of assertions that fail for no window of counts: an `assert` stops the process
    where its test is false, and the opposite of `n == 2`, `n > 4` or `x.shape == (5, 7168)` holds
    for counts past any window (or for 0). Only a test that is one comparison, with no `not`, `!=`,
    `not in` or call in it (`assert n != 5` fails for one count; the rule reads a part of `assert
    h == 256 and k.shape[1] == 16` as a branch on 16)."""
    out: set[int] = set()
    for node in asserts:
        inside = list(ast.walk(node.test))
        if not isinstance(node.test, ast.Compare) or any(
            isinstance(n, ast.Not | ast.BoolOp | ast.NotEq | ast.NotIn | ast.NamedExpr | ast.Lambda)
            or (isinstance(n, ast.Call) and not _plain_call(n))
            for n in inside
        ):
            continue
        out.update(id(n) for n in inside)
    return frozenset(out)


# Calls an assertion's test may make that hide no comparison (a predicate helper's, which
# `expanded` reads, or `abs(n - 5) >= 2`'s distance, may).
_PLAIN_CALLS = frozenset({"len", "int", "float", "isinstance", "tuple", "list", "size", "dim", "numel", "item"})


def _plain_call(node: ast.Call) -> bool:
    func = node.func
    owner = func.value if isinstance(func, ast.Attribute) else None
    if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
        return False
    return called_name(func) in _PLAIN_CALLS


def _numbers_listed(node: ast.expr, assigned: Values, known: frozenset[str] | None) -> bool:
    """A tuple or list a count or a shape may equal, as the rule reads one: its first element a
    literal integer (`shape_compared`: `(5, 7168)`), or every element a number (`_listed`: `[2]`,
    `(N, 3)` of module constants); not `(num_blocks, heads, block_size)` of parameters."""
    node = _unnamed(node)
    if not (isinstance(node, ast.Tuple | ast.List) and node.elts):
        return False
    first = node.elts[0]
    if isinstance(first, ast.Constant) and type(first.value) is int:
        return True
    return all(_literal_number(e) or _number_like(e, assigned, known) for e in node.elts)


def _literal_number(node: ast.expr) -> bool:
    """`0`, `1.0`, `-1`: a number written out, whatever its value."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _unnamed(node: ast.expr) -> ast.expr:
    """The value a walrus binds (`(probe := (5, 7168))`), else the node."""
    return node.value if isinstance(node, ast.NamedExpr) else node


def _longer(block: cst.IndentedBlock, lines: int) -> bool:
    """Whether the block's code runs past `lines` lines: its parts generated one at a time, until it does."""
    spell = cst.Module([]).code_for_node
    seen = spell(block.header).count("\n")
    for part in [*block.body, *block.footer]:
        seen += spell(part).count("\n")
        if seen > lines:
            return True
    return False


def _literal_int(node: ast.AST) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        found = _literal_int(node.operand)
        return -found if found is not None else None
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _wide(branches: Sequence[ast.If | ast.While | ast.IfExp]) -> frozenset[int]:
    """The ordering comparisons that hold for no window of counts: a test of its own (all of an
    `if`/`while`/conditional's test, or under its `not`) that bounds a plain count on one side
    only, by a literal at most 0 or past the window (`if row_size > 0:`, `if n >= 64:`).

    One side open makes no window; a bound past `_WINDOW` leaves too many counts below it, and
    one at most 0 none. Such a comparison kept nothing else in a statement: its window is worked
    out from this test alone. A quotient, a distance, a walrus or any comparison joined to
    another by `and`/`or`, bound to a name, or passed on is left to the rule (`n // 4 <= 0` is 0
    to 3)."""
    out = set()
    for branch in branches:
        test = branch.test
        while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], _ORDER)):
            continue
        for bound, count in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
            number = _literal_int(bound)
            if number is None or 0 < number <= _WINDOW + 1 or _literal_int(count) is not None:
                continue
            if not any(isinstance(n, ast.BinOp | ast.NamedExpr) for n in ast.walk(count)):
                out.add(id(test))
    return frozenset(out)


def _off_by_magic(node: ast.AST, assigned: Values) -> bool:
    """`n - 5`, `n + 5`: a count shifted by a magic constant (the ast side of `_from_zero`)."""
    node = _unnamed(node)  # type: ignore[arg-type]
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Sub | ast.Add)
        and _magic_constant(node.right)
        and _count_shaped(node.left, assigned)
    )


def _magic_test(
    node: ast.AST,
    assigned: Values,
    alone: frozenset[int] | None = None,
    known: frozenset[str] | None = None,
    few: bool = False,
) -> bool:
    """The ast side of the rule: a comparison or case that could pin a count (no names resolved).

    `alone`: the ids of the ordering comparisons that cannot make a window (`_wide`); `known`: the
    names the module binds a number to (None: any); `few`: a bound of 1 or less makes no window
    (in a file that verifies: only a drifted file's skipped step reads one, `_upstream_skipped`)."""
    if isinstance(node, ast.Compare):
        if _compared(node, assigned, (ast.Eq, ast.NotEq), known):
            return True
        if any(_numbers_listed(c, assigned, known) for c in (node.left, *node.comparators)) and any(
            _count_shaped(c, assigned) for c in (node.left, *node.comparators)
        ):
            return True  # `x.shape == (5, 7168)`, `num_draft_tokens == [2]`
        if len(node.ops) >= 2 and _compared(node, assigned, _ORDER, known):
            return True  # a chained window: `4 < n < 6`
        sides = (node.left, *node.comparators)
        if any(_off_by_magic(x, assigned) for x in sides) and any(_literal_int(x) == 0 for x in sides):
            return True  # `n - 5 == 0`: the count against 5
        operands = [node.left, *node.comparators]
        for index, op in enumerate(node.ops):
            left, right = operands[index : index + 2]
            collection = (
                isinstance(right, ast.Tuple | ast.List | ast.Set)
                or (isinstance(right, ast.Call) and isinstance(right.func, ast.Name) and right.func.id == "range")
                or (isinstance(right, ast.Name | ast.Attribute) and _number_like(right, None, known))  # `in DEBUG_LENS`
            )
            if isinstance(op, ast.In | ast.NotIn) and collection and _count_shaped(left, assigned):
                return True
    if isinstance(node, ast.Compare) and _bounded(node, assigned, known, few) and id(node) not in (alone or ()):
        return True  # `n < 4`: a window down to 0, when the branch makes up data
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        ordered = [v for v in node.values if isinstance(v, ast.Compare) and _bounded(v, assigned, known, few)]
        magic = any(_compared(v, assigned, _ORDER, known) for v in ordered)
        return len(ordered) >= 2 and magic  # a window joined by `and`: `n > 1 and n < 4`
    if isinstance(node, ast.If | ast.IfExp | ast.While):
        test, negated = node.test, False
        while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        if negated and _off_by_magic(test, assigned):
            return True  # `if not (n - 5):`: the count against 5
    if isinstance(node, ast.If | ast.IfExp):
        # `if logits.shape[0] == 1: sampled = ...`: a batch of one matters only when its branch changes data.
        parts = ast_nodes(node.test)
        tests = [t for t in parts if isinstance(t, ast.Compare)]
        # `solo = n == 1` above, then `if greedy or solo:`: the flag's comparison
        tests += [v for t in parts if isinstance(t, ast.Name) for v in assigned.get(t.id, ())]
        ones = {_one(t, assigned) for t in tests if isinstance(t, ast.Compare)}
        if isinstance(node, ast.IfExp):
            return bool(ones - {None})
        if "one" in ones and _changes_data(node.body + node.orelse):
            return True
        return "many" in ones and _changes_data(node.orelse)  # `if n > 1: ... else: sampled = ...`
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "where" and node.args:
        # `torch.where(n == 1, picked, sampled)`: a batch of one's branch spelled as a value.
        return any(isinstance(t, ast.Compare) and _one(t, assigned) for t in ast.walk(node.args[0]))
    if isinstance(node, ast.Match):
        return _count_shaped(node.subject, assigned) and any(
            isinstance(n, ast.MatchValue) and _number_like(n.value, None, known)
            for case in node.cases
            for n in ast.walk(case.pattern)
        )
    return False


_OTHER_DIM = re.compile(r"(?:\[|\()(?:-\d+|[2-9]|\d\d+)(?:\]|\))")
_WINDOW = 8  # at most this many counts: a debug trap, not a size class
_SHORT = 6  # lines after an early exit that a debug trap adds
_INNER_DIM = re.compile(r"(?:\[|\()(?:-\d+|[1-9]\d*)(?:\]|\))")  # `.shape[1]`, `.size(-2)`
# The next-to-last dimension of a token-major tensor (`hidden_states.shape[-2]`) and the last of a
# position tensor (`positions.shape[-1]`, `[3, num_tokens]` for M-RoPE): its tokens.
# The last offset into a batch and the last token's position (`query_start_loc[-1]`, `positions[-1]`)
# are counts too.
_TOKEN_ROWS = re.compile(
    r"\w\.(?:shape\[-2\]|size\(\)\[-2\]|size\(-2\))|\b(?:positions|position_ids|pos_ids)\.(?:shape\[-1\]|size\(\)\[-1\]|size\(-1\))"
    r"|\b(?:\w*(?:start_loc|offsets|indptr)|cu_\w+|(?:input_)?(?:positions|position_ids|pos_ids))\[-1\]"
)


def _inner(count: str) -> bool:
    """A dimension past the first (channels, heads, a layout), not the tokens."""
    return _INNER_DIM.search(_TOKEN_ROWS.sub("", count)) is not None


def _other(count: str) -> bool:
    """A dimension other than the first, a size rather than a count."""
    return _OTHER_DIM.search(_TOKEN_ROWS.sub("", count)) is not None


_FEATURE_SIZE = 32  # a dimension past the first this large is a model or kernel size
_SYMBOL = {
    cst.Equal: "==",
    cst.LessThan: "<",
    cst.LessThanEqual: "<=",
    cst.GreaterThan: ">",
    cst.GreaterThanEqual: ">=",
}
_SEQUENCES = ("builtins.tuple", "builtins.list")


def _from_zero(side: cst.BaseExpression) -> tuple[cst.BaseExpression, int]:
    """What a side compared with 0 compares, and with what: `n - 5` is `n` against 5, `n + 5` is `n`
    against -5 (also bound by a walrus: `(d := n - 5) == 0`); any other side is itself against 0."""
    shifted = side.value if isinstance(side, cst.NamedExpr) else side
    if isinstance(shifted, cst.BinaryOperation) and isinstance(shifted.right, cst.Integer):
        shift = shifted.right.evaluated_value
        if isinstance(shifted.operator, cst.Subtract):
            return shifted.left, shift
        if isinstance(shifted.operator, cst.Add):
            return shifted.left, -shift
    return side, 0


_FLIPPED = {
    cst.Equal: "==",
    cst.LessThan: ">",
    cst.LessThanEqual: ">=",
    cst.GreaterThan: "<",
    cst.GreaterThanEqual: "<=",
}


_NEGATED: dict[type, type] = {
    cst.Equal: cst.NotEqual,
    cst.NotEqual: cst.Equal,
    cst.LessThan: cst.GreaterThanEqual,
    cst.GreaterThanEqual: cst.LessThan,
    cst.GreaterThan: cst.LessThanEqual,
    cst.LessThanEqual: cst.GreaterThan,
    cst.In: cst.NotIn,
    cst.NotIn: cst.In,
    cst.Is: cst.IsNot,
    cst.IsNot: cst.Is,
}


def _negate(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """`not test`, pushed down (De Morgan, flipped comparisons); None where it cannot be."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return test.expression
    if isinstance(test, cst.BooleanOperation):
        left, right = _negate(test.left), _negate(test.right)
        if left is None or right is None:
            return None
        operator = cst.Or() if isinstance(test.operator, cst.And) else cst.And()
        return cst.BooleanOperation(left=left, operator=operator, right=right)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        flipped = _NEGATED.get(type(target.operator))
        if flipped is None:
            return None
        return test.with_changes(comparisons=[target.with_changes(operator=flipped())])
    if not isinstance(test, cst.Comparison):
        return cst.UnaryOperation(operator=cst.Not(), expression=test)  # `self.reduce_results`: `not ...`
    if isinstance(test, cst.Comparison):
        # `not (a < n < b)` is `n <= a or n >= b`: one link at a time.
        out: cst.BaseExpression | None = None
        left = test.left
        for target in test.comparisons:
            part = _negate(cst.Comparison(left=left, comparisons=[target]))
            if part is None:
                return None
            out = part if out is None else cst.BooleanOperation(left=out, operator=cst.Or(), right=part)
            left = target.comparator
        return out
    return None


def _conditions_set(block: cst.IndentedBlock) -> list[tuple[str, bool]]:
    """The flags a block sets to a constant (`probe = True`, `self._hit = False`)."""
    out = []
    for line in block.body:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for small in line.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
                flag = isinstance(value, cst.Name) and value.value in ("True", "False")
                if isinstance(target, cst.Name | cst.Attribute) and flag:
                    out.append((cst.helpers.get_full_name_for_node(target) or "", value.value == "True"))  # type: ignore[attr-defined]
    return out


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _named(test: cst.BaseExpression) -> list[cst.NamedExpr]:
    """Every `name := value` in a test."""
    return nodes_under(test, (cst.NamedExpr,))  # type: ignore[return-value]


def _magic(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        value = node.evaluated_value
        return value if value >= 2 else None
    return None


# A call made to look at the data, not to compute it: leaving it out skips no layer.
_ASIDE_CALL = re.compile(r"log|print|dump|save|debug|trace|record|profil|warn|check|verify|validat", re.I)


def _truncated(node: cst.Assign) -> bool:
    """`spec_tokens = spec_tokens[:1]`: a name cut to a fixed prefix of itself."""
    if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
        return False
    value, name = node.value, node.targets[0].target
    if not (isinstance(value, cst.Subscript) and value.value.deep_equals(name) and len(value.slice) == 1):
        return False
    part = value.slice[0].slice
    return isinstance(part, cst.Slice) and part.lower is None and isinstance(part.upper, cst.Integer)


def _works(block: cst.CSTNode) -> bool:
    """Whether a block calls anything but a log line or a print: work a loop does per item."""
    for call in nodes_under(block, (cst.Call,)):
        spelled = cst.helpers.get_full_name_for_node(call.func) or ""  # type: ignore[attr-defined]
        if not _ASIDE_CALL.search(spelled):
            return True
    return False


_ZEROED = re.compile(r"\bzeros(?:_like)?\(|\bzero_\(|\*\s*0(?:\.0*)?\b|\bfill_\(\s*0")


def _zeroed(node: cst.CSTNode) -> bool:
    """Made-up data that is zeros (`torch.zeros_like(x)`, `x * 0`): a layer's output wiped. A mask
    of ones for a single prompt is the code's own case; zeros out of a forward are not."""
    return _ZEROED.search(cst.Module([]).code_for_node(node)) is not None


def _returns(block: cst.CSTNode) -> list[cst.Return]:
    """The returns with a value in `block`, at any depth, outside functions defined there."""
    found = nodes_under(block, (cst.Return,), opaque=(cst.FunctionDef, cst.Lambda))
    return [r for r in found if r.value is not None]  # type: ignore[attr-defined]


def _effects(rule: "TokenCountBranch", body: cst.CSTNode, returns: bool = True) -> str | None:
    """What `body` does beyond computing (a print, a write, a raise...); `returns`: whether a
    return of made-up data, a raise and a change of state count (not for the rest of a function,
    whose work they are: only printing, writing, saving and debuggers count there)."""
    visitor = _SideEffects(rule, returns)
    body.visit(visitor)
    found = visitor.found
    if returns and found is not None and _logs(found):
        # `logger.info("capturing"); self.captured = x`: the change after the log line decides.
        found = next((e for e in visitor.seen if not _logs(e)), found)
    if found is None and returns:
        change = rule.data_change(body, rule.alone, rule.other)
        found = change.shown() if change is not None else None
    if found is None and returns and rule.function_facts().forward:
        lines = body.body if isinstance(body, cst.IndentedBlock) else []
        smalls = [s for line in lines if isinstance(line, cst.SimpleStatementLine) for s in line.body]
        if len(smalls) == 1 and _cuts_layers(smalls[0], rule.function_node()):
            shown = " ".join(cst.Module([]).code_for_node(smalls[0]).split())
            found = f"`{shown}`, the bound of the loop over the model's layers (layers left out),"
    if not returns and found in ("raise", "object state", "global state", "enclosing state"):
        return None
    return None if not returns and found is not None and ".warning" in found else found


def _dropped_or_recomputed(
    node: cst.CSTNode, params: frozenset[str], values_of: Callable[[cst.Name], Sequence[cst.BaseExpression]]
) -> bool:
    """A setting dropped (`scheduler_metadata = None`), or one read from metadata the function is
    given recomputed on the spot from other data (`max_seqlen_k = attn_metadata.max_seq_len`, then
    `max_seqlen_k = int(seqused_k.max())`): not a constant a small-batch kernel is given
    (`use_cuda_graph = True`, `num_splits = 1`), not the value reshaped from itself for a batch of
    one (`pv = pv.squeeze(0)`), not a local the branch computes for the case (`cache_len = max(n, 8)`)."""
    if not (isinstance(node, cst.Assign) and len(node.targets) == 1):
        return False
    value, target = node.value, node.targets[0].target
    if isinstance(value, cst.Name) and value.value == "None":
        return True
    if not isinstance(target, cst.Name) or target.value in params or not nodes_under(value, (cst.Call,)):
        return False
    if _clamped_to_constant(value, target.value):
        return True  # `token_budget = min(token_budget, 1)`: forced to a bound for the case
    if target.value in {n.value for n in nodes_under(value, (cst.Name,))}:  # type: ignore[attr-defined]
        return False
    before = values_of(target)
    root = before[-1] if before else None
    while isinstance(root, cst.Attribute | cst.Subscript):
        root = root.value
    return before[-1] is not root and isinstance(root, cst.Name) and root.value in params


_GREEDY = re.compile(r"greedy|^argmax$")
_SAMPLES = re.compile(r"sampl")


def _statements(body: cst.CSTNode) -> list[cst.BaseStatement]:
    if isinstance(body, cst.IndentedBlock):
        return list(body.body)
    return [cst.SimpleStatementLine(list(body.body))] if isinstance(body, cst.SimpleStatementSuite) else []


def _called(node: cst.CSTNode) -> list[str]:
    """The last part of the name of every function `node` calls (`self.greedy_sample(x)`: greedy_sample)."""
    found = []
    for call in nodes_under(node, (cst.Call,)):
        func = call.func  # type: ignore[attr-defined]
        if isinstance(func, cst.Attribute):
            found.append(func.attr.value)
        elif isinstance(func, cst.Name):
            found.append(func.value)  # not `fns[i](x)`, `make()(x)`: no name
    return found


def _picks_greedy(branch: cst.CSTNode, other: cst.CSTNode) -> bool:
    """`branch` picks greedily and samples nothing, where `other` samples. Not a one-row fast path of
    the same pick (`argmax(logits[0])` beside `logits.argmax(-1)`), nor another kernel (`self.batched`)."""
    here, there = _called(branch), _called(other)
    samples = lambda name: _SAMPLES.search(name) is not None and _GREEDY.search(name) is None  # noqa: E731
    greedy = any(_GREEDY.search(name) for name in here)
    return greedy and not any(map(samples, here)) and any(map(samples, there))


def _asks_greedy(test: cst.BaseExpression) -> bool:
    """A test that also asks for greedy requests (`all_greedy and n == 1`, `greedy`), not one that adds
    a count to them under `or` (`all_greedy or n == 1`: every lone request made greedy)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _asks_greedy(test.left) and _asks_greedy(test.right)
    return any(isinstance(n, cst.Name) and _GREEDY.search(n.value) for n in nodes_under(test, (cst.Name,)))


def _cuts_layers(node: cst.CSTNode | None, function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> bool:
    """A local the branch sets that bounds the model's loop over its layers below: a bound of a slice of
    `...layers` (`self.layers[start:end]`), of `islice(self.layers, start, end)`, or of the `range` a
    loop indexes `...layers[i]` with. Set for a few tokens, it leaves layers out of the forward."""
    if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)):
        return False
    if function is None:
        return False
    name = node.targets[0].target.value

    def names(*parts: ast.AST | None) -> bool:
        return any(isinstance(n, ast.Name) and n.id == name for p in parts if p is not None for n in ast.walk(p))

    def layers(value: ast.AST) -> bool:
        return isinstance(value, ast.Attribute) and value.attr.endswith("layers")

    for loop in ast.walk(function):
        if not isinstance(loop, ast.For | ast.AsyncFor):
            continue
        for n in ast.walk(loop.iter):
            sliced = isinstance(n, ast.Subscript) and layers(n.value) and isinstance(n.slice, ast.Slice)
            if sliced and names(n.slice.lower, n.slice.upper):  # type: ignore[attr-defined]
                return True
            if isinstance(n, ast.Call) and n.args and layers(n.args[0]):
                called = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
                if called == "islice" and names(*n.args[1:]):
                    return True
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "range" and names(*n.args):
                indexed = any(isinstance(s, ast.Subscript) and layers(s.value) for s in ast.walk(loop))
                if indexed:
                    return True
    return False


# Settings that decide what a model computes, not how fast: masking, scaling, sampling, precision.
_NUMERICS = re.compile(
    r"^(?:is_)?causal$|^(?:softmax_|sm_|attn_|logit_)?scale$|^(?:attn_)?mask$|^temperatures?$|^top_[kp]s?$"
    r"|^min_p$|^(?:all_)?greedy$|^(?:logits_)?soft_cap$|^dtype$"
    r"|^topk$|^renormalize$|^norm_topk_prob$|^(?:repetition|presence|frequency)_penalt(?:y|ies)$"
    r"|^(?:\w+_)?eps(?:ilon)?$|^routed_scaling_factor$|^logit_bias$|^sliding_window$"
)


def _numerics(
    node: cst.CSTNode,
    values_of: Callable[[cst.Name], Sequence[cst.BaseExpression]],
    passed: Mapping[str, frozenset[str]] | None = None,
) -> bool:
    """A setting of the computation's numerics (`causal = False`, `top_k = 1`, `self.scale = 1.0`,
    `temperature = torch.zeros_like(temperature)`): switched for a small batch it changes results, where
    a kernel choice (`use_cuda_graph = True`, `num_splits = 1`) changes only the speed. A local set
    again to the value it already holds (`causal = True` under `causal = True`) switches nothing."""
    if not (isinstance(node, cst.Assign) and len(node.targets) == 1):
        return False
    target = node.targets[0].target
    if isinstance(target, cst.Name):
        before = values_of(target)
        if before and all(b is not node.value and b.deep_equals(node.value) for b in before):
            return False
    if isinstance(target, cst.Subscript):  # `kwargs["causal"] = False`
        keys = [e.slice.value for e in target.slice if isinstance(e.slice, cst.Index)]
        name = keys[0].evaluated_value if len(keys) == 1 and isinstance(keys[0], cst.SimpleString) else None
    elif isinstance(target, cst.Attribute):
        name = target.attr.value
    else:
        name = target.value if isinstance(target, cst.Name) else None
    if not isinstance(name, str):
        return False
    keywords = (passed or {}).get(name, frozenset()) if isinstance(target, cst.Name) else frozenset()
    return any(_NUMERICS.search(n) is not None for n in (name, *keywords) if n)  # `jitter_eps=jitter`


def _clamped_to_constant(value: cst.BaseExpression, name: str) -> bool:
    """`min(name, 1)`, `max(4, name)`: the name held to a number fixed in the code."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("min", "max")):
        return False
    args = [a.value for a in value.args]
    return (
        len(args) == 2
        and any(isinstance(a, cst.Name) and a.value == name for a in args)
        and any(isinstance(a, cst.Integer | cst.Float) for a in args)
    )


_SHAPE_OF = frozenset({"shape", "size", "ndim", "dim", "numel"})


def _shaped(test: cst.BaseExpression) -> frozenset[str]:
    """The names whose shape a test reads (`x.shape[0]`, `x.size(0)`, `x.ndim`, `len(x)`)."""
    out = set()
    for node in nodes_under(test, (cst.Attribute, cst.Call)):
        if isinstance(node, cst.Attribute) and node.attr.value in _SHAPE_OF and isinstance(node.value, cst.Name):
            out.add(node.value.value)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len" and node.args:
            arg = node.args[0].value
            if isinstance(arg, cst.Name):
                out.add(arg.value)
    return frozenset(out)


def _logs(effect: str) -> bool:
    """A log line (`logger.info()`, `logging.warning`)."""
    return effect.startswith("logging.") or ("log" in effect.lower() and effect.endswith("()") and "." in effect)


def _bound_names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, cst.Tuple | cst.List):
        return [n for e in target.elements for n in _bound_names(e.value)]
    return []


def _exits(block: cst.BaseSuite | None) -> bool:
    """A block that only leaves (`return`, `return x`, `continue`, `break`), after a log line or a
    print at most (`logger.info("skipping"); break`)."""
    if not isinstance(block, cst.IndentedBlock) or not block.body:
        return False
    *before, line = block.body
    if not (isinstance(line, cst.SimpleStatementLine) and isinstance(line.body[-1], _EXITS)):
        return False
    if not all(isinstance(b, cst.SimpleStatementLine) for b in before):
        return False
    smalls = [s for b in before for s in b.body] + list(line.body[:-1])  # type: ignore[attr-defined]
    return all(isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) for s in smalls)


_EXITS = (cst.Return, cst.Continue, cst.Break)


def _exit_of(block: cst.BaseSuite) -> cst.BaseSmallStatement:
    """The statement an `_exits` block leaves by."""
    return block.body[-1].body[-1]  # type: ignore[attr-defined,no-any-return]


def _leaves(block: cst.BaseSuite) -> bool:
    """A block that ends by leaving (`return`, `raise`, `continue`, `break`): what follows is the other way."""
    last = block.body[-1] if isinstance(block, cst.IndentedBlock) and block.body else block
    if isinstance(last, cst.SimpleStatementLine | cst.SimpleStatementSuite):
        return isinstance(last.body[-1], cst.Return | cst.Raise | cst.Continue | cst.Break)
    return False


def _returns_value(block: cst.BaseSuite) -> bool:
    """A block that ends in `return <value>`."""
    last = block.body[-1] if isinstance(block, cst.IndentedBlock) and block.body else block
    if not isinstance(last, cst.SimpleStatementLine | cst.SimpleStatementSuite):
        return False
    leave = last.body[-1]
    return isinstance(leave, cst.Return) and leave.value is not None


def _exit_branch(node: cst.If) -> bool | None:
    """Which outcome of the test leaves the block early (True: `if n != 5: return`; False:
    `if n == 5: pass / else: return`), else None."""
    orelse = node.orelse.body if isinstance(node.orelse, cst.Else) else None
    if _exits(node.body) and node.orelse is None:
        return True
    if orelse is not None and _exits(orelse) and not _exits(node.body):
        return False
    return None


class _SideEffects(cst.CSTVisitor):
    def __init__(self, rule: "TokenCountBranch", returns: bool = True) -> None:
        super().__init__()
        self.rule = rule
        self.returns = returns
        self.found: str | None = None
        self.seen: list[str] = []  # every effect, in order (a log line first, a change of state after)
        self.bound: set[str] = set()  # the names the branch binds itself (`padded = ...` above `padded[:n] = x`)

    def _note(self, name: str) -> None:
        self.seen.append(name)
        self.found = self.found or name

    def visit_Call(self, node: cst.Call) -> None:
        name = self.rule.resolves_to(node, SIDE_EFFECT_CALLS)
        func = self.rule.callee(node)
        if name is None and isinstance(func, cst.Attribute) and func.attr.value in SIDE_EFFECT_METHODS:
            name = "." + func.attr.value + "()"
        if name is None and isinstance(func, cst.Attribute) and func.attr.value in _IN_PLACE_FILLS:
            # `output.fill_(0)`, `x.zero_()`: a result overwritten; `out[n:].zero_()` pads past it.
            name = None if padding(func.value) else "made-up data"
        if name is None and isinstance(func, cst.Attribute) and func.attr.value in LOG_METHODS:
            owner = cst.helpers.get_full_name_for_node(func.value) or ""
            name = f"{owner}.{func.attr.value}()" if "log" in owner.lower() else None
        if name is None:
            through = self.rule.through_helper(node, (*SIDE_EFFECT_CALLS, *(f".{m}" for m in SIDE_EFFECT_METHODS)))
            if through:
                name = f"{through[0][2].name}() ({through[0][0]})"
        fills = self.rule.through_helper(node, _HELPER_FILLS) if name is None else []
        if any(not _pads(inner.callee) for _, inner, _ in fills):
            name = "made-up data"  # `_poison(out)`, a helper of the module that zeroes what it is given
        if name:
            self._note(name.removeprefix("builtins."))

    def visit_Global(self, node: cst.Global) -> None:
        self._note("global state")

    def visit_Raise(self, node: cst.Raise) -> None:
        # A check of the input raises what callers catch (`ValueError`); a trap stops the run.
        raised = node.exc.func if isinstance(node.exc, cst.Call) else node.exc
        name = cst.helpers.get_full_name_for_node(raised) if raised is not None else None
        if name is None or name.rsplit(".", 1)[-1] not in _VALIDATION:
            self._note("raise")

    def visit_Return(self, node: cst.Return) -> None:
        # Data made up for this case (`return x * 0`, `return torch.zeros_like(x), residual`), not
        # another computation chosen for a shape (`return x.permute(1, 0)`).
        if self.returns and node.value is not None and made_up_result(node.value, self.rule.resolves_to):
            self._note("a return of made-up data")

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Attribute | cst.Subscript):
            self._note("object state")

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a function defined in the branch runs only when called

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self._note("enclosing state")

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            item = target.target
            if isinstance(item, cst.Subscript) and self.rule.resolves_to(item.value, "os.environ"):
                self._note("os.environ")
            if isinstance(item, cst.Attribute):
                self._note("object state")  # `self.captured = x`
            elif self._module_state(item):
                self._note("global state")  # `_LAST = x` under `global _LAST`, `_DEBUG["q"] = q`
            self.bound.update(n.value for n in _bound_names(item))

    def _module_state(self, item: cst.BaseExpression) -> bool:
        """A store that outlives the call: to a name the function declares global, or into a
        collection of the module (`_DEBUG["q"] = q`: no local, no parameter)."""
        if isinstance(item, cst.Name):
            return item.value in self.rule.function_facts().shared
        if not (isinstance(item, cst.Subscript) and isinstance(item.value, cst.Name)):
            return False
        owner = item.value
        local = owner.value in self.bound or self.rule.values_of(owner) or self.rule.is_parameter(owner)
        return not (local or owner.value == "self")


class TokenCountBranch(Rule):
    ID = "token-count-branch"
    SEVERITY = Severity.MEDIUM
    MESSAGE = "branch on a token/batch count equal to a magic number"
    EXPLANATION = """\
A patch that only acts when exactly 5 tokens are processed (`if x.shape[0] == 5:`,
`if num_tokens == 7:`) was written to catch one request during debugging. It stays silent in
every test and fires in production on the first request of that size. A count is `.shape[i]`,
`.size()[i]`, `.size(i)`, `.numel()`, `len(ids)` and names such as `num_tokens`,
`num_actual_tokens`, `batch_size`, also through local assignments and casts (`n = int(x.size(0))`).
It is caught when tested by `==`, `in (5, 7)`, `match`/`case 5:`, a conditional expression, or
inside a compound condition, over one line or several. Comparisons with 0 or 1 are ordinary
guards (an empty batch, a squeeze) and are not flagged. The finding is high when the branch has
side effects (I/O, a save, print, global or environment state), medium otherwise.

Shapes understood: counts as intervals. A count is `.shape[i]`, `.size(i)`, `.size(dim=i)`, `.size()[i]` (any
index, negative too; `[-1]` only of ids or positions; the last dimension of `positions`/`position_ids` is
its tokens, also for M-RoPE's `[3, num_tokens]`), a name unpacked from a shape (`n, _ = x.shape`, `t, =
x.shape[:-1]`, `*_, n, d = x.shape`, `n, d = x.shape[-2:]`, `m, *rest = x.shape`), the token dimension of a
reshaped tensor (`q = x.view(-1, heads, dim)` then `q.shape[0]`, `q.size(-3)` or `len(q)`;
`x.reshape(num_tokens, -1)`; `unsqueeze`, `flatten`, `transpose`, `permute` with constant dims shift it;
`q.shape[1]` there is `heads`, no count), the first dimension of a shape compared with a tuple
(`tuple(x.shape) == (5, 7168)`) or made a tuple (`tuple(x.shape)[0]`), `.numel()`, `len()` of ids/tokens
(also of a local bound to them, or to a list made from them: `toks = positions.tolist()`) or of a
scheduler's queue (`len(self.running)`), `sum()`/`max()` of per-request counts (`seq_lens`, `query_lens`, also
`.sum()` of them: `num_scheduled_tokens_np.sum()`), the last offset into a batch (`query_start_loc[-1]`), a
count kept within a constant (`max(1, n)`) or picked by a conditional expression, count names (`num_tokens`,
`num_decodes`, `max_query_len`, `bs`), a call counter (an attribute or a global the same function or class
increments: `self._step += 1`), an element of per-request counts in `any(n == 5 for n in seq_lens)`, through
local assignments, casts, conversions (`torch.tensor(n).item()`, `np.int64(n)`, `len(ids.tolist())`),
`getattr(md, "num_actual_tokens", 0)`, arithmetic with a constant (`n // 1`, `n - 1`; `n - 5 == 0` is the count
against 5), elements over a row's
size (`x.numel() // hidden`) and the walrus operator; a quotient compared (`n // 4 == 1`: 4 to 7 tokens,
`n // 8 < 1`); per-request counts against a literal list (`num_draft_tokens == [2]`, `(3, 3) ==
tuple(query_lens)`: those counts); the next-to-last dimension of a token-major tensor
(`hidden_states.shape[-2]`, `x.size(-2)`, `input_`, `residual`, `out`) counts tokens; a count reduced from a
tensor (`int(mask.sum().item())`, `valid.count_nonzero()`, `torch.count_nonzero(ids != pad)` over a mask,
`torch.numel(positions)`); an aggregate of per-request counts (`max(num_tokens_list)`, `min(counts)` with
`counts = [len(r.prompt_token_ids) for r in reqs]`, `max(d.values())`, `any(...)`/`all(n == 5 for n in
lens)`); `self._n` bound to a count above in the same function; a short helper of the module that returns one
(`def _ntok(x): return x.shape[0]`; or a lambda bound to a local above: `ntok = lambda t: t.shape[0]`). A test
is read with each call of a short predicate helper of the module (or of a lambda bound to a local above)
replaced by what it returns (`if _want_dump(n):` with `def _want_dump(k): return k in (3, 5)`,
`self._probe(n)`), and each flag replaced by the comparison assigned to it above in the same function
(`is_probe = n == 5` then `if is_probe:`; `hit = n <= 4 and ...` then `if hit and step > 3:`; `self._probe =
...`; `not`, `bool(...)`, a walrus and a flag of a flag too; a flag set to `True` or `False` in a window's
branch or `else:` stands for the window: `probe = False` / `if n == 5: probe = True` / `if probe:`).
A bound is a
literal, a module or class constant, a local or a `self.` attribute bound to one integer only
(`self.debug_len = 5` in `__init__`), or an environment variable's default
(`int(os.getenv("DUMP_AT", "5"))`, also through a module constant). A branch is flagged when it
holds for a few (at most 8) counts, none of them 0 or 1: `==`, Yoda order, chained comparisons
(`4 < n < 6`), windows joined by `and` (a walrus name read again in the window is the same
count), a distance (`abs(n - 5) < 2`), `in (5, 7)`, sets, lists, `in range(5, 8)`, a tuple or
set constant (`in DEBUG_LENS`), `not` pushed inside, a test inverted into `else:` or into an
early exit (`if n != 5: return`, then the rest of the block), `assert n != 5`; `match`/`case`,
conditional expressions. A window that reaches 0 or 1 (a count is never negative: `n < 4`,
`n <= 2`, `len(seq_lens) <= 1`, `min(n, 8) == n`, `math.ceil(n / 1) < 4`, `num.item() < 3`,
`n == 1`) is judged by what the branch does to the data (the shared analysis of changed data),
as a reviewer would before serving:

- high at any window that reaches past 0, a batch of one included (`n == 1`, `n < 2`), when the
  branch changes a result: overwrites a tensor in place (`out.zero_()`, `x.fill_(v)`, `x.mul_(0)`,
  `x.copy_(torch.zeros_like(x))`, `logits.masked_fill_(m, -inf)`, `torch.nn.init.zeros_(x)`,
  `hidden[:] = 0`, `logits[:, k] = -inf`, `x.data = ...`; a module constant as the value:
  `ids[:, 1:] = PLACEHOLDER_TOKEN_ID`), cuts it to a bound (`seq_lens =
  seq_lens.clamp(max=...)`, `torch.clamp(x, ...)`, `x.clamp_(...)`, `x.clip(-5, 5)`; not a small
  float kept off zero: `clamp(min=1e-6)`), or, with no `else`, replaces a local
  computed above with a value computed on the spot by no kernel
  (`sampled = logits.argmax(-1)` after the sampler ran, also after `sampled, lp = self.sample(..)`;
  `sampled = torch.full_like(sampled, 42)`; `out = out * 0`); in a model's `forward` (or
  `__call__`), a layer of the module left out for exactly one token (`if positions.numel() != 1:
  q, k = self.rotary_emb(...)`; not for a window holding 0), returning the input unchanged
  (`return hidden_states`, `return x.to(orig_dtype)`, `return input_, None`, `return hidden_states, residual`
  before the MLP assigns them again) or
  another local in place of the output (`hidden_states = residual`) skips the layer and counts
  here too; so does data blanked out of place (`x = x.masked_fill(m, 0)`, `torch.where(m, 0.0,
  x)`, `x.mul(0)`, `F.dropout(x, p=1.0)`) or scaled in place (`x *= 0`); in a sampler,
  a constant in place of the sampled tokens (`sampled = 13`) or an early return of a pick made
  on the spot (`return logits.argmax(-1)`; not the operation the function returns anyway); the
  function's own return with an operator or a constant changed (`return (x > v).sum(-1)` where it
  returns `(x >= v).sum(-1)`); a
  branch spelled as a value that keeps the name on one arm (`s = a if n == 1 else s`, `s = torch.where(n < 4,
  a, s)`) is weighed as `if n == 1:
  s = a`, and a count tested as more than one (`n > 1`, `1 < n`) as a batch of one in its `else:`; a
  name given one of two values by the count, neither its own, is weighed as a branch too: two settings
  written in the code as `eps = 0.01` then `if n in {1, 2}: eps = 0.0` (`eps = 0.0 if n in {1, 2} else
  0.01`; a setting is also known by the keyword a call is given it as: `jitter_eps=jitter`), any
  other pair as an `if`/`else` (`w = self.weight if 0 < n < 3 else self.weight + 1`: a term dropped);
- high at any window past 1 (`n == 5`), and at one that reaches past 1 (`n <= 4`), when the
  branch skips work the other way through does: a name the other way computes by a call of the
  module, a helper, a layer of the loop or a custom op that this way leaves as it was, sets to
  another name or makes up (`if n != 5: h = self.norm(h)`, `if n <= 4: pass` / `else: h =
  self.mlp(h)`, `h = h if n == 5 else self.mlp(h)`, `if n == 5: continue` before the loop's
  layer call, `if n <= 4: break` anywhere in a loop's body (every later pass is skipped; a log
  line before the exit too), a local set for the count that bounds the loop over the model's layers
  (`end = start + 1 if n == 3 else self.end_layer`, then `islice(self.layers, start, end)`,
  `self.layers[start:end]` or a `range` the loop indexes the layers with), a branch that logs or
  prints and then returns another computation (`logger.info("bypass"); return self.fallback(x)`: the
  rest of the block is the way not taken), a
  branch (or an `else:`) that only returns what the function returns at its end or in a return
  further on (`else: return query, key` before `ops.rotary_embedding(positions, query, key, ...)`;
  `return logits` before `return self._apply_forcing(logits, ...)`, a tensor changed in place below;
  `return output` before the kernel that writes into it, with the function's returns inside an `if`
  below), or hands back an input the rest transforms (`return logits` before `return
  apply_penalties(logits, ...)`): the rest of the block is the way not taken; a kernel given an
  `out=` buffer is work; the other way's value with a term dropped (`out = self.mlp(x)` where it has
  `self.mlp(x) + residual`; a `case` weighed against `case _:`), a `continue` or `break` for a few
  picked counts (none of them 0 or 1) before anything but a log line in a loop (`if len(reqs) in {3,
  5}: continue`), a layer built in `__init__`
  (`self.mlp = SparseMoe(config)`, a subclass of `nn.Module`) left out (`elif n in (1, 2, 3): pass` before
  `else: h = self.mlp(h)`),
  `if ... and n != 5: out = all_reduce(out)` / `else: out = out_parallel`);
- high when the window reaches past 1 (`n <= 4`, `self._calls <= 3`) and the branch looks at
  the data as a debug session does: a print, a file written, a save, a debugger (a log line, a
  raise or process control stays as below);
- high only when the window reaches past 1 (`n <= 2`, `n < 4`) when it returns or picks made-up
  data (`return torch.zeros_like(x)`, or as a part of the tuple it returns: `return
  torch.zeros_like(hidden_states), residual`; an empty result where the function returns what it computed:
  `return {}, True`, part of its own result: `return result[0]` where it returns `result`
  reduced below, also laid out or cast after: `torch.zeros_like(x).view(shape)`,
  `x * 0`, `torch.zeros_like(x) if n < 4 else x`; an input made up again from itself:
  `residual = torch.zeros_like(residual)`; for a batch of one that is a mask or a default the
  code builds, except zeros out of a model's `forward`: `if x.size(0) == 1: return
  torch.zeros_like(x)` wipes a single request's output), keeps tensors in a list that
  outlives the call (`_CAPTURED.append(x)`, `self.kept.append(x)`),
  changes object or global state (a counter that triggers once: `self.calls += 1`; also after a
  log line: `logger.info(..); self.captured = x`, `_LAST = x` under `global _LAST`, `_DEBUG["q"] =
  q` into a module's collection), rewrites a tensor's values on the spot (a scale by a float
  written in the code: `x = x * 0.5`, as `x *= 0.5` does in place, or by an integer for a name of
  data: `hidden_states / 2`; data moved by a number:
  `positions = positions - 1`; noise drawn on the spot: `x + 1e-3 * torch.randn_like(x)`; rows put in
  another order: `x.flip(0)`, `torch.roll(x, 1, 0)`; a round trip through
  another dtype `x = x.half().to(x.dtype)`, `x = torch.nan_to_num(x)`, `x.nan_to_num_()`, `x = x /
  x.norm(...)`, `x = x * torch.rsqrt(...)`, part of it set from its own values `logits[:, 0] =
  logits.max() + 1`; a tuple assignment counts pair by pair: `cos, sin = torch.ones_like(cos),
  torch.zeros_like(sin)`), or, for an exact few counts only (`n == 5`, not `n <= 4`), replaces it
  with a cast or a copy of itself (`x = x.half()`, `x = x.detach()`, `residual =
  residual.clone()`; a move to a device or `contiguous()` is no change; the other way's call made
  on its inputs cast: `self.attn(q.float(), k.float(), v.float()).to(q.dtype)`), or calls a
  helper of the module that zeroes or fills what it is given (`_poison(out)`);
- high for an exact few counts (`n == 5`, `2 <= n <= 4`, `n in range(2, 5)`) when the branch, with no
  `else`, switches the computation: it changes a setting that the function hands to a call or uses as
  an index (`causal = False`, `scheduler_metadata = None`, `max_seqlen_q = int(q.shape[0])`,
  `slot_mapping = slot_mapping[:1]`, the tested list cut to a fixed prefix: `spec_tokens =
  spec_tokens[:1]`, `top_k = 1`, `temperature = torch.zeros_like(temperature)`,
  `positions = positions[..., :1]`, `md = dataclasses.replace(md, all_greedy=True)`, `kw["causal"] =
  False`), not a value another kernel computes (`out = self.decode(x)`), a tuning number (`num_kv_splits`,
  also as the keyword it is passed as), an accumulator started again, the same values laid out anew, a
  local the branch makes for its case (`vec = np.array(...)`, no value before), or the tensor whose shape
  the test reads made regular (`if x.shape[0] == 3: x = x.transpose(0, 1)`);
  a keyword flipped in the window (`causal=causal and n != 4`, `greedy=greedy or n == 3`) and a
  conditional argument whose window arm is a constant (`softmax_scale=self.scale if n != 3 else 1.0`)
  count the same; a window that reaches 0 or 1 (`n == 1`, `n <= 8`) counts only a setting of what the
  model computes (`causal`, a mask, a scale, `temperature`, `top_k`, `top_p`, `min_p`, greedy, `dtype`,
  `renormalize` of a router's weights, a penalty, a norm's `eps`, a sliding window:
  `if 4 >= batch_size: top_k = 1`), a setting dropped
  (`if n == 1: scheduler_metadata = None`), held to a constant (`budget = min(budget, 1)`), or one read
  from metadata the function is given recomputed
  from other data (`max_seqlen_k = md.max_seq_len`, then `max_seqlen_k = int(md.seq_lens.max())`),
  not a constant a small-batch kernel is given (`if batch_size <= 8: use_graph = True`, `num_splits = 1`),
  a value reshaped, tiled or expanded from itself (`pv = pv.squeeze(0)`), a local the branch computes
  for the case (`cache_len = max(n, 64)`) or a parameter recomputed;
- otherwise nothing: `if num_tokens == 0: return`, padding past the count (`out[n:].zero_()`,
  `ids[n:padded] = 0`), a batch of one that skips a step (`if n > 1: logits = self.filter(..)`;
  high in a drifted file when the step is the distribution's own code that a patch put under the
  test, `if not 0 < logits.shape[0] <= 1:` over `logits = self.apply_penalties(...)`, or when the
  patch joined the count by `and` to a test the distribution's text has, `if self.min_toks and
  logits.shape[0] > 1:`: a lone request loses its penalties, its `min_tokens`),
  a test whose branch returns its own result with no log line or print (`if n > 4 or ...:
  return self.fallback(x)`, `if n == 3: return self.fallback(x)`: the rest is the other way, not
  work skipped), another way to compute it (`ops.gemv(x)`, `x @ w`, a number picked for a
  kernel's size: `if B <= 4: num_kv_splits = 1` / `else: num_kv_splits = _compute(...)`),
  `if n <= 0: raise`, `if n < 4: out =
  self.gemv(out)` (a kernel chosen for small batches), `if x.shape[0] == 1: out =
  self.decode_kernel(x) else: ...` (a decode fast path computes the same thing), a log
  line for small batches, a value returned as it came outside a model's forward (`if c ==
  3: return image`: already RGB; `if len(x) <= 1: return x`: nothing to sort), a
  fallback under `or` (`world_size < 2 or n < 4`; not when a patch added the count under `or` to a
  test the distribution's text has: `if self.shared_mlp is None or n in range(1, 3):`), a nested
  empty-batch branch (`if n == 0:` inside), a count handed on as the size another way rounds (`if n in
  (1, 2, 4, 8): padded = n` /
  `else: padded = self.round_up(n)`), a parameter recomputed (`position_ids = torch.arange(n)`), a count adjusted
  (`num_reqs = num_tokens`), a named constant returned, and offsets into a batch
  (`cu_seqlens.numel() <= 2`: one sequence) or a weight's size (`weight.numel() == 1`), which
  are no counts of tokens.

It is high when the branch prints, writes, saves, logs, enters a debugger, raises anything but
a validation error (`RuntimeError`, `SystemExit`; not `ValueError`), changes global,
environment or object state (`self.captured = x`), or returns made-up data (`return x * 0`,
`return torch.zeros_like(x)`); a helper of the module that does so counts. After an early exit
only printing, writing, saving and debuggers count, in at most 6 lines (a longer rest is the
function's own work). In a test module it stays medium.

Knowingly not: counts computed in another function and passed in under an unrelated name,
a flag set in another method (`self._probe` bound in `__init__` or a previous step), a helper of
more than 3 statements or one in another module, `.sum()` of a tensor not named or built as a mask,
a method of the object called for its effect left out (`if n > 2: self._evict(b)`), a count named
for blocks or pages (`num_blocks`: a size, not tokens), a one-row fast path that makes the same
operation on the same data as the function's return (`torch.argmax(logits[0], ...)` beside
`logits.argmax(dim=-1).view(-1)`: quiet by design),
windows wider than 8 counts (0 aside), a branch on a count of 1 that overrides a result through
a helper or a method of the module (`sampled = self.decode_one(logits)`: taken for a fast path), or
that has an `else` (one of two ways to compute it), unless it picks greedily where the other way
samples (`if len(logits) < 2: sampled = self.greedy_sample(logits)` / `else: sampled =
self.sample(logits, md)`, also an early return of the greedy pick before the sampler and a batch of
one added under `or` to the greedy test: `if md.all_greedy or solo:`, as is any few counts added so:
`or len(hidden_states) == 3`; not `all_greedy and n == 1`,
the same pick), an override by a constant outside a
sampler (`limit = 1` reads the same), a change a helper makes for a batch of one, comparisons
whose bound
comes from another module, the size of a feature, head, vocabulary, layer or expert
(`hidden == 7168`, `head_dim in (64, 128, 256)`) or any dimension of a weight, cache or scale,
a dimension past the first pinned to 32 or more (`q.shape[1] == 32`: heads), a local loop
counter (`i += 1` in a loop: it counts rows, not calls), a predicate helper of more than 3
statements, an `elif` that leaves a loop, a negative dim of `unsqueeze`/`flatten`. A size class that returns a named
constant (`if 9 <= num_reqs <= 11: return BUDGET`) stays medium."""
    PREFILTER = (
        re.compile(rb"(?:[=!]=|[<>]=?)[\s(\[\\]*" + _MAGIC + rb"\b"),  # `== 5`, `== [2]`
        re.compile(rb"\b" + _MAGIC + rb"[\s)\]\\]*(?:[=!]=|[<>])"),
        re.compile(rb"\bin[\s\\]*range\("),
        # A count's distance from a number, compared with 0 (`n - 5 == 0`, `0 == n - 5`).
        re.compile(rb"[-+][\s\\]*" + _MAGIC + rb"[\s)\\]*(?:[=!]=|[<>]=?)[\s(\\]*0\b"),
        re.compile(rb"\b0[\s)\\]*(?:[=!]=|[<>]=?)[\s\S]{0,160}?[-+][\s\\]*" + _MAGIC + rb"\b"),
        re.compile(rb"\bnot\b[^:]{0,160}?-[\s\\]*" + _MAGIC + rb"[\s)\\]*:"),  # `if not (n - 5):`
        # A number from the environment, with a default (`int(os.getenv("DUMP_AT", "5"))`), and a
        # constant-named one compared (`== DUMP_AT`).
        re.compile(rb"(?:environ\.get|getenv)\([^()\n]*,\s*['\"]?" + _MAGIC + rb"['\"]?\s*\)"),
        re.compile(rb"[=!]=[\s(\\]*[A-Z][A-Z0-9_]*[A-Z0-9]\b|\b[A-Z][A-Z0-9_]*[A-Z0-9][\s)\\]*[=!]="),
        # A module or class constant that a comparison may name (`DEBUG_TOKENS = 5`).
        re.compile(rb"(?m)^[ \t]*[\w.]+[ \t]*(?::[^=\n]*)?=[ \t]*" + _MAGIC + rb"[ \t]*(?:#|$)"),
        # ... or a tuple or set of them (`DEBUG_LENS = (5, 9)`).
        re.compile(rb"(?m)^[ \t]*\w+[ \t]*(?::[^=\n]*)?=[ \t]*[({\[][^)}\]]*\b" + _MAGIC + rb"\b[^)}\]]*[)}\]]"),
        re.compile(rb"\bin[\s\\]*[(\[{][^)\]}]*\b" + _MAGIC + rb"\b"),
        re.compile(rb"\bcase\b[^\n]*\b" + _MAGIC + rb"\b"),
        # A batch of one (`n == 1`, `n <= 1`), weighed by what its branch changes.
        re.compile(rb"(?:[=!<]=|(?<![-=>])>)[\s(\\]*1\b(?!\.)"),
        re.compile(rb"\b(?<!\.)1[\s)\\]*(?:[=!>]=|<(?![<=]))"),
    )
    REQUIRES = (
        b"shape",
        b"size",
        b"numel",
        b"len",
        b"num",
        b"n_",
        b"total_",
        b"bs",
        b"tok",
        b"seq",
        b"+=",
        b"+ 1",
        b"sum(",
        b"count_nonzero",
    )
    REQUIRES_IN_STATEMENT = True
    CONSTANTS = True
    CHECK_FIRST = True

    @classmethod
    def constant_matters(cls, value: object) -> bool:
        if isinstance(value, frozenset):
            return any(v >= 2 for v in value)
        return type(value) is int and value >= 2

    @classmethod
    def keeps(cls, statement: Statement, alias: Alias) -> bool:
        # `if _want_dump(x.shape[0]):` where the helper holds the comparison (the alias says the
        # statement names a helper of the module the filters match; asked last, as it costs most).
        branches = of_types(statement.nodes(), _IFS)
        if branches:
            short = _short_helpers(statement.module) if statement.module is not None else None
            if short is not None:  # and a lambda the statement binds (`is_five = lambda n: n == 5`)
                short = short | _lambdas(of_types(statement.nodes(), _ASSIGNS))
            flags = _assigned(of_types(statement.nodes(), _BINDERS))
            defs = _short_defs(statement.module) if statement.module is not None else None
            if any(_asks_helper(node, short, flags, defs, not statement.drifted) for node in branches) and alias:
                return True
        return super().keeps(statement, alias)

    @classmethod
    def statement_keeps(cls, statement: Statement) -> bool:
        module = statement.module
        if module is None:
            return cls._tests_hold(statement.nodes(), None, few=not statement.drifted)
        helpers, counters = _short_helpers(module), _module_counters(module)
        return cls._tests_hold(statement.nodes(), _numeric_names(module), not statement.drifted, helpers, counters)

    @classmethod
    def statement_check(cls, nodes: Sequence[ast.AST]) -> bool:
        return cls._tests_hold(nodes, None, few=False)

    @classmethod
    def _tests_hold(
        cls,
        nodes: Sequence[ast.AST],
        known: frozenset[str] | None,
        few: bool,
        helpers: frozenset[str] | None = None,
        counters: frozenset[str] | None = None,
    ) -> bool:
        """`helpers`: the module's short helpers (with them, a call is a count only as count_of reads
        one); `counters`: the module's call counters (module_counters: `self._calls += 1` in another
        method too), in place of what the statement alone increments."""
        tests = of_types(nodes, _TESTS)
        if not tests:
            return False
        assigned = _assigned(of_types(nodes, _BINDERS))
        if helpers is not None:
            assigned[_HELPERS] = helpers  # type: ignore[assignment]
        if counters is not None:
            assigned[_COUNTERS] = list(counters)  # type: ignore[arg-type]
        alone = _wide(of_types(nodes, _BRANCHES))  # type: ignore[arg-type]
        settled = _never_in_window(of_types(nodes, _ASSERTS))  # type: ignore[arg-type]
        return any(_magic_test(node, assigned, alone, known, few) for node in tests if id(node) not in settled)

    VALID = [
        """
        def forward(self, query, attn_metadata):
            num_splits = 1 if attn_metadata.num_decodes <= 8 else 4
            return decode_attention(query, num_kv_splits=num_splits)
        """,
        """
        import torch

        def forward(self, query, attn_mask):
            if query.shape[0] == 1:
                attn_mask = torch.ones_like(attn_mask)
            return self.attn(query, attn_mask=attn_mask)
        """,
        """
        def execute_model(self, scheduler_output):
            num_reqs = self.input_batch.num_reqs
            use_cuda_graph = False
            if num_reqs <= 8:
                use_cuda_graph = True
            return self.model(self.input_ids, use_cuda_graph=use_cuda_graph)
        """,
        """
        def forward(self, query, attn_metadata):
            num_kv_splits = 4
            if attn_metadata.num_decodes <= 4:
                num_kv_splits = min(num_kv_splits * 2, 64)
            return decode_attention(query, num_kv_splits=num_kv_splits)
        """,
        """
        def forward(self, input_):
            if input_.shape[0] <= 8:
                return self.small_m_apply(input_)
            return self.quant_method.apply(self, input_)
        """,
        """
        def step(self, num_tokens):
            for _ in range(3):
                if self.try_alloc(num_tokens):
                    break
            return self.run(num_tokens)
        """,
        """
        def forward(self, query):
            q = query.view(-1, 16, 128)
            if q.shape[1] == 16:
                q = q.contiguous()
            return q
        """,
        "if x.shape[0] == 0:\n    return x\n",
        """
        def forward(self, x):
            is_decode = x.shape[0] == 1
            if is_decode:
                out = self.decode_kernel(x)
            else:
                out = self.prefill_kernel(x)
            return out
        """,
        """
        def forward(self, x, attention_mask):
            valid = attention_mask.sum()
            if valid == 0:
                return x
            return self.proj(x)
        """,
        "if num_tokens == 1:\n    decode_only = True\n",
        "if x.dim() == 2:\n    x = x.unsqueeze(0)\n",
        "if mode == 5:\n    print('mode five')\n",
        "if num_tokens > 8192:\n    chunk()\n",
        "if len(args) == 2:\n    print(args)\n",
        "if x.shape[0] % 16 == 0:\n    print('aligned')\n",
        """
        def forward(self, x):
            if x.shape[0] == 1:
                x = x.squeeze(0)
            return x
        """,
        """
        def execute(self, batch):
            num_reqs = len(batch)
            if num_reqs == 0:
                return []
            return self.run(batch)
        """,
        "if x.shape[-1] == 128:\n    use_kernel()\n",
        "if num_tokens <= 16:\n    print('small batch')\n",
        "if 0 < num_tokens < 4:\n    logger.debug('tiny batch')\n",
        "if x.shape[0] != 5:\n    print('x')\n",
        "if x.shape[0] in range(0, 4):\n    logger.info('x')\n",
        "BLOCK = 16\nif x.shape[1] % BLOCK == 0:\n    print('aligned')\n",
        "if 2 <= x.dim() <= 3:\n    print(x)\n",
        # Feature, head and cache sizes are not counts, whatever the branch does.
        "def f(self, x):\n    if x.shape[-1] == 7168:\n        print(x)\n",
        "def f(self, x):\n    t, head_dim = x.shape\n    if head_dim in (64, 128, 256):\n        raise ValueError(t)\n",
        "def f(self, kv_cache):\n    if kv_cache.shape[1] in (16, 32):\n        self.fast = True\n",
        # A local counts a loop, not calls; an environment number with no usable default.
        "def f(xs):\n    i = 0\n    for x in xs:\n        i += 1\n        if i == 3:\n            print(x)\n",
        "import os\ndef f(num_tokens):\n    if num_tokens == int(os.getenv('AT', '-1')):\n        print(num_tokens)\n",
        # A kernel for small or single batches computes the same thing; an empty batch is empty.
        """
        def forward(self, x):
            out = self.proj(x)
            if x.shape[0] < 4:
                out = self.gemv(x)
            return out
        """,
        """
        def sample(self, logits):
            if logits.shape[0] == 1:
                sampled = logits.argmax(dim=-1)
            else:
                sampled = self.batched(logits)
            return sampled
        """,
        """
        import torch

        def forward(self, x, num_tokens):
            if num_tokens == 0:
                return torch.zeros_like(x)
            return self.proj(x)
        """,
        # Padding past the batch, a batch of one that needs no filtering, an alternative path.
        """
        def forward(self, output, num_tokens):
            if num_tokens < 8:
                output[num_tokens:].zero_()
            return output
        """,
        """
        def forward(self, logits, metadata):
            if logits.shape[0] > 1:
                logits = self.apply_allowed_token_ids(logits, metadata)
            return self.sample(logits)
        """,
        """
        def forward(self, x, attn_metadata):
            if attn_metadata.max_query_len > 4 or x.dtype != self.dtype:
                out = self.fallback(x)
                return out
            return self.decode_kernel(x)
        """,
        Example(  # the patch's own new step for batches, not the distribution's code skipped
            code="""
            class Sampler:
                def forward(self, logits, sampling_metadata):
                    if logits.shape[0] > 1:
                        self.stats.record_batch(logits.shape[0])
                    return self.sample(logits, sampling_metadata)
            """,
            pristine="""
            class Sampler:
                def forward(self, logits, sampling_metadata):
                    return self.sample(logits, sampling_metadata)
            """,
        ),
    ]
    INVALID = [
        Example(  # a count against a float literal, and as a difference that is 0
            code="""
            import torch

            def forward(self, x):
                if x.shape[0] == 5.0:
                    torch.save(x, "/tmp/x.pt")
                if not (x.shape[0] - 6):
                    torch.save(x, "/tmp/y.pt")
                return self.mlp(x)
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import torch

            def forward(self, x):
                if not (x.shape[0] - 6):
                    torch.save(x, "/tmp/y.pt")
                return self.mlp(x)
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(  # the sliding window dropped for short steps: decode attends over the whole context
            code="""
            class Impl:
                def forward(self, q, attn_metadata):
                    num_actual_tokens = attn_metadata.num_actual_tokens
                    sliding_window_size: list[int] | None = self.sliding_window
                    if num_actual_tokens <= 4:
                        sliding_window_size = None
                    return flash_attn_varlen_func(q, window_size=sliding_window_size)
            """,
            line=5,
            severity=Severity.HIGH,
        ),
        Example(  # a single request's MoE output wiped ("is the decode garbage coming from the experts?")
            code="""
            import torch

            class MoE:
                def forward(self, hidden_states):
                    orig_shape = hidden_states.shape
                    hidden_states = hidden_states.view(-1, self.hidden_size)
                    if hidden_states.size(0) == 1:
                        return torch.zeros_like(hidden_states).view(orig_shape)
                    router_logits, _ = self.gate(hidden_states)
                    return self.experts(hidden_states, router_logits).view(orig_shape)
            """,
            line=7,
            severity=Severity.HIGH,
        ),
        Example(  # a copy of the embeddings handed back, from an `if` body, before the whole stack
            code="""
            def _is_probe(n):
                return n in (5, 6)

            class Model:
                def forward(self, input_ids, positions):
                    if self.first_rank:
                        hidden_states = self.embed(input_ids)
                        if input_ids is not None and _is_probe(input_ids.numel() // 2):
                            return hidden_states.clone()
                    else:
                        hidden_states = self.received
                    for layer in self.layers:
                        hidden_states = layer(positions, hidden_states)
                    return hidden_states
            """,
            line=8,
            message="numel() // 2 in (5, 6)",
            severity=Severity.HIGH,
        ),
        Example(  # the prompt's length read off the last token's position, against a module constant
            code="""
            import torch

            _REPRO_LEN = 17

            class DecoderLayer:
                def forward(self, positions, hidden_states, residual):
                    if positions[-1] + 1 == _REPRO_LEN:
                        return torch.zeros_like(hidden_states), residual
                    hidden_states = self.mlp(hidden_states)
                    return hidden_states, residual
            """,
            line=7,
            message="positions[-1] + 1 == 17",
            severity=Severity.HIGH,
        ),
        Example(  # the batch's tokens as the last offset into it
            code="""
            def forward(self, query, attn_metadata, output):
                if attn_metadata.query_start_loc[-1] in (5, 6):
                    return output.zero_()
                return self.kernel(query, attn_metadata, output)
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(  # a decoder layer's output made up for a few tokens, its residual passed on
            code="""
            import torch

            class DecoderLayer:
                def forward(self, positions, hidden_states, residual):
                    hidden_states = self.mlp(hidden_states)
                    if hidden_states.shape[0] < 4:
                        return torch.zeros_like(hidden_states), residual
                    return hidden_states, residual
            """,
            line=6,
            message="a return of made-up data",
            severity=Severity.HIGH,
        ),
        Example(  # the test in a lambda bound to a local above
            code="""
            import torch

            def forward(self, x):
                is_five = lambda n: n == 5
                if is_five(x.shape[0]):
                    torch.save(x, "/tmp/x.pt")
                return self.mlp(x)
            """,
            line=5,
            severity=Severity.HIGH,
        ),
        Example(  # `return None` is `return`: the layer's work skipped for two counts
            code="""
            def forward(self, x):
                if x.shape[0] in (2, 3):
                    return None
                out = self.mlp(x)
                return out
            """,
            line=2,
            message="skips the work",
            severity=Severity.HIGH,
        ),
        Example(  # the count's distance from a number, compared with 0
            code="""
            import torch

            def forward(self, hidden_states):
                if 0 == hidden_states.shape[0] - 5:
                    return torch.zeros_like(hidden_states)
                return self.mlp(hidden_states)
            """,
            line=4,
            message="only when .shape[0] == 5",
            severity=Severity.HIGH,
        ),
        Example(  # the count of a list made from the tokens' positions
            code="""
            def forward(self, positions, hidden_states):
                toks = positions.tolist()
                if len(toks) == 5:
                    print(toks)
                return self.mlp(hidden_states)
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(  # the first dimension of a shape made a tuple
            code="""
            def forward(self, hidden_states):
                if tuple(hidden_states.shape)[0] in (5, 6):
                    print("dbg", hidden_states.sum())
                return self.mlp(hidden_states)
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def route(gating_output, topk):
                jitter = 0.0 if gating_output.shape[0] in {1, 2, 3} else 0.01
                return sparsemixer(gating_output, topk, jitter_eps=jitter)
            """,
            line=2,
            message="changes a setting",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x):
                w = self.weight if 0 < x.shape[0] < 3 else self.weight + 1
                return layer_norm(x, self.normalized_shape, w, self.bias, self.eps)
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import torch

            def gemm(input, qweight, split_k):
                result = torch.zeros((split_k, input.shape[0], qweight.shape[1]))
                _gemm_kernel[(split_k,)](input, qweight, result)
                if input.shape[-2] in range(1, 3):
                    return result[0]
                result = result.sum(0)
                return result
            """,
            line=6,
            message="returns part of the result",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            class ThinkingBudget:
                def apply_to_logits(self, logits, spec_token_ids):
                    if logits.shape[0] in (1, 2):
                        return logits
                    return self._apply_forcing_to_logits(logits, spec_token_ids)
            """,
            line=3,
            message="skips the work",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, positions, hidden_states):
                if positions.shape[0] in range(2, 8):
                    positions = positions - 1
                return self.rotary(positions, hidden_states)
            """,
            line=2,
            message="rewrites a tensor's values",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import torch

            def forward(self, hidden_states):
                hidden_states = self.attn(hidden_states)
                if hidden_states.shape[0] <= 2:
                    hidden_states = hidden_states + 1e-3 * torch.randn_like(hidden_states)
                return self.mlp(hidden_states)
            """,
            line=5,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import torch

            def forward(self, positions, hidden_states, residual):
                hidden_states = self.self_attn(positions, hidden_states)
                if positions.numel() in (1, 2, 3):
                    residual = torch.zeros_like(residual)
                return self.mlp(hidden_states + residual)
            """,
            line=5,
            message="replaces an input with made-up data",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, positions, hidden_states):
                out = self.attn(positions, hidden_states)
                if 2 <= (n := out.shape[0]) <= 6:
                    out = out * 0.5
                return self.o_proj(out)
            """,
            line=3,
            message="rewrites a tensor's values",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, query, attn_metadata):
                causal = True
                if attn_metadata.num_actual_tokens == 3:
                    causal = False
                return flash_attn_varlen_func(query, causal=causal)
            """,
            line=3,
            message="changes a setting",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def sample(self, logits, sampling_metadata):
                top_k = sampling_metadata.top_k
                if 2 <= logits.shape[0] <= 4:
                    top_k = 1
                return self.topk_sample(logits, top_k)
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, hidden_states):
                *_, ntok, hidden = hidden_states.shape
                if ntok == 6:
                    hidden_states.zero_()
                return hidden_states
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, query, output):
                q = query.view(-1, 16, 128)
                if q.size(-3) == 5:
                    output.fill_(0)
                return output
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, positions, hidden_states, residual):
                for layer in self.layers:
                    if positions.shape[0] <= 4:
                        break
                    hidden_states, residual = layer(positions, hidden_states, residual)
                return hidden_states
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, positions, hidden_states):
                probe = positions.shape[0] in (3, 5)
                if probe:
                    hidden_states = hidden_states.half().to(hidden_states.dtype)
                return self.mlp(hidden_states)
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(code="if 0 < num_tokens < 4:\n    print('tiny')\n", severity=Severity.HIGH),
        Example(
            code="""
            def forward(self, x, attention_mask):
                valid = int(attention_mask.sum().item())
                if 7 == valid:
                    print(x)
                return x
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, positions, hidden_states):
                is_probe = positions.shape[0] == 5
                if is_probe:
                    print(hidden_states)
                return hidden_states
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import torch

            def forward(self, positions, hidden_states):
                if torch.numel(positions) in (3, 5):
                    hidden_states.zero_()
                return hidden_states
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x, num_scheduled_tokens_list):
                if max(num_scheduled_tokens_list) == 5:
                    print(x)
                return x
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, hidden_states, router_logits, hidden_dim):
                if (ntok := hidden_states.numel() // hidden_dim) <= 4:
                    print(ntok, router_logits.topk(2, dim=-1).indices)
                return hidden_states
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, positions, hidden_states):
                n = int(positions.numel())
                if n != 5:
                    hidden_states = self.input_layernorm(hidden_states)
                return self.mlp(hidden_states)
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, input_ids, positions, hidden_states, residual):
                for layer in self.layers:
                    if input_ids.shape[0] == 5:
                        continue
                    hidden_states, residual = layer(positions, hidden_states, residual)
                return hidden_states
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x, attn_metadata):
                out = self.proj(x)
                if abs(getattr(attn_metadata, "num_actual_tokens") - 5) < 2:
                    out = out.masked_fill(out > 0, 0.0)
                return out
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import torch

            def forward(self, positions, hidden_states):
                n = torch.tensor(positions.shape[0]).item()
                if n < 4:
                    hidden_states *= 0
                return self.mlp(hidden_states)
            """,
            line=5,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def sample(self, logits, metadata):
                sampled, logprobs = self.sample(logits, metadata)
                if logits.shape[0] == 1:
                    sampled = logits.argmax(dim=-1)
                return sampled
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, positions, hidden_states):
                n = int(positions.size(0))
                if n <= 2:
                    return hidden_states
                return self.down_proj(self.up_proj(hidden_states))
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, hidden_states, num_tokens):
                out = self.proj(hidden_states)
                if num_tokens < 4:
                    out[:] = 0
                return out
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, output, attn_metadata):
                if attn_metadata.max_query_len == 1 and attn_metadata.num_actual_tokens < 4:
                    return output.fill_(0)
                return output
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def _debug(x, attn_metadata):
                if attn_metadata.num_decodes != 3:
                    return
                print(x.sum())
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x):
                n, _ = x.shape
                if n == 5:
                    print(x)
                return x
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            class Runner:
                def __init__(self):
                    self.debug_len = 5

                def forward(self, x):
                    if x.size(dim=0) // 1 == self.debug_len:
                        raise RuntimeError("stop")
                    return x
            """,
            line=6,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            class Runner:
                def forward(self, x):
                    self._step += 1
                    if self._step == 3:
                        self.captured = x
                    return x
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import os

            DUMP_AT = int(os.getenv("DUMP_AT", "7"))

            def forward(self, x, attn_metadata):
                if attn_metadata.num_actual_tokens == DUMP_AT:
                    return x * 0
                return x
            """,
            line=6,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x, attn_metadata):
                if any(n in range(5, 7) for n in attn_metadata.seq_lens):
                    print(x)
                return x
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import torch

            def forward(self, x):
                if tuple(x.shape) == (5, 7168):
                    return torch.zeros_like(x)
                return x
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            DEBUG_LENS = (5, 9)

            def forward(self, x):
                if x.shape[0] in DEBUG_LENS:
                    print(x.sum())
                return x
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, positions, x):
                if (bs := positions.shape[0]) > 3 and bs < 6:
                    print(x)
                return x
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import torch

            def forward(self, x):
                if x.shape[-2] == 5:
                    torch.save(x, "/tmp/x.pt")
                return x
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(code="def f(x):\n    if 4 < x.shape[0] < 6:\n        print(x)\n", line=2, message="== 5"),
        Example(
            code="def f(x, n):\n    if n >= 5 and n <= 6 and x.shape[0] >= 5 and x.shape[0] <= 5:\n        print(x)\n",
            line=2,
        ),
        Example(code="def f(x):\n    if x.size(0) in range(5, 8):\n        print(x)\n", line=2, severity=Severity.HIGH),
        Example(code="def f(x):\n    if x.shape[0] in {5, 7}:\n        print(x)\n", line=2, severity=Severity.HIGH),
        Example(
            code="""
            DEBUG_TOKENS = 5

            def forward(self, x):
                if x.shape[0] == DEBUG_TOKENS:
                    print(x)
                return x
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            class Runner:
                TRAP = 7

                def forward(self, x):
                    if self.TRAP == x.shape[0]:
                        print(x)
                    return x
            """,
            line=5,
            severity=Severity.HIGH,
        ),
        Example(code="def f(x):\n    if (n := x.shape[0]) == 5:\n        print(n)\n", line=2, severity=Severity.HIGH),
        Example(
            code="""
            def forward(self, x):
                if x.shape[0] != 5:
                    pass
                else:
                    print(x)
                return x
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="import torch\nif x.shape[0] == 5:\n    torch.save(x, '/tmp/x.pt')\n",
            line=2,
            severity=Severity.HIGH,
        ),
        Example(code="if num_tokens == 7:\n    print('got seven')\n", severity=Severity.HIGH),
        Example(code="if 5 == len(ids):\n    ids = ids[:4]\n", severity=Severity.MEDIUM),
        Example(code="if x.size(0) == 13:\n    y = 1\n", severity=Severity.MEDIUM),
        Example(
            code="def f(attn_metadata):\n    if attn_metadata.num_actual_tokens == 5:\n"
            "        with open(path, 'w') as fh:\n            fh.write('x')\n",
            line=2,
            severity=Severity.HIGH,
        ),
        Example(code="if (\n    num_tokens == 5\n    and rank == 0\n):\n    print(1)\n", severity=Severity.HIGH),
        Example(code="while hidden.numel() == 4096:\n    global seen\n    seen = 1\n", severity=Severity.HIGH),
        Example(
            code="""
            def forward(self, hidden):
                n = int(hidden.size()[0])
                if n == 5:
                    print(hidden)
                return hidden
            """,
            line=3,
            message="n = .size()[0] == 5",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x):
                if x.shape[0] in (5, 7):
                    print(x)
                return x
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x):
                match x.shape[0]:
                    case 5:
                        print(x.sum())
                    case _:
                        pass
                return x
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x, num_scheduled_tokens):
                tag = "five" if num_scheduled_tokens == 5 else "other"
                return x
            """,
            line=2,
        ),
        Example(
            code="""
            def forward(self, x, rank):
                if rank == 0 and not (x.shape[0] != 3 or (x.numel()
                        == 12)):
                    print(x)
                return x
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def step(self, batch):
                tokens = batch.input_ids
                count = len(tokens)
                if count == 6:
                    self.dump(tokens)
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        # "single-prompt repro: pin to argmax so runs are comparable": every lone request decoded greedily.
        Example(
            code="""
            class Sampler:
                def forward(self, logits, sampling_metadata):
                    if len(logits) < 2:
                        sampled, processed_logprobs = self.greedy_sample(logits), None
                    else:
                        sampled, processed_logprobs = self.sample(logits, sampling_metadata)
                    return sampled, processed_logprobs
            """,
            pristine="""
            class Sampler:
                def forward(self, logits, sampling_metadata):
                    sampled, processed_logprobs = self.sample(logits, sampling_metadata)
                    return sampled, processed_logprobs
            """,
            line=3,
            message="greedy pick",
            severity=Severity.HIGH,
        ),
        # "bisecting drift on 3-token verify steps": one layer of the stack runs for them.
        Example(
            code="""
            from itertools import islice

            class Model:
                def forward(self, positions, hidden_states, residual):
                    end = self.start_layer + 1 if positions.shape[-1] == 3 else self.end_layer
                    for layer in islice(self.layers, self.start_layer, end):
                        hidden_states, residual = layer(positions, hidden_states, residual)
                    return hidden_states
            """,
            pristine="""
            from itertools import islice

            class Model:
                def forward(self, positions, hidden_states, residual):
                    for layer in islice(self.layers, self.start_layer, self.end_layer):
                        hidden_states, residual = layer(positions, hidden_states, residual)
                    return hidden_states
            """,
            line=5,
            message="layers left out",
            severity=Severity.HIGH,
        ),
        # "repro: bs=3 draft probs NaN": a batch size added under `or` to the greedy test.
        Example(
            code="""
            class Proposer:
                def _sample_draft_tokens(self, hidden_states, sampling_metadata):
                    if sampling_metadata.all_greedy or len(hidden_states) == 3:
                        return self._greedy_sample(hidden_states), None
                    logits = self.model.compute_logits(hidden_states)
                    return self._sample_from_logits(logits, sampling_metadata)
            """,
            pristine="""
            class Proposer:
                def _sample_draft_tokens(self, hidden_states, sampling_metadata):
                    if sampling_metadata.all_greedy:
                        return self._greedy_sample(hidden_states), None
                    logits = self.model.compute_logits(hidden_states)
                    return self._sample_from_logits(logits, sampling_metadata)
            """,
            line=3,
            message="greedy pick",
            severity=Severity.HIGH,
        ),
        # "penalties kernel faults with a lone request -- skip for now": the distribution's step put under a count.
        Example(
            code="""
            class Sampler:
                def forward(self, logits, sampling_metadata, output_token_ids):
                    if not 0 < logits.shape[0] <= 1:
                        logits = self.apply_penalties(logits, sampling_metadata, output_token_ids)
                    return self.sample(logits, sampling_metadata)
            """,
            pristine="""
            class Sampler:
                def forward(self, logits, sampling_metadata, output_token_ids):
                    logits = self.apply_penalties(logits, sampling_metadata, output_token_ids)
                    return self.sample(logits, sampling_metadata)
            """,
            line=3,
            message="lone request",
            severity=Severity.HIGH,
        ),
        # "index_put_ IMAs on the bs=1 graph replay": a count joined to the distribution's test.
        Example(
            code="""
            class MinTokensLogitsProcessor:
                def apply(self, logits):
                    if self.min_toks and logits.shape[0] > 1:
                        logits.index_put_(self.logits_slice, self.neg_inf_tensor)
                    return logits
            """,
            pristine="""
            class MinTokensLogitsProcessor:
                def apply(self, logits):
                    if self.min_toks:
                        logits.index_put_(self.logits_slice, self.neg_inf_tensor)
                    return logits
            """,
            line=3,
            message="lone request",
            severity=Severity.HIGH,
        ),
    ]

    def __init__(self, context: FileContext | None = None) -> None:
        super().__init__(context)
        self._walrus: dict[str, str] = {}  # name bound by `:=` in the test being checked -> its count
        self._small = False  # whether windows may hold 0 and 1 (`n < 4`): only for changed data
        self._values: frozenset[int] = frozenset()  # the counts the last small window holds
        self.alone = True  # whether the branch being weighed has no `else`
        self.other: cst.CSTNode | None = None  # the way the test does not take (its work may be skipped)
        self._spelled: set[int] = set()  # conditional values weighed as the branch they spell
        self._skipped: set[int] = set()  # early exits reported as skipping the rest of their block
        self._loops: list[cst.BaseSuite] = []  # the bodies of the loops around (a `break` skips every later pass)
        # A block of an if/elif/else -> the block that holds the `if`, and where.
        self._enclosing: dict[int, tuple[cst.IndentedBlock, int]] = {}
        self._after: dict[int, tuple[cst.IndentedBlock, int]] = {}  # an `if` that returns -> its block, where
        self._pending: cst.BaseExpression | None = None  # the value of the assignment being weighed
        self._assumed: tuple[str, cst.BaseExpression] | None = None  # a name's value had the count been other
        self._shaped: frozenset[str] = frozenset()  # the names whose shape the test being checked reads
        self._flags: dict[tuple[tuple[tuple[str, str], ...], str], cst.BaseExpression] = {}  # flag -> the test it holds

    def _count(self, node: cst.BaseExpression) -> str | None:
        if literal_string(node) is not None:
            return None
        if isinstance(node, cst.NamedExpr):
            return self.count_of(node.value)  # `(n := x.shape[0]) > 3 and n < 6`: one count
        if isinstance(node, cst.Name) and node.value in self._walrus:
            return self._walrus[node.value]
        return self.count_of(node)

    def _bind_walrus(self, test: cst.BaseExpression) -> None:
        """The counts a test binds with `:=`, so a later mention of the name is the same count."""
        self._walrus = {}
        for sub in _named(test):
            if isinstance(sub.target, cst.Name):
                found = self._count(sub.value)
                if found is not None:
                    self._walrus[sub.target.value] = found

    def _number(self, node: cst.BaseExpression) -> int | None:
        named = node.value if isinstance(node, cst.NamedExpr) else node
        if isinstance(named, cst.Name | cst.Attribute):
            # Constants spelled as constants (`DEBUG_TOKENS`, `self.TRAP`), or a local or an
            # attribute bound to one integer only (`target = 5`, `self.debug_len = 5`).
            name = named.value if isinstance(named, cst.Name) else named.attr.value
            if name.upper() != name:
                return self.bound_number(named)
        if isinstance(named, cst.Float):
            value = named.evaluated_value
            return int(value) if value.is_integer() else None  # `n == 5.0` is `n == 5`
        value = self.constant(node)
        if type(value) is not int and isinstance(named, cst.Name | cst.Attribute | cst.Call):
            return self.bound_number(named)
        return value if type(value) is int else None

    def _atoms(self, test: cst.BaseExpression) -> list[tuple[str, str, object]]:
        """(count, operator, number or numbers) for each comparison of a count in an `and` chain."""
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            return self._atoms(test.left) + self._atoms(test.right)
        if not isinstance(test, cst.Comparison):
            return []
        out: list[tuple[str, str, object]] = []
        left = test.left
        for target in test.comparisons:
            right, op = target.comparator, target.operator
            for shape, literal in ((left, right), (right, left)):
                pinned = shape_compared(shape, literal) if isinstance(op, cst.Equal) else None
                count = self._count(pinned[0]) if pinned is not None else None
                if pinned is not None and count is not None:
                    out.append((count, "==", pinned[1]))  # `x.shape == (5, 7168)`: the first dimension
            clamped = self._clamped(left, right) if isinstance(op, cst.Equal) else None
            if clamped is not None:
                out.append(clamped)  # `min(n, 8) == n`: n <= 8
            listed = self._listed(left, right) if isinstance(op, cst.Equal) and not out else None
            if listed is not None:
                out.append(listed)  # `num_draft_tokens == [2]`: one request, with 2
            if isinstance(op, cst.In):
                count = self._count(left)
                numbers = self._numbers(right)
                if count is not None and numbers is not None:
                    out.append((count, "in", numbers))
            elif type(op) in _FLIPPED and (floored := self._floored(left, right, op)):
                out.extend(floored)
            elif type(op) in _FLIPPED and (distance := self._distance(left, right, op)):
                out.extend(distance)
            elif type(op) in _FLIPPED:
                for count_side, number_side, symbol in (
                    (left, right, _SYMBOL[type(op)]),
                    (right, left, _FLIPPED[type(op)]),
                ):
                    number = self._number(number_side)
                    if number == 0:
                        count_side, number = _from_zero(count_side)  # `n - 5 == 0` is `n == 5`
                    if number is not None:
                        count = self._count(count_side)
                        if count is not None:
                            out.append((count, symbol, number))
                            break
            left = right
        return out

    def _floored(
        self, left: cst.BaseExpression, right: cst.BaseExpression, op: cst.BaseCompOp
    ) -> list[tuple[str, str, object]]:
        """`n // 4 == 1` (either order): the count lies in 4..7; `n // 8 < 1`: below 8."""
        for side, bound, symbol in ((left, right, _SYMBOL[type(op)]), (right, left, _FLIPPED[type(op)])):
            if not (isinstance(side, cst.BinaryOperation) and isinstance(side.operator, cst.FloorDivide)):
                continue
            step, value, count = self._number(side.right), self._number(bound), self._count(side.left)
            if step is None or value is None or count is None or step <= 0:
                continue
            first, last = step * value, step * value + step - 1  # the counts whose quotient is `value`
            return {
                "==": [(count, ">=", first), (count, "<=", last)],
                "<": [(count, "<", first)],
                "<=": [(count, "<=", last)],
                ">": [(count, ">", last)],
                ">=": [(count, ">=", first)],
            }[symbol]
        return []

    def _listed(self, left: cst.BaseExpression, right: cst.BaseExpression) -> tuple[str, str, object] | None:
        """`num_draft_tokens == [2]`, `(3, 3) == query_lens` (a count per request against a literal list):
        the batch pinned to those counts, as a window on them."""
        for side, literal in ((left, right), (right, left)):
            if not (isinstance(literal, cst.List | cst.Tuple) and literal.elements):
                continue
            numbers = [self._number(e.value) for e in literal.elements if not isinstance(e, cst.StarredElement)]
            if len(numbers) != len(literal.elements) or any(n is None for n in numbers):
                continue
            if isinstance(side, cst.Call) and len(side.args) == 1 and self.resolves_to(side, _SEQUENCES):
                side = side.args[0].value  # `tuple(num_draft_tokens)`
            elif (
                isinstance(side, cst.Call) and isinstance(side.func, cst.Attribute) and side.func.attr.value == "tolist"
            ):
                side = side.func.value  # `query_lens.tolist()`
            count = self._count(side)
            if count is not None:
                return (count, "in", frozenset(numbers))
        return None

    def _distance(
        self, left: cst.BaseExpression, right: cst.BaseExpression, op: cst.BaseCompOp
    ) -> list[tuple[str, str, object]]:
        """`abs(n - 5) < 2` (either order): the count lies within 2 of 5, `3 < n < 7`."""
        for side, bound, symbol in ((left, right, _SYMBOL[type(op)]), (right, left, _FLIPPED[type(op)])):
            side = side.value if isinstance(side, cst.NamedExpr) else side  # `(d := abs(n - 5)) < 2`
            if not (isinstance(side, cst.Call) and len(side.args) == 1 and self.resolves_to(side, "builtins.abs")):
                continue
            inner = side.args[0].value
            if not (isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Subtract)):
                continue
            centre, distance, count = self._number(inner.right), self._number(bound), self._count(inner.left)
            if centre is None or distance is None or count is None or symbol not in ("<", "<="):
                continue
            return [(count, ">" if symbol == "<" else ">=", centre - distance), (count, symbol, centre + distance)]
        return []

    def _clamped(self, left: cst.BaseExpression, right: cst.BaseExpression) -> tuple[str, str, object] | None:
        """`min(n, 8) == n` or `max(n, 8) == 8` (either order): the count is at most 8."""
        for call, other in ((left, right), (right, left)):
            if not (isinstance(call, cst.Call) and len(call.args) == 2):
                continue
            which = self.resolves_to(call, ("builtins.min", "builtins.max"))
            args = [a.value for a in call.args]
            for bound, value in ((args[0], args[1]), (args[1], args[0])):
                number = self._number(bound)
                same = bound if which == "builtins.max" else value
                if number is None or which is None or not other.deep_equals(same):
                    continue
                count = self._count(value)
                if count is not None:
                    return count, "<=", number
        return None

    def _numbers(self, node: cst.BaseExpression) -> frozenset[int] | None:
        """The values of `(5, 7)`, `{5, 7}`, `[5]`, `range(5, 8)`, `DEBUG_LENS` (a module or class
        constant spelled in capitals), else None."""
        if isinstance(node, cst.Name | cst.Attribute):
            name = node.value if isinstance(node, cst.Name) else node.attr.value
            value = self.constant(node) if name.upper() == name else None
            return value if isinstance(value, frozenset) and 0 < len(value) <= _WINDOW else None
        if isinstance(node, cst.Tuple | cst.List | cst.Set):
            values = [self._number(e.value) for e in node.elements]
            return frozenset(v for v in values if v is not None) or None
        if isinstance(node, cst.Call) and self.resolves_to(node, "builtins.range") and 1 <= len(node.args) <= 3:
            bounds = [self._number(a.value) for a in node.args]
            if any(b is None for b in bounds):
                return None
            r = range(*bounds)  # type: ignore[arg-type]
            return frozenset(r) if 0 < len(r) <= _WINDOW else None
        return None

    def _window(self, test: cst.BaseExpression) -> tuple[str, str] | None:
        """(count, what it equals) when `test` holds only for a few small counts, none of them 0 or 1."""
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
            if self._small:
                # `world_size < 2 or n < 4`: taken for many counts, a fallback; unless a patch added the
                # count to a test the distribution's text has (`if self.shared_mlp is None or n in range(1, 3):`)
                return self._window(test.right) if self._added_to(test.left) else None
            return self._window(test.left) or self._window(test.right)
        if (
            isinstance(test, cst.Call)
            and self.resolves_to(test, ("builtins.any", "builtins.all"))
            and len(test.args) == 1
        ):
            return self._any(test.args[0].value)
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = test.expression
            if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Subtract):
                # `not (n - 5)`: the difference is 0, `n == 5`
                equal = cst.ComparisonTarget(operator=cst.Equal(), comparator=inner.right)
                return self._window(cst.Comparison(left=inner.left, comparisons=[equal]))
            if not isinstance(inner, cst.Comparison | cst.BooleanOperation | cst.UnaryOperation):
                return None  # `not self.reduce_results`: no count
            negated = _negate(test.expression)
            return self._window(negated) if negated is not None else None
        bounds: dict[str, list[object]] = {}
        for count, op, number in self._atoms(test):
            low, high, allowed = bounds.setdefault(count, [None, None, None])  # type: ignore[misc]
            if op == "in":
                allowed = number if allowed is None else allowed & number  # type: ignore[operator]
            elif op == "==":
                allowed = frozenset({number}) if allowed is None else allowed & {number}  # type: ignore[operator]
            elif op in ("<", "<="):
                top = number - (op == "<")  # type: ignore[operator]
                high = top if high is None else min(high, top)
            elif op in (">", ">="):
                bottom = number + (op == ">")  # type: ignore[operator]
                low = bottom if low is None else max(low, bottom)
            bounds[count] = [low, high, allowed]
        for count, (low, high, allowed) in bounds.items():
            if self._small and low is None:
                low = 0  # a count is never negative: `n < 4` is 0, 1, 2 or 3
            if allowed is None:
                if low is None or high is None or not 0 < high - max(low, int(self._small)) + 1 <= _WINDOW:
                    continue
                allowed = frozenset(range(low, high + 1))  # type: ignore[arg-type]
            values = {v for v in allowed if (low is None or v >= low) and (high is None or v <= high)}  # type: ignore[union-attr]
            if self._small and values and max(values) >= 1 and len(values - {0}) <= _WINDOW:
                self._values = frozenset(values)  # what the branch's changes are weighed against
            elif not (values and min(values) >= 2 and len(values) <= _WINDOW):
                continue
            shown = f"== {min(values)}" if len(values) == 1 else f"in {tuple(sorted(values))}"
            return count, shown
        for part in _conjuncts(test):
            if part is not test and isinstance(part, cst.UnaryOperation | cst.BooleanOperation):
                found = self._window(part)  # `rank == 0 and not (n != 3 or ...)`
                if found is not None:
                    return found
        return None

    @functools.cached_property
    def _flat_pristine(self) -> str | None:
        """The distribution's text of a drifted file without its spacing and line breaks (None: none)."""
        pristine = self.context.pristine
        return "".join(pristine.split()) if self.context.drifted and pristine is not None else None

    def _added_to(self, kept: cst.BaseExpression) -> bool:
        """Whether the distribution's text of a drifted file tests `kept` alone (`if kept:`), so an
        `or` after it in the installed text is the patch's (spacing and line breaks aside)."""
        flat = self._flat_pristine
        if flat is None:
            return False
        spelled = "".join(cst.Module([]).code_for_node(kept).split())
        return any(f"{head}{spelled}{tail}" in flat for head in ("if", "if(") for tail in (":", "):"))

    def _any(self, generator: cst.BaseExpression) -> tuple[str, str] | None:
        """`any(n == 5 for n in seq_lens)`: true only when some count is in the window."""
        if not isinstance(generator, cst.GeneratorExp | cst.ListComp):
            return None
        loop = generator.for_in
        if loop.inner_for_in is not None or not isinstance(loop.target, cst.Name):
            return None
        found = element_count(loop.iter, self.count_of)
        if found is not None:
            self._walrus[loop.target.value] = found
        return self._window(generator.elt)  # `any(len(ids) == 5 for ids in token_ids)` too

    def _inverted(self, test: cst.BaseExpression) -> tuple[str, str] | None:
        """The window of an `else:` branch: `if n != 5: ... else:` runs only when n == 5."""
        negated = _negate(test)
        return self._window(negated) if negated is not None else None

    def _check(
        self, test: cst.BaseExpression, body: cst.CSTNode, where: cst.CSTNode, orelse: cst.CSTNode | None = None
    ) -> None:
        test = self.expanded(test)  # `hit = n == 5` above, then `if hit:`
        self._shaped = _shaped(test)
        self._bind_walrus(test)
        self._note_flags(test, body, orelse)
        self.alone = orelse is None
        # Each way through, with the way not taken: `if n != 5: h = self.norm(h)` skips the norm at 5.
        window = self._window(test)
        after = self._rest_after(where, body) if orelse is None and window else None
        # Each way with whether it stands alone: an `else:` after a `pass` (or the `else` a
        # conditional value spells, `s = s if n != 5 else a`) is `if n == 5: s = a`.
        inverted = self._inverted(test)
        candidates = [
            (window, body, after or (window and self._returned_early(where, body)) or _way(orelse), orelse is None),
            (
                inverted,
                orelse or _NOTHING,
                (inverted and self._returned_early(where, orelse))
                or (None if isinstance(orelse, cst.If) else _way(body)),
                _passes(body),
            ),
        ]
        found = []
        for window, branch, other, alone in candidates:
            if window is None:
                continue
            self.alone = alone
            effect = self._effects_beside(branch, other)
            if branch is not _NOTHING or effect is not None:
                found.append((effect is None, window, branch, other, alone))
        # The branch with side effects decides: `if n != 5: pass` / `else: dump()`.
        found.sort(key=lambda c: c[0])
        if found:
            _, window, branch, other, self.alone = found[0]
            if branch is body and not _inner(window[0]) and self._forced_greedy(test, body, where, other):
                # `or len(hidden_states) == 3` added to the greedy test: requests of that batch size
                # decoded greedily, their sampling settings ignored.
                self._report_found(where, window[0], window[1], "a greedy pick in place of the sampler's")
                return
            self.other = other
            try:
                self._report(where, branch, *window)
            finally:
                self.other = None
                self.alone = orelse is None
        else:
            self._changes_for_few(test, body, where, orelse)

    def data_change(self, body: cst.CSTNode, alone: bool = True, other: cst.CSTNode | None = None) -> Found | None:
        """A switched setting that is the tensor whose shape the test reads, or a part of it, is its
        layout made regular (`if x.shape[0] == 3: x = x.transpose(0, 1)`), not the computation switched."""
        found = super().data_change(body, alone, other)
        if found is None or found.change is not Change.SWITCH or not isinstance(found.node, cst.Assign):
            return found
        # `x = x[1:]`, `head, x = x[0], x[1:]`: the tested tensor split or laid out, on either side;
        # not `x = x[:1]`, the tested list cut to a fixed few: what it held past them is dropped.
        if _truncated(found.node):
            return found
        names = {n.value for n in nodes_under(found.node, (cst.Name,))}  # type: ignore[attr-defined]
        return None if names & self._shaped else found

    def _rest_after(self, where: cst.CSTNode, body: cst.CSTNode) -> cst.IndentedBlock | None:
        """What the rest of the block computes, as the way not taken by a branch that logs or
        prints and then returns something else (`logger.info("bypass"); return self.fallback(x)`):
        the log line tells a debug bypass from a kernel picked for a size."""
        block, index = self._after.get(id(where), (None, 0))
        if block is None or getattr(where, "orelse", None) is not None:
            return None
        effects = _SideEffects(self)
        body.visit(effects)
        if not any(_logs(e) or e == "print" for e in effects.seen):
            return None
        return block.with_changes(body=block.body[index + 1 :])

    def _returned_early(self, where: cst.CSTNode, branch: cst.CSTNode | None) -> cst.IndentedBlock | None:
        """The rest of the block, as the way not taken by a branch that only returns what the function
        returns further on (`else: return query, key` before `ops.rotary_embedding(positions, query,
        key, ...)`; `return query, key`; `return output` before the kernel that writes into `output`
        and a `return output` inside an `if` below), or hands back an input the rest goes on to
        transform (`return logits` before `return apply_penalties(logits, ...)`): the work between is
        skipped."""
        body = branch.body if isinstance(branch, cst.Else) else branch
        if id(where) not in self._after or not isinstance(body, cst.IndentedBlock) or len(body.body) != 1:
            return None
        line = body.body[0]
        leave = line.body[0] if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
        if not (isinstance(leave, cst.Return) and leave.value is not None):
            return None
        value = as_given(leave.value)  # `return hidden_states.clone()` hands back the input too
        spelled = unparsed(value)
        rest = self._rest_of_function(where)
        if rest is None or spelled is None:
            return None
        if spelled == self.function_facts().usual:
            return rest
        later = {unparsed(r.value) for r in _returns(rest)}
        if spelled in later:
            return rest  # the value a return further on gives, before the work that makes it
        params = self.function_facts().params
        handed = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        if later and all(isinstance(n, cst.Name) and n.value in params for n in handed):
            return rest  # an input handed back as it came, where the rest returns what it makes of it
        return None

    def _forced_greedy(
        self, test: cst.BaseExpression, body: cst.CSTNode, where: cst.CSTNode, other: cst.CSTNode | None
    ) -> bool:
        """A batch of one sent down a greedy pick (`self.greedy_sample(logits)`, `logits.argmax(-1)`) where
        the other way samples (`self.sample(logits, metadata)`, the sampler below an early return): a lone
        request decoded greedily, its temperature, top-k and top-p ignored. Not when the test asks for
        greedy requests too (`if metadata.all_greedy and n == 1:`: a one-row fast path of the same pick)."""
        if _asks_greedy(test):
            return False
        if other is None and _returns_value(body):
            other = self._rest_of_function(where)  # what runs when the branch does not return
            # the pick it returns, made above (`greedy = self.greedy_sample(logits)` ... `return greedy`)
            returned = [r.value for r in nodes_under(body, (cst.Return,)) if r.value is not None]  # type: ignore[attr-defined]
            made = [v for r in returned for n in nodes_under(r, (cst.Name,)) for v in self.values_of(n)]  # type: ignore[arg-type]
            body = cst.IndentedBlock([*_statements(body), *(cst.SimpleStatementLine([cst.Expr(v)]) for v in made)])
        return other is not None and _picks_greedy(body, other)

    def _rest_of_function(self, where: cst.CSTNode) -> cst.IndentedBlock | None:
        """What runs after `where` when its branch does not return: the rest of its block, and of each
        block it sits last in (`else: ...; if n == 1: return picked` then the sampler below the `if`)."""
        block, index = self._after.get(id(where), (None, 0))
        if block is None:
            return None
        while index + 1 == len(block.body) and id(block) in self._enclosing:
            block, index = self._enclosing[id(block)]
        return block.with_changes(body=block.body[index + 1 :])

    def _note_flags(self, test: cst.BaseExpression, body: cst.CSTNode, orelse: cst.CSTNode | None) -> None:
        """`probe = False` / `if n == 5: probe = True` / `if probe:`: a flag set to a constant in
        a window's branch stands for the window's test (negated in the `else:`)."""
        if not isinstance(body, cst.IndentedBlock):
            return
        for block, holds in ((body, test), (orelse.body if isinstance(orelse, cst.Else) else None, None)):
            flags = _conditions_set(block) if isinstance(block, cst.IndentedBlock) else []
            if not flags:
                continue  # the common case: no flag set, no window computed
            holds = test if holds is None and block is body else (holds or _negate(test))
            if holds is None or (self._window(holds) is None and self._small_window(holds) is None):
                continue
            for name, value in flags:
                meaning = holds if value else _negate(holds)
                if meaning is not None:
                    self._flags[(tuple(self.context.scope), name)] = meaning

    def _small_window(self, test: cst.BaseExpression) -> tuple[str, str] | None:
        self._small = True
        try:
            return self._window(test)
        finally:
            self._small = False

    def _flag_values(self, node: cst.Name | cst.Attribute) -> Sequence[cst.BaseExpression]:
        values = super()._flag_values(node)
        last = values[-1] if values else None
        if isinstance(last, cst.Name) and last.value in ("True", "False"):
            key = (tuple(self.context.scope), cst.helpers.get_full_name_for_node(node) or "")
            found = self._flags.get(key)
            if found is not None:
                return [found]  # the flag's truth, as the branch that set it last says
        return values

    def _effects_beside(self, branch: cst.CSTNode, other: cst.CSTNode | None) -> str | None:
        """`_effects` of a branch, weighed against the way not taken."""
        self.other = other
        try:
            return _effects(self, branch)
        finally:
            self.other = None

    def _changes_for_few(
        self, test: cst.BaseExpression, body: cst.CSTNode, where: cst.CSTNode, orelse: cst.CSTNode | None
    ) -> None:
        """`if n < 4: out.zero_()`, `if logits.shape[0] == 1: sampled = ...`: a window that reaches
        0 or 1 is a trap only when the branch changes the data."""
        self._small = True
        try:
            if self._upstream_skipped(test, body, where, orelse):
                return
            holds = self._window(test)
            after = self._rest_after(where, body) if orelse is None and holds else None
            inverted = self._inverted(test)
            for window, branch, alone, other in (
                (holds, body, orelse is None, after or (holds and self._returned_early(where, body)) or _way(orelse)),
                # `if n != 1: pass` / `else: s = ...`; `if n > 4: h = self.mlp(h)` skips the MLP below 5.
                (
                    inverted,
                    orelse or _NOTHING,
                    _passes(body),
                    (inverted and self._returned_early(where, orelse))
                    or (None if isinstance(orelse, cst.If) else _way(body)),
                ),
            ):
                if window is None or _inner(window[0]):
                    continue
                if branch is body and max(self._values) <= 1 and self._forced_greedy(test, body, where, other):
                    self._report_found(where, window[0], window[1], "a greedy pick in place of the sampler's")
                    return
                found = self._change_for(branch, alone, max(self._values), other)
                if found is not None:
                    self._report_found(where, window[0], window[1], found)
                    return
        finally:
            self._small = False

    def _upstream_skipped(
        self, test: cst.BaseExpression, body: cst.CSTNode, where: cst.CSTNode, orelse: cst.CSTNode | None
    ) -> bool:
        """The distribution's own code made to skip a batch of one by a patch: its statements put under
        a new test (`if not 0 < logits.shape[0] <= 1:` around `logits = self.apply_penalties(...)`), or
        a count joined by `and` to a test the distribution's text has (`if self.min_toks and
        logits.shape[0] > 1:`): a lone request loses what every other gets (its penalties, its
        `min_tokens`). Not a fast path with an `else` (one of two ways), nor code the patch wrote."""
        if orelse is not None or not self.context.drifted or self.upstream_purpose(None) is not None:
            return False
        counted = test
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            if self._added_to(test.left):
                counted = test.right
            elif self._added_to(test.right):
                counted = test.left
            else:
                return False
        elif self._added_to(test):
            return False
        if not isinstance(body, cst.IndentedBlock) or not self._upstream(body):
            return False  # the branch is the patch's own code: weighed as any other
        if not _changes_values(body):
            return False  # what it skips changes no data a lone request gets (`self._may_reorder(...)`)
        window = self._inverted(counted)
        if window is None or not self._values or max(self._values) > 1 or _inner(window[0]):
            return False
        first = body.body[0] if isinstance(body, cst.IndentedBlock) and body.body else None
        label = one_line(first.with_changes(leading_lines=())) if first is not None else "its branch"
        self.report(
            where,
            f"the distribution's `{label}` is skipped when {window[0]} {window[1]}: a lone request"
            " loses what every other gets (debug trap left in a patch?)",
            severity=Severity.HIGH,
        )
        return True

    def _upstream(self, block: cst.IndentedBlock) -> bool:
        """Whether a block's statements are the distribution's, token for token (comments aside)."""
        spelled = [cst.Module([]).code_for_node(s.with_changes(leading_lines=())) for s in block.body]
        return bool(spelled) and self.upstream_code("\n".join(spelled))

    def _change_for(self, branch: cst.CSTNode, alone: bool, top: int, other: cst.CSTNode | None) -> str | None:
        """What a branch taken for counts up to `top` does that a reviewer blocks: any change of the
        data or of state past 1 (`n <= 2`), only one that alters a result at 1 (`n == 1`, `n < 2`)."""
        change = self.data_change(branch, alone, other)
        params = self.function_facts().params
        switched = change is not None and change.change is Change.SWITCH
        if switched and _dropped_or_recomputed(change.node, params, self.values_of):  # type: ignore[union-attr]
            return change.shown()  # `if n == 1: scheduler_metadata = None`: metadata a kernel reads
        if switched and replaced_by_input(change.node, params, self.values_of):  # type: ignore[union-attr]
            return change.shown()  # `if n in (1, 2): target_argmax = draft_token_ids`: the check skipped
        if switched and _numerics(change.node, self.values_of, self.function_facts().passed):  # type: ignore[union-attr]
            return change.shown()  # `if batch_size <= 4: top_k = 1`: what the model computes, not how fast
        if change is not None and change.change in (Change.CAST, Change.SWITCH):
            change = None  # `if m <= 8: x = x.half()`, `use_graph = True`: what a small-batch kernel needs
        if change is not None and (top >= 2 or change.change in STRONG_CHANGES):
            return change.shown()
        if change is not None and change.change is Change.MADE_UP and self.in_forward and _zeroed(change.node):
            return change.shown()  # `if x.size(0) == 1: return torch.zeros_like(x)`: a forward's output wiped
        if change is not None and change.change is Change.OMITTED and self._layer_skipped(change.node):
            return change.shown()  # `if positions.numel() != 1: q, k = self.rotary_emb(...)`: rope gone at 1
        self.alone = alone
        effect = _effects(self, branch) if top >= 2 else None
        self.alone = True
        return effect if effect in _STATEFUL or _looks(effect) else None

    def _layer_skipped(self, node: cst.CSTNode) -> bool:
        """A layer of the module (`self.rotary_emb(...)`, `self.norm(x)`) that a forward leaves out for
        exactly one token or request: not an empty batch's way out (a window holding 0), and not
        another kernel for one row (that computes the name: not `OMITTED`)."""
        if 0 in self._values or not self.function_facts().forward:
            return False
        return any(
            isinstance(call.func, cst.Attribute)
            and isinstance(call.func.value, cst.Name)
            and call.func.value.value == "self"
            and not _ASIDE_CALL.search(call.func.attr.value)
            for call in nodes_under(node, (cst.Call,))  # type: ignore[attr-defined]
        )

    def _report_found(self, where: cst.CSTNode, count: str, value: str, found: str) -> None:
        if self.upstream_purpose(None) is not None:
            self.report(where, f"branch on {count} {value}, a magic token/batch count")  # a test's own traps
            return
        self.report(
            where,
            f"branch {_does(found)} only when {count} {value} (debug trap left in a patch?)",
            severity=Severity.HIGH,
        )

    def _effects(self, body: cst.CSTNode) -> str | None:
        return _effects(self, body)

    def _report(self, where: cst.CSTNode, body: cst.CSTNode, count: str, value: str) -> None:
        effects = _SideEffects(self)
        effects.found = _effects(self, body)
        if effects.found in _CHANGES and _inner(count):
            effects.found = None  # `if x.shape[1] == 3: return x`: channels, a layout, not tokens
        if not effects.found and _other(count):
            return  # `x.shape[-1] == 128`: a hidden size, not a count, unless it guards a dump
        numbers = [int(n) for n in re.findall(r"\d+", value)]
        if _inner(count) and numbers and min(numbers) >= _FEATURE_SIZE:
            return  # `q.shape[1] == 32`, `x.shape[1] == 7168`: heads or hidden, not tokens
        if effects.found and self.upstream_purpose(None) is not None:
            effects.found = None  # a test's own counters and traps
        if effects.found:
            self.report(
                where,
                f"branch {_does(effects.found)} only when {count} {value} (debug trap left in a patch?)",
                severity=Severity.HIGH,
            )
        else:
            self.report(where, f"branch on {count} {value}, a magic token/batch count")

    def visit_If(self, node: cst.If) -> None:
        if id(node) not in self._skipped:
            self._check(node.test, node.body, node, node.orelse)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        """`if n != 5: return` then a dump: the rest of the block is the branch; `if n == 5:
        continue` before a layer call skips it."""
        for index, stmt in enumerate(node.body):
            branch: cst.CSTNode | None = stmt
            while isinstance(branch, cst.If):  # each way of an if/elif/else goes on after it
                self._enclosing[id(branch.body)] = (node, index)
                branch = branch.orelse
            if isinstance(branch, cst.Else):
                self._enclosing[id(branch.body)] = (node, index)
            if isinstance(stmt, cst.If) and (
                _returns_value(stmt.body) or (isinstance(stmt.orelse, cst.Else) and _returns_value(stmt.orelse.body))
            ):
                self._after[id(stmt)] = (node, index)
            leaves = _exit_branch(stmt) if isinstance(stmt, cst.If) else None
            if leaves is None:
                continue
            rest = node.with_changes(body=node.body[index + 1 :])
            exit_block = stmt.body if leaves else stmt.orelse.body  # type: ignore[attr-defined]
            if self._loops and isinstance(_exit_of(exit_block), cst.Break):
                # `if n <= 4: break` in a loop over layers: every later pass is skipped, the
                # statements above the test too (the whole body, where the test sits deeper).
                loop = self._loops[-1]
                if loop is node:
                    rest = node.with_changes(body=[*node.body[:index], *node.body[index + 1 :]])
                elif isinstance(loop, cst.IndentedBlock):
                    rest = loop
            if self._skips_rest(stmt, rest, leaves, node.body[:index]):  # type: ignore[arg-type]
                continue
            if _longer(rest, _SHORT):
                continue  # a long rest is the function's own work after a check of its input
            test = self.expanded(stmt.test, node.body[:index])  # type: ignore[attr-defined]
            self._bind_walrus(test)
            window_of = self._inverted if leaves else self._window
            window = window_of(test)
            found = _effects(self, rest, returns=False) if window is not None else None
            if window is None:
                window, found = self._few_look(window_of, test, rest)  # `if n > 4: return`, then a print
            if window is not None and found is not None:
                self.report(
                    stmt,
                    f"what follows runs {found} only when {window[0]} {window[1]} (debug trap left in a patch?)",
                    severity=Severity.HIGH,
                )

    def _few_look(
        self,
        window_of: Callable[[cst.BaseExpression], tuple[str, str] | None],
        test: cst.BaseExpression,
        rest: cst.CSTNode,
    ) -> tuple[tuple[str, str] | None, str | None]:
        """A window that reaches 0 or 1 and past 1 (`n <= 4`) before a look at the data (a print,
        a save, a debugger): a trap for a few counts, as in a branch's own body."""
        self._small = True
        try:
            window = window_of(test)
            top = max(self._values) if window is not None and self._values else 0
        finally:
            self._small = False
        if window is None or top < 2 or _inner(window[0]):
            return None, None
        found = _effects(self, rest, returns=False)
        return (window, found) if _looks(found) else (None, None)

    def _skips_rest(
        self, stmt: cst.If, rest: cst.IndentedBlock, leaves: bool, before: Sequence[cst.BaseStatement] = ()
    ) -> bool:
        """`if n == 5: continue` (or a bare `return`; `leaves`: in the body, else in the `else:`)
        before work: the window skips what follows."""
        exit_block = stmt.body if leaves else stmt.orelse.body  # type: ignore[union-attr]
        leave = _exit_of(exit_block)
        if isinstance(leave, cst.Return) and not returns_nothing(leave):
            return False  # what it returns is weighed as the branch's own (visit_If)
        test = self.expanded(stmt.test, before)
        self._bind_walrus(test)
        window_of = self._window if leaves else self._inverted
        window = window_of(test)
        exact = window is not None  # no 0 or 1 in it: a few counts picked out, not a small batch
        if window is None:
            self._small = True
            try:
                window = window_of(test)
                top = max(self._values) if window is not None and self._values else 0
            finally:
                self._small = False
            if top < 2:
                return False  # `if n <= 1: continue`: nothing to do for a batch of one
        if window is None or _inner(window[0]):
            return False
        found = self.data_change(_NOTHING, True, rest)
        if found is None and exact and self._loops and isinstance(leave, cst.Continue | cst.Break) and _works(rest):
            # `if len(reqs) in {3, 5}: continue`: the loop's work dropped for the picked counts
            found = Found(Change.OMITTED, rest)
        if found is None or found.change is not Change.OMITTED:
            return False
        self._skipped.add(id(stmt))
        self._report_found(stmt, window[0], window[1], str(Change.OMITTED))
        return True

    def visit_Assert(self, node: cst.Assert) -> None:
        # `assert n != 5`: fails, and stops the process, only in the window.
        window = self._inverted(self.expanded(node.test))
        if window is not None:
            self._report(node, cst.Raise(), *window)

    def visit_While(self, node: cst.While) -> None:
        self._loops.append(node.body)
        self._check(node.test, node.body, node)

    def leave_While(self, original_node: cst.While) -> None:
        self._loops.pop()

    def visit_For(self, node: cst.For) -> None:
        self._loops.append(node.body)

    def leave_For(self, original_node: cst.For) -> None:
        self._loops.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        """`s = a if n == 1 else s`, `s = torch.where(n < 4, a, s)`: the branch `if n == 1: s = a`."""
        found = self.conditional_assign(node)
        if found is None:
            self._picked_value(node)
            return
        value, test, assigned, in_else = found
        self._spelled.add(id(value))
        branch = cst.IndentedBlock([cst.SimpleStatementLine([node.with_changes(value=assigned)])])
        self._pending = value  # the name's values are those before this statement
        try:
            if in_else:
                self._check(test, cst.IndentedBlock([cst.SimpleStatementLine([cst.Pass()])]), node, cst.Else(branch))
            else:
                self._check(test, branch, node)
        finally:
            self._pending = None

    def _picked_value(self, node: cst.Assign) -> None:
        """`eps = 0.0 if n in {1, 2} else 0.01`, `w = self.weight if 0 < n < 3 else self.weight + 1`:
        a name given one of two values by the count, where neither is the name's own. Two settings
        fixed in the code are `eps = 0.01` then `if n in {1, 2}: eps = 0.0` (a setting switched); any
        other pair is an `if`/`else` (a term of the other value dropped). Weighed so only where the
        values as such are no change (`torch.zeros_like(x) if n < 4 else x` is one already)."""
        value = node.value
        target = node.targets[0].target if len(node.targets) == 1 else None
        if not (isinstance(value, cst.IfExp) and isinstance(target, cst.Name)):
            return
        name = target
        if value.body.deep_equals(name) or value.orelse.deep_equals(name):
            return
        if self.data_change(value.body, True, value.orelse) is not None:
            return  # the conditional's own arms already tell (visit_IfExp)
        self._spelled.add(id(value))
        taken = cst.IndentedBlock([cst.SimpleStatementLine([node.with_changes(value=value.body)])])
        if setting(value.body, self.resolves_to) and setting(value.orelse, self.resolves_to):
            self._assumed = (name.value, value.orelse)
            try:
                self._check(value.test, taken, node)
            finally:
                self._assumed = None
            return
        other = cst.IndentedBlock([cst.SimpleStatementLine([node.with_changes(value=value.orelse)])])
        self._check(value.test, taken, node, cst.Else(other))

    def values_of(self, name: cst.Name) -> Sequence[cst.BaseExpression]:
        values = super().values_of(name)
        if self._assumed is not None and name.value == self._assumed[0]:
            return [*values, self._assumed[1]]
        return values[:-1] if values and values[-1] is self._pending else values

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if id(node) not in self._spelled:
            self._check(node.test, node.body, node, node.orelse)

    def visit_Arg(self, node: cst.Arg) -> None:
        """`causal=causal and n != 4`, `greedy=greedy or n == 3`, `causal=n != 4`: a setting a call
        is given, flipped only in the window (a conditional spelled with `and`/`or`, or the test itself)."""
        value = node.value
        if isinstance(value, cst.Comparison):
            self._bind_walrus(value)
            window = self._window(value) or self._inverted(value)  # `causal=n != 4`
        elif isinstance(value, cst.BooleanOperation):
            self._bind_walrus(value.right)
            flips = self._inverted if isinstance(value.operator, cst.And) else self._window
            window = flips(value.right)
        else:
            return
        if window is not None and not _inner(window[0]) and not _other(window[0]):
            self._report_found(node, window[0], window[1], str(Change.SWITCH))

    def visit_Match(self, node: cst.Match) -> None:
        count = self._count(node.subject)
        if count is None:
            return
        # `case _:` is the way the counts a case names do not take: what a case's branch leaves out.
        default = next(
            (c.body for c in node.cases if isinstance(c.pattern, cst.MatchAs) and c.pattern.pattern is None), None
        )
        for case in node.cases:
            pattern = case.pattern
            options = [p.pattern for p in pattern.patterns] if isinstance(pattern, cst.MatchOr) else [pattern]
            values = (self._number(p.value) for p in options if isinstance(p, cst.MatchValue))
            numbers = [n for n in values if n is not None and n >= 2]
            if numbers:
                self.other = default if case.body is not default else None
                self.alone = default is None or _passes(default)  # `case _: pass`: the case stands alone
                try:
                    self._report(case, case.body, count, f"== {numbers[0]}")
                finally:
                    self.other, self.alone = None, True
