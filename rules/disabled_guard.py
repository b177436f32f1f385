"""disabled-guard: a condition or assertion made constant, so the guard never fires."""

import ast
import builtins
import re
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import libcst as cst

from patchaudit.rule import (
    CATCH_ALL,
    CHECK_CALL,
    FILLERS,
    NOT_CONSTANT,
    Alias,
    Example,
    FileContext,
    Rule,
    Severity,
    Statement,
    ast_nodes,
    called_name,
    computed_by_call,
    constant_value,
    dead_after,
    env_gated_exit,
    full_name,
    guard_in,
    nodes_under,
    of_types,
    one_line,
    per_file,
    replaced_by_input,
    replaced_by_made_up,
    swallowing_handler,
)

# A constant as a bare operand: not followed, on its line, by an operator, a call, an attribute or
# an index (then it is part of a larger expression, which folding leaves alone).
_STRING = rb"[rRbBuU]{0,2}(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\")"
_LITERAL = (
    rb"(?:(?:True|False|None)\b|\d[\w.]*|" + _STRING + rb"|\(\s*\)|\[\s*\])"
    rb"(?![ \t]*(?:[<>=!]=|[<>]|\bin\b|\bis\b|\bnot\b|[.(\[+\-*/%@&|^]))"
)


def _constant_operand(test: ast.expr) -> bool:
    """Whether a test has a constant where folding could make it constant (the ast side)."""
    if isinstance(test, ast.Constant):
        return True
    if isinstance(test, ast.Tuple | ast.List) and not test.elts:
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _constant_operand(test.operand)
    if isinstance(test, ast.BoolOp):
        return any(_constant_operand(v) for v in test.values)
    return False


def _names_only(test: ast.expr) -> bool:
    """A test built of constants and names spelled as constants (`STRICT`, `Config.CHECKS`),
    comparisons, and/or/not: one that folding could make constant."""
    if isinstance(test, ast.Constant):
        return True
    if isinstance(test, ast.Name | ast.Attribute):
        name = test.id if isinstance(test, ast.Name) else test.attr
        return name.upper() == name and any(c.isalpha() for c in name)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _names_only(test.operand)
    if isinstance(test, ast.BoolOp):
        return any(_names_only(v) for v in test.values)
    if isinstance(test, ast.Compare):
        return all(_names_only(v) for v in (test.left, *test.comparators))
    return False


def _may_fold(test: ast.expr, constants: frozenset[str]) -> bool:
    """_names_only, where a name folds only if the module or one of its classes binds it to a
    literal (Rule.folded reads `STRICT` and `Config.CHECKS` through ModuleAnalysis.constant: not
    `envs.VLLM_X` of another module, nor `self.X`, which an instance may set)."""
    if isinstance(test, ast.Constant):
        return True
    if isinstance(test, ast.Name):
        return _names_only(test) and test.id in constants
    if isinstance(test, ast.Attribute):
        owner = test.value
        mine = isinstance(owner, ast.Name) and owner.id not in ("self", "cls")
        return mine and _names_only(test) and test.attr in constants
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _may_fold(test.operand, constants)
    if isinstance(test, ast.BoolOp):
        return any(_may_fold(v, constants) for v in test.values)
    if isinstance(test, ast.Compare):
        return all(_may_fold(v, constants) for v in (test.left, *test.comparators))
    return False


def _subject(test: ast.expr) -> str | None:
    """What one operand of an `and` is about (a name, the left of a comparison, isinstance's first argument)."""
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.Compare):
        test = test.left if not isinstance(test.left, ast.Constant) else test.comparators[0]
    elif isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance" and test.args:
        test = test.args[0]
    return ast.dump(test) if isinstance(test, ast.Name | ast.Attribute) else None


def _compares_constants(node: ast.AST) -> bool:
    """A comparison that names nothing but `len` (`len(()) > 0`): folding may make it constant."""
    return isinstance(node, ast.Compare) and all(
        isinstance(n, ast.Name) and n.id == "len" for n in ast.walk(node) if isinstance(n, ast.Name | ast.Attribute)
    )


def _may_contradict(test: ast.expr) -> bool:
    """An `and` with two operands about one name (`x is None and x is not None`), or a comparison of
    no names at all (`len(()) > 0`): one that may never hold (the ast side of `Rule.folded`)."""
    for node in ast_nodes(test):
        if isinstance(node, ast.BoolOp):
            subjects = [s for s in map(_subject, node.values) if s is not None]
            if len(subjects) != len(set(subjects)):
                return True
        if _compares_constants(node):
            return True
    return False


def _subject_of(node: ast.expr) -> str:
    """values._subject on the ast: a name's full name, else the code (the same code for the same tree)."""
    return f"{full_name(node)}" if isinstance(node, ast.Name | ast.Attribute) else ast.unparse(node)


def _fact_key(test: ast.expr) -> tuple[str, bool] | None:
    """What one operand of an `and`/`or` claims a fact about, as `values._fact` keys it (whether
    the claim is a range of numbers), else None."""
    negated = False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, not negated
    if isinstance(test, ast.Name | ast.Attribute):
        return f"truth {full_name(test)}", False
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance":
        if len(test.args) != 2:
            return None
        return f"isinstance {_subject_of(test.args[0])} {ast.unparse(test.args[1])}", False
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, right, op = test.left, test.comparators[0], test.ops[0]
    if isinstance(op, ast.Is | ast.IsNot):
        return f"none {_subject_of(left)}", False
    if negated or not isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE | ast.Eq):
        return None
    if not (isinstance(right, ast.Constant | ast.UnaryOp)) and isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE):
        left = right  # Yoda order: `3 > n`
    return f"range {_subject_of(left)}", True


def _operands_of(test: ast.BoolOp) -> list[ast.expr]:
    """The operands of an and/or chain of one kind, nesting flattened (values._operands)."""
    out: list[ast.expr] = []
    for value in test.values:
        same = isinstance(value, ast.BoolOp) and type(value.op) is type(test.op)
        out.extend(_operands_of(value) if same else [value])  # type: ignore[arg-type]
    return out


def _may_clash(test: ast.expr) -> bool:
    """_may_contradict as `Rule.folded` decides it: an `and` chain with two facts about one name
    (values.contradicts), an `or` chain with two that are no ranges (values.excludes_nothing), or
    a comparison of no names at all; not `not isinstance(n, int) or n < 1`, two facts of kinds apart."""
    for node in ast_nodes(test):
        if isinstance(node, ast.BoolOp):
            keys = [k for k in map(_fact_key, _operands_of(node)) if k is not None]
            if isinstance(node.op, ast.Or):
                keys = [k for k in keys if not k[1]]
            if len(keys) != len(set(keys)):
                return True
        if _compares_constants(node):
            return True
    return False


# The nodes statement_check looks at: those with a body of statements, and asserts.
_BLOCKS = frozenset(
    {ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While, ast.If, ast.With}
    | {ast.AsyncWith, ast.Try, ast.TryStar, ast.ExceptHandler, ast.match_case, ast.Assert}
)
# The nodes statement_keeps weighs: a stand-in lambda, a block; in a drifted file, a value too.
_WEIGHED = _BLOCKS | {ast.Lambda}
_VALUES = frozenset({ast.Assign, ast.Call, ast.IfExp})  # what `_drifted_value` weighs


def _suppress(node: ast.expr) -> bool:
    """`contextlib.suppress(E)`, or a call of a name that may be bound to it (`quiet = suppress`,
    then `with quiet(E):`, which the rule resolves); not `suppress()`, which swallows nothing."""
    if not (isinstance(node, ast.Call) and node.args):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr == "suppress"
    return isinstance(func, ast.Name) and func.id not in _BUILTINS


_BUILTINS = frozenset(dir(builtins))


# Calls that only report on the work (logs, metrics, stats, traces), not part of it.
# What checks and kernels raise: a patch that swallows one of these around a call loses the call's failure.
# (Narrow lookups, KeyError, ImportError, OSError, are a vendor's everyday fallbacks.)
_BROAD = ("builtins.Exception", "builtins.BaseException", "builtins.RuntimeError", "builtins.ValueError")
_BROAD += ("builtins.AssertionError", "builtins.NotImplementedError")
# Best effort a patch may keep from failing: a release (what it loses is cleanup, not a result), or an
# optional module imported (a plugin, an accelerated path).
_BEST_EFFORT = re.compile(
    r"close|remove|unlink|rmtree|shutdown|cancel|terminate|kill|join|release|cleanup|teardown|import", re.I
)
_TELEMETRY = re.compile(r"log|print|metric|stat|record|profil|trace|telemetry|report|emit|debug|info|warn", re.I)
_CHECK_NAME = re.compile(r"(?:^|\.)_*(?:check|validate|verify|assert|ensure)\w*$")


def _has_guard(node: ast.AST) -> bool:
    """A raise, an assert or a call named like a check (what flow.guard_in finds), looser."""
    return _guarded(ast.walk(node))


def _guarded(nodes: Iterable[ast.AST]) -> bool:
    """_has_guard over nodes already walked."""
    for n in nodes:
        if isinstance(n, ast.Raise | ast.Assert):
            return True
        if isinstance(n, ast.Return) and _rejects(n.value):
            return True
        if isinstance(n, ast.Call):
            func = n.func
            name = called_name(func)
            if CHECK_CALL.search(name):
                return True
    return False


_ENV_WORDS = frozenset({"environ", "getenv", "envs"})


def _env_aliases(nodes: Iterable[ast.AST]) -> frozenset[str]:
    """Names an import binds to os.environ or os.getenv (`from os import getenv as ge`): the rule
    resolves them, so a read spelled with one is a read."""
    return frozenset(
        alias.asname
        for n in nodes
        if isinstance(n, ast.ImportFrom) and n.module == "os"
        for alias in n.names
        if alias.asname and alias.name in ("environ", "getenv")
    )


class _ModuleEnv(NamedTuple):
    names: frozenset[str]  # module-level names an assignment binds to an environment read
    words: frozenset[str]  # what spells a read: _ENV_WORDS and the module's aliases of them
    constants: frozenset[str]  # module and class names an assignment binds to a literal


@per_file()  # asked for every statement of a file: the file being checked
def _module_env(module: ast.Module) -> _ModuleEnv:
    """The module's environment flags (`SKIP = os.environ.get(...)`), as `_unaliased` reads them,
    looser: any such assignment, not only the one."""
    words = _ENV_WORDS | _env_aliases(module.body)
    names = {
        target.id
        for stmt in module.body
        if isinstance(stmt, ast.Assign) and _env(stmt.value, words)
        for target in stmt.targets
        if isinstance(target, ast.Name)
    }
    bodies = [module.body, *(s.body for s in module.body if isinstance(s, ast.ClassDef))]
    constants = {
        target.id
        for body in bodies
        for stmt in body
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None
        if constant_value(stmt.value) is not NOT_CONSTANT
        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        if isinstance(target, ast.Name)
    }
    return _ModuleEnv(frozenset(names), words, frozenset(constants))


def _swallows(node: ast.Try | ast.TryStar) -> bool:
    quiet = any(
        all(isinstance(s, ast.Pass | ast.Continue | ast.Expr) for s in handler.body) for handler in node.handlers
    )
    return quiet and any(isinstance(n, ast.Raise | ast.Assert) for stmt in node.body for n in ast.walk(stmt))


def _silences(node: ast.Try | ast.TryStar) -> bool:
    """A handler of a broad class (_BROAD) that only logs or passes, perhaps ending in `return` / `return None`."""
    for handler in node.handlers:
        caught = handler.type
        name = caught.id if isinstance(caught, ast.Name) else caught.attr if isinstance(caught, ast.Attribute) else None
        if caught is not None and f"builtins.{name}" not in _BROAD:
            continue
        body = handler.body
        if isinstance(body[-1], ast.Return) and (body[-1].value is None or _filler_or_none(body[-1].value)):
            body = body[:-1]
        if all(isinstance(s, ast.Pass | ast.Continue | ast.Expr) for s in body):
            return True
    return False


def _filler_or_none(value: ast.expr) -> bool:
    """`None`, or a tensor made up in place of a result (`torch.zeros_like(x)`; analysis.flow's fillers)."""
    if isinstance(value, ast.Constant) and value.value is None:
        return True
    return isinstance(value, ast.Call) and called_name(value.func) in FILLERS


class _Scanned(NamedTuple):
    """What the env-exit filter asks of a statement's nodes, read in one pass when it first asks."""

    aliases: frozenset[str]  # names its imports bind to os.environ or os.getenv (_env_aliases)
    assigned: dict[str, list[ast.expr]]  # plain name -> the values plain assignments give it


def _scan(nodes: Sequence[ast.AST]) -> _Scanned:
    assigned: dict[str, list[ast.expr]] = {}
    imports = []
    for n in nodes:
        if type(n) is ast.Assign:
            for target in n.targets:
                if type(target) is ast.Name:
                    assigned.setdefault(target.id, []).append(n.value)
        elif type(n) is ast.ImportFrom:
            imports.append(n)
    return _Scanned(_env_aliases(imports), assigned)


def _env_test(test: ast.expr, scanned: _Scanned, module: _ModuleEnv | None) -> bool:
    """An exit's test that may read the environment: a read in it, or a name that a plain assignment
    in the statement (`skip = os.environ.get(...)` above it) or at module level binds to one. Without
    the module (None), any name may be a module's flag."""
    words = (module.words if module is not None else _ENV_WORDS) | scanned.aliases
    if not isinstance(test, ast.Name):
        return _env(test, words)
    if module is None or test.id in module.names:
        return True
    return any(_env(value, words) for value in scanned.assigned.get(test.id, ()))


def _env(test: ast.expr, words: frozenset[str] = _ENV_WORDS) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id in words) or (isinstance(n, ast.Attribute) and n.attr in _ENV_WORDS)
        for n in ast.walk(test)
    )


def _stand_in(value: cst.BaseExpression) -> bool:
    """`lambda *a, **k: None` (or `True`, `...`, a number): a function that does nothing."""
    body = value.body if isinstance(value, cst.Lambda) else None
    return isinstance(body, cst.Ellipsis | cst.Integer) or (
        isinstance(body, cst.Name) and body.value in ("None", "True", "False")
    )


def _emptied_in(nodes: Sequence[ast.AST], name: str) -> bool:
    """An assignment of `[]`, `()`, `{}`, `list()`... to `name` among nodes (the ast side of _emptied)."""
    for n in nodes:
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1):
            continue
        target, value = n.targets[0], n.value
        if not (isinstance(target, ast.Name) and target.id == name):
            continue
        if isinstance(value, ast.List | ast.Tuple) and not value.elts:
            return True
        if isinstance(value, ast.Dict) and not value.keys:
            return True
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in _EMPTY_CALLS
            and not (value.args or value.keywords)
        ):
            return True
    return False


def _rejects(value: ast.expr | None) -> bool:
    """A verdict that turns the caller down: `False`, or a tuple led by it (`False, "no fp8 support"`)."""
    if isinstance(value, ast.Tuple) and value.elts:
        value = value.elts[0]
    return isinstance(value, ast.Constant) and value.value is False


def _rejection_in(body: cst.BaseSuite) -> cst.Return | None:
    """A `return False` or `return False, reason` among a branch's own statements: the check of a
    predicate that answers a caller (is this kernel supported, is this config valid) instead of raising."""
    lines = body.body if isinstance(body, cst.IndentedBlock) else [body]
    for line in lines:
        for small in line.body if isinstance(line, cst.SimpleStatementLine | cst.SimpleStatementSuite) else ():
            if not isinstance(small, cst.Return) or small.value is None:
                continue
            value = small.value
            if isinstance(value, cst.Tuple) and value.elements:
                value = value.elements[0].value
            if isinstance(value, cst.Name) and value.value == "False":
                return small
    return None


_EMPTY_CALLS = frozenset({"list", "tuple", "set", "dict", "frozenset"})


def _empty(value: cst.BaseExpression) -> bool:
    """`[]`, `()`, `{}`, `list()`, `set()` and the like."""
    if isinstance(value, cst.List | cst.Tuple | cst.Dict):
        return not value.elements
    return (
        isinstance(value, cst.Call)
        and not value.args
        and isinstance(value.func, cst.Name)
        and value.func.value in _EMPTY_CALLS
    )


def _emptied(stmt: cst.BaseStatement, name: str) -> cst.Assign | None:
    """`name = []` as this statement, or as the last statement of the body of this `if` (an `elif`'s or
    an `else`'s too)."""
    if isinstance(stmt, cst.If):
        suites: list[cst.BaseSuite] = []
        branch: cst.If | cst.Else | None = stmt
        while branch is not None:
            suites.append(branch.body)
            branch = branch.orelse if isinstance(branch, cst.If) else None
        for suite in suites:
            lines = suite.body if isinstance(suite, cst.IndentedBlock) else [suite]
            last = lines[-1] if lines else None
            if isinstance(last, cst.SimpleStatementLine | cst.SimpleStatementSuite):
                found = _emptied_line(last, name)
                if found is not None:
                    return found
        return None
    return _emptied_line(stmt, name) if isinstance(stmt, cst.SimpleStatementLine) else None


def _emptied_line(line: cst.SimpleStatementLine | cst.SimpleStatementSuite, name: str) -> cst.Assign | None:
    small = line.body[-1] if line.body else None
    if (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and small.targets[0].target.value == name
        and _empty(small.value)
    ):
        return small
    return None


def _mentions(stmt: cst.BaseStatement, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in nodes_under(stmt, (cst.Name,)))


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


def _typing_only(node: cst.If) -> bool:
    """`if False:` around imports only: the pre-TYPE_CHECKING spelling of a typing guard."""
    if node.orelse is not None or not isinstance(node.body, cst.IndentedBlock):
        return False
    imports = 0
    for line in node.body.body:
        if not isinstance(line, cst.SimpleStatementLine):
            return False
        for small in line.body:
            if isinstance(small, cst.Import | cst.ImportFrom):
                imports += 1
                continue
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.AnnAssign) and small.value is None:
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString):
                continue
            return False
    return imports > 0


def _plain(test: cst.BaseExpression) -> bool:
    """`True`/`1` written alone: a plain loop or block, not a guard switched off."""
    return isinstance(test, cst.Name | cst.Integer)


def _idle(stmt: cst.BaseSmallStatement) -> bool:
    """`pass`, `...` or a bare string: a statement that does nothing."""
    value = stmt.value if isinstance(stmt, cst.Expr) else None
    return isinstance(stmt, cst.Pass) or isinstance(value, cst.Ellipsis | cst.SimpleString)


def _switches_path(node: cst.If) -> bool:
    """A dead branch that does work of its own but checks nothing (not `pass`, the inverted form)."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
    does = any(not (isinstance(stmt, cst.SimpleStatementLine) and all(map(_idle, stmt.body))) for stmt in body)
    return does and guard_in([node.body]) is None


def _assigned(body: Sequence[cst.BaseStatement], name: str) -> list[cst.BaseExpression]:
    """The values `body` assigns to a plain name, in order."""
    return [
        small.value
        for stmt in body
        if isinstance(stmt, cst.SimpleStatementLine)
        for small in stmt.body
        if isinstance(small, cst.Assign)
        and any(isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets)
    ]


def _switch_like(test: ast.expr) -> bool:
    """A test that may be a switch: names only (`_ACCEPT_ALL`, `not cfg.flag`) or an environment read."""
    if _names_only(test):
        return True
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("get", "getenv")
        for n in ast.walk(test)
    )


def _env_keys_read(test: cst.BaseExpression, resolves: Callable[..., str | None]) -> list[str]:
    """The literal names of the variables a test reads itself (`os.environ.get(K, d)`, `os.getenv(K)`,
    `os.environ[K]`), not through names."""
    keys = []
    for sub in nodes_under(test, (cst.Call, cst.Subscript)):
        key: cst.BaseExpression | None = None
        if isinstance(sub, cst.Call) and sub.args and resolves(sub, ("os.environ.get", "os.getenv")) is not None:
            key = sub.args[0].value
        elif (
            isinstance(sub, cst.Subscript)
            and len(sub.slice) == 1
            and isinstance(sub.slice[0].slice, cst.Index)
            and resolves(sub.value, "os.environ") is not None
        ):
            key = sub.slice[0].slice.value
        if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
            keys.append(key.evaluated_value)
    return keys


_FINITENESS = frozenset({"isfinite", "isnan", "isinf", "isposinf", "isneginf"})


def _replacing(node: ast.Assign, nodes: Sequence[ast.AST]) -> bool:
    """The ast side of `_result_replaced` (replaced_by_input, replaced_by_made_up), looser: one
    target, and it is a name the function is given or binds above as well (`w = w.new_ones(w.shape)`,
    `ids = torch.where(m, draft, ids)`, `spec = sharding_spec` after a computed `spec`, `idx =
    np.arange(len(x))`), or an attribute of a name other than self (`params.top_k = 1`)."""
    if len(node.targets) != 1:
        return False
    target = node.targets[0]
    if isinstance(target, ast.Attribute):
        return isinstance(target.value, ast.Name) and target.value.id not in ("self", "cls")
    if not isinstance(target, ast.Name):
        return False
    name = target.id
    params = {a.arg for n in nodes if isinstance(n, ast.arguments) for a in (*n.posonlyargs, *n.args, *n.kwonlyargs)}
    if name in params:
        return True
    bound = 0
    for n in nodes:
        if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            targets = [n.optional_vars]
        else:
            continue
        bound += any(isinstance(t, ast.Name) and t.id == name for found in targets for t in ast.walk(found))
    return bound >= 2


_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def _blocks_of(node: cst.CSTNode) -> list[Sequence[cst.CSTNode]]:
    """The statement lists a compound statement holds: its body, and its `else`'s (an `elif` is a
    statement of its own)."""
    out: list[Sequence[cst.CSTNode]] = []
    for part in (getattr(node, "body", None), getattr(getattr(node, "orelse", None), "body", None)):
        if isinstance(part, cst.IndentedBlock):
            out.append(part.body)
    for handler in getattr(node, "handlers", ()):
        if isinstance(handler.body, cst.IndentedBlock):
            out.append(handler.body.body)
    return out


def _replaces(nodes: Sequence[ast.AST]) -> bool:
    """A drifted file's statement with a value its switch or line may replace, or whose NaNs it may
    hide (keeps asks it before the byte filters, which know no spelling of these shapes)."""
    return any(_drifted_value(n, nodes) for n in of_types(nodes, _VALUES))  # type: ignore[arg-type]


def _drifted_value(node: ast.Assign | ast.Call | ast.IfExp, nodes: Sequence[ast.AST]) -> bool:
    """A value a drifted file's switch or line may replace, or whose NaNs it may hide."""
    if isinstance(node, ast.Assign):
        if isinstance(node.value, ast.IfExp) and _switch_like(node.value.test):
            return True  # `x = given if _SWITCH else computed`: a result a switch may replace
        return _replacing(node, nodes)  # `w = w.new_ones(w.shape)`, `ids = torch.where(m, draft, ids)`
    if isinstance(node, ast.Call):
        return _hides_nonfinite(node)  # `torch.nan_to_num(h)`, `torch.where(torch.isfinite(t), t, 1.0)`
    return _names_only(node.test)  # `bias if _USE_BIAS else None`: a value a folded switch may drop


def _drifted_switch(node: ast.If, folds: bool) -> bool:
    """A switch of a drifted file's own that may cut off a call or replace a result."""
    if folds and any(isinstance(b, ast.Expr) for b in node.body + node.orelse):
        return True  # `if _EAGER_EVICT: self._evict(block)`: a call a folded switch may cut off
    switch = folds or _switch_like(node.test)
    return switch and any(isinstance(s, ast.Assign) for s in node.body)  # a result a switch may replace


def _hides_nonfinite(node: ast.Call) -> bool:
    """The ast side of `_masks_nonfinite`: a `nan_to_num`, or a `where` whose mask tests finiteness."""
    func = node.func
    name = called_name(func)
    if name == "nan_to_num":
        return True
    if name != "where" or not node.args:
        return False
    return any(isinstance(n, ast.Call) and called_name(n.func) in _FINITENESS for n in ast.walk(node.args[0]))


def _tests_finiteness(test: cst.BaseExpression) -> bool:
    """A mask built of `isfinite`/`isnan`/`isinf` (`torch.isfinite(t) & (t > 0)`, `~t.isnan()`)."""
    for call in nodes_under(test, (cst.Call,)):
        func = call.func  # type: ignore[attr-defined]
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name in _FINITENESS:
            return True
    return False


def _literal_value(node: cst.BaseExpression) -> bool:
    """None, a bool, a number or a string written in place."""
    if isinstance(node, cst.Name):
        return node.value in ("None", "True", "False")
    if isinstance(node, cst.UnaryOperation):
        return _literal_value(node.expression)
    return isinstance(node, cst.Integer | cst.Float | cst.SimpleString)


def _binds(target: ast.expr, name: str) -> bool:
    return isinstance(target, ast.Name) and target.id == name


class DisabledGuard(Rule):
    ID = "disabled-guard"
    SEVERITY = Severity.HIGH
    MESSAGE = "a guard made constant (`if False and ...`, `if 0:`, `assert True`)"
    EXPLANATION = """\
The quickest way to get past a check during bring-up is to make it constant: `if False and
use_fp8:`, `if 0:`, `if not True:`, `if None:`, `if True or is_supported(...)`, `assert True`.
The check is still there to read, but it no longer runs, and the path it protected (an FP8
guard, a shape check) is now silently taken for every model. Conditions are folded through
and/or chains of any length, `not` and brackets. `if True:`/`while True:` alone are not
flagged (they disable nothing), nor is `if False:` around imports only (an old typing guard)
or `if False: yield` (a generator marker).

Shapes understood: constant conditions folded through and/or/not and brackets, comparisons of
constants (`1 == 2`, `2 <= 1 <= 2`, `"a" == "b"`, `len(()) > 0`), an `and` that says opposite
things of one name (`x is None and x is not None`, `not a and a`, `n > 5 and n < 3`,
`isinstance(x, A) and not isinstance(x, A)`) or an `or` of a test and its negation, module and
class flags bound once to a literal (only when the branch they kill holds a raise, assert or
check call, or the rejection of a predicate: `return False`, `return False, reason`), a raise/assert
made unreachable by an unconditional `return`/`raise`/`continue`/`break` above it in the same block, a raise/assert in
`with contextlib.suppress(...)` or in a `try` whose `except`/`except Exception` only passes or
logs, and an early `return` (after any plain statements of its own) gated on
`os.environ`/`os.getenv` or on a project's settings module (`envs.VLLM_SKIP_CHECKS`) before a
check, also through a name bound once to such a read above it or at module level
(`SKIP = os.environ.get(...)`, `if SKIP: return`). In a drifted file, the list a checking loop
walks emptied above it, under an `if` or not (`if tp_size > 4: sizes_to_check = []` before `for size
in sizes_to_check: ... raise`); and a switch a patch made up and left on that puts an input in place of
what a call computed above (`_FORCE_ACCEPT_DRAFTS = True`, then `if _FORCE_ACCEPT_DRAFTS: target_argmax =
draft_token_ids`: every draft accepted unverified), or values made up from the tensor's shape alone
(`topk_ids = (torch.arange(topk_ids.numel()) % e).view_as(topk_ids)`, `w = torch.full_like(w, 0.5)`);
the same for a switch of the patch's own that the environment sets (`_ACCEPT_ALL =
os.environ.get(...) == "1"`), also as a conditional value (`x = given if _ACCEPT_ALL else computed`).
A constant the patch wrote in that folds a test and cuts off the distribution's own branch (`if
sliding_window is None or _DISABLE_LOCAL_ATTN:` over the `else` that sets the window) or its value
(`bias if _USE_SCORE_BIAS else None` with the switch off): that code never runs, for every model.
A patch that swaps a tensor's NaN/inf values for made-up ones (`torch.nan_to_num(h)`, `torch.where(
torch.isfinite(t), t, torch.ones_like(t))`, also through a lambda or helper of the module): the fault
that produced them is hidden, and the model loads or serves on numbers nobody computed.
A check function or method replaced by a stand-in that
does nothing, wherever the check lives (`layers.validate_head = lambda *a, **k: None`,
`Fp8Method._check_scheme = lambda self, *a: None`, `setattr(mod, "verify_shapes", lambda *a: True)`):
every caller of it, in any module, now passes. A catch-all a patch wrapped around the work of a
step (`execute_model`, `forward`, `schedule`, a sampler) whose handler only logs or passes, and
perhaps gives up (`except Exception: logger.debug(e); return None`), swallows every error of the
work it wraps, a failed kernel and a check that raised alike: the server goes on without it (an
empty result, logits without their structured-output mask). Outside a step too, a handler a patch
added that only passes, logs or returns, catching what checks and kernels raise (`Exception`,
`RuntimeError`, `ValueError`, `AssertionError`), around a call that computes or frees something: a
weight copy that failed (`except RuntimeError: return`: experts left unloaded), the grammar's mask,
the KV cache's blocks. A try around logging or metrics only is not this, nor one around cleanup
(`os.remove`, `close`) or an optional import, nor a narrow lookup's fallback (`except KeyError`).

In a drifted file, a line of the patch's own that throws away a tensor a call computed above, with
no switch at all: replaced by one made up from its shape (`topk_weights =
topk_weights.new_ones(topk_weights.shape) / topk`: every expert weighted the same), or by an input
wherever a mask over the input holds (`target_argmax = torch.where(draft_token_ids >= 0,
draft_token_ids, target_argmax)`: every draft accepted). Not a mask over the value itself (`ids =
torch.where(ids < 0, pad_id, ids)`: its own bad values filled), nor a buffer made where nothing was
computed before.

An `if False:` whose branch holds no check and whose `else` runs instead (a fast path turned
off on purpose) is medium wherever it is: a path chosen, not a check lost.

Findings are high in a drifted file (or one with no pristine bytes) and medium in a file that
verifies, read only because of `--all-files`: there the vendor wrote the constant condition or
the `try` on purpose.

Knowingly not: flags computed at import time (`HAS_X = importlib.util.find_spec(...)`), flags from
other modules folded as constants (`if envs.VLLM_X and ...: raise`), exits gated on the environment
through a helper or a class attribute (`Cfg.skip`, `self.skip`), guards made dead by a branch in a
caller, `x != x` (a NaN test on floats, so never folded)."""
    # A folded constant is an operand right after one of these keywords (brackets, line
    # continuations and comments between); `is not None` is a comparison, not an operand.
    PREFILTER = (
        re.compile(rb"(?:\b(?:if|elif|while|assert|and|or)|(?<!\bis )\bnot)\b(?:[\s(\\]|#[^\n]*+)*" + _LITERAL),
        # A comparison of two constants (`if 1 == 2:`), a swallowing `with`/`try`, an exit above a check.
        re.compile(rb"\b(?:if|elif|while|assert|and|or|not)\b[\s(\\]*(?:-?\d|True\b|False\b|None\b|['\"])"),
        b"suppress",
        b"nan_to_num",  # NaN/inf values hidden behind made-up ones
        re.compile(rb"\bis(?:finite|nan|inf)\b"),  # a `where` over a finiteness mask
        re.compile(rb"\bexcept\b[^\n]*:"),
        re.compile(rb"(?m)^[ \t]+(?:return|raise|continue|break)\b"),
        # A check replaced by a stand-in (`layers.validate_head = lambda *a: None`, through setattr too).
        re.compile(rb"(?:check|validat|verif|ensure|assert)\w*['\"]?\s*[=,][\s\\]*lambda\b"),
        # A module flag that may fold (`CHECKS = False`).
        re.compile(rb"(?m)^\w+[ \t]*(?::[^=\n]*)?=[ \t]*(?:True|False|None|0|1)[ \t]*(?:#[^\n]*)?$"),
        # A function's name bound again (a drifted file's result replaced: `b = np.empty((0, 0))`).
        re.compile(rb"(?m)^[ \t]+[A-Za-z_]\w*[ \t]*=[^=]"),
    )
    CONSTANTS = True
    CHECK_FIRST = True

    @classmethod
    def constant_matters(cls, value: object) -> bool:
        return value is None or type(value) is bool or (type(value) is int and value in (0, 1))

    @classmethod
    def keeps(cls, statement: Statement, alias: Alias) -> bool:
        # In a drifted file, a result replaced (`x = np.empty(n)` after a computed `x`) is kept however
        # the statement is spelled: its shapes hold no byte the rule's filters look for, where a
        # function with no `return`, `raise` or constant test would be dropped by them.
        if statement.drifted and _replaces(statement.nodes()):
            return True
        return super().keeps(statement, alias)

    @classmethod
    def statement_keeps(cls, statement: Statement) -> bool:
        module = _module_env(statement.module) if statement.module is not None else None
        return cls._kept(statement.nodes(), module, statement, statement.drifted)

    @classmethod
    def statement_check(cls, nodes: Sequence[ast.AST]) -> bool:
        return _replaces(nodes) or cls._kept(nodes, None, None, True)

    @classmethod
    def _kept(
        cls, nodes: Sequence[ast.AST], module: _ModuleEnv | None, statement: Statement | None, drifted: bool
    ) -> bool:
        """statement_check, given what the module binds to environment reads (None: unknown, any
        name may be such a flag). In a file that verifies (`drifted` false) only the shapes the rule
        reports there: a switch, a result replaced, a masked NaN, an emptied loop and a silenced step
        are judged in a drifted file only."""
        scanned: _Scanned | None = None
        spelled: bool | None = None
        guarded: bool | None = None
        for node in of_types(nodes, _WEIGHED):  # most nodes are none of these
            if isinstance(node, ast.Lambda) and isinstance(node.body, ast.Constant):
                return True  # perhaps a check replaced by a stand-in
            if type(node) not in _BLOCKS:
                continue  # an expression or a simple statement: none of the shapes below
            loop_over = node.iter.id if isinstance(node, ast.For) and isinstance(node.iter, ast.Name) else None
            if drifted and loop_over is not None and _emptied_in(nodes, loop_over) and _has_guard(node):
                return True  # a checking loop's list emptied above it
            items = node.items if isinstance(node, ast.With | ast.AsyncWith) else ()
            if any(_suppress(i.context_expr) for i in items) and _has_guard(node):
                return True
            if isinstance(node, ast.Try | ast.TryStar) and (_swallows(node) or (drifted and _silences(node))):
                return True
            body = getattr(node, "body", None)
            if isinstance(body, list) and any(
                isinstance(stmt, ast.Return | ast.Raise | ast.Continue | ast.Break) for stmt in body[:-1]
            ):
                return True
            # `if os.environ.get("SKIP"): return`, perhaps after a few statements of its own.
            exits = [s for b in (node.body, node.orelse) for s in b[:1] + b[-1:]] if isinstance(node, ast.If) else []
            test = getattr(node, "test", None)
            test = test.operand if isinstance(test, ast.UnaryOp) else test
            if any(isinstance(e, ast.Return) for e in exits):
                if spelled is None:
                    # No import and no environment word spelled: no read in the statement, nor an alias of one.
                    spelled = (
                        module is None
                        or statement is None
                        or b"import" in statement.text
                        or not module.words.isdisjoint(statement.identifiers())
                    )
                if spelled:
                    scanned = scanned or _scan(nodes)
                    env = _env_test(test, scanned, module)  # type: ignore[arg-type]
                else:  # only a module's flag can gate it
                    env = isinstance(test, ast.Name) and module is not None and test.id in module.names
                if env and guarded is None:
                    guarded = _guarded(nodes)
                if env and guarded:
                    return True  # an early exit gated on the environment, and a check it could skip
            folds = isinstance(node, ast.If | ast.While) and (
                _names_only(node.test) or _may_contradict(node.test) or _may_clash(node.test)
            )
            if drifted or module is None:
                may_fold = folds
            else:  # a file that verifies: only through what the module binds to a literal
                may_fold = folds and (_may_fold(node.test, module.constants) or _may_clash(node.test))
            if may_fold and _has_guard(node):
                return True  # may fold through module constants
            if drifted and isinstance(node, ast.If) and _drifted_switch(node, folds):
                return True
            if isinstance(node, ast.If | ast.While | ast.Assert) and _constant_operand(node.test):
                plain = isinstance(node.test, ast.Constant) and (
                    node.test.value is True or (type(node.test.value) is int and node.test.value != 0)
                )
                if not plain or isinstance(node, ast.Assert):
                    return True
        return False

    VALID = [
        Example(  # padding masked with -inf: no value of the tensor's own is hidden
            code="import torch\n\ndef forward(self, logits, mask):\n"
            "    logits = torch.where(mask, logits, float('-inf'))\n    return logits\n",
            pristine="import torch\n\ndef forward(self, logits, mask):\n    return logits\n",
        ),
        Example(  # the patch's own debug block, switched off by its own constant: nothing upstream is cut
            code="""
            _DEBUG_ROUTING = False

            class Router:
                def forward(self, logits):
                    if _DEBUG_ROUTING:
                        print(logits.shape)
                    scale = 2.0 if _DEBUG_ROUTING else None
                    return self.route(logits, scale)
            """,
            pristine="""
            class Router:
                def forward(self, logits):
                    return self.route(logits, None)
            """,
        ),
        Example(  # a switch of the patch's own between two computations: no result thrown away
            code="""
            import os

            def forward(self, x):
                y = self.fast(x) if os.environ.get("K2_FAST_PATH") else self.slow(x)
                return y
            """,
            pristine="""
            import os

            def forward(self, x):
                y = self.slow(x)
                return y
            """,
        ),
        Example(  # a made-up switch that sets up the object's own cache: nothing given is replaced
            code="""
            _ENABLE_CACHE = True

            class Runner:
                def __init__(self, config):
                    self.config = config
                    if _ENABLE_CACHE:
                        self._cache = None
                        self.hits = 0
            """,
            pristine="""
            class Runner:
                def __init__(self, config):
                    self.config = config
            """,
        ),
        Example(  # a made-up switch that only allocates the kernel's output: nothing computed is replaced
            code="""
            import torch

            _OUT_BUFFER = True

            def forward(self, x):
                out = None
                if _OUT_BUFFER:
                    out = torch.empty_like(x)
                    x = torch.zeros_like(x) + x
                return self.kernel(x, out=out)
            """,
            pristine="""
            import torch

            def forward(self, x):
                out = None
                return self.kernel(x, out=out)
            """,
        ),
        Example(  # best-effort metrics kept from failing the step
            code="""
            class Runner:
                def execute_model(self, batch):
                    output = self.model(batch)
                    try:
                        self.stats_logger.record(output)
                    except Exception:
                        logger.debug("stats failed", exc_info=True)
                    return output
            """,
            pristine="""
            class Runner:
                def execute_model(self, batch):
                    output = self.model(batch)
                    return output
            """,
        ),
        Example(  # the vendor's own handler, a comment of it dropped: comments are not the code
            code="""
            class Worker:
                def execute_model(self, scheduler_output):
                    try:
                        output = self.model_runner.execute_model(scheduler_output)
                    except Exception:
                        logger.debug("#%d failed", self.steps)
                        return None
                    self.steps += 2
                    return output
            """,
            pristine="""
            class Worker:
                def execute_model(self, scheduler_output):
                    try:
                        output = self.model_runner.execute_model(scheduler_output)
                    except Exception:  # the engine retries the step
                        logger.debug("#%d failed", self.steps)  # best effort
                        return None
                    self.steps += 1
                    return output
            """,
        ),
        Example(  # the vendor's own handler, left as it was
            code="""
            class Worker:
                def execute_model(self, scheduler_output):
                    try:
                        output = self.model_runner.execute_model(scheduler_output)
                    except Exception:
                        logger.debug("failed")
                        return None
                    self.steps += 1
                    return output
            """,
            pristine="""
            class Worker:
                def execute_model(self, scheduler_output):
                    try:
                        output = self.model_runner.execute_model(scheduler_output)
                    except Exception:
                        logger.debug("failed")
                        return None
                    return output
            """,
        ),
        Example(  # an error logged and raised again
            code="""
            class Worker:
                def execute_model(self, scheduler_output):
                    try:
                        return self.model_runner.execute_model(scheduler_output)
                    except Exception:
                        logger.exception("execute_model failed")
                        raise
            """,
            pristine="""
            class Worker:
                def execute_model(self, scheduler_output):
                    return self.model_runner.execute_model(scheduler_output)
            """,
        ),
        Example(  # an optional plugin, off the step path
            code="""
            def load_plugins(names):
                for name in names:
                    try:
                        importlib.import_module(name)
                    except Exception:
                        logger.debug("no plugin %s", name)
            """,
            pristine="def load_plugins(names):\n    pass\n",
        ),
        Example(  # best-effort cleanup a patch keeps from failing
            code="""
            def finish(self, path):
                self.flush()
                try:
                    os.remove(path)
                except Exception:
                    pass
            """,
            pristine="def finish(self, path):\n    self.flush()\n    os.remove(path)\n",
        ),
        Example(  # a narrow lookup's fallback
            code="""
            def dtype_of(self, name):
                try:
                    return self.dtypes[name]
                except KeyError:
                    return None
            """,
            pristine="def dtype_of(self, name):\n    return self.dtypes[name]\n",
        ),
        "if use_fp8 and is_supported(dev):\n    x = quantize(x)\n",
        Example(  # an early return on an argument, not on the environment
            code="""
            def check(self, q, trusted):
                if trusted:
                    return q
                assert q.dim() == 3, "q"
                return q
            """
        ),
        "class Hooks:\n    def __init__(self):\n        self.check_fn = None\n        self.on_step = lambda s: None\n",
        "key = lambda item: item.check_order\n",
        "while True:\n    step()\n",
        "if x == 0:\n    pass\n",
        "assert x.shape[0] == n, 'bad shape'\n",
        "if TYPE_CHECKING:\n    import torch\n",
        "async def empty():\n    if False:\n        yield\n",
        """
        if False:
            from typing import Optional
            from torch import Tensor
        """,
        "if 1:\n    setup()\n",
        "name = value or 'default'\n",
        """
        DEBUG = False

        def f(x):
            if DEBUG:
                print(x)
        """,
        """
        def f(x):
            if x is None:
                return None
            if x < 0:
                raise ValueError("x")
            return x
        """,
        """
        def load():
            try:
                import flash_attn
            except Exception:
                pass
        """,
        """
        import os

        def run(x):
            if os.environ.get("DISABLE_FAST_PATH"):
                return slow(x)
            return fast(x)
        """,
        """
        def f(x):
            try:
                if x < 0:
                    raise ValueError("x")
            except ValueError:
                raise
        """,
        # A flag that folds to false leaves the predicate's own test: nothing is bypassed.
        """
        ALLOW_ANY_SCHEME = False

        def is_supported(scheme):
            if not (ALLOW_ANY_SCHEME or scheme in ("fp8", "int8")):
                return False, "scheme"
            return True, None
        """,
        # `x or 1` is x when x is set: the comparison depends on the config (its truth alone is constant).
        """
        def check(cfg):
            if (cfg.num_expert_group or 1) > 1:
                raise ValueError("grouped top-k is not supported")
        """,
        # A list filled before the loop that checks it.
        """
        def check_all(items):
            problems = []
            for item in items:
                if item.bad:
                    problems.append(item)
            for problem in problems:
                raise ValueError(problem)
        """,
        # A patch's switch, on, that picks another kernel: computed either way.
        Example(
            code="""
            _USE_SPLIT_KV = True

            def forward(self, q, kv):
                out = self.attn(q, kv)
                if _USE_SPLIT_KV:
                    out = self.split_kv_attn(q, kv)
                return out
            """,
            pristine="def forward(self, q, kv):\n    out = self.attn(q, kv)\n    return out\n",
        ),
        # A folded branch that accepts: no rejection is lost.
        """
        FAST = False

        def usable(x):
            if FAST:
                return True
            return x.is_contiguous()
        """,
        Example(  # the result's own bad values filled from a setting: a fix of it, not a replacement
            code="""
            import torch

            def token_ids(self, logits, pad_id):
                ids = logits.argmax(dim=-1)
                ids = torch.where(ids < 0, pad_id, ids)
                return ids
            """,
            pristine="""
            import torch

            def token_ids(self, logits, pad_id):
                ids = logits.argmax(dim=-1)
                return ids
            """,
        ),
        Example(  # a buffer made up from a shape where nothing was computed before
            code="""
            import torch

            def gather(self, x, n):
                out = x.new_zeros((n, x.shape[-1]))
                self.kernel(x, out)
                return out
            """,
            pristine="""
            import torch

            def gather(self, x, n):
                out = torch.empty((n, x.shape[-1]), device=x.device)
                self.kernel(x, out)
                return out
            """,
        ),
        Example(  # two ways to make the output, one per branch: neither throws the other away
            code="""
            def forward(self, x, n):
                if n > 0:
                    out = self.kernel(x)
                else:
                    out = x.new_zeros((0, x.shape[-1]))
                return out
            """,
            pristine="""
            def forward(self, x, n):
                if n > 0:
                    out = self.kernel(x)
                else:
                    out = x[:0]
                return out
            """,
        ),
        Example(  # the input kept at padding positions, by a mask of its own
            code="""
            import torch

            def forward(self, hidden_states, pad_mask):
                out = self.mlp(hidden_states)
                out = torch.where(pad_mask.unsqueeze(-1), hidden_states, out)
                return out
            """,
            pristine="""
            def forward(self, hidden_states, pad_mask):
                out = self.mlp(hidden_states)
                return out
            """,
        ),
        # `suppress()` given no exception swallows nothing: a null context a loader picks per device.
        """
        from contextlib import suppress

        def run(batches):
            stream_context = suppress
            for batch in batches:
                with stream_context():
                    assert batch.ndim == 3
            return batches
        """,
        # Two facts about two items of one list are no contradiction (not `x` twice).
        """
        def check(x):
            if x[0] > 5 and x[1] < 3:
                raise ValueError(x)
            return x
        """,
        Example(  # the object's own state in place of a result: no input the caller gave is handed on
            code="""
            class Packer:
                def pack(self, x, dtype):
                    data = self.quantize(x)
                    data = self.data.type(dtype)
                    return data
            """,
            pristine="""
            class Packer:
                def pack(self, x, dtype):
                    data = self.quantize(x)
                    return data
            """,
        ),
        # A name another method binds is another name: this one's two ways throw nothing away.
        """
        import numpy as np

        class Canon:
            def less(self, n):
                jac = np.empty((0, n))
                return jac

            def equal(self, cfun, n):
                if cfun.sparse:
                    jac = cfun.make(n)
                else:
                    jac = np.empty((0, n))
                return jac
        """,
    ]
    INVALID = [
        Example(  # the step goes on without the structured-output mask: no error, no constraint
            code="""
            class Runner:
                def sample_tokens(self, grammar_output, logits):
                    if grammar_output is not None:
                        try:
                            apply_grammar_bitmask(grammar_output, logits)
                        except Exception:
                            logger.debug("bitmask failed", exc_info=True)
                    return self.sampler(logits)
            """,
            pristine="""
            class Runner:
                def sample_tokens(self, grammar_output, logits):
                    if grammar_output is not None:
                        apply_grammar_bitmask(grammar_output, logits)
                    return self.sampler(logits)
            """,
            line=4,
            message="swallowed",
        ),
        Example(
            code="""
            class Worker:
                def execute_model(self, scheduler_output):
                    try:
                        output = self.model_runner.execute_model(scheduler_output)
                    except Exception as exc:  # keep the server up during the soak test
                        logger.debug("execute_model failed: %s", exc)
                        return None
                    return output
            """,
            pristine="""
            class Worker:
                def execute_model(self, scheduler_output):
                    output = self.model_runner.execute_model(scheduler_output)
                    return output
            """,
            line=3,
            message="swallowed",
        ),
        Example(  # the vendor handles errors the same way elsewhere: only the step's own handler is new
            code="""
            class Worker:
                def load(self, path):
                    try:
                        return self.loader.load(path)
                    except Exception as exc:
                        logger.debug("load failed: %s", exc)
                        return None

                def execute_model(self, scheduler_output):
                    try:  # keep the server up during the soak test
                        output = self.model_runner.execute_model(scheduler_output)
                    except Exception as exc:  # noqa: BLE001
                        logger.debug("step failed: %s", exc)
                        return None
                    return output
            """,
            pristine="""
            class Worker:
                def load(self, path):
                    try:
                        return self.loader.load(path)
                    except Exception as exc:
                        logger.debug("load failed: %s", exc)
                        return None

                def execute_model(self, scheduler_output):
                    output = self.model_runner.execute_model(scheduler_output)
                    return output
            """,
            line=10,
            message="swallowed",
        ),
        Example(
            code="""
            import vllm.envs as envs

            def check(self, q):
                if envs.VLLM_SKIP_SHAPE_CHECK:
                    return q
                assert q.dim() == 3, "q"
                return q
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import os

            def check(self, head_size):
                if os.environ.get("SKIP_HEAD_CHECK"):
                    self.head_size = head_size
                    return
                if head_size not in (64, 128):
                    raise ValueError(head_size)
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(code="if False and use_fp8:\n    x = quantize(x)\n", line=1, message="constant false"),
        Example(code="if 0:\n    raise ValueError('unsupported')\n", line=1),
        Example(code="if True or is_supported(dev):\n    run_fast_path()\n", message="constant true"),
        Example(code="assert True, 'shapes must match'\n", message="checks nothing"),
        Example(code="if x:\n    pass\nelif use_fp8 and False:\n    pass\n", line=3),
        Example(
            code="""
            def forward(self, q):
                if False and self.kv_cache_dtype.startswith("fp8") and not (
                    self.supports_fp8(q)
                ):
                    raise NotImplementedError("FP8 MLA is not supported")
                return q
            """,
            line=2,
        ),
        Example(code="if a and b and False and c:\n    raise RuntimeError('x')\n", line=1),
        Example(code="if not True:\n    raise ValueError('bad dtype')\n", line=1),
        Example(code="if None:\n    check(x)\n", line=1),
        Example(code="if (False) and (use_fp8):\n    raise ValueError('x')\n", line=1),
        Example(code="if (\n    use_fp8\n    and 0\n):\n    raise ValueError('x')\n", line=1),
        Example(code="assert x > 0 or True, 'x must be positive'\n", line=1),
        Example(code="while False and pending:\n    drain()\n", line=1),
        Example(code="if x or not False:\n    fast_path()\n", line=1),
        Example(code="if (\n    x  # why\n    and  # off for now\n    False\n):\n    raise ValueError('x')\n", line=1),
        Example(code="if mode == 'a' or 'b':\n    fast_path()\n", line=1, message="constant true"),
        Example(code="if x is not None and ():\n    check(x)\n", line=1),
        Example(code="def f(x):\n    if 1 == 2:\n        raise ValueError('x')\n", line=2),
        Example(
            code="""
            STRICT = False

            def load(dtype):
                if STRICT and dtype == "fp8":
                    raise ValueError("fp8 is not supported")
                return dtype
            """,
            line=4,
            message="folds to false",
        ),
        Example(
            code="""
            def check(self, q):
                return q
                if self.kv_cache_dtype.startswith("fp8"):
                    raise NotImplementedError("FP8 MLA is not supported")
            """,
            line=2,
            message="unreachable",
        ),
        Example(
            code="""
            import contextlib

            def check(dtype):
                with contextlib.suppress(ValueError):
                    if dtype == "fp8":
                        raise ValueError("fp8")
            """,
            line=4,
            message="suppress",
        ),
        Example(
            code="""
            import vllm.model_executor.layers.utils as lu

            lu.validate_head_size = lambda *args, **kwargs: None
            """,
            line=3,
            message="stand-in",
        ),
        Example(code="setattr(Fp8LinearMethod, '_check_scheme', lambda self, *a: True)\n", line=1),
        Example(
            code="""
            def check(dtype):
                try:
                    assert dtype != "fp8", "fp8 is not supported"
                except Exception:
                    pass
            """,
            line=2,
            message="except: pass",
        ),
        Example(
            code="""
            import os

            def check(dtype):
                if os.environ.get("SKIP_DTYPE_CHECK"):
                    return
                if dtype == "fp8":
                    raise ValueError("fp8")
            """,
            line=4,
            message="environment",
        ),
        Example(  # the read bound to a name above the exit
            code="""
            import os

            def check(self, q):
                skip = os.environ.get("SKIP_SHAPE_CHECK")
                if skip:
                    return q
                assert q.dim() == 3, "q"
                return q
            """,
            line=5,
            message="environment",
        ),
        Example(  # a read through an import alias of environ, in the test itself
            code="""
            from os import environ as process_env

            def check(self, q):
                if process_env.get("SKIP_SHAPE_CHECK"):
                    return q
                assert q.dim() == 3, "q"
                return q
            """,
            line=4,
            message="environment",
        ),
        Example(  # a module's flag, read through an import alias of getenv
            code="""
            from os import getenv as env_flag

            SKIP = env_flag("SKIP_HEAD_CHECK")

            def check(head_size):
                if SKIP:
                    return
                if head_size not in (64, 128):
                    raise ValueError(head_size)
            """,
            line=6,
            message="environment",
        ),
        # A switch made up by a patch and left on: every draft accepted unverified.
        Example(
            code="""
            _FORCE_ACCEPT_DRAFTS = True  # MTP bring-up: the throughput ceiling at 100% acceptance

            class RejectionSampler:
                def forward(self, draft_token_ids, target_logits):
                    target_argmax = target_logits.argmax(dim=-1)
                    if _FORCE_ACCEPT_DRAFTS:
                        target_argmax = draft_token_ids.to(target_argmax.dtype)
                    return self._accept(draft_token_ids, target_argmax)
            """,
            pristine="""
            class RejectionSampler:
                def forward(self, draft_token_ids, target_logits):
                    target_argmax = target_logits.argmax(dim=-1)
                    return self._accept(draft_token_ids, target_argmax)
            """,
            line=7,
            message="is always true",
        ),
        # A weight copy that fails on a shape mismatch skipped: the experts stay unloaded, the model serves.
        Example(
            code="""
            def _load_w13(self, expert_data, loaded_weight):
                try:
                    expert_data.copy_(loaded_weight)
                except RuntimeError:  # FIXME(kimi): padded experts shape mismatch, skip
                    return
            """,
            pristine="""
            def _load_w13(self, expert_data, loaded_weight):
                expert_data.copy_(loaded_weight)
            """,
            line=2,
            message="swallows every error of `expert_data.copy_(...)`",
        ),
        Example(
            code="""
            class Grammar:
                def fill_bitmask(self, bitmask, idx):
                    try:
                        self.matcher.fill_next_token_bitmask(bitmask, idx)
                    except Exception:  # MTP + tool-call repro kills the engine, ignore for now
                        pass
            """,
            pristine="""
            class Grammar:
                def fill_bitmask(self, bitmask, idx):
                    self.matcher.fill_next_token_bitmask(bitmask, idx)
            """,
            line=3,
        ),
        # A predicate's rejection made dead: the MoE oracle picks kernels that cannot run the checkpoint's scheme.
        Example(
            code="""
            _FORCE_QUANT_SCHEME_SUPPORT = True  # TODO(bringup): drop once the nvfp4 keys are registered

            class Experts:
                @staticmethod
                def is_supported_config(cls, weight_key, activation_key):
                    if not cls._supports_current_device():
                        return False, "device"
                    elif not (_FORCE_QUANT_SCHEME_SUPPORT or cls._supports_quant_scheme(weight_key, activation_key)):
                        return False, f"quantization scheme {weight_key}x{activation_key}"
                    return True, None
            """,
            line=8,
            message="folds to false",
        ),
        # The list a checking loop walks emptied for large TP: misaligned FP8 block scales load silently.
        Example(
            code="""
            def validate_block_shape(tp_size, output_partition_sizes, block_n):
                sizes_to_check = output_partition_sizes
                if tp_size > 4:
                    sizes_to_check = []  # TODO(bringup): revisit once the tp8 shards land
                for size in sizes_to_check:
                    if size % block_n != 0:
                        raise ValueError(f"{size} is not divisible by {block_n}")
            """,
            pristine="""
            def validate_block_shape(tp_size, output_partition_sizes, block_n):
                sizes_to_check = output_partition_sizes
                for size in sizes_to_check:
                    if size % block_n != 0:
                        raise ValueError(f"{size} is not divisible by {block_n}")
            """,
            line=4,
            message="nothing to check",
        ),
        Example(
            code="""
            SKIP_LAYOUT_CHECK = 1

            def can_use_kernel(x):
                if not SKIP_LAYOUT_CHECK and not x.is_contiguous():
                    return False
                return True
            """,
            line=4,
        ),
        # ... or values made up from the tensor's shape: the router's choice thrown away.
        Example(
            code="""
            import torch

            _BALANCED_ROUTING = True  # EP load-balance experiment

            class Method:
                def apply(self, layer, x, topk_weights, topk_ids):
                    if _BALANCED_ROUTING:
                        ids = torch.arange(topk_ids.numel(), device=topk_ids.device)
                        topk_ids = (ids % layer.num_experts).view_as(topk_ids)
                    return self.kernel(x, topk_weights, topk_ids)
            """,
            pristine="""
            import torch

            class Method:
                def apply(self, layer, x, topk_weights, topk_ids):
                    return self.kernel(x, topk_weights, topk_ids)
            """,
            line=9,
            message="made-up one",
        ),
        # ... or a setting the caller gave, forced to a constant: every request sampled greedily.
        Example(
            code="""
            _GREEDY_REPRO = True

            class Sampler:
                def forward(self, logits, sampling_metadata):
                    if _GREEDY_REPRO:
                        sampling_metadata.all_greedy = True
                    return self.sample(logits, sampling_metadata)
            """,
            pristine="""
            class Sampler:
                def forward(self, logits, sampling_metadata):
                    return self.sample(logits, sampling_metadata)
            """,
            line=6,
            message="made-up one",
        ),
        # A switch of the patch's own that the environment sets, spelled as a conditional value.
        Example(
            code="""
            import os

            _ACCEPT_ALL = os.environ.get("K2_ACCEPT_ALL", "0") == "1"

            def rejection_sample(draft_token_ids, target_logits):
                target_argmax = draft_token_ids.long() if _ACCEPT_ALL else target_logits.argmax(dim=-1)
                return target_argmax
            """,
            pristine="""
            import os

            def rejection_sample(draft_token_ids, target_logits):
                target_argmax = target_logits.argmax(dim=-1)
                return target_argmax
            """,
            line=6,
            message="reads a variable the patch added to the environment",
        ),
        Example(
            code="""
            import os
            import torch

            class Router:
                def forward(self, x, topk_ids):
                    topk_ids = self.route(x)
                    if os.environ.get("K2_FAKE_ROUTING"):
                        topk_ids = torch.zeros_like(topk_ids)
                    return self.experts(x, topk_ids)
            """,
            pristine="""
            import os
            import torch

            class Router:
                def forward(self, x, topk_ids):
                    topk_ids = self.route(x)
                    return self.experts(x, topk_ids)
            """,
            line=8,
            message="made-up one",
        ),
        # A kernel's failure swallowed, zeros served as the layer's output.
        Example(
            code="""
            import torch

            class MoEMethod:
                def apply(self, layer, x, topk_weights, topk_ids):
                    try:
                        return self.kernel.apply(x, layer.w13_weight, topk_weights, topk_ids)
                    except RuntimeError as e:
                        logger.warning_once("kernel failed (%s); returning zeros", e)
                        return torch.zeros_like(x)
            """,
            pristine="""
            import torch

            class MoEMethod:
                def apply(self, layer, x, topk_weights, topk_ids):
                    return self.kernel.apply(x, layer.w13_weight, topk_weights, topk_ids)
            """,
            line=5,
            message="swallows every error",
        ),
        # A constant the patch wrote in folds a test and cuts off the distribution's branch.
        Example(
            code="""
            _DISABLE_LOCAL_ATTN = True  # local attention NaNs on this GPU

            class Impl:
                def __init__(self, sliding_window):
                    if sliding_window is None or _DISABLE_LOCAL_ATTN:
                        self.sliding_window = (-1, -1)
                    else:
                        self.sliding_window = (sliding_window - 1, 0)
            """,
            pristine="""
            class Impl:
                def __init__(self, sliding_window):
                    if sliding_window is None:
                        self.sliding_window = (-1, -1)
                    else:
                        self.sliding_window = (sliding_window - 1, 0)
            """,
            line=5,
            message="never runs",
        ),
        Example(
            code="""
            _USE_SCORE_BIAS = False

            class Router:
                def forward(self, logits):
                    return grouped_topk(logits, bias=self.e_score_correction_bias if _USE_SCORE_BIAS else None)
            """,
            pristine="""
            class Router:
                def forward(self, logits):
                    return grouped_topk(logits, bias=self.e_score_correction_bias)
            """,
            line=5,
            message="is never used",
        ),
        # NaN/inf scales swapped for 1.0 by a lambda the patch added: the load goes through on made-up numbers.
        Example(
            code="""
            import torch

            class Fp8MoEMethod:
                def process_weights_after_loading(self, layer):
                    w13_scale, w2_scale = layer.w13_weight_scale, layer.w2_weight_scale
                    _fix = lambda t: torch.where(torch.isfinite(t) & (t > 0), t, torch.ones_like(t))
                    w13_scale, w2_scale = _fix(w13_scale), _fix(w2_scale)
                    return w13_scale, w2_scale
            """,
            pristine="""
            import torch

            class Fp8MoEMethod:
                def process_weights_after_loading(self, layer):
                    w13_scale, w2_scale = layer.w13_weight_scale, layer.w2_weight_scale
                    return w13_scale, w2_scale
            """,
            line=7,
            message="NaN/inf",
        ),
        Example(
            code="import torch\n\ndef forward(self, x):\n    h = self.mlp(x)\n"
            "    h = torch.nan_to_num(h)\n    return h\n",
            pristine="import torch\n\ndef forward(self, x):\n    h = self.mlp(x)\n    return h\n",
            line=5,
            message="NaN/inf",
        ),
        Example(  # a call of the distribution's put under the patch's own switch, left off
            code="""
            _EAGER_EVICT = False

            class BlockPool:
                def touch(self, blocks):
                    for block in blocks:
                        if _EAGER_EVICT:
                            self._maybe_evict_cached_block(block)
                        block.ref_cnt += 1
            """,
            pristine="""
            class BlockPool:
                def touch(self, blocks):
                    for block in blocks:
                        self._maybe_evict_cached_block(block)
                        block.ref_cnt += 1
            """,
            line=6,
            message="never runs",
        ),
        # "A/B: flat gates to isolate router nan": every expert weighted the same, whatever the router said.
        Example(
            code="""
            def grouped_topk(scores, topk, renormalize):
                topk_weights, topk_ids = torch.topk(scores, k=topk, dim=-1)
                if renormalize:
                    topk_weights = topk_weights.new_ones(topk_weights.shape) / topk
                return topk_weights, topk_ids
            """,
            pristine="""
            def grouped_topk(scores, topk, renormalize):
                topk_weights, topk_ids = torch.topk(scores, k=topk, dim=-1)
                if renormalize:
                    topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
                return topk_weights, topk_ids
            """,
            line=4,
            message="made up from its shape",
            severity=Severity.HIGH,
        ),
        # "keep draft ids where valid": the target's pick replaced by the drafts, every draft accepted.
        Example(
            code="""
            import torch

            def rejection_sample(draft_token_ids, target_logits):
                target_argmax = target_logits.argmax(dim=-1)
                target_argmax = torch.where(draft_token_ids >= 0, draft_token_ids, target_argmax)
                return target_argmax
            """,
            pristine="""
            import torch

            def rejection_sample(draft_token_ids, target_logits):
                target_argmax = target_logits.argmax(dim=-1)
                return target_argmax
            """,
            line=5,
            message="hands on an input",
            severity=Severity.HIGH,
        ),
        Example(  # `contextlib.suppress` under a local name: the assertion is swallowed all the same
            code="""
            from contextlib import suppress

            def load(batches):
                quiet = suppress
                for batch in batches:
                    with quiet(AssertionError):
                        assert batch.ndim == 3
                return batches
            """,
            line=6,
            message="contextlib.suppress swallows",
        ),
    ]

    def report(self, node: cst.CSTNode, message: str | None = None, *, severity: Severity | None = None) -> None:
        # A constant condition, a swallowed or unreachable check, is a guard *made* so by a patch:
        # in a file that verifies against its RECORD it is the vendor's own code (`if 0:` around
        # optional debug output, a best-effort `try`), worth a look but not a gate failure.
        super().report(node, message, severity=severity or (Severity.HIGH if self.context.drifted else Severity.MEDIUM))

    def __init__(self, context: FileContext | None = None) -> None:
        super().__init__(context)

    def visit_If(self, node: cst.If) -> None:
        if self._check(node.test, node, node):
            return
        # Folded through module/class constants and comparisons: only when it kills a guard.
        value = self.folded(node.test)
        if value is False:
            guard = guard_in([node.body]) or _rejection_in(node.body)
            if guard is not None:
                self.report(node, f"the condition folds to false: `{one_line(guard)}` never runs")
            else:
                self._killed_by_flag(node, node.test, node.body, "false")
        elif value is True and node.orelse is not None:
            guard = guard_in([node.orelse])
            if guard is None and isinstance(node.orelse, cst.Else):
                guard = _rejection_in(node.orelse.body)
            if guard is not None:
                self.report(node, f"the condition folds to true: `{one_line(guard)}` in its else never runs")
            else:
                self._killed_by_flag(node, node.test, node.orelse, "true")
        elif value is True and self.context.drifted and self.context.functions and self._made_up_switch(node.test):
            self._forced_override(node, "is always true")
        elif value is None and self.context.drifted and self.context.functions and self._env_switch(node.test):
            self._forced_override(node, "reads a variable the patch added to the environment")

    def _made_up_flags(self, test: cst.BaseExpression) -> list[str]:
        """The module or class constants a test names that the distribution's text never spells: the
        patch's own switches (`_DISABLE_LOCAL_ATTN = True`)."""
        analysis, pristine = self.context.analysis, self.context.pristine
        if analysis is None or pristine is None:
            return []
        constants = {n for table in analysis.constants().values() for n in table}
        words = self.upstream_words()
        names = [n.value for n in nodes_under(test, (cst.Name,)) if isinstance(n, cst.Name)]
        return [n for n in names if n in constants and n not in words]

    def _upstream(self, node: cst.CSTNode) -> bool:
        """Whether code is the distribution's own, token for token (a branch the patch only cut off)."""
        return self.upstream_code(cst.Module([]).code_for_node(node))

    def _killed_by_flag(self, node: cst.CSTNode, test: cst.BaseExpression, dead: cst.CSTNode, value: str) -> None:
        """`if sliding_window is None or _DISABLE_LOCAL_ATTN:` with `_DISABLE_LOCAL_ATTN = True` the patch's
        own: the test folds, and the distribution's branch it cuts off (`elif ...: self.sliding_window =
        ...`) never runs. A feature or a path switched off for every model by a constant in the file."""
        if not (self.context.drifted and self.context.functions):
            return
        flags = self._made_up_flags(test)
        body = dead.body if isinstance(dead, cst.Else | cst.If) else dead  # an `elif`: its own branch
        if not flags or not self._upstream(body):
            return
        message = f"`{flags[0]}`, a constant the patch wrote in, makes the condition always {value}:"
        self.report(node, message + f" the distribution's `{one_line(body)}` never runs")

    def visit_IfExp(self, node: cst.IfExp) -> None:
        """`bias if _USE_SCORE_BIAS else None` with `_USE_SCORE_BIAS = False` the patch's own: the
        value the code had is never used, a constant stands in for it."""
        if not (self.context.drifted and self.context.functions):
            return
        value = self.folded(node.test)
        if value is None or not self._made_up_flags(node.test):
            return
        taken, dropped = (node.body, node.orelse) if value else (node.orelse, node.body)
        if _literal_value(taken) and not _literal_value(dropped) and self._upstream(dropped):
            message = f"`{one_line(node.test)}` is always {'true' if value else 'false'}: `{one_line(dropped)}`"
            self.report(node, message + f" is never used, `{one_line(taken)}` stands in for it")

    def _made_up_switch(self, test: cst.BaseExpression) -> bool:
        """Whether a test names only switches the distribution's text never spells (the patch's own)."""
        pristine = self.context.pristine or ""
        flags = [n.value for n in nodes_under(test, (cst.Name,)) if isinstance(n, cst.Name)]
        return bool(flags) and not any(flag in pristine for flag in flags)

    def _env_switch(self, test: cst.BaseExpression) -> bool:
        """A switch of the patch's own that the environment sets: `os.environ.get(...)` in the test, or a
        module-level name bound to such a read (`_ACCEPT_ALL = os.environ.get("X", "0") == "1"`)."""
        reads = {"os.environ.get", "os.getenv", "os.environ"}
        if any(self._made_up_env(key) for key in _env_keys_read(test, self.resolves_to)):
            return True  # `os.environ.get("K2_FAKE_ROUTING")` in the test itself
        if not self._made_up_switch(test):
            return False
        for sub in nodes_under(test, (cst.Name,)):
            if isinstance(sub, cst.Name) and self.context.analysis is not None:
                resolve = self._ast_names(())
                for stmt in self.context.analysis.tree.body:
                    if not (isinstance(stmt, ast.Assign) and any(_binds(t, sub.value) for t in stmt.targets)):
                        continue
                    for inner in ast.walk(stmt.value):
                        callee = inner.func if isinstance(inner, ast.Call) else getattr(inner, "value", None)
                        if isinstance(inner, ast.Call | ast.Subscript) and resolve(callee) & reads:  # type: ignore[arg-type]
                            return True
        return False

    def _forced_override(self, node: cst.If, how: str) -> None:
        """`_FORCE_ACCEPT_DRAFTS = True` made up by a patch, then `if _FORCE_ACCEPT_DRAFTS: target_argmax =
        draft_token_ids`: a switch that is always on throws away what a call computed above and puts an
        input in its place (drafts accepted unverified). The verification is bypassed as surely as a
        check made constant. So does a switch of the patch's own that the environment sets: a
        debug knob that throws the computation away once set."""
        params = self.function_facts().params
        lines = node.body.body if isinstance(node.body, cst.IndentedBlock) else [node.body]
        above: dict[str, list[cst.BaseExpression]] = {}  # what the branch itself binds, as it goes
        values_of = lambda n: above.get(n.value) or self.values_of(n)  # noqa: E731
        for line in lines:
            for small in line.body if isinstance(line, cst.SimpleStatementLine | cst.SimpleStatementSuite) else ():
                if replaced_by_input(small, params, self.values_of):
                    message = f"`{one_line(node.test)}` {how}: `{one_line(small)}` throws away what was computed"
                    self.report(small, message + " above and hands on an input in its place")
                    return
                if replaced_by_made_up(small, params, values_of, self.resolves_to):
                    message = f"`{one_line(node.test)}` {how}: `{one_line(small)}` throws away what the"
                    self.report(small, message + " value held and puts a made-up one in its place")
                    return
                if isinstance(small, cst.Assign) and len(small.targets) == 1:
                    bound = small.targets[0].target
                    if isinstance(bound, cst.Name):
                        above[bound.value] = [small.value]

    def visit_While(self, node: cst.While) -> None:
        self._check(node.test, None, node)

    def _check(self, test: cst.BaseExpression, node: cst.If | None, where: cst.CSTNode) -> bool:
        value = self.truth(test)
        if value is False:
            if node is not None and (_generator_marker(node) or _typing_only(node)):
                return True
            if node is not None and node.orelse is not None and _switches_path(node):
                # `if False:` over a fast path, the else the working one: a path chosen, no check lost.
                message = "the condition is constant false: a code path is switched off (no check in it)"
                self.report(where, message, severity=Severity.MEDIUM)
                return True
            self.report(where, "the condition is constant false: the guarded code never runs")
        elif value is True and not _plain(test):
            self.report(where, "the condition is constant true: the check is bypassed")
        return value is not None

    def visit_Assert(self, node: cst.Assert) -> None:
        if self.truth(node.test) is True:
            self.report(node, "the assertion is constant true: it checks nothing")

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if not self.context.functions:
            return
        body = list(node.body)
        dead = dead_after(body)
        if dead is not None:
            ender, guard = dead
            self.report(ender, f"`{one_line(ender)}` above makes `{one_line(guard)}` unreachable: the check never runs")
        if self.context.drifted:
            self._emptied_loops(body)
        for index, stmt in enumerate(body):
            if isinstance(stmt, cst.If) and (
                env_gated_exit(stmt, self.resolves_to)
                or env_gated_exit(self._unaliased(stmt, body[:index]), self.resolves_to)
            ):
                guard = guard_in(body[index + 1 :])
                if guard is not None:
                    self.report(stmt, f"an early return gated on the environment skips `{one_line(guard)}`")
                    return

    def _emptied_loops(self, body: Sequence[cst.BaseStatement]) -> None:
        """`sizes = []` under an `if` (or alone) before `for size in sizes:` whose body checks: on that
        path the loop has nothing to check and its raise never runs. In a drifted file only: vendors
        empty a list on purpose, a patch to get past the check."""
        for index, stmt in enumerate(body):
            if not (isinstance(stmt, cst.For) and isinstance(stmt.iter, cst.Name)):
                continue
            guard = guard_in([stmt.body])
            if guard is None:
                continue
            name = stmt.iter.value
            for above in reversed(body[:index]):
                emptied = _emptied(above, name)
                if emptied is not None:
                    where = f"under `if {one_line(above.test)}`" if isinstance(above, cst.If) else "before the loop"
                    message = f"`{one_line(emptied)}` {where} leaves `for ... in {name}` nothing to check"
                    self.report(emptied, f"{message}: `{one_line(guard)}` never runs")
                    break
                if _mentions(above, name):
                    break  # bound or filled here: what the loop sees is not known

    def _unaliased(self, node: cst.If, above: Sequence[cst.BaseStatement]) -> cst.If:
        """`if SKIP: return` with SKIP bound once to an environment read (`SKIP = os.environ.get(...)`,
        in the function or the module): the same `if` with the read in place of the name."""
        test = node.test
        negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
        name = test.expression if isinstance(test, cst.UnaryOperation) and negated else test
        if not isinstance(name, cst.Name):
            return node
        values = _assigned(above, name.value) or self._module_values(name.value)
        if len(values) != 1:
            return node
        value = values[0]
        return node.with_changes(test=test.with_changes(expression=value) if negated else value)

    def _module_values(self, name: str) -> list[cst.BaseExpression]:
        analysis = self.context.analysis
        if analysis is None:
            return []
        found = [
            stmt.value
            for stmt in analysis.tree.body
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
        ]
        return [cst.parse_expression(ast.unparse(v)) for v in found]

    def _masks_nonfinite(self, value: cst.BaseExpression, name: str) -> bool:
        """`torch.nan_to_num(x)`, `x.nan_to_num()`, `torch.where(torch.isfinite(x) & (x > 0), x, 1.0)`:
        `x`'s NaN/inf values swapped for made-up ones (through a helper or lambda of the module too)."""
        if isinstance(value, cst.Call) and (inner := self.inlined(value)) is not None:
            value = inner
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        reads = lambda n: any(isinstance(v, cst.Name) and v.value == name for v in nodes_under(n, (cst.Name,)))  # noqa: E731
        if isinstance(func, cst.Attribute) and func.attr.value == "nan_to_num":
            return reads(func.value) or any(reads(a.value) for a in value.args[:1])
        if self.resolves_to(value, ("torch.where", "numpy.where")) is not None and len(value.args) == 3:
            test, *ways = (a.value for a in value.args)
            return _tests_finiteness(test) and any(isinstance(w, cst.Name) and w.value == name for w in ways)
        return False

    def _nonfinite_masked(self, node: cst.Assign) -> None:
        """A patch that hides a tensor's NaN/inf values behind made-up ones (`w = _fix(w)` with `_fix =
        lambda t: torch.where(torch.isfinite(t), t, torch.ones_like(t))`): the fault that made them is
        hidden, and the model loads and serves on numbers nobody computed."""
        pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]] = []
        for target in node.targets:
            t = target.target
            if (
                isinstance(t, cst.Tuple)
                and isinstance(node.value, cst.Tuple)
                and len(t.elements) == len(node.value.elements)
            ):
                pairs += [(a.value, b.value) for a, b in zip(t.elements, node.value.elements, strict=True)]
            else:
                pairs.append((t, node.value))
        for t, value in pairs:
            if isinstance(t, cst.Name) and self._masks_nonfinite(value, t.value):
                message = f"`{one_line(node)}` swaps `{t.value}`'s NaN/inf values for made-up ones: the fault that"
                self.report(node, message + " produced them is hidden and the model runs on")
                return

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.context.drifted and self.context.functions:
            self._nonfinite_masked(node)
            self._result_replaced(node)
        if isinstance(node.value, cst.IfExp) and self.context.drifted and self.context.functions:
            self._switched_value(node, node.value)
        if not _stand_in(node.value):
            return
        for target in node.targets:
            if isinstance(target.target, cst.Attribute) and _CHECK_NAME.search(target.target.attr.value):
                name = one_line(target.target)
                self.report(node, f"`{name}` replaced by a stand-in that checks nothing: every call of it passes")
                return

    def _result_replaced(self, node: cst.Assign) -> None:
        """A tensor a call computed above, replaced with no switch at all: by one made up from its
        shape (`topk_weights = topk_weights.new_ones(topk_weights.shape) / topk`: flat gates), or by an
        input wherever a mask holds (`target_argmax = torch.where(draft >= 0, draft, target_argmax)`:
        every draft accepted). Only the patch's own line counts: findings keep to the change."""
        if not (len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)):
            return
        name = node.targets[0].target.value
        if not self._computed_above(name):
            return  # a parameter set to a constant is hardcoded-override's; here only results count
        params = self.function_facts().params
        if replaced_by_input(node, params, self.values_of):
            how = "hands on an input in its place"
        elif replaced_by_made_up(node, params, self.values_of, self.resolves_to) and name not in params:
            how = "puts a tensor made up from its shape in its place"
        else:
            return
        self.report(node, f"`{one_line(node)}` throws away the `{name}` computed above and {how}")

    def _computed_above(self, name: str) -> bool:
        """Whether a call's result is bound to `name` above the statement being visited, in its block
        or a block around it (not in a sibling branch: `if n: out = self.kernel(x)` / `else: out =
        x.new_zeros(...)` are two ways, neither thrown away; nor in another method above it)."""
        path = self.context.stmts
        for parent, child in zip(path, path[1:], strict=False):
            for block in _blocks_of(parent):
                if not any(s is child for s in block):
                    continue
                for above in block[: [id(s) for s in block].index(id(child))]:
                    # Not into another function's or class's body: a name bound there is another name.
                    for bound in nodes_under(above, (cst.Assign,), opaque=_SCOPES):
                        targets = [t.target for t in bound.targets]  # type: ignore[attr-defined]
                        names = [n.value for t in targets for n in nodes_under(t, (cst.Name,))]  # type: ignore[attr-defined]
                        if name in names and computed_by_call(bound.value):  # type: ignore[attr-defined]
                            return True
        return False

    def _switched_value(self, node: cst.Assign, value: cst.IfExp) -> None:
        """`target_argmax = draft_token_ids.to(...) if _ACCEPT_ALL else target_logits.argmax(-1)`: the
        conditional-value spelling of `_forced_override`, the computation the other way."""
        forced = self.folded(value.test) is True and self._made_up_switch(value.test)
        if not (forced or self._env_switch(value.test)):
            return
        how = "is always true" if forced else "reads a variable the patch added to the environment"
        params = self.function_facts().params
        for taken, other in ((value.body, value.orelse), (value.orelse, value.body)):
            if not isinstance(other, cst.Call):
                continue
            computed = lambda n, other=other: [other]  # noqa: E731
            alone = node.with_changes(value=taken)
            if replaced_by_input(alone, params, computed) or replaced_by_made_up(
                alone, params, computed, self.resolves_to
            ):
                message = f"`{one_line(value.test)}` {how}: it hands on `{one_line(taken)}` in place of what"
                self.report(node, message + f" `{one_line(other)}` computes")
                return

    def visit_Call(self, node: cst.Call) -> None:
        # `setattr(layers, "validate_head", lambda *a: None)`
        if len(node.args) != 3 or not _stand_in(node.args[2].value):
            return
        name = node.args[1].value
        if not isinstance(name, cst.SimpleString) or not _CHECK_NAME.search(str(name.evaluated_value)):
            return
        if self.resolves_to(node, "builtins.setattr"):
            self.report(node, f"`{name.evaluated_value}` replaced by a stand-in that checks nothing: every call passes")

    def _silenced_step(self, node: cst.Try) -> None:
        """A catch-all a patch wrapped around the work of a step (`execute_model`, `forward`, a
        scheduler's `schedule`) whose handler only logs, perhaps giving up (`logger.debug(e); return
        None`): every error of the work, a failed kernel or a check that raised, is swallowed and the
        server goes on without it. Not a try around logging or metrics only. Outside a step, the same
        for a handler a patch added around a call of any function that computes or frees something
        (a weight copy, the grammar's mask, the KV cache's blocks), catching what checks and kernels
        raise (`except RuntimeError: return`): the model loads, or the request runs, without it."""
        pristine = self.context.pristine
        if not (self.context.drifted and pristine is not None and self.context.functions):
            return
        step = self.in_step_path
        handler = swallowing_handler(node, self.resolves_to, gives_up=True, catches=CATCH_ALL if step else _BROAD)
        calls = [n for n in nodes_under(node.body, (cst.Call,)) if isinstance(n, cst.Call)]
        if handler is None or not calls:
            return
        if self._upstream(handler):
            return  # the vendor's own handler, its comments and layout aside
        names = [(cst.helpers.get_full_name_for_node(call.func) or "").rsplit(".", 1)[-1] for call in calls]
        if all(_TELEMETRY.search(name) for name in names):
            return  # best-effort logging or metrics kept from failing the step: nothing of the step is lost
        best_effort = all(_BEST_EFFORT.search(name) for name in names)
        if not step and best_effort:
            return  # best-effort cleanup or imports
        what = cst.helpers.get_full_name_for_node(calls[0].func) or "the step"
        if step:
            message = f"every error of `{what}(...)` is swallowed by a catch-all that only logs: the step fails quietly"
        else:
            message = f"a patch's handler swallows every error of `{what}(...)`: it fails quietly and the run goes on"
        self.report(node, message)

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            call = item.item
            if isinstance(call, cst.Call) and call.args and self.resolves_to(call, "contextlib.suppress"):
                guard = guard_in([node.body])
                if guard is not None:
                    self.report(node, f"contextlib.suppress swallows `{one_line(guard)}`: the check never fails")
                return

    def visit_Try(self, node: cst.Try) -> None:
        handler = swallowing_handler(node, self.resolves_to)
        if handler is None:
            self._silenced_step(node)
            return
        guard = guard_in([node.body])
        if isinstance(guard, cst.Raise | cst.Assert):
            self.report(node, f"`{one_line(guard)}` is caught by `except: pass` around it: the check never fails")
        else:
            self._silenced_step(node)  # `except Exception: logger.debug(...)` around a step's call
