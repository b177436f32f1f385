"""What a rule's filters see before any libcst parse: a statement's text, its ast nodes and the
identifiers it spells, and the byte tests (substrings and patterns) of PREFILTER and REQUIRES."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from patchaudit.analysis.trees import of_types

__all__ = [
    "Alias",
    "Filter",
    "Statement",
    "matches_any",
    "required_literal",
    "required_literals",
    "spelled_identifiers",
]

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


# An escape in a string literal that can spell a letter (`"s\x61ve"`, `"\u0073ave"`, `"\N{...}"`,
# octal), or a backslash that joins lines (inside a string, `"sa\` and `ve"` are one `save`): the
# byte filters read a name by its spelling, and the rules read the string's value.
RESPELLED = re.compile(rb"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{|[0-7]|\r|\n)")
# A coding declaration (on the first or second line): the file's text is not its bytes.
_CODING = re.compile(rb"\A(?:[^\r\n]*(?:\r\n?|\n))?[ \t\f]*#[^\r\n]*?coding[:=]")


class Spelling:
    """Whether a module spells one of a set of identifiers as the ast reads it: in a name, an
    attribute, an import or a piece of a short string (what `Statement.identifiers()` gives of
    every statement, and what a module alias or helper resolves through).

    A whole word of the bytes answers at once. Else the ast's own reading decides: in a file that
    is ASCII with no escape, line join or coding declaration, only adjacent string literals
    (`"sa" "ve"`) make a value its bytes do not spell, so its strings' pieces are read; in any other
    file, every identifier of its nodes (`ｓａｖｅ` is `save`). `nodes` gives every node of the
    module, read once when first needed.
    """

    __slots__ = ("source", "_nodes", "_spelled")

    def __init__(self, source: bytes, nodes: Callable[[], Sequence[ast.AST]]) -> None:
        self.source = source
        self._nodes = nodes
        self._spelled: frozenset[str] | None = None

    def any_of(self, identifiers: Collection[str]) -> bool:
        for name in identifiers:
            word = name.encode()
            if word in self.source and _whole_word(word).search(self.source) is not None:
                return True
        if self._spelled is None:
            nodes = self._nodes()
            if self.source.isascii() and not (RESPELLED.search(self.source) or _CODING.search(self.source)):
                self._spelled = frozenset(
                    piece
                    for node in of_types(nodes, (ast.Constant,))
                    if isinstance(node.value, str) and len(node.value) < 80  # type: ignore[attr-defined]
                    for piece in node.value.split(".")  # type: ignore[attr-defined]
                )
            else:
                self._spelled = spelled_identifiers(nodes)
        return not self._spelled.isdisjoint(identifiers)


@functools.lru_cache(maxsize=1024)
def _whole_word(word: bytes) -> re.Pattern[bytes]:
    """The word where no word character stands either side; led by its literal, which the regex
    engine finds by itself (a pattern led by a lookbehind is tried at every byte)."""
    escaped = re.escape(word)
    return re.compile(escaped + rb"(?<!\w" + escaped + rb")(?!\w)")


class Alias:
    """Whether a statement reaches what a rule's filters match through the module: a module-level
    name bound to it (`save = torch.save`, then `save(x)`), a constant the rule weighs, or a helper
    of the module whose text matches (`_dump(x)`).

    Weighed on first use, once: a rule that settles a statement without it (env-mutation and
    host-sync in a file that verifies) never pays for it. `Alias(False)` is a known answer.
    """

    __slots__ = ("_known", "_weigh")

    def __init__(self, weigh: Callable[[], bool] | bool) -> None:
        self._weigh = weigh
        self._known: bool | None = weigh if isinstance(weigh, bool) else None

    def __bool__(self) -> bool:
        if self._known is None:
            assert not isinstance(self._weigh, bool)
            self._known = self._weigh()
        return self._known


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
    if isinstance(tests, bytes):
        return tests in data
    if isinstance(tests, re.Pattern):
        return _may_match(tests, data) and _searching(tests).search(data) is not None
    if isinstance(tests, tuple):  # a rule's own (a list may change: planned each time)
        planned = _PLANS.get(id(tests))
        if planned is None or planned[0] is not tests:
            planned = _PLANS[id(tests)] = (tests, _plan(tests))
        plain, guarded, rest = planned[1]
    else:
        plain, guarded, rest = _plan(tests)
    for test in plain:
        if test in data:
            return True
    for literals, pattern in guarded:
        for literal in literals:
            if literal in data:
                if pattern.search(data) is not None:
                    return True
                break
    return any(pattern.search(data) is not None for pattern in rest)


_REQUIRED: dict[re.Pattern[bytes], tuple[bytes, ...]] = {}
_sre_parse = re._parser.parse  # type: ignore[attr-defined]
_C = re._constants  # type: ignore[attr-defined]
_LITERAL = _C.LITERAL
_REPEATS = (_C.MAX_REPEAT, _C.MIN_REPEAT, *([_C.POSSESSIVE_REPEAT] if hasattr(_C, "POSSESSIVE_REPEAT") else []))
_ZERO_WIDTH = (_C.AT, _C.ASSERT, _C.ASSERT_NOT)
_MOST = 16  # the most literals a check tries, and strings a part of a pattern is expanded to


def _literals(pattern: re.Pattern[bytes]) -> tuple[bytes, ...]:
    """required_literals, read once per pattern."""
    literals = _REQUIRED.get(pattern)
    if literals is None:
        literals = _REQUIRED[pattern] = required_literals(pattern)
    return literals


def _may_match(pattern: re.Pattern[bytes], data: bytes) -> bool:
    """False only when data lacks every literal of a set one of which each match of the pattern
    contains (a few cheap `in`s first)."""
    literals = _literals(pattern)
    return not literals or any(literal in data for literal in literals)


# The bytes of a tuple of tests, its patterns with the literals one of which a match holds, the rest.
_Plan = tuple[tuple[bytes, ...], tuple[tuple[tuple[bytes, ...], re.Pattern[bytes]], ...], tuple[re.Pattern[bytes], ...]]
# Per tuple of tests (held, so that its id names it alone): the order to try them in.
_PLANS: dict[int, tuple[tuple[bytes | re.Pattern[bytes], ...], _Plan]] = {}


def _plan(tests: Sequence[bytes | re.Pattern[bytes]]) -> _Plan:
    """The tests cheapest first: bytes, then patterns a literal rules out (with their literals),
    then the rest. The answer is whether any test holds, so their order changes only what it costs."""
    patterns = [(_literals(test), _searching(test)) for test in tests if not isinstance(test, bytes)]
    return (
        tuple(test for test in tests if isinstance(test, bytes)),
        tuple((literals, test) for literals, test in patterns if literals),
        tuple(test for literals, test in patterns if not literals),
    )


_SEARCHES: dict[re.Pattern[bytes], re.Pattern[bytes]] = {}
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_DIGIT = frozenset(b"0123456789")
_SPACE = frozenset(b" \t\n\r\f\v")
_BYTES = frozenset(range(256))
_CATEGORIES = {
    _C.CATEGORY_DIGIT: _DIGIT,
    _C.CATEGORY_NOT_DIGIT: _BYTES - _DIGIT,
    _C.CATEGORY_WORD: _WORD,
    _C.CATEGORY_NOT_WORD: _BYTES - _WORD,
    _C.CATEGORY_SPACE: _SPACE,
    _C.CATEGORY_NOT_SPACE: _BYTES - _SPACE,
}
_LEADING_FLAGS = re.compile(rb"\A(?:\(\?[aiLmsux]+\))+")
_FEWEST_LEADS = 32  # the most bytes a lead may be (more: about as slow as no lead)


def _searching(pattern: re.Pattern[bytes]) -> re.Pattern[bytes]:
    """A pattern that matches somewhere in a text exactly when `pattern` does, led by the bytes a
    match of it can start with: `[LEAD](?<=(?=PATTERN).)`.

    The regex engine skips ahead by itself only when a pattern starts with a literal or a class;
    one that starts with `\\b`, a lookaround or a branch that does (`\\bdef\\s+forward`,
    `(?:==|(?<!-)>)`) is tried at every byte of the text. Led by a class of its first bytes, it is
    tried only where one of them stands, in the text as it is (a `\\b` or a lookbehind still sees
    the byte before). Used where only whether it matches is asked; any pattern whose first bytes
    are not proven few, that may match the empty string, or that the wrapping cannot hold (a
    backreference), is searched as written.
    """
    found = _SEARCHES.get(pattern)
    if found is None:
        found = _SEARCHES[pattern] = _led(pattern) or pattern
    return found


def _led(pattern: re.Pattern[bytes]) -> re.Pattern[bytes] | None:
    if not isinstance(pattern.pattern, bytes) or pattern.flags & (re.IGNORECASE | re.VERBOSE | re.LOCALE):
        return None
    try:
        parsed = list(_sre_parse(pattern.pattern, pattern.flags))
        if _engine_leads(parsed):
            return None
        first, empty = _first_bytes(parsed)
    except Exception:  # noqa: BLE001 - an opcode unknown here (or of another Python version): as written
        return None
    if empty or len(first) > _FEWEST_LEADS or not first.isdisjoint(_SPACE):
        return None
    lead = b"".join(re.escape(bytes([c])) for c in sorted(first))
    body = _LEADING_FLAGS.sub(b"", pattern.pattern)
    try:
        return re.compile(b"[" + lead + b"](?<=(?=" + body + b").)", pattern.flags)
    except re.error:  # a backreference inside the lookbehind
        return None


def _engine_leads(items: list[tuple[Any, Any]]) -> bool:
    """Whether the regex engine finds the pattern's first byte by itself: it starts with a
    literal, a class, or a branch whose every arm starts with a literal."""
    while items and items[0][0] is _C.SUBPATTERN and not items[0][1][1] & re.IGNORECASE:
        items = list(items[0][1][3])
    if not items:
        return False
    op, value = items[0]
    if op is _C.BRANCH:
        return all(arm and list(arm)[0][0] is _LITERAL for arm in value[1])
    return op is _LITERAL or op is _C.IN


def _first_bytes(items: list[tuple[Any, Any]]) -> tuple[frozenset[int], bool]:
    """The bytes a match of the sequence can start with, and whether it can match the empty
    string (a zero-width part adds no byte; ValueError for a part not read here)."""
    out: set[int] = set()
    for op, value in items:
        if op is _LITERAL:
            found, empty = frozenset({value}), False
        elif op is _C.NOT_LITERAL:
            found, empty = _BYTES - {value}, False
        elif op is _C.IN:
            found, empty = _class_bytes(value), False
        elif op in _ZERO_WIDTH:
            found, empty = frozenset(), True
        elif op is _C.SUBPATTERN and not value[1] & re.IGNORECASE:
            found, empty = _first_bytes(list(value[3]))
        elif op is getattr(_C, "ATOMIC_GROUP", None):
            found, empty = _first_bytes(list(value))
        elif op in _REPEATS:
            found, empty = _first_bytes(list(value[2]))
            empty = empty or value[0] == 0
        elif op is _C.BRANCH:
            arms = [_first_bytes(list(arm)) for arm in value[1]]
            found, empty = frozenset().union(*(f for f, _ in arms)), any(e for _, e in arms)
        else:
            raise ValueError(op)
        out |= found
        if not empty:
            return frozenset(out), False
    return frozenset(out), True


def _class_bytes(items: list[tuple[Any, Any]]) -> frozenset[int]:
    """The bytes a class (`[...]`) of a bytes pattern matches."""
    out: set[int] = set()
    negate = False
    for kind, item in items:
        if kind is _C.NEGATE:
            negate = True
        elif kind is _LITERAL:
            out.add(item)
        elif kind is _C.RANGE:
            out.update(range(item[0], item[1] + 1))
        elif kind is _C.CATEGORY and item in _CATEGORIES:
            out |= _CATEGORIES[item]
        else:
            raise ValueError(kind)
    return _BYTES - out if negate else frozenset(out)


def required_literals(pattern: re.Pattern[bytes]) -> tuple[bytes, ...]:
    """Literals one of which every match of the pattern contains (none: no such set is proven).

    `\bset(?:trace|profile)\b` gives settrace and setprofile; `[=!]=` gives == and !=. Read from
    the pattern's own parse tree, as sets of the strings each part can match where they are few;
    any case folding, or a str pattern, proves nothing. Only sets whose every literal is at least
    three bytes long are kept (a shorter one is in most texts)."""
    if not isinstance(pattern.pattern, bytes) or pattern.flags & re.IGNORECASE:
        return ()
    try:
        parsed = _sre_parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - a parser of another Python version: no check, not a wrong one
        return ()
    if parsed.state.flags & re.IGNORECASE:
        return ()
    try:
        found = _required(list(parsed))
    except Exception:  # noqa: BLE001 - an opcode of another Python version: no check, not a wrong one
        return ()
    if found is None or min(map(len, found)) < 3:
        single = required_literal(pattern)
        return (single,) if single else ()
    return tuple(sorted(found))


def _better(a: frozenset[bytes] | None, b: frozenset[bytes] | None) -> frozenset[bytes] | None:
    """The more telling of two literal sets: the longer shortest literal, then the fewer literals."""
    if a is None or b is None:
        return a if b is None else b
    return max(a, b, key=lambda s: (min(map(len, s)), -len(s)))


def _required(items: list[tuple[Any, Any]]) -> frozenset[bytes] | None:
    """A set of non-empty literals one of which every match of the sequence contains, or None."""
    best: frozenset[bytes] | None = None
    run: frozenset[bytes] | None = frozenset({b""})  # the strings the current run of exact parts matches
    for op, value in items:
        exact = _exact(op, value)
        if exact is not None and run is not None:
            grown = frozenset(a + b for a in run for b in exact)
            run = grown if len(grown) <= _MOST else None
        else:
            run = exact
        if run is not None and b"" not in run:
            best = _better(best, run)
        if exact is None:
            best = _better(best, _inner_required(op, value))
            run = frozenset({b""})
    return best


def _inner_required(op: Any, value: Any) -> frozenset[bytes] | None:
    """For a part that matches no small set of strings: literals one of which its every match holds."""
    if op is _C.SUBPATTERN:
        return None if value[1] & re.IGNORECASE else _required(list(value[3]))
    if op is getattr(_C, "ATOMIC_GROUP", None):
        return _required(list(value))
    if op in _REPEATS and value[0] >= 1:
        return _required(list(value[2]))
    if op is _C.BRANCH:
        return _union(_required, value[1])
    return None


def _union(
    read: Callable[[list[tuple[Any, Any]]], frozenset[bytes] | None], branches: list[Any]
) -> frozenset[bytes] | None:
    """What `read` gives each branch of an alternation, together (None where one gives None)."""
    out: set[bytes] = set()
    for branch in branches:
        found = read(list(branch))
        if found is None:
            return None
        out |= found
    return frozenset(out) if len(out) <= _MOST else None


def _exact(op: Any, value: Any) -> frozenset[bytes] | None:
    """Every string a part of a pattern can match, where they are few; else None."""
    if op is _LITERAL:
        return frozenset({bytes([value])})
    if op in _ZERO_WIDTH:
        return frozenset({b""})
    if op is _C.IN:
        chars: set[int] = set()
        for kind, item in value:
            if kind is _LITERAL:
                chars.add(item)
            elif kind is _C.RANGE and item[1] - item[0] < _MOST:
                chars.update(range(item[0], item[1] + 1))
            else:
                return None  # a negation, a category, a wide range
        return frozenset(bytes([c]) for c in chars) if len(chars) <= _MOST else None
    if op is _C.SUBPATTERN:
        return None if value[1] & re.IGNORECASE else _exact_sequence(list(value[3]))
    if op is _C.BRANCH:
        return _union(_exact_sequence, value[1])
    if op in _REPEATS:
        low, high, inner = value
        once = _exact_sequence(list(inner))
        if once is None or high > 3:
            return None
        out = set()
        for times in range(low, high + 1):
            strings = {b""}
            for _ in range(times):
                strings = {a + b for a in strings for b in once}
                if len(strings) > _MOST:
                    return None
            out |= strings
        return frozenset(out) if len(out) <= _MOST else None
    return None


def _exact_sequence(items: list[tuple[Any, Any]]) -> frozenset[bytes] | None:
    out = frozenset({b""})
    for op, value in items:
        exact = _exact(op, value)
        if exact is None:
            return None
        out = frozenset(a + b for a in out for b in exact)
        if len(out) > _MOST:
            return None
    return out


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
