"""The gate's output for the journal: one line per problem, one summary line; no colour, no table."""

from __future__ import annotations

TYPE_CHECKING = False  # no typing import: the warm gate renders with this module

if TYPE_CHECKING:
    from patchaudit.gate import Problem, Verdict

PREFIX = "patchaudit"


def problem_line(problem: Problem) -> str:
    detail = f" ({problem.detail})" if problem.detail else ""
    if problem.kind == "error":
        return f"{PREFIX}: error: {problem.detail}"
    return f"{PREFIX}: {problem.where}: {problem.kind} {problem.path}{detail}"


def summary_line(verdict: Verdict) -> str:
    if verdict.failed_open:
        word = "FAIL-OPEN"
    elif verdict.exit_code == 0:
        word = "ok"
    elif verdict.exit_code == 1:
        word = "FAIL"
    else:
        word = "ERROR"
    counts: dict[str, int] = {}
    for p in verdict.problems:
        counts[p.kind] = counts.get(p.kind, 0) + 1
    parts = [f"{n} {kind}" for kind, n in sorted(counts.items())]
    what = ", ".join(parts) if parts else "no problems"
    facts = [f"{verdict.distributions} distribution{'s' if verdict.distributions != 1 else ''}"]
    facts.append(f"{verdict.files_checked} files")
    if verdict.approved:
        facts.append(f"{verdict.approved} approved patch{'es' if verdict.approved != 1 else ''}")
    if verdict.baseline:
        facts.append(f"baseline {verdict.baseline}")
    if verdict.seconds or verdict.cached:
        facts.append(f"{verdict.seconds:.2f}s{' cached' if verdict.cached else ''}")
    tail = " (failing open: the service starts anyway)" if verdict.failed_open else ""
    return f"{PREFIX} gate: {word}: {what}; {', '.join(facts)}; exit {verdict.exit_code}{tail}"


def render_journal(verdict: Verdict) -> str:
    """The full text the gate prints: problems first, the summary last."""
    lines = [problem_line(p) for p in verdict.problems]
    lines.append(summary_line(verdict))
    return "\n".join(lines) + "\n"
