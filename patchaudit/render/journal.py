"""The gate's output for the journal: one line per problem, one summary line; no colour, no table."""

from __future__ import annotations

from patchaudit.errors import ExitCode

TYPE_CHECKING = False  # no typing import: the warm gate renders with this module

if TYPE_CHECKING:
    from patchaudit.gate.cache import Cached
    from patchaudit.gate.verdict import Problem, Verdict

PREFIX = "patchaudit"

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# C0 and C1 controls, DEL, and the Unicode line and paragraph separators: anything that could end a
# journal line early, or rewrite it on a terminal. A file name is attacker-chosen text. Lone surrogates
# (bytes of a name that is not UTF-8) could not even be written out.
_UNSAFE = frozenset(chr(c) for c in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *range(0xD800, 0xE000)))


def escape(text: str) -> str:
    """`text` on one journal line: control characters become visible escapes (a newline is `\\n`)."""
    if not any(ch in _UNSAFE for ch in text):
        return text
    return "".join(_escape_char(ch) if ch in _UNSAFE else ch for ch in text)


def problem_line(problem: Problem) -> str:
    detail = f" ({escape(problem.detail)})" if problem.detail else ""
    if problem.kind == "error":
        return f"{PREFIX}: error: {escape(problem.detail)}"
    return f"{PREFIX}: {escape(problem.where)}: {escape(problem.kind)} {escape(problem.path)}{detail}"


_NOUNS = frozenset({"finding", "error", "interrupted-revert"})  # the other kinds are adjectives: "3 modified"


def summary_line(verdict: Verdict | Cached) -> str:
    if verdict.failed_open:
        word = "FAIL-OPEN"
    elif verdict.exit_code == ExitCode.CLEAN:
        word = "ok"
    elif verdict.exit_code == ExitCode.PROBLEMS:
        word = "FAIL"
    else:
        word = "ERROR"
    counts: dict[str, int] = {}
    for p in verdict.problems:
        counts[p.kind] = counts.get(p.kind, 0) + 1
    parts = [f"{n} {escape(kind)}{'s' if n != 1 and kind in _NOUNS else ''}" for kind, n in sorted(counts.items())]
    what = ", ".join(parts) if parts else "no problems"
    facts = [f"{verdict.distributions} distribution{'s' if verdict.distributions != 1 else ''}"]
    facts.append(f"{verdict.files_checked} file{'s' if verdict.files_checked != 1 else ''}")
    if verdict.approved:
        facts.append(f"{verdict.approved} approved patch{'es' if verdict.approved != 1 else ''}")
    if verdict.baseline:
        facts.append(f"baseline {escape(verdict.baseline)}")
    if verdict.seconds or verdict.cached:
        facts.append(f"{verdict.seconds:.2f}s{' cached' if verdict.cached else ''}")
    tail = " (failing open: the service starts anyway)" if verdict.failed_open else ""
    return f"{PREFIX} gate: {word}: {what}; {', '.join(facts)}; exit {verdict.exit_code}{tail}"


def render_journal(verdict: Verdict | Cached) -> str:
    """The full text the gate prints: problems first, the summary last."""
    lines = [problem_line(p) for p in verdict.problems]
    lines.append(summary_line(verdict))
    return "\n".join(lines) + "\n"
