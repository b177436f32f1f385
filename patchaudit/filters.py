"""What a rule's filters see before any libcst parse: a statement's text, its ast nodes and the
identifiers it spells, and the byte tests (substrings and patterns) of PREFILTER and REQUIRES."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Sequence

__all__ = ["Filter", "Statement", "matches_any", "required_literal", "spelled_identifiers"]

Filter = Sequence[bytes | re.Pattern[bytes]] | re.Pattern[bytes] | bytes | None


class Statement:
    """A statement as prefilters see it: its source bytes, its ast nodes, the identifiers it spells.

    Nodes and identifiers are computed on first use and shared by every rule.
    """

    def __init__(
        self,
        text: bytes,
        statements: Sequence[ast.stmt],
        nodes: Callable[[ast.stmt], list[ast.AST]],
        module: ast.Module | None = None,
        drifted: bool = True,
        source: bytes | None = None,
    ):
        self.text = text
        self.module = module  # the file's tree, for a filter that needs a module-level binding (None: unknown)
        self.source = source  # the whole file's bytes (None: unknown)
        # Whether the file differs from what its distribution installed (True when unknown): in one
        # that verifies, a rule's shapes that it reports only in a drifted file cannot be found.
        self.drifted = drifted
        self._statements = statements
        self._nodes_of = nodes
        self._nodes: list[ast.AST] | None = None
        self._identifiers: frozenset[str] | None = None

    def nodes(self) -> list[ast.AST]:
        if self._nodes is None:
            self._nodes = [n for stmt in self._statements for n in self._nodes_of(stmt)]
        return self._nodes

    def identifiers(self) -> frozenset[str]:
        """Every name, attribute, imported module part and short string the statement spells."""
        if self._identifiers is None:
            self._identifiers = spelled_identifiers(self.nodes())
        return self._identifiers


def spelled_identifiers(nodes: Iterable[ast.AST]) -> frozenset[str]:
    """Every name, attribute, imported module part and short string that `nodes` spell."""
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.alias):
            out.update(node.name.split("."))
            if node.asname:
                out.add(node.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.update(node.module.split("."))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 80:
            out.update(node.value.split("."))
    return frozenset(out)


def matches_any(tests: Filter, data: bytes) -> bool:
    """Whether data holds one of the tests: bytes, or a pattern's match (None: any data)."""
    if tests is None:
        return True
    if isinstance(tests, bytes | re.Pattern):
        tests = (tests,)
    for test in tests:
        if isinstance(test, bytes):
            if test in data:
                return True
        elif _may_match(test, data) and test.search(data) is not None:
            return True
    return False


_REQUIRED: dict[re.Pattern[bytes], bytes] = {}
_sre_parse = re._parser.parse  # type: ignore[attr-defined]
_LITERAL = re._constants.LITERAL  # type: ignore[attr-defined]


def _may_match(pattern: re.Pattern[bytes], data: bytes) -> bool:
    """False only when data lacks a literal every match of the pattern contains (a cheap `in` first)."""
    literal = _REQUIRED.get(pattern)
    if literal is None:
        literal = _REQUIRED[pattern] = required_literal(pattern)
    return literal in data


def required_literal(pattern: re.Pattern[bytes]) -> bytes:
    """The longest run of literal bytes at the pattern's top level: every match holds it (b"" if none).

    Read from the pattern's own parse tree; any case folding, or a str pattern, proves nothing.
    """
    if not isinstance(pattern.pattern, bytes) or pattern.flags & re.IGNORECASE:
        return b""
    try:
        parsed = _sre_parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - a parser of another Python version: no check, not a wrong one
        return b""
    if parsed.state.flags & re.IGNORECASE:
        return b""
    best: list[int] = []
    run: list[int] = []
    for op, value in parsed:
        if op is _LITERAL:
            run.append(value)
            best = max(best, run, key=len)[:]
        else:
            run = []
    return bytes(best)
