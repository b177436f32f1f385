"""A pack's own VALID/INVALID examples, run through the engine one rule at a time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from patchaudit.hazards.engine import check_file
from patchaudit.hazards.source import SourceFile
from patchaudit.report import Finding
from patchaudit.rule import Example, Rule

__all__ = ["ExampleResult", "as_example", "run_example", "run_examples"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ExampleResult:
    """One VALID or INVALID example of a rule, run through the engine with that rule alone."""

    rule: str
    kind: str  # "valid" | "invalid"
    index: int
    ok: bool
    problem: str
    findings: tuple[Finding, ...]


def as_example(example: str | Example) -> Example:
    return example if isinstance(example, Example) else Example(code=example)


def run_example(rule: type[Rule], kind: str, index: int, example: str | Example) -> ExampleResult:
    ex = as_example(example)
    source = SourceFile(
        path=ex.path,
        installed=ex.code.encode(),
        pristine=ex.pristine.encode() if ex.pristine is not None else None,
        drifted=True,
    )
    found = tuple(f for f in check_file(source, [rule]) if not f.suppressed)
    own = [f for f in found if f.rule == rule.ID]
    unfiltered = tuple(f for f in check_file(source, [rule], prefilter=False) if not f.suppressed)
    problem = ""
    if unfiltered != found:
        problem = "the prefilter changes the result: without it, " + _listed(unfiltered)
    elif ex.pristine is None and (verified := _verified(replace(source, drifted=False), rule)):
        problem = verified
    elif kind == "valid":
        if found:
            problem = "expected no finding, got " + "; ".join(f"{f.rule} at line {f.line}: {f.message}" for f in found)
    else:
        if not own:
            other = "; ".join(f"{f.rule} at line {f.line}: {f.message}" for f in found)
            problem = "expected a finding, got none" + (f" (but: {other})" if other else "")
        elif ex.line is not None and not any(f.line == ex.line for f in own):
            problem = f"expected a finding at line {ex.line}, got lines {[f.line for f in own]}"
        elif ex.message is not None and not any(ex.message in f.message for f in own):
            problem = f"expected a message with {ex.message!r}, got {[f.message for f in own]}"
        elif ex.severity is not None and own[0].severity is not ex.severity:
            problem = f"expected severity {ex.severity.value}, got {own[0].severity.value}"
    return ExampleResult(rule=rule.ID, kind=kind, index=index, ok=not problem, problem=problem, findings=found)


def _verified(source: SourceFile, rule: type[Rule]) -> str:
    """The code in a file that verifies (`--all-files`), where a filter keeps only what the rule
    reports there (Statement.drifted): what the prefilter changes, if anything."""
    whole = tuple(check_file(source, [rule], prefilter=False))
    if tuple(check_file(source, [rule])) == whole:
        return ""
    return "the prefilter changes the result in a file that verifies: without it, " + _listed(whole)


def _listed(findings: Sequence[Finding]) -> str:
    return "; ".join(f"{f.rule} at line {f.line}: {f.message}" for f in findings) or "no finding"


def run_examples(rules: Sequence[type[Rule]]) -> list[ExampleResult]:
    """Every example of every rule; a rule with no VALID or no INVALID example fails too."""
    results = []
    for rule in rules:
        for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID)):
            if not examples:
                results.append(
                    ExampleResult(
                        rule=rule.ID,
                        kind=kind,
                        index=-1,
                        ok=False,
                        problem=f"the rule declares no {kind.upper()} example",
                        findings=(),
                    )
                )
            for index, example in enumerate(examples):
                results.append(run_example(rule, kind, index, example))
    return results
