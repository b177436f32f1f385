"""The literal checks in front of a rule's patterns keep exactly what the patterns alone keep."""

from __future__ import annotations

import ast
import os
import re
import sysconfig
from pathlib import Path

from patchaudit.filters import _searching, matches_any, required_literal, required_literals
from patchaudit.hazards import load_rules

RULES = load_rules()


def _patterns() -> list[re.Pattern[bytes]]:
    found: dict[re.Pattern[bytes], None] = {}
    for rule in RULES:
        for filt in (rule.PREFILTER, rule.REQUIRES):
            tests = (filt,) if isinstance(filt, bytes | re.Pattern) else (filt or ())
            found.update({test: None for test in tests if isinstance(test, re.Pattern)})
    return list(found)


def _statements(root: Path) -> list[bytes]:
    """Every module-level statement and class member of the Python files under root, as text."""
    texts: list[bytes] = []
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            continue
        lines = data.splitlines(keepends=True)
        nodes = [*tree.body, *(m for s in tree.body if isinstance(s, ast.ClassDef) for m in s.body)]
        texts.extend(b"".join(lines[n.lineno - 1 : n.end_lineno]) for n in nodes)
    return texts


def test_the_literal_check_keeps_the_same_statements_as_the_patterns() -> None:
    corpus = Path(os.environ.get("PATCHAUDIT_LITERAL_CORPUS") or Path(sysconfig.get_paths()["purelib"]) / "rich")
    statements = _statements(corpus)
    patterns = _patterns()
    assert len(statements) > 1000 and len(patterns) > 10
    proven = 0
    for pattern in patterns:
        literal = required_literal(pattern)
        proven += bool(literal)
        plain = [pattern.search(text) is not None for text in statements]
        checked = [literal in text and pattern.search(text) is not None for text in statements]
        assert checked == plain, pattern.pattern
    assert proven > len(patterns) // 2  # the check is there for most patterns, not only proven harmless


def test_no_literal_is_claimed_where_a_match_can_do_without_it() -> None:
    assert required_literal(re.compile(rb"\btorch\.save\(")) == b"torch.save("
    assert required_literal(re.compile(rb"ab(cd)?ef")) == b"ab"
    assert required_literal(re.compile(rb"save|load")) == b""
    assert required_literal(re.compile(rb"(?i)save")) == b""
    assert required_literal(re.compile(rb"save", re.IGNORECASE)) == b""
    assert required_literal(re.compile(rb"x*")) == b""


def test_the_literal_sets_keep_the_same_statements_as_the_patterns() -> None:
    """`matches_any` tries one of a set of literals before a pattern (`settrace` or `setprofile`
    for `\\bset(?:trace|profile)\\b`): it keeps what the pattern alone keeps."""
    corpus = Path(os.environ.get("PATCHAUDIT_LITERAL_CORPUS") or Path(sysconfig.get_paths()["purelib"]) / "rich")
    statements = _statements(corpus)
    patterns = _patterns()
    proven = 0
    for pattern in patterns:
        proven += len(required_literals(pattern)) > 1
        plain = [pattern.search(text) is not None for text in statements]
        assert [matches_any(pattern, text) for text in statements] == plain, pattern.pattern
    assert proven >= 5  # sets, not only the single literal


def test_a_literal_set_holds_one_literal_of_every_match() -> None:
    assert required_literals(re.compile(rb"\bset(?:trace|profile)(?:_all_threads)?\b")) == (b"setprofile", b"settrace")
    assert required_literals(re.compile(rb"\bSIG(?:STOP|TSTP|TRAP)\b")) == (b"SIGSTOP", b"SIGTRAP", b"SIGTSTP")
    assert required_literals(re.compile(rb"(?:environ\.get|getenv)\([^()\n]*,")) == (b"environ.get(", b"getenv(")
    assert required_literals(re.compile(rb"ab(cd)?ef")) == (b"abcdef", b"abef")
    assert required_literals(re.compile(rb"save|load")) == (b"load", b"save")
    assert required_literals(re.compile(rb"\bdef\s+(?:save|\w+_dump)")) == (b"_dump", b"save")
    assert required_literals(re.compile(rb"\bdef\s+(?:save|\w+)")) == (b"def",)  # one branch proves no literal
    assert required_literals(re.compile(rb"x*")) == ()
    assert required_literals(re.compile(rb"[=!]=")) == (b"=",)  # {==, !=} is too short: the literal run
    assert required_literals(re.compile(rb"sa(?i:ve)d")) == (b"sa",)  # folded inside: the literal run before it
    assert required_literals(re.compile(rb"(?i)save")) == ()
    for text in (b"x.settrace(f)", b"sys.setprofile(None)"):
        assert matches_any(re.compile(rb"\bset(?:trace|profile)\b"), text)
    assert not matches_any(re.compile(rb"\bset(?:trace|profile)\b"), b"settings = setup()")


def test_a_rules_tests_in_any_order_keep_what_they_keep_in_theirs() -> None:
    """`matches_any` tries a rule's tests cheapest first (bytes, then patterns a literal rules out):
    over every statement of a corpus and every file of it, each rule's PREFILTER and REQUIRES hold
    exactly where one of their tests, tried in the rule's order, holds."""
    corpus = Path(os.environ.get("PATCHAUDIT_LITERAL_CORPUS") or Path(sysconfig.get_paths()["purelib"]) / "rich")
    texts = _statements(corpus) + [path.read_bytes() for path in sorted(corpus.rglob("*.py"))]
    reordered = 0
    for rule in RULES:
        for tests in (rule.PREFILTER, rule.REQUIRES):
            if not isinstance(tests, tuple):
                continue
            kinds = [isinstance(test, bytes) or bool(required_literals(test)) for test in tests]
            reordered += kinds != sorted(kinds, reverse=True)
            in_order = [
                any(test in text if isinstance(test, bytes) else test.search(text) is not None for test in tests)
                for text in texts
            ]
            assert [matches_any(tests, text) for text in texts] == in_order, rule.ID
    assert reordered >= 3  # rules whose own order puts a costly pattern first


def test_a_pattern_led_by_its_first_bytes_matches_where_the_pattern_does() -> None:
    """A pattern that starts with `\\b`, a lookaround or a mixed branch is searched led by the bytes
    its match can start with: over every statement and file of a corpus, and at the edges its
    zero-width start reads (the byte before, the start of the text), it matches where it did."""
    edges = {
        rb"\bdef\s+forward": [b"def forward", b"undef forward", b"x\ndef  forward(", b"_def forward"],
        rb"(?:[=!<]=|(?<![-=>])>)\s*1\b": [b"a >= 1", b"a -> 1", b"a >1", b"f() => 1", b"a == 10", b">1"],
        rb"(?<!\.)\b1\s*==": [b"1 == n", b"x.1 == n", b"a1 == n", b"(1 ==n"],
        rb"(?m)^\w+ = (?:True|1)$": [b"X = True", b"  X = True", b"a\nX = 1", b"a\nX = 1\n"],
        rb"(?:\bnot|(?<!is )\bin)\b": [b"not x", b"is in", b"x in y", b"cannot", b"notin"],
        rb"([\'\"])w\1": [b"'w'", b"'w\"", b"\"w\""],  # a backreference: searched as written
        rb"\b\d*": [b"", b"x"],  # may match nothing: searched as written
    }
    for source, texts in edges.items():
        pattern = re.compile(source)
        for text in texts:
            assert (_searching(pattern).search(text) is not None) == (pattern.search(text) is not None), (source, text)
    assert _searching(re.compile(rb"\bdef\s+forward")).pattern.startswith(b"[d]")
    assert _searching(re.compile(rb"([\'\"])w\1")).pattern == rb"([\'\"])w\1"
    corpus = Path(os.environ.get("PATCHAUDIT_LITERAL_CORPUS") or Path(sysconfig.get_paths()["purelib"]) / "rich")
    texts = _statements(corpus) + [path.read_bytes() for path in sorted(corpus.rglob("*.py"))]
    led = 0
    for pattern in _patterns():
        searching = _searching(pattern)
        led += searching is not pattern
        assert [searching.search(t) is not None for t in texts] == [pattern.search(t) is not None for t in texts]
    assert led >= 15  # most of the rules' patterns start where the engine cannot skip ahead
