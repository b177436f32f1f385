"""The gate's verdict: a report judged by a policy (also what `baseline check` prints), and its exit code.

Kept light: a gate builds a Verdict from its cache without importing the report values (a warm gate whose
kept verdict found no problem builds none: patchaudit.gate.cache.Cached).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from patchaudit.errors import ExitCode

# typing costs the warm gate milliseconds; annotations are strings (PEP 563) and need it only for checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from patchaudit.gate.policy import Policy
    from patchaudit.report import DistReport, Drift, Finding, Report, Severity


@dataclass(frozen=True, kw_only=True, slots=True)
class Problem:
    """One reason the gate fails, as one journal line."""

    kind: str  # modified | missing | added | finding | unverifiable | error
    where: str  # distribution name, or "environment"
    path: str
    detail: str = ""
    rule: str = ""  # findings only: the rule and its severity, for metrics
    severity: str = ""

    def to_list(self) -> list[str]:
        return [self.kind, self.where, self.path, self.detail, self.rule, self.severity]


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    exit_code: ExitCode
    problems: tuple[Problem, ...] = ()
    distributions: int = 0
    files_checked: int = 0
    approved: int = 0
    baseline: str | None = None
    cached: bool = False
    failed_open: bool = False
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.exit_code == ExitCode.CLEAN


def replace(verdict: Verdict, **changes: Any) -> Verdict:
    import dataclasses

    return dataclasses.replace(verdict, **changes)


def error(message: str) -> Problem:
    return Problem(kind="error", where="gate", path="-", detail=message)


def interrupted(runs: list[str], command: str) -> Problem:
    """The problem of an environment where a revert was interrupted: files may be half restored."""
    return Problem(
        kind="interrupted-revert",
        where="environment",
        path=runs[0],
        detail=f"revert run {', '.join(runs)} was interrupted; `{command}` finishes or rolls it back",
    )


def judge(report: Report, policy: Policy, fail_on: Severity | None, *, baseline: str | None = None) -> Verdict:
    """Apply the policy to a report: approved patches pass, everything else is a problem."""
    from patchaudit.report import DistStatus, DriftState

    problems: list[Problem] = []
    approved = 0
    sections: list[tuple[str, tuple[Drift, ...], tuple[Finding, ...], DistReport | None]]
    sections = [(d.name, d.drift, d.findings, d) for d in report.distributions]
    sections.append(("environment", report.environment.drift, report.environment.findings, None))
    sections += [(f"model:{m.name}", m.drift, m.findings, None) for m in report.models]
    for where, drift, findings, dist in sections:
        owner = None if dist is None else dist.name
        approved_paths: set[str] = set()
        for d in drift:
            actual = None if d.state is DriftState.MISSING else d.actual
            if any(a.covers(owner, d.path, actual) for a in policy.approved):
                approved += 1
                approved_paths.add(d.path)
                continue
            problems.append(Problem(kind=d.state.value, where=where, path=d.path, detail=_drift_detail(d)))
        if fail_on is not None:
            for f in findings:
                if f.suppressed or not f.in_change or f.path in approved_paths or not f.severity.at_least(fail_on):
                    continue  # upstream code that verifies against RECORD never fails the gate
                detail = f"{f.severity.value} {f.rule}: {f.message}"
                if f.reach is not None:
                    detail += f" (reach {f.reach.kind.value})"
                problems.append(
                    Problem(
                        kind="finding",
                        where=where,
                        path=f"{f.path}:{f.line}",
                        detail=detail,
                        rule=f.rule,
                        severity=f.severity.value,
                    )
                )
        if (
            dist is not None
            and policy.fail_unverifiable
            and dist.status is DistStatus.UNVERIFIABLE
            and (policy.fail_os_packages or not dist.os_packaged)
        ):
            reasons = dist.unverified
            first = reasons[0].reason if reasons else "nothing to verify against"
            more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
            problems.append(Problem(kind="unverifiable", where=where, path=dist.version, detail=first + more))
    for m in report.models:
        if policy.fail_unverifiable and m.status is DistStatus.UNVERIFIABLE:
            problems.append(Problem(kind="unverifiable", where=f"model:{m.name}", path=m.location, detail="no files"))
    if report.environment.variables:
        from patchaudit.procs.serviceenv import detail as variable_detail

        for v in report.environment.variables:
            kind = {"added": "env-added", "missing": "env-removed"}.get(v.state.value, "env-changed")
            problems.append(Problem(kind=kind, where=v.unit or "environment", path=v.name, detail=variable_detail(v)))
    return Verdict(
        exit_code=ExitCode.PROBLEMS if problems else ExitCode.CLEAN,
        problems=tuple(problems),
        distributions=len(report.distributions),
        files_checked=sum(d.files_checked for d in report.distributions),
        approved=approved,
        baseline=baseline,
    )


def _drift_detail(d: Any) -> str:
    parts = [f"reach {d.reach.kind.value}"] if getattr(d, "reach", None) is not None else []
    if d.expected or d.actual:
        parts.append(f"expected {d.expected or '-'} got {d.actual or '-'}")
    if d.note:
        parts.append(d.note)
    if getattr(d, "layer", None) is not None:
        parts.append(f"layer {d.layer.index}: {d.layer.created_by or d.layer.digest}")
    return "; ".join(parts)


def to_dict(v: Verdict) -> dict[str, Any]:
    return {
        "exit_code": v.exit_code,
        "problems": [p.to_list() for p in v.problems],
        "distributions": v.distributions,
        "files_checked": v.files_checked,
        "approved": v.approved,
        "baseline": v.baseline,
    }
