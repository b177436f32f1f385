"""The statement prefilter: the file cut down to the statements some rule could flag, before libcst parses it.

A module-level statement no rule keeps becomes blank lines, joined by backslashes into one stretch of
whitespace for libcst (_blank); in a class that is kept, a member no rule keeps becomes a `pass`. Each
rule says what it keeps (Rule.keeps: its byte filters, IDENTIFIERS, then its statement check over the
statement's ast nodes); a statement that names a module-level alias or a helper of the module counts
what they stand for (`save = torch.save`, `_dump(x)`), at any depth.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Sequence
from typing import NamedTuple

from patchaudit.analysis.module import ModuleAnalysis
from patchaudit.analysis.trees import walk
from patchaudit.filters import Alias, Spelling, Statement, spelled_identifiers
from patchaudit.rule import Rule

__all__ = ["Reduced", "blocks", "reduced"]


class _Nodes:
    """Every ast node of a statement, walked once per file; a class reuses its members' walks."""

    def __init__(self) -> None:
        self.memo: dict[int, list[ast.AST]] = {}
        self.headers: dict[int, list[ast.AST]] = {}

    def __call__(self, stmt: ast.stmt) -> list[ast.AST]:
        found = self.memo.get(id(stmt))
        if found is None:
            if isinstance(stmt, ast.ClassDef):
                found = list(self.header(stmt))
                for member in stmt.body:
                    found.extend(self(member))
            else:
                found = walk(stmt)
            self.memo[id(stmt)] = found
        return found

    def header(self, cls: ast.stmt) -> list[ast.AST]:
        """A class's own nodes, without its members': the class, its decorators, bases and keywords."""
        found = self.headers.get(id(cls))
        if found is None:
            assert isinstance(cls, ast.ClassDef)
            found = self.headers[id(cls)] = [cls]
            for expr in [*cls.decorator_list, *cls.bases, *cls.keywords]:
                found.extend(walk(expr))
        return found


def blocks(statements: list[ast.stmt]) -> list[tuple[int, int, list[ast.stmt]]]:
    """Statements grouped by the lines they span (decorators included; `a; b` is one block)."""
    blocks: list[tuple[int, int, list[ast.stmt]]] = []
    for stmt in statements:
        first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
        last = stmt.end_lineno or stmt.lineno
        if blocks and first <= blocks[-1][1]:
            blocks[-1] = (blocks[-1][0], max(blocks[-1][1], last), [*blocks[-1][2], stmt])
        else:
            blocks.append((first, last, [stmt]))
    return blocks


_WORD = re.compile(rb"\w+")
_NAME = re.compile(r"\w+")


def _words(text: bytes) -> frozenset[bytes]:
    return frozenset(_WORD.findall(text))


class _Spelled:
    """Names spelled as whole words in a text: what `\b(?:a|b)\b` finds, mostly by set lookup."""

    def __init__(self, names: set[str]) -> None:
        plain: set[bytes] = set()
        other: list[bytes] = []
        for name in names:
            raw = name.encode()
            if _WORD.fullmatch(raw):
                plain.add(raw)  # ASCII word characters only: a whole word is one of the text's words
            else:
                other.append(re.escape(raw))
        self.plain = frozenset(plain)
        self.other = re.compile(rb"\b(?:" + b"|".join(other) + rb")\b") if other else None

    def which(self, text: bytes, words: frozenset[bytes]) -> set[str]:
        """The names spelled in the text."""
        out = {word.decode() for word in self.plain & words}
        if self.other is not None:
            out.update(found.decode() for found in self.other.findall(text))
        return out


class _SpanIdentifiers:
    """The identifiers spelled on a span of lines (a helper or a class of the module).

    A helper stands for what it calls only where its own lines could hold a finding of the rule:
    with IDENTIFIERS, a rule's sink is spelled on the way to it (or reached through a module
    alias or another helper, which the caller follows). The identifiers are those of every node
    that starts on the span's lines (a superset of the span's own, so never stricter than the rule).
    """

    def __init__(self, body: list[ast.stmt], nodes: _Nodes) -> None:
        self.body = body
        self.nodes = nodes
        self.memo: dict[tuple[int, int], frozenset[str]] = {}
        self.by_line: dict[int, dict[int, frozenset[str]]] = {}  # per statement: line -> identifiers
        self.whole: dict[int, frozenset[str]] = {}  # per statement: all of its identifiers

    def any_of(self, identifiers: frozenset[str] | None, span: tuple[int, int]) -> bool:
        if identifiers is None:
            return True
        found = self.memo.get(span)
        if found is None:
            found = self.memo[span] = self._spelled(*span)
        return not identifiers.isdisjoint(found)

    def _spelled(self, first: int, last: int) -> frozenset[str]:
        out: set[str] = set()
        self._collect(self.body, first, last, out)
        return frozenset(out)

    def _collect(self, body: list[ast.stmt], first: int, last: int, out: set[str]) -> None:
        """Into `out`, the identifiers of the nodes of `body`'s statements that start on the lines:
        a statement within them whole, read once per file (a method, a helper function); the own
        lines of a class that holds them, and its members; else the statement's lines."""
        for stmt in body:
            start = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
            end = stmt.end_lineno or stmt.lineno
            if start > last or end < first:
                continue
            if first <= start and end <= last:
                found = self.whole.get(id(stmt))
                if found is None:
                    found = self.whole[id(stmt)] = spelled_identifiers(self.nodes(stmt))
                out.update(found)
            elif isinstance(stmt, ast.ClassDef):
                own = self.nodes.header(stmt)
                out.update(spelled_identifiers(n for n in own if first <= getattr(n, "lineno", 0) <= last))
                self._collect(stmt.body, first, last, out)
            else:
                table = self._lines_of(stmt)
                if last - first < len(table):
                    out.update(*(table[line] for line in range(first, last + 1) if line in table))
                else:
                    out.update(*(found for line, found in table.items() if first <= line <= last))

    def _lines_of(self, stmt: ast.stmt) -> dict[int, frozenset[str]]:
        """The identifiers of a statement's nodes, by the line each starts on (once per statement).

        Every node that spells an identifier (a name, an attribute, an import, a string) has a line.
        """
        table = self.by_line.get(id(stmt))
        if table is None:
            grouped: dict[int, list[ast.AST]] = {}
            for node in self.nodes(stmt):
                line = getattr(node, "lineno", None)
                if line is not None:
                    grouped.setdefault(line, []).append(node)
            table = self.by_line[id(stmt)] = {line: spelled_identifiers(found) for line, found in grouped.items()}
        return table


class Reduced(NamedTuple):
    source: bytes
    firsts: list[int]  # the first line of each module-level statement kept
    inner: dict[int, list[int]]  # a class cut down -> the first line of each member (or its `pass`)
    keepers: dict[tuple[int, int], frozenset[int]]  # (class line or 0, first line) -> the rules that keep it


@functools.lru_cache(maxsize=4096)  # the same qualified names recur in every file of a tree
def _may_name(rule: type[Rule], qualified: str, identifiers: frozenset[str] | None) -> bool:
    """Whether what a module-level name is bound to (a qualified name, or a string it holds) could be
    a rule's sink: its filters match it and, for a rule with IDENTIFIERS, one of its dotted parts is
    one of them (`pdb.set_trace`, `torch.save[]` of a container of sinks, `subprocess.Popen`; not
    `rotary_embedding.MRotaryEmbedding` for the `embed` in it); `identifiers`: the rule's
    IDENTIFIERS in this file (Rule.identifiers_in: not `copy.deepcopy` for torch-save's `copy`
    where nothing spells `shutil`)."""
    if not rule.mentions(qualified.encode()):
        return False
    return identifiers is None or not identifiers.isdisjoint(_NAME.findall(qualified))


def _blank(out: list[bytes], first: int, last: int, head: bytes = b"") -> None:
    """Lines `first` to `last` (from 1), and the blank lines after them, made one blank line (or
    `head` and its line's end: a `pass`) that spans them: each line but the last ends in a
    backslash, which joins it to the next. libcst reads the run as one piece of whitespace, where
    it makes three nodes of each blank line; Python and positions count the lines alike."""
    last = min(last, len(out))
    while last < len(out) and not out[last].strip():
        last += 1
    for index in range(first - 1, last - 1):
        out[index] = b"\\\n"
    out[last - 1] = b"\n"
    if head:
        out[first - 1] = head + (b" \\\n" if last > first else b"\n")


def reduced(
    data: bytes,
    analysis: ModuleAnalysis,
    rules: Sequence[type[Rule]],
    changed: set[int] | None,
    *,
    drifted: bool = True,
) -> Reduced | None:
    """The file with every statement no rule could flag turned into blank lines.

    Module-level statements are dropped whole; inside a class that is kept, each member that no
    rule keeps becomes a `pass` (a class body cannot be empty). Lines keep their numbers, so
    positions need no mapping; the line of every module-level statement kept comes along, and
    for a class cut down so, the line of each member (or of the `pass` standing for it), keyed
    by the class's line; and which rules keep each statement and member (by index in `rules`).
    None when no statement is left. A rule keeps what its filters
    match (Rule.keeps), counting a mention of a module-level name bound to something its
    filters match (`save = torch.save`, then `save(...)`) as a match. With the changed lines of a
    drifted file, a statement that holds none of them is dropped too, unless a rule looks at the
    whole module (WHOLE_MODULE): its findings could not be in the change. In a file that verifies
    (`drifted` false) a rule keeps only what it reports there (Statement.drifted).
    """
    lines = data.splitlines(keepends=True)  # bytes split at \r\n, \r and \n only, as ast counts
    tree, names = analysis.tree, analysis.names
    module_names = {name: names.lookup(name, ()) for name in names.module_aliases()}
    for name, strings in names.strings.get((), {}).items():
        # `_SAVE = "save"`, then `getattr(torch, _SAVE)`: the name spells what its text does.
        module_names[name] = module_names.get(name, frozenset()) | {t for t in strings if t.isidentifier()}
    for attr, qualified in analysis.instance_aliases().items():
        module_names[attr] = module_names.get(attr, frozenset()) | qualified  # `self.bp = pdb.set_trace`
    helpers = analysis.helper_spans()
    for name, spans in analysis.instance_spans().items():
        helpers[name] = helpers.get(name, []) + spans  # `_dump = Dumper()`: `_dump(x)` runs its class
    constants = [(name, value) for table in analysis.constants().values() for name, value in table.items()]
    # A helper of the module stands for what it calls (any depth): `_dump(x)` is a `torch.save`.
    # Asked per statement, from the names it spells: each helper's text is read, and each rule's
    # filters run over it, only when a statement reaches the helper (a drifted file's few changed
    # statements reach few).
    texts = {name: [b"".join(lines[first - 1 : last]) for first, last in spans] for name, spans in helpers.items()}
    reaching = set(module_names) | set(texts)
    through = _Spelled(reaching)  # what a helper's text may reach through
    spelled_names = _Spelled(reaching | {name for name, _ in constants})
    nodes = _Nodes()
    # A rule that keeps no statement of this module is not asked of any (Rule.keeps_nothing).
    spelling = Spelling(data, lambda: [node for stmt in tree.body for node in nodes(stmt)])
    live = [not rule.keeps_nothing(spelling, drifted) for rule in rules]
    spelled_in = _SpanIdentifiers(tree.body, nodes)
    span_words: dict[tuple[int, int], frozenset[bytes]] = {}
    edges: dict[str, set[str]] = {}
    reached: dict[str, frozenset[str]] = {}
    asked: list[set[str]] = [set() for _ in rules]  # per rule: the names weighed so far
    direct: list[set[str]] = [set() for _ in rules]  # and of those, the ones that are its sink
    matter = [{n for n, value in constants if r.constant_matters(value)} if r.CONSTANTS else set() for r in rules]
    identifiers = [r.identifiers_in(data) for r in rules]

    def words(span: tuple[int, int], text: bytes) -> frozenset[bytes]:
        """The words of the text on a span of lines (a helper's is a statement's too: read once)."""
        found = span_words.get(span)
        if found is None:
            found = span_words[span] = _words(text)
        return found

    def reach(name: str) -> frozenset[str]:
        """The name and every name its helpers' texts spell, at any depth."""
        found = reached.get(name)
        if found is None:
            seen, todo = {name}, [name]
            while todo:
                at = todo.pop()
                done = reached.get(at)
                if done is not None:
                    seen |= done  # a name already followed: all it reaches, without a walk
                    continue
                if at not in edges:
                    spans = zip(texts.get(at, ()), helpers.get(at, ()), strict=True)
                    edges[at] = set().union(*(through.which(t, words(span, t)) for t, span in spans))
                todo.extend(edges[at] - seen)
                seen |= edges[at]
            found = reached[name] = frozenset(seen)
        return found

    def is_direct(index: int, name: str) -> bool:
        """A module-level name bound to what the rule's filters match, or a helper whose own text does."""
        rule = rules[index]
        return any(_may_name(rule, q, identifiers[index]) for q in module_names.get(name, ())) or any(
            rule.mentions(text) and spelled_in.any_of(identifiers[index], span)
            for text, span in zip(texts.get(name, ()), helpers.get(name, ()), strict=True)
        )

    def any_direct(index: int, names: frozenset[str]) -> bool:
        """Whether one of the names is direct for the rule (each name weighed once per rule, the rest
        by set operations)."""
        if not direct[index].isdisjoint(names):
            return True
        for name in names - asked[index]:
            asked[index].add(name)
            if is_direct(index, name):
                direct[index].add(name)
                return True
        return False

    def keep(first: int, last: int, stmts: list[ast.stmt], header: bool = False) -> frozenset[int]:
        touched = changed is None or any(line in changed for line in range(first, last + 1))
        walked = nodes.header if header else nodes
        statement = Statement(b"".join(lines[first - 1 : last]), stmts, walked, tree, drifted, data)
        named: list[tuple[set[str], frozenset[str]]] = []  # what it spells, and reaches through helpers

        def aliased(index: int) -> bool:
            if not named:
                spelled = spelled_names.which(statement.text, words((first, last), statement.text))
                named.append((spelled, frozenset().union(*(reach(n) for n in spelled if n in reaching))))
            spelled, through_names = named[0]
            return not matter[index].isdisjoint(spelled) or any_direct(index, through_names)

        found = set()
        for index, rule in enumerate(rules):
            if not (live[index] and (touched or rule.WHOLE_MODULE)):
                continue
            try:
                kept = rule.keeps(statement, Alias(functools.partial(aliased, index)))
            except RecursionError:  # nested past the stack of a filter's own walk: the rule weighs it
                kept = True
            if kept:
                found.add(index)
        return frozenset(found)

    out = list(lines)
    kept: list[int] = []
    inner: dict[int, list[int]] = {}
    keepers: dict[tuple[int, int], frozenset[int]] = {}
    for first, last, stmts in blocks(tree.body):
        (cls,) = stmts if len(stmts) == 1 else (None,)
        if not isinstance(cls, ast.ClassDef) or cls.body[0].lineno <= cls.lineno:
            keepers[0, stmts[0].lineno] = by = keep(first, last, stmts)
            if by:
                kept.append(stmts[0].lineno)  # the `def` line, not a decorator's, as libcst positions it
            else:
                _blank(out, first, last)
            continue
        # A class is read member by member, and its own lines (decorators, bases, the `class` line)
        # apart: every rule that keeps one of them keeps the class. A member's findings lie in it
        # (each member is walked only by the rules that keep it), so the class as a whole need not
        # be read a second time.
        members = blocks(cls.body)
        members_by = [keep(m_first, m_last, m_stmts) for m_first, m_last, m_stmts in members]
        by = keep(first, members[0][0] - 1, [cls], header=True).union(*members_by)
        keepers[0, cls.lineno] = by
        if not by:
            _blank(out, first, last)
            continue
        kept.append(cls.lineno)
        members_at = inner[cls.lineno] = []
        for (m_first, m_last, m_stmts), member_by in zip(members, members_by, strict=True):
            line = lines[m_first - 1]
            if member_by or line[: m_stmts[0].col_offset].strip():
                keepers[cls.lineno, m_stmts[0].lineno] = member_by or by
                members_at.append(m_stmts[0].lineno)
                continue  # kept, or on the header's line (`class A(B): ...`)
            keepers[cls.lineno, m_first] = by  # the `pass` standing for it
            members_at.append(m_first)
            _blank(out, m_first, m_last, head=line[: len(line) - len(line.lstrip(b" \t"))] + b"pass")
    if not kept:
        return None
    return Reduced(b"".join(out), kept, inner, keepers)
