"""The rule API: what a rule file in `rules/` imports, subclasses and declares (nothing else).

Two kinds of rule, as in Fixit: `Rule` walks the libcst tree of a Python file (`visit_*`
methods that call `self.report(node)`); `TextRule` reads the text of a file, and of its pristine
version when there is one (`.pth` files, comparisons of two versions).
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst
from libcst.metadata import MetadataWrapper

from patchaudit.analysis import changes as _changes
from patchaudit.analysis import conditions as _conditions
from patchaudit.analysis import counts as _counts
from patchaudit.analysis import instances as _instances
from patchaudit.analysis import names as _names
from patchaudit.analysis import purpose as _purpose
from patchaudit.analysis import sinks as _sinks
from patchaudit.analysis import values as _values
from patchaudit.analysis.changes import (
    STRONG_CHANGES,
    Change,
    Found,
    made_up,
    made_up_result,
    padding,
    returns_nothing,
    setting,
)
from patchaudit.analysis.counts import (
    MORE_COUNT_NAMES,
    OFFSETS,
    PLURAL,
    POSITIONS,
    THROUGH_NAMES,
    element_count,
    len_may_count,
    module_counters,
    numeric_names,
    shape_compared,
    unparsed,
)
from patchaudit.analysis.flow import (
    CATCH_ALL,
    CHECK_CALL,
    FILLERS,
    dead_after,
    env_gated_exit,
    guard_in,
    swallowing_handler,
)
from patchaudit.analysis.guards import conjunction as guard_conjunction
from patchaudit.analysis.guards import covers as guard_covers
from patchaudit.analysis.guards import escapes as guard_escapes
from patchaudit.analysis.guards import fails_alike as guard_fails_alike
from patchaudit.analysis.guards import narrowed as guard_narrowed
from patchaudit.analysis.guards import swallowed_by, swallowers
from patchaudit.analysis.guards import terms as guard_terms
from patchaudit.analysis.lines import code_tokens, line_opcodes, one_line, pth_executable_lines, source_lines
from patchaudit.analysis.module import (
    NOT_CONSTANT,
    Helper,
    Inner,
    ModuleAnalysis,
    constant_value,
    short_helper_names,
    short_helpers,
)
from patchaudit.analysis.names import NameTable, Scope, canonical
from patchaudit.analysis.omits import tuning
from patchaudit.analysis.paths import fixed_path_ast, path_names, spells_path
from patchaudit.analysis.per_file import per_file
from patchaudit.analysis.purpose import reached_from, wraps_step
from patchaudit.analysis.reach import blocked_lines, neutered, never_fires, off_by_default
from patchaudit.analysis.rejects import bindings_at, exits_above, left_before, rejects_nothing, repinned
from patchaudit.analysis.rewrites import (
    FACTORY_NAMES,
    GIVEN_AS,
    as_given,
    computed_by_call,
    replaced_by_input,
    replaced_by_made_up,
    unwrapped,
)
from patchaudit.analysis.siblings import Siblings, imported_names
from patchaudit.analysis.sinks import subexpressions
from patchaudit.analysis.trees import (
    assigned_names,
    bound_through,
    called_name,
    dotted,
    full_name,
    of_types,
    statements,
)
from patchaudit.analysis.trees import walk as ast_nodes
from patchaudit.analysis.values import COUNT_NAME, UNKNOWN, call_arg, const_value, literal_string, ref_of_cst
from patchaudit.analysis.walk import nodes as nodes_under
from patchaudit.filters import Alias, Filter, Spelling, Statement, matches_any, spelled_identifiers
from patchaudit.report import Severity

__all__ = [
    "blocked_lines",
    "never_fires",
    "neutered",
    "off_by_default",
    "Siblings",
    "dotted",
    "full_name",
    "imported_names",
    "dead_after",
    "env_gated_exit",
    "CHECK_CALL",
    "CATCH_ALL",
    "unparsed",
    "guard_in",
    "swallowing_handler",
    "guard_conjunction",
    "guard_escapes",
    "guard_fails_alike",
    "guard_narrowed",
    "guard_covers",
    "guard_terms",
    "bindings_at",
    "rejects_nothing",
    "exits_above",
    "left_before",
    "repinned",
    "swallowed_by",
    "swallowers",
    "Example",
    "Helper",
    "Inner",
    "NOT_CONSTANT",
    "constant_value",
    "fixed_path_ast",
    "Hit",
    "Pending",
    "FileContext",
    "Rule",
    "TextRule",
    "Statement",
    "Alias",
    "matches_any",
    "Spelling",
    "per_file",
    "tuning",
    "called_name",
    "reached_from",
    "wraps_step",
    "Severity",
    "FORWARD_NAMES",
    "COUNT_NAME",
    "shape_compared",
    "MORE_COUNT_NAMES",
    "OFFSETS",
    "PLURAL",
    "POSITIONS",
    "unwrapped",
    "replaced_by_input",
    "replaced_by_made_up",
    "computed_by_call",
    "FACTORY_NAMES",
    "GIVEN_AS",
    "FILLERS",
    "as_given",
    "element_count",
    "len_may_count",
    "THROUGH_NAMES",
    "module_counters",
    "numeric_names",
    "short_helper_names",
    "short_helpers",
    "path_names",
    "statements",
    "ast_nodes",
    "of_types",
    "spelled_identifiers",
    "assigned_names",
    "bound_through",
    "spells_path",
    "Change",
    "STRONG_CHANGES",
    "Found",
    "made_up",
    "made_up_result",
    "returns_nothing",
    "padding",
    "setting",
    "UNKNOWN",
    "call_arg",
    "subexpressions",
    "nodes_under",
    "one_line",
    "const_value",
    "literal_string",
    "line_opcodes",
    "pth_executable_lines",
    "source_lines",
]

# Function names that run on every step of a model: a hazard there fires per token or per batch.
_TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "$TMPDIR")
# A forward and its variants (`forward_cuda`), a function named for the forward it runs
# (`_model_forward`, `moe_forward`: the pass itself), and `__call__`; not one named for what it does
# around a forward (`prepare_forward`, `set_forward_context`, `_make_forward`, a test, a wrapper a
# tool sets around a module's forward: `wrapped_forward`, `top_wrapped_forward`).
FORWARD_NAMES = re.compile(
    r"^_*forward(_\w+)?$|^__call__$"
    r"|^(?!_*(?:pre|post|prepare|finish|update|no|make|create|begin|end|init|set|get|register|compile|rewrite"
    r"|benchmark|collect|skip|join|recover|dispatch|test)_)(?!\w*wrap)\w+_forward$"
)
STEP_NAMES = re.compile(
    r"^_*(?:execute_model|model_step|step|schedule|sample|compute_logits|update_from_output|prepare_inputs"
    r"|propose|do_kv_cache_update)(?:_\w+)?$"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Example:
    """A code example a rule must pass (VALID) or flag (INVALID).

    `code` and `pristine` are dedented, and a leading newline dropped, so they can be written
    as indented triple-quoted blocks. `line` and `message` (a substring) pin the finding.
    """

    code: str
    pristine: str | None = None
    path: str = "example.py"
    line: int | None = None
    message: str | None = None
    severity: Severity | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", _dedent(self.code))
        if self.pristine is not None:
            object.__setattr__(self, "pristine", _dedent(self.pristine))


def _dedent(code: str) -> str:
    """An indented triple-quoted block as code: the newline after the opening quotes dropped."""
    if code.startswith("\n") and code[1:2] in (" ", "\t"):
        return textwrap.dedent(code[1:])
    return textwrap.dedent(code)


@dataclass(frozen=True, kw_only=True, slots=True)
class Hit:
    """A rule's raw verdict inside one file, before suppressions and change mapping."""

    rule: str
    severity: Severity
    line: int
    column: int
    message: str
    stmt_line: int = 0
    always_in_change: bool = False
    # The last line of what the finding names (a condition over several lines): a change to any
    # line from `line` to here puts the finding in the change, pointed at the first changed one.
    end_line: int = 0


@dataclass(kw_only=True, slots=True)
class Pending:
    """A report waiting for positions: they are computed only for files that have findings."""

    rule: str
    severity: Severity
    node: cst.CSTNode
    stmt: cst.CSTNode | None
    top: cst.CSTNode | None  # the module-level statement holding the node
    message: str
    member: cst.CSTNode | None = None  # the statement below `top` holding the node (a class's method)


@dataclass(kw_only=True, slots=True)
class FileContext:
    """What the engine shares with every rule during the pass over one file."""

    path: str
    # Whether the file differs from what its distribution installed (False: a pristine file read
    # only because of --all-files).
    drifted: bool = True
    # Where the file's distribution is installed (`siblings` reads its other modules), if known.
    location: str | None = None
    # The distribution's own text of a drifted file (what the patch changed), else None.
    pristine: str | None = None
    # The ast of the installed bytes, where the engine parsed them before the text rules ran; shared,
    # so never changed by a rule.
    tree: ast.Module | None = None
    wrapper: MetadataWrapper | None = None
    names: NameTable = field(default_factory=NameTable.empty)
    analysis: ModuleAnalysis | None = None
    scope: list[tuple[str, str]] = field(default_factory=list)
    # (scope, local name) -> the values assigned to it so far, inside functions.
    assigned: dict[tuple[Scope, str], list[cst.BaseExpression]] = field(default_factory=dict)
    params: list[frozenset[str]] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    stmts: list[cst.CSTNode] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    main_guard_depth: int = 0
    _resolved: dict[type, Mapping[cst.CSTNode, object]] = field(default_factory=dict)
    _qualified: dict[int, frozenset[str]] = field(default_factory=dict)

    def metadata(self, provider: type) -> Mapping[cst.CSTNode, object]:
        if provider not in self._resolved:
            if self.wrapper is None:
                raise RuntimeError("no libcst module for this file")
            self._resolved[provider] = self.wrapper.resolve(provider)
        return self._resolved[provider]

    def qualified(self, node: cst.CSTNode) -> frozenset[str]:
        """Every qualified name `node` may stand for, raw and canonical."""
        key = id(node)
        found = self._qualified.get(key)
        if found is None:
            raw = self.names.resolve(ref_of_cst(node), tuple(self.scope))
            found = raw | {canonical(q) for q in raw}
            self._qualified[key] = found
        return found


_VISITOR_NAMES: dict[type, tuple[str, ...]] = {}


def visitor_methods(visitor: cst.BatchableCSTVisitor) -> dict[str, Callable[[cst.CSTNode], None]]:
    """What BatchableCSTVisitor.get_visitors returns, with the method names found once per class.

    libcst's own lookup runs inspect.getmembers on every instance: per file, per rule.
    """
    cls = type(visitor)
    names = _VISITOR_NAMES.get(cls)
    if names is None:
        names = tuple(
            name
            for name in dir(cls)
            if name.startswith(("visit_", "leave_"))
            and callable(getattr(cls, name))
            and not getattr(getattr(cls, name), "_is_no_op", False)
        )
        _VISITOR_NAMES[cls] = names
    return {name: getattr(visitor, name) for name in names}


@functools.lru_cache(maxsize=64)  # asked for every statement of a file, by each rule (bytes hash once)
def _identifiers_in(rule: type[Rule], source: bytes) -> frozenset[str]:
    assert rule.IDENTIFIERS is not None
    return rule.IDENTIFIERS - {name for name, module in rule.IDENTIFIER_MODULES.items() if module not in source}


class Rule(cst.BatchableCSTVisitor):
    """A libcst rule. Subclass it in a file of its own and declare the class attributes below."""

    ID: ClassVar[str] = ""
    SEVERITY: ClassVar[Severity] = Severity.MEDIUM
    MESSAGE: ClassVar[str] = ""
    EXPLANATION: ClassVar[str] = ""
    VALID: ClassVar[Sequence[str | Example]] = ()
    INVALID: ClassVar[Sequence[str | Example]] = ()
    # Bytes every finding's module-level statement contains (a substring, or a pattern's match):
    # the engine parses only files, and only statements, that hold one. It must be looser than
    # the rule; the tests run every rule with and without it over its examples and variants.
    PREFILTER: ClassVar[Filter] = None
    # And one of these anywhere in the file (a module's name), or with REQUIRES_IN_STATEMENT in
    # the same module-level statement (a count's spelling, the `def forward` a finding sits in).
    REQUIRES: ClassVar[Filter] = None
    REQUIRES_IN_STATEMENT: ClassVar[bool] = False
    # True when a finding may hinge on a module or class constant (`N = 5`, then `== N`): a
    # statement naming one counts as matching the filters.
    CONSTANTS: ClassVar[bool] = False
    # Names a finding's statement must spell (as a name, an attribute, an imported module or
    # name, or a string: `getattr(torch, "save")`) unless it uses a module-level alias. Every
    # way to reach `torch.save` spells `save` or `torch` somewhere on the way.
    IDENTIFIERS: ClassVar[frozenset[str] | None] = None
    # Of IDENTIFIERS, those that name a sink only as a member of one module, with that module's
    # name (`copy`: `shutil.copy`): a file that never spells the name cannot reach the sink
    # through them (`cute.copy(src, dst)`, `copy.deepcopy(cfg)`).
    IDENTIFIER_MODULES: ClassVar[Mapping[str, bytes]] = {}
    # True when a finding depends on statements other than its own (the engine then never drops
    # a statement this rule's filters keep, even outside a drifted file's changed lines).
    WHOLE_MODULE: ClassVar[bool] = False
    # True when the statement check (statement_keeps) is cheap and seldom true next to the filters
    # and the alias: Rule.keeps asks it first (the same answer, asked in another order).
    CHECK_FIRST: ClassVar[bool] = False
    SUFFIXES: ClassVar[tuple[str, ...]] = (".py",)
    USES_LIBCST: ClassVar[bool] = True
    NEEDS_PRISTINE: ClassVar[bool] = False

    METADATA_DEPENDENCIES = ()

    # Set by the loader: the file the rule came from.
    SOURCE_FILE: ClassVar[str] = ""

    def __init__(self, context: FileContext | None = None) -> None:
        super().__init__()
        self.context = context if context is not None else FileContext(path="")
        self._counters: dict[str, frozenset[str]] = {}  # module-level def or class -> its call counters
        self._instance_numbers: dict[str, dict[str, int]] = {}  # class -> `self.NAME` bound once to an int
        self._env_numbers: dict[str, int] | None = None  # module-level names bound to an env number
        self._new_to_module: dict[int, bool] = {}  # id of the patterns asked about -> the answer
        self._functions: dict[tuple[tuple[str, str], ...], _changes.Function] = {}  # scope -> its facts
        self._returned: dict[int, cst.BaseExpression | None] = {}  # id of a helper's returned value -> as libcst
        self._pristine_tokens: str | None = None  # the distribution's text as tokens, read at the first ask
        self._pristine_words: frozenset[str] | None = None  # and as words

    def get_visitors(self) -> Mapping[str, Callable[[cst.CSTNode], None]]:
        return visitor_methods(self)

    @classmethod
    def applies_to(cls, path: str) -> bool:
        return path.endswith(cls.SUFFIXES)

    @classmethod
    def prefilter(cls, data: bytes) -> bool:
        """Whether the file could hold a finding (cheap, on bytes)."""
        return matches_any(cls.PREFILTER, data) and matches_any(cls.REQUIRES, data)

    @classmethod
    def constant_matters(cls, value: object) -> bool:
        """Whether a module/class constant of this value could decide a finding (with CONSTANTS)."""
        return True

    @classmethod
    def mentions(cls, text: bytes) -> bool:
        """Whether text (a qualified name a local name is bound to) holds one of the filter's bytes."""
        return (cls.PREFILTER is not None and matches_any(cls.PREFILTER, text)) or (
            cls.REQUIRES_IN_STATEMENT and cls.REQUIRES is not None and matches_any(cls.REQUIRES, text)
        )

    @classmethod
    def keeps(cls, statement: Statement, alias: Alias) -> bool:
        """Whether a statement (a module-level one, or a member of a class) could hold a finding.

        `alias`: the statement names a module-level name bound to something `mentions` accepts
        (weighed when first asked: a rule that settles a statement otherwise never weighs it).
        """
        if cls.CHECK_FIRST and not cls.statement_keeps(statement):
            return False
        if not (alias or matches_any(cls.PREFILTER, statement.text)):
            return False
        if cls.REQUIRES_IN_STATEMENT and not (alias or matches_any(cls.REQUIRES, statement.text)):
            return False
        if cls.IDENTIFIERS is not None and not alias:
            wanted = cls.identifiers_in(statement.source)
            if wanted is not None and wanted.isdisjoint(statement.identifiers()):
                return False
        return cls.CHECK_FIRST or cls.statement_keeps(statement)

    @classmethod
    def keeps_nothing(cls, module: Spelling, drifted: bool) -> bool:
        """Whether no statement of the module could be kept, asked before any is weighed (`module`:
        what it spells; `drifted`: whether the file differs from what its distribution installed).

        A rule whose `keeps` is this class's asks for one of its IDENTIFIERS: spelled in the
        statement, or by what a module alias or helper the statement names resolves to, which the
        module spells too. Where the module spells none, it keeps nothing. A rule that weighs
        constants (CONSTANTS), or keeps by other ways (its own `keeps`), says False unless it
        overrides this with what its own `keeps` asks.
        """
        if not cls.USES_LIBCST or cls.IDENTIFIERS is None or cls.CONSTANTS:
            return False
        if cls.keeps.__func__ is not Rule.keeps.__func__:  # type: ignore[attr-defined]
            return False
        wanted = cls.identifiers_in(module.source)
        return wanted is not None and not module.any_of(wanted)

    @classmethod
    def identifiers_in(cls, source: bytes | None) -> frozenset[str] | None:
        """IDENTIFIERS less those whose module the file never spells (IDENTIFIER_MODULES; source
        None: unknown, all of them)."""
        if cls.IDENTIFIERS is None or not cls.IDENTIFIER_MODULES or source is None:
            return cls.IDENTIFIERS
        return _identifiers_in(cls, source)

    @classmethod
    def statement_keeps(cls, statement: Statement) -> bool:
        """statement_check over the statement's nodes; a rule whose check needs the module's own
        bindings (Statement.module) overrides this."""
        return cls.statement_check(statement.nodes())

    @classmethod
    def statement_check(cls, nodes: Sequence[ast.AST]) -> bool:
        """A structural check over every ast node of a statement; False only if it cannot hold a finding."""
        return True

    def check_text(self, installed: str, pristine: str | None) -> Iterable[Hit]:
        """Findings of a TextRule."""
        return ()

    # -- helpers for rule authors ------------------------------------------------------------

    def report(
        self,
        node: cst.CSTNode,
        message: str | None = None,
        *,
        severity: Severity | None = None,
    ) -> None:
        self.context.pending.append(
            Pending(
                rule=self.ID,
                severity=severity or self.SEVERITY,
                node=node,
                stmt=self.context.stmts[-1] if self.context.stmts else None,
                top=self.context.stmts[0] if self.context.stmts else None,
                message=message or self.MESSAGE,
                member=self.context.stmts[1] if len(self.context.stmts) > 1 else None,
            )
        )

    def hit(self, line: int, message: str | None = None, *, severity: Severity | None = None) -> Hit:
        """A Hit for text rules."""
        return Hit(
            rule=self.ID,
            severity=severity or self.SEVERITY,
            line=line,
            column=0,
            message=message or self.MESSAGE,
            stmt_line=line,
        )

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        """What a name, attribute or call's callee may resolve to, however it was imported or aliased."""
        return set(self.context.qualified(node.func if isinstance(node, cst.Call) else node))

    def resolves_to(self, node: cst.CSTNode, names: Iterable[str] | str) -> str | None:
        """The first of `names` (exact, or a `prefix.*` pattern) that node resolves to."""
        wanted = (names,) if isinstance(names, str) else tuple(names)
        for qname in sorted(self.qualified_names(node)):
            found = _match(qname, wanted)
            if found is not None:
                return found
        return None

    def callee(self, node: cst.Call) -> cst.BaseExpression:
        """What a call runs: its func, the function a `functools.partial(f, ...)` wraps, or the
        call a local lambda that hands on all its arguments makes (`d = lambda *a: x.dump(*a)`)."""
        func = node.func
        if isinstance(func, cst.Call) and func.args and self.resolves_to(func.func, "functools.partial"):
            return func.args[0].value
        if isinstance(func, cst.Name):
            for value in self.values_of(func):
                if isinstance(value, cst.Lambda) and _forwards(value):
                    return value.body.func  # type: ignore[attr-defined]
        return func

    def helper(self, node: cst.Call) -> Helper | None:
        """The function of this module a call runs (`_dump(x)`, `self._dump(x)`), one level deep."""
        analysis = self.context.analysis
        func = _ast_ref(self.callee(node))
        if analysis is None or func is None:
            return None
        return analysis.helper(func, tuple(self.context.scope))

    def through_helper(self, node: cst.Call, names: Iterable[str] | str) -> list[tuple[str, Inner, Helper]]:
        """The calls inside the helper `node` runs that resolve to one of `names`."""
        helper = self.helper(node)
        if helper is None:
            return []
        wanted = (names,) if isinstance(names, str) else tuple(names)
        out = []
        for inner in self.context.analysis.calls(helper):  # type: ignore[union-attr]
            for qname in sorted(inner.names | self._passed_in(node, helper, inner)):
                found = _match(qname, wanted)
                if found is not None:
                    out.append((found, inner, helper))
                    break
        return out

    def partial_arg(self, node: cst.Call, position: int, keyword: str) -> ast.expr | None:
        """The argument at `position` or named `keyword` that a `functools.partial` the callee is
        bound to supplies (`dump = partial(torch.save, f="/tmp/x.pt")`, then `dump(t)`)."""
        analysis = self.context.analysis
        func = self.callee(node)
        if analysis is None or not isinstance(func, cst.Name | cst.Attribute):
            return None
        ref = _ast_ref(func)
        given = sum(1 for a in node.args if a.keyword is None and not a.star)
        for partial in analysis.partials(ref, tuple(self.context.scope)) if ref is not None else ():
            for name, value in ((k.arg, k.value) for k in partial.keywords):
                if name == keyword:
                    return value
            bound = partial.args[1:]
            if position < len(bound) and given + len(bound) > position:
                return bound[position]
        return None

    def fixed_path_of(self, node: ast.expr) -> str | None:
        """fixed_path for an ast expression of this module (constants and helpers followed)."""
        analysis = self.context.analysis
        if analysis is None:
            return None
        scope = tuple(self.context.scope)
        return fixed_path_ast(node, bound=lambda n: analysis.bound_path(n, scope))

    def helper_path(self, node: cst.Call, helper: Helper, target: ast.expr | None) -> str | None:
        """The literal start of the path a helper's call writes to, as this call site fixes it: a
        literal or constant in the helper, or the argument (or the default) its parameter gets."""
        analysis = self.context.analysis
        if analysis is None or target is None:
            return None
        scope = helper.scope
        fixed = fixed_path_ast(target, bound=lambda n: analysis.bound_path(n, scope))
        if fixed is not None or not (isinstance(target, ast.Name) and target.id in helper.params):
            return fixed
        given = call_arg(node, helper.params.index(target.id), target.id)
        if given is not None:
            return self.fixed_path(given)
        default = _instances.default_of(helper.node, target.id)
        return fixed_path_ast(default) if default is not None else None

    def given_for(self, node: cst.Call, helper: Helper, value: ast.expr | None) -> cst.BaseExpression | None:
        """The argument this call site gives the helper's parameter that `value` names, else None."""
        if not isinstance(value, ast.Name) or value.id not in helper.params:
            return None
        return call_arg(node, helper.params.index(value.id), value.id)

    def _passed_in(self, node: cst.Call, helper: Helper, inner: Inner) -> frozenset[str]:
        """What a helper's call runs when its callee is a parameter: the argument this call site
        passes, one level (`_run(dbg)` with `dbg = __import__("pdb")`, then `dbg.set_trace()`)."""
        tail: list[str] = []
        root = inner.callee
        while isinstance(root, ast.Attribute):
            tail.insert(0, root.attr)
            root = root.value
        if not isinstance(root, ast.Name) or root.id not in helper.params or helper.node is None:
            return frozenset()
        given = call_arg(node, helper.params.index(root.id), root.id)
        if given is None or _ast_ref(given) is None:
            return frozenset()
        suffix = "".join("." + t for t in tail)
        return frozenset(q + suffix for q in self.context.qualified(given))

    def constant(self, node: cst.BaseExpression) -> object:
        """The value of a literal, or of a module/class constant it names (`N`, `self.N`), else NOT_CONSTANT."""
        if isinstance(node, cst.Integer):
            return node.evaluated_value
        if isinstance(node, cst.NamedExpr):
            return self.constant(node.value)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            inner = self.constant(node.expression)
            return -inner if type(inner) is int else NOT_CONSTANT
        analysis = self.context.analysis
        ref = _ast_ref(node)
        if analysis is None or ref is None:
            return NOT_CONSTANT
        return analysis.constant(ref, tuple(self.context.scope))

    def values_of(self, name: cst.Name) -> Sequence[cst.BaseExpression]:
        """The values assigned to a local name before this point of the enclosing function."""
        if not self.context.functions:
            return ()
        return self.context.assigned.get((tuple(self.context.scope), name.value), ())

    def attribute_values(self, node: cst.Attribute) -> Sequence[cst.BaseExpression]:
        """The values assigned to `self.x` (an attribute of a name) before this point of the
        enclosing function."""
        if not (self.context.functions and isinstance(node.value, cst.Name)):
            return ()
        return self.context.assigned.get((tuple(self.context.scope), f"{node.value.value}.{node.attr.value}"), ())

    def expanded(self, test: cst.BaseExpression, before: Sequence[cst.BaseStatement] = ()) -> cst.BaseExpression:
        """`test` with each flag it reads (`is_probe`, `self._hit`) replaced by the comparison
        assigned to it above in the same function, and each call of a short predicate helper of
        the module by what it returns (see analysis.conditions); `before`: the
        statements above it in a block not yet walked (their assignments count too)."""
        if not before:
            return _conditions.expanded(test, self._flag_values, inline=self.inlined)
        local = _conditions.assigned_in(before)
        flags = lambda n: local.get(_conditions.key(n)) or self._flag_values(n)  # noqa: E731
        return _conditions.expanded(test, flags, inline=self.inlined)

    def _flag_values(self, node: cst.Name | cst.Attribute) -> Sequence[cst.BaseExpression]:
        return self.values_of(node) if isinstance(node, cst.Name) else self.attribute_values(node)

    def is_parameter(self, node: cst.BaseExpression) -> bool:
        """Whether node is a parameter of the enclosing function (a value from the caller)."""
        return isinstance(node, cst.Name) and bool(self.context.params) and node.value in self.context.params[-1]

    def fixed_path(self, node: cst.BaseExpression) -> str | None:
        """The literal start of a path the code fixes itself (see analysis.values.fixed_path).

        A parameter is the caller's path, even where the function gives it a fixed default
        (`if path is None: path = "/tmp/x"`).
        """
        if self.is_parameter(node):
            return None
        return _values.fixed_path(node, self.resolves_to, self.values_of, bound=self.bound_path)

    def serialised(self, data: cst.BaseExpression) -> str | None:
        """What makes `data` serialised object or array bytes (`pickle.dumps(t)`, `a.tobytes()`)."""
        return _sinks.serialised(data, self.resolves_to, self.values_of)

    @staticmethod
    def serialised_ast(data: ast.expr | None) -> str | None:
        """`serialised` for an expression of a helper (by the callee's last name: `pickle.dumps`)."""
        return _sinks.serialised_ast(data)

    def write_destination(self, receiver: cst.BaseExpression) -> str | None:
        """Where a file object or descriptor written to goes, when the code fixes it: the fixed
        path its opener got, `a new temp file`, `a stream` (the process's stdout), else None."""
        where = _sinks.destination(receiver, self.resolves_to, self.values_of)
        if where is None:
            return None
        if where == _sinks.STREAM:
            return "a stream"
        if where == _sinks.TEMP_FILE:
            return "a new temp file"
        assert isinstance(where, cst.BaseExpression)
        fixed = self.fixed_path(where)
        if fixed is not None:
            return fixed
        return "a new temp file" if self.fresh_temp(where) is not None else None

    def fresh_temp(self, path: cst.BaseExpression) -> str | None:
        """The temp-file call a destination comes from (`mkstemp()`, `NamedTemporaryFile(delete=False)`)."""
        return _sinks.fresh_temp(path, self.resolves_to, self.values_of)

    def introduced_env(self, node: cst.BaseExpression) -> str | None:
        """An environment variable `node` reads (directly, through a local or a module name) that
        the distribution's text of this file never names and that is not in the package's own
        namespace or the serving stack's (`VLLM_...`, `TORCH_...`: documented settings): one the
        patch made up. None
        for a file read without its pristine text."""
        pristine = self.context.pristine
        if pristine is None:
            return None
        keys = list(_sinks.env_keys(node, self.resolves_to, self.values_of))
        scope = tuple(self.context.scope)
        for sub in _sinks.names_in(node):
            for value, where in self.context.names.values(sub, scope):
                keys.extend(_sinks.env_keys_ast(value, self._ast_names(where)))
        return next((k for k in keys if self._made_up_env(k)), None)

    def _made_up_env(self, key: str) -> bool:
        """Whether an environment variable is one a patch made up: the distribution's text of this
        file never names it, and it is not in the package's own namespace or the serving stack's."""
        pristine = self.context.pristine
        own = (self.context.path.replace("\\", "/").split("/")[0].upper() + "_", *_sinks.SETTINGS_PREFIXES)
        return pristine is not None and key not in pristine and not key.startswith(own)

    def _env_default_ast(self, value: ast.expr, scope: Scope) -> str | None:
        """The temp directory a module-level binding of a variable the patch made up falls back to
        (`_DUMP = os.environ.get("K_DUMP", "/tmp/k")`); a documented variable's default is upstream's
        choice, reached through a parameter's fallback too."""
        if not (isinstance(value, ast.Call) and len(value.args) == 2 and not value.keywords):
            return None
        if not self._ast_names(scope)(value.func) & {"os.environ.get", "os.getenv"}:
            return None
        key, default = (
            a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in value.args
        )
        if default is None or key is None or not self._made_up_env(key):
            return None
        return default if default.startswith(_TEMP_DIRS) else None

    def env_keys(self, node: cst.BaseExpression) -> list[str]:
        """The environment variables `node` reads with no default, through local names."""
        return list(_sinks.env_keys(node, self.resolves_to, self.values_of))

    def env_temp_default(self, target: cst.BaseExpression, depth: int = 0) -> str | None:
        """The temp directory an environment lookup falls back to, where the destination is built
        from one (`os.path.join(os.environ.get("DUMP_DIR", "/tmp/d"), name)`, also through a
        module-level name bound to a variable the patch made up), else None."""
        if depth > 6:
            return None
        again = lambda n: self.env_temp_default(n, depth + 1)  # noqa: E731
        if isinstance(target, cst.Name):
            local = self.values_of(target)
            if not local:  # a module-level name: `_DUMP = os.environ.get("K_DUMP", "/tmp/k")`
                scope = tuple(self.context.scope)
                found = (self._env_default_ast(v, w) for v, w in self.context.names.values(target.value, scope))
                return next((f for f in found if f is not None), None)
            return next((f for f in map(again, reversed(local)) if f is not None), None)
        if isinstance(target, cst.BinaryOperation):
            return again(target.left)
        if isinstance(target, cst.FormattedString):
            first = target.parts[0] if target.parts else None
            return again(first.expression) if isinstance(first, cst.FormattedStringExpression) else None
        if not isinstance(target, cst.Call) or not target.args:
            return None
        if self.resolves_to(target, ("os.environ.get", "os.getenv")) is not None:
            default = call_arg(target, 1, "default")
            text = literal_string(default) if default is not None else None
            return text if text is not None and text.startswith(_TEMP_DIRS) else None
        return again(target.args[0].value)

    def _ast_names(self, scope: Scope) -> Callable[[ast.expr], frozenset[str]]:
        """What an `ast` expression of `scope` may name, canonical."""
        names = self.context.names
        return lambda f: frozenset(canonical(q) for q in names.resolve(_names.ref_of_ast(f), scope))

    def bound_path(self, node: cst.BaseExpression) -> str | None:
        """The path a module or class constant or an instance attribute bound once holds
        (`DUMP_DIR = "/tmp/d"`, `self.dump_dir = "/tmp/d"` in `__init__`), else None."""
        analysis = self.context.analysis
        ref = _ast_ref(node.func if isinstance(node, cst.Call) else node)
        if analysis is None or ref is None:
            return None
        if isinstance(node, cst.Call):
            return analysis.returned_path(ref, tuple(self.context.scope))  # `_path(name)`
        return analysis.bound_path(ref, tuple(self.context.scope))

    def upstream_purpose(self, path: cst.BaseExpression | None, writer: cst.Call | None = None) -> str | None:
        """Why a write to a fixed path serves the code itself rather than a debugger, else None.

        In a test module the write serves the test run; a local path name that the function
        returns or passes to a call that uses the file makes the file a product (a script it
        then runs); a command (a main-guarded module) that tells its user the path writes its
        output there. See analysis.purpose.
        """
        analysis = self.context.analysis
        if analysis is None:
            return None
        if _purpose.is_test_module(analysis.tree):
            return "in a test module"
        func = self.function_node()
        name = path.value if isinstance(path, cst.Name) else None
        if func is None or name is None:
            return None
        callee: cst.BaseExpression | None = None
        if writer is not None:
            # The name the writer is called by: a lambda's own name, not the call inside it.
            callee = writer.func if isinstance(writer.func, cst.Name | cst.Attribute) else self.callee(writer)
        spelled = ""
        if isinstance(callee, cst.Attribute | cst.Name):
            spelled = callee.attr.value if isinstance(callee, cst.Attribute) else callee.value
        if _purpose.handed_on(func, name, spelled):
            return "the path is handed on"
        if _purpose.is_script(analysis.tree) and _purpose.announced(func, name):
            return "a command announcing its output"
        return None

    def bound_by_with(self, name: str) -> bool:
        """Whether `name` is the target of a `with <call> as name` in the enclosing function."""
        func = self.function_node()
        return func is not None and _purpose.with_target(func, name)

    def count_of(self, node: cst.BaseExpression) -> str | None:
        """How node spells a token/batch count (see analysis.counts), through local assignments,
        unpacked shapes, casts and constant arithmetic; a call counter of the enclosing
        module-level function or class is one too."""
        return _counts.count_of(
            node,
            self.resolves_to,
            self._flag_values,
            self._counted(),
            inline=self.inlined,
        )

    def inlined(self, node: cst.Call) -> cst.BaseExpression | None:
        """What a call of a short helper of the module returns, with the helper's parameters
        replaced by what the call passes (`_ntok(h)` with `def _ntok(x): return x.shape[0]`
        is `h.shape[0]`; a lambda bound to a local above: `is_five = lambda n: n == 5`, then
        `is_five(x.shape[0])` is `x.shape[0] == 5`), else None."""
        if isinstance(node.func, cst.Name):
            bound = self.values_of(node.func)
            if bound and isinstance(bound[-1], cst.Lambda):
                return _applied(bound[-1], node)
        analysis, func = self.context.analysis, _ast_ref(node.func)
        found = analysis.returned_value(func, tuple(self.context.scope)) if analysis and func else None
        if found is None:
            return None
        helper, value = found
        params = helper.params  # without `self`: the call passes the rest
        given = _passed(params, node)
        if id(value) not in self._returned:
            try:
                self._returned[id(value)] = cst.parse_expression(ast.unparse(value))  # once per helper
            except cst.ParserSyntaxError:
                self._returned[id(value)] = None
        returned = self._returned[id(value)]
        return returned.visit(_Substitute(given)) if returned is not None else None  # type: ignore[return-value]

    def _counted(self) -> frozenset[str]:
        scope, analysis = self.context.scope, self.context.analysis
        if not scope or analysis is None:
            return frozenset()
        top = scope[0][1]
        if top not in self._counters:
            self._counters[top] = _counts.counters(analysis.tree, top)
        return self._counters[top]

    def data_change(
        self, body: cst.CSTNode, alone: bool = True, other: cst.CSTNode | None = None
    ) -> _changes.Found | None:
        """What `body` does to the data the enclosing function computes (see analysis.changes):
        `alone`, the branch has no `else`; `other`, the way the test does not take, whose work
        `body` may leave out (see analysis.omits)."""
        function = self._function_facts()
        return _changes.data_change(body, self.resolves_to, self.values_of, function, alone, other, self._number)

    def _number(self, node: cst.BaseExpression) -> bool:
        """A module or class constant holding a number (`PLACEHOLDER_TOKEN_ID = -1`, `self.PAD = 0`)."""
        value = self.constant(node) if isinstance(node, cst.Name | cst.Attribute) else NOT_CONSTANT
        return type(value) in (int, float)

    def conditional_assign(
        self, node: cst.Assign
    ) -> tuple[cst.BaseExpression, cst.BaseExpression, cst.BaseExpression, bool] | None:
        """`s = a if test else s`, `s = torch.where(test, a, s)`: a branch spelled as a value (see
        analysis.changes.conditional_assign)."""
        return _changes.conditional_assign(node, self.resolves_to)

    def function_node(self) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The enclosing function in the module's ast (None at module level or without an analysis)."""
        analysis = self.context.analysis
        return _purpose.function_at(analysis.tree, tuple(self.context.scope)) if analysis is not None else None

    def function_facts(self) -> _changes.Function:
        """What the enclosing function takes, returns, assigns and declares global (see analysis.changes)."""
        return self._function_facts()

    def _function_facts(self) -> _changes.Function:
        """What the enclosing function takes, returns and assigns (once per function)."""
        scope = tuple(self.context.scope)
        if scope not in self._functions:
            func = self.function_node()
            params = self.context.params[-1] if self.context.params else frozenset()
            forward = bool(self.context.functions) and FORWARD_NAMES.match(self.context.functions[-1]) is not None
            self._functions[scope] = _changes.function_facts(func, params, forward)
        return self._functions[scope]

    def bound_number(self, node: cst.BaseExpression) -> int | None:
        """The integer a local (`target = 5`), an attribute of the class (`self.debug_len = 5`,
        bound once in its methods) or an environment variable's default (`int(os.getenv("N",
        "5"))`, also through a module-level name) holds, else None."""
        scope, analysis = self.context.scope, self.context.analysis
        if isinstance(node, cst.Call):
            return _counts.env_default(node, self.resolves_to)
        if isinstance(node, cst.Name):
            local = _counts.local_number(node, self.values_of)
            if local is not None or analysis is None or self.values_of(node):
                return local
            if self._env_numbers is None:
                self._env_numbers = _counts.env_numbers(analysis.tree)
            return self._env_numbers.get(node.value)
        if not isinstance(node, cst.Attribute):
            return None
        owner = node.value
        if not (isinstance(owner, cst.Name) and owner.value == "self" and analysis is not None):
            return None
        if len(scope) < 2 or scope[0][0] != "class":
            return None
        cls = scope[0][1]
        if cls not in self._instance_numbers:
            self._instance_numbers[cls] = _counts.instance_numbers(analysis.tree, cls)
        return self._instance_numbers[cls].get(node.attr.value)

    def folded(self, node: cst.BaseExpression) -> bool | None:
        """Truth of a condition folded through module/class constants and comparisons of constants."""
        if isinstance(node, cst.BooleanOperation):
            left, right = self.folded(node.left), self.folded(node.right)
            if isinstance(node.operator, cst.And):
                if False in (left, right) or _values.contradicts(node):
                    return False
                return True if left is right is True else None
            if True in (left, right) or _values.excludes_nothing(node):
                return True
            return False if left is right is False else None
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            inner = self.folded(node.expression)
            return None if inner is None else not inner
        if isinstance(node, cst.Comparison):
            first: object = self._folded_value(node.left)
            for target in node.comparisons:  # `2 <= 1 <= 2`: every link constant
                second: object = self._folded_value(target.comparator)
                compare = _COMPARE.get(type(target.operator))
                if first is NOT_CONSTANT or second is NOT_CONSTANT or compare is None:
                    return None
                try:
                    if not compare(first, second):
                        return False
                except TypeError:
                    return None
                first = second
            return True
        value = self._folded_value(node)
        return None if value is NOT_CONSTANT else bool(value)

    def _folded_value(self, node: cst.BaseExpression) -> object:
        value = _values.const_value(node)
        if value is not UNKNOWN:
            return value
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value in ("self", "cls"):
            return NOT_CONSTANT  # an instance may set its own value over the class's
        if isinstance(node, cst.Name | cst.Attribute):
            # Only names spelled as constants (`STRICT`, `Config.CHECKS`) fold.
            name = node.value if isinstance(node, cst.Name) else node.attr.value
            return self.constant(node) if name.upper() == name else NOT_CONSTANT
        return NOT_CONSTANT

    @staticmethod
    def truth(node: cst.BaseExpression) -> bool | None:
        """Constant truth of a condition (folded through and/or/not/brackets), None if it varies."""
        return _values.truth(node)

    @property
    def in_forward(self) -> bool:
        """Whether the node being visited is inside a forward-like function."""
        return any(FORWARD_NAMES.match(name) for name in self.context.functions)

    @property
    def in_step_callee(self) -> bool:
        """Whether the node is in a method that a forward or step method of its class runs through
        `self.name(...)` (`forward` -> `_gather_logits`): it runs on every step too."""
        analysis, scope = self.context.analysis, self.context.scope
        if analysis is None or len(scope) < 2 or scope[-2][0] != "class":
            return False
        hot = lambda name: FORWARD_NAMES.match(name) is not None or STEP_NAMES.match(name) is not None  # noqa: E731
        return (scope[-2][1], scope[-1][1]) in _purpose.reached_from(analysis.tree, hot)

    @property
    def in_step_path(self) -> bool:
        """Whether the node being visited is inside a function a server runs for every step or batch:
        a forward, the runner's `execute_model`, a scheduler's `schedule`, a sampler, `compute_logits`."""
        return any(FORWARD_NAMES.match(name) or STEP_NAMES.match(name) for name in self.context.functions)

    def upstream_words(self) -> frozenset[str]:
        """The words (`\\w+` runs) of the distribution's text of this file: a name it never spells is
        the patch's own. Empty without the distribution's text."""
        if self._pristine_words is None:
            self._pristine_words = frozenset(re.findall(r"\w+", self.context.pristine or ""))
        return self._pristine_words

    def upstream_code(self, code: str) -> bool:
        """Whether the distribution's text of this file holds `code` token for token (comments and
        layout aside): a branch the patch only cut off, a handler it only reworded, a literal it only
        named. False without the distribution's text."""
        if self.context.pristine is None:
            return False
        if self._pristine_tokens is None:
            self._pristine_tokens = f" {code_tokens(self.context.pristine)} "
        return f" {code_tokens(code)} " in self._pristine_tokens

    def new_to_module(self, patterns: Filter) -> bool:
        """Whether a patch brought what `patterns` spell into library code that never had it: the
        file drifted, the distribution's text of it matches none of them, and the module is neither
        a command (`if __name__ == "__main__":`) nor a test. Once per file and rule."""
        key = id(patterns)
        if key not in self._new_to_module:
            pristine, analysis = self.context.pristine, self.context.analysis
            tree = analysis.tree if analysis is not None else None
            own_use = tree is not None and (_purpose.is_script(tree) or _purpose.is_test_module(tree))
            self._new_to_module[key] = (
                self.context.drifted
                and pristine is not None
                and not own_use
                and not matches_any(patterns, pristine.encode())
            )
        return self._new_to_module[key]

    @property
    def in_main_guard(self) -> bool:
        return self.context.main_guard_depth > 0


class TextRule(Rule):
    """A rule over the text of a file (and of its pristine version): override check_text."""

    USES_LIBCST: ClassVar[bool] = False


_COMPARE: dict[type, Callable[[object, object], object]] = {
    cst.Equal: lambda a, b: a == b,
    cst.NotEqual: lambda a, b: a != b,
    cst.Is: lambda a, b: a is b,
    cst.IsNot: lambda a, b: a is not b,
    cst.LessThan: lambda a, b: a < b,  # type: ignore[operator]
    cst.GreaterThan: lambda a, b: a > b,  # type: ignore[operator]
    cst.LessThanEqual: lambda a, b: a <= b,  # type: ignore[operator]
    cst.GreaterThanEqual: lambda a, b: a >= b,  # type: ignore[operator]
}


def _applied(lam: cst.Lambda, call: cst.Call) -> cst.BaseExpression | None:
    """The lambda's body with its parameters replaced by what the call passes; None where a
    parameter has a default, a star, or gets nothing."""
    params = lam.params
    if params.star_arg is not cst.MaybeSentinel.DEFAULT or params.star_kwarg or params.kwonly_params:
        return None
    positional = [*params.posonly_params, *params.params]
    if any(p.default is not None for p in positional):
        return None
    names = [p.name.value for p in positional]
    given = _passed(names, call)
    if set(given) != set(names) or len(call.args) != len(names):
        return None
    return lam.body.visit(_Substitute(given))  # type: ignore[return-value]


def _passed(params: Sequence[str], call: cst.Call) -> dict[str, cst.BaseExpression]:
    """What a call passes for each parameter it names, by position or keyword (stars pass nothing known)."""
    given = {p: a.value for p, a in zip(params, call.args, strict=False) if a.keyword is None and not a.star}
    given |= {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    return given


def _forwards(lam: cst.Lambda) -> bool:
    """`lambda *a, **k: f(*a, **k)`: the lambda's body calls f with exactly its own arguments."""
    body = lam.body
    star = lam.params.star_arg
    if not isinstance(body, cst.Call) or not isinstance(star, cst.Param):
        return False
    stars = [a for a in body.args if a.star == "*"]
    return len(stars) == 1 and isinstance(stars[0].value, cst.Name) and stars[0].value.value == star.name.value


class _Substitute(cst.CSTTransformer):
    """Names replaced by expressions (a helper's parameters by a call's arguments)."""

    def __init__(self, given: Mapping[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.given = given

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        return self.given.get(original_node.value, updated_node)

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
        return updated_node.with_changes(attr=original_node.attr)  # `x.shape`: `shape` is no parameter


def _ast_ref(node: cst.CSTNode) -> ast.expr | None:
    """`name`, `a.b` as ast nodes (what the module analysis keys on), else None."""
    if isinstance(node, cst.Name):
        return ast.Name(id=node.value, ctx=ast.Load())
    if isinstance(node, cst.Attribute):
        base = _ast_ref(node.value)
        return ast.Attribute(value=base, attr=node.attr.value, ctx=ast.Load()) if base is not None else None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("super", "type"):
        # `super()`, `type(self)`: what an attribute of it is looked up on (the class and its bases)
        args = [a.value for a in node.args if a.keyword is None and not a.star]
        given = [r for a in args if (r := _ast_ref(a)) is not None]
        if len(given) == len(args) == len(node.args):
            return ast.Call(func=ast.Name(id=node.func.value, ctx=ast.Load()), args=given, keywords=[])
    return None


def _match(qname: str, wanted: tuple[str, ...]) -> str | None:
    for want in wanted:
        if want.endswith(".*"):
            if qname.startswith(want[:-1]):
                return qname
        elif qname == want:
            return qname
    return None
