"""The hazard rule base class: what a rule file in `rules/` subclasses and declares."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider

from patchaudit.report import Severity

__all__ = ["Example", "Hit", "FileContext", "Rule", "Severity", "FORWARD_NAMES"]

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
class FileContext:
    """What the engine shares with every rule during the pass over one file."""

    path: str
    hits: list[Hit] = field(default_factory=list)
    stmt_lines: list[int] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    main_guard_depth: int = 0


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
    # The file's bytes must match this for the rule to run; it lets the engine skip the libcst
    # parse of files no rule could flag. It must be looser than the rule: INVALID examples check that.
    PREFILTER: ClassVar[re.Pattern[bytes] | None] = None
    SUFFIXES: ClassVar[tuple[str, ...]] = (".py",)
    USES_LIBCST: ClassVar[bool] = True
    NEEDS_PRISTINE: ClassVar[bool] = False

    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

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
        return cls.PREFILTER is None or cls.PREFILTER.search(data) is not None

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
        pos = self.get_metadata(PositionProvider, node).start
        stmt_line = self.context.stmt_lines[-1] if self.context.stmt_lines else pos.line
        self.context.hits.append(
            Hit(
                rule=self.ID,
                severity=severity or self.SEVERITY,
                line=pos.line,
                column=pos.column,
                message=message or self.MESSAGE,
                stmt_line=stmt_line,
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
        found = self.get_metadata(QualifiedNameProvider, node, set())
        return {q.name for q in found}

    def resolves_to(self, node: cst.CSTNode, names: Iterable[str] | str) -> str | None:
        """The first of `names` (exact, or a `prefix.*` pattern) that node resolves to."""
        wanted = (names,) if isinstance(names, str) else tuple(names)
        for qname in sorted(self.qualified_names(node)):
            for want in wanted:
                if want.endswith(".*"):
                    if qname.startswith(want[:-1]):
                        return qname
                elif qname == want:
                    return qname
        return None

    @property
    def in_forward(self) -> bool:
        """Whether the node being visited is inside a forward-like function."""
        return any(FORWARD_NAMES.match(name) for name in self.context.functions)

    @property
    def in_main_guard(self) -> bool:
        return self.context.main_guard_depth > 0


def literal_string(node: cst.BaseExpression) -> str | None:
    """The value of a plain string literal (or the literal parts of an f-string), else None."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
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
