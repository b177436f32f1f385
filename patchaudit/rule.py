"""The hazard rule base class: what a rule file in `rules/` subclasses and declares."""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst
from libcst._metadata_dependent import LazyValue
from libcst.metadata import MetadataWrapper, QualifiedNameProvider

from patchaudit.report import Severity

__all__ = ["Example", "Hit", "Pending", "FileContext", "Rule", "Severity", "FORWARD_NAMES"]

# Function names that run on every step of a model: a hazard there fires per token or per batch.
FORWARD_NAMES = re.compile(r"^_*forward(_\w+)?$|^__call__$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Example:
    """A code example a rule must pass (VALID) or flag (INVALID)."""

    code: str
    pristine: str | None = None
    path: str = "example.py"
    line: int | None = None
    severity: Severity | None = None


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


@dataclass(kw_only=True, slots=True)
class Pending:
    """A report waiting for positions: they are computed only for files that have findings."""

    rule: str
    severity: Severity
    node: cst.CSTNode
    stmt: cst.CSTNode | None
    top: cst.CSTNode | None  # the module-level statement holding the node
    message: str


@dataclass(kw_only=True, slots=True)
class FileContext:
    """What the engine shares with every rule during the pass over one file.

    Metadata is resolved lazily and at most once per file: a libcst QualifiedNameProvider pass
    costs five to ten times the parse, so it runs only when a node could resolve to a name a rule
    asks about (judged from the file's import table), and positions only when a rule reports.
    """

    path: str
    wrapper: MetadataWrapper | None = None
    # local name -> what it was imported as; None when unknown (every name is then checked).
    imports: dict[str, str] | None = None
    # names bound other than by import: resolving them needs libcst's scope analysis.
    rebound: frozenset[str] = frozenset()
    # True: always ask QualifiedNameProvider (tests use it to check the import-table shortcut).
    exact: bool = False
    hits: list[Hit] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    stmts: list[cst.CSTNode] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    main_guard_depth: int = 0
    _resolved: dict[type, Mapping[cst.CSTNode, object]] = field(default_factory=dict)

    def metadata(self, provider: type) -> Mapping[cst.CSTNode, object]:
        if provider not in self._resolved:
            if self.wrapper is None:
                raise RuntimeError("no libcst module for this file")
            self._resolved[provider] = self.wrapper.resolve(provider)
        return self._resolved[provider]

    def guess(self, node: cst.CSTNode) -> tuple[str | None, bool]:
        """What `node` resolves to from the import table, and whether that is certain.

        Certain when the head name is bound only by imports (or is an unshadowed builtin): then
        scope analysis could only say the same. Otherwise the caller asks QualifiedNameProvider.
        """
        dotted = cst.helpers.get_full_name_for_node(node)
        if not dotted:
            return None, True
        head, _, rest = dotted.partition(".")
        if self.imports is not None and head in self.imports:
            base = self.imports[head]
        elif head in _BUILTINS:
            base = "builtins." + head
        else:
            # Neither imported nor a builtin: a local, which never resolves to a module's name.
            return None, True
        certain = head not in self.rebound
        return (f"{base}.{rest}" if rest else base), certain


_BUILTINS = frozenset(dir(builtins))


class Rule(cst.BatchableCSTVisitor):
    """One hazard rule. Subclass it in a file of its own and declare the class attributes below.

    Python rules define libcst `visit_*` methods and call `self.report(node)`. A rule about other
    input (a `.pth` file) or about two versions of a file sets `USES_LIBCST = False` and overrides
    `check_text`.
    """

    ID: ClassVar[str] = ""
    SEVERITY: ClassVar[Severity] = Severity.MEDIUM
    MESSAGE: ClassVar[str] = ""
    EXPLANATION: ClassVar[str] = ""
    VALID: ClassVar[Sequence[str | Example]] = ()
    INVALID: ClassVar[Sequence[str | Example]] = ()
    # The file's bytes must contain one of these (bytes: a substring; a pattern: a match) for the
    # rule to run; it lets the engine skip the libcst parse of files no rule could flag. It must be
    # looser than the rule: the INVALID examples check that. Start patterns with a literal: `re`
    # scans much faster for them.
    PREFILTER: ClassVar[Sequence[bytes | re.Pattern[bytes]] | re.Pattern[bytes] | bytes | None] = None
    SUFFIXES: ClassVar[tuple[str, ...]] = (".py",)
    USES_LIBCST: ClassVar[bool] = True
    NEEDS_PRISTINE: ClassVar[bool] = False

    # Resolved on demand through the FileContext, not up front for every file.
    METADATA_DEPENDENCIES = ()

    # Set by the loader: the file the rule came from.
    SOURCE_FILE: ClassVar[str] = ""

    def __init__(self, context: FileContext | None = None) -> None:
        super().__init__()
        self.context = context if context is not None else FileContext(path="")

    @classmethod
    def applies_to(cls, path: str) -> bool:
        return path.endswith(cls.SUFFIXES)

    @classmethod
    def prefilter(cls, data: bytes) -> bool:
        tests = cls.PREFILTER
        if tests is None:
            return True
        if isinstance(tests, bytes | re.Pattern):
            tests = (tests,)
        for test in tests:
            if isinstance(test, bytes):
                if test in data:
                    return True
            elif test.search(data) is not None:
                return True
        return False

    def check_text(self, installed: str, pristine: str | None) -> Iterable[Hit]:
        """Findings for rules that do not walk the libcst tree (USES_LIBCST = False)."""
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
            )
        )

    def hit(self, line: int, message: str | None = None, *, severity: Severity | None = None) -> Hit:
        """A Hit for check_text rules."""
        return Hit(
            rule=self.ID,
            severity=severity or self.SEVERITY,
            line=line,
            column=0,
            message=message or self.MESSAGE,
            stmt_line=line,
        )

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        """What a name, attribute or call resolves to (`import torch as t; t.save` -> torch.save)."""
        if isinstance(node, cst.Call):
            node = node.func
        found = self.context.metadata(QualifiedNameProvider).get(node, set())
        if isinstance(found, LazyValue):
            found = found()
        return {q.name for q in found}  # type: ignore[attr-defined]

    def resolves_to(self, node: cst.CSTNode, names: Iterable[str] | str) -> str | None:
        """The first of `names` (exact, or a `prefix.*` pattern) that node resolves to."""
        wanted = (names,) if isinstance(names, str) else tuple(names)
        target = node.func if isinstance(node, cst.Call) else node
        if self.context.imports is not None and not self.context.exact:
            guess, certain = self.context.guess(target)
            found = _match(guess, wanted) if guess is not None else None
            if certain or found is None:
                # An assignment can hide an import from a rule, never make one up: only a
                # possible match on a rebound name needs scope analysis.
                return found
        for qname in sorted(self.qualified_names(target)):
            found = _match(qname, wanted)
            if found is not None:
                return found
        return None

    @property
    def in_forward(self) -> bool:
        """Whether the node being visited is inside a forward-like function."""
        return any(FORWARD_NAMES.match(name) for name in self.context.functions)

    @property
    def in_main_guard(self) -> bool:
        return self.context.main_guard_depth > 0


def _match(qname: str, wanted: tuple[str, ...]) -> str | None:
    for want in wanted:
        if want.endswith(".*"):
            if qname.startswith(want[:-1]):
                return qname
        elif qname == want:
            return qname
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
