"""One node's share of a cluster audit: the report, the policy's verdict and the fingerprints."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from patchaudit.check.audit import ScanOptions, scan
from patchaudit.check.fingerprint import fingerprints
from patchaudit.errors import ExitCode
from patchaudit.gate.policy import Policy, load
from patchaudit.gate.verdict import interrupted, judge, replace
from patchaudit.report import Severity
from patchaudit.revert.recovery import RESUME_COMMAND, pending_runs
from patchaudit.target import environment

SCHEMA = "patchaudit/cluster-node/v1"


def node_report(
    *,
    python: Path | None,
    site_path: Path | None,
    names: Sequence[str],
    policy_path: Path | None,
    detail: Sequence[str],
    use_cache: bool = True,
    fail_on: str | None = None,
) -> dict[str, Any]:
    """Audit this node's environment as the gate would, and fingerprint what was found."""
    policy = load(policy_path) if policy_path is not None else Policy()
    if policy_path is not None:
        python = python or (policy.python if site_path is None else None)
        site_path = site_path or (policy.path if python is None else None)
        names = names or policy.distributions
    env = environment.resolve(python, site_path)
    chosen = environment.select(environment.distributions(env), names)
    report = scan(
        env,
        ScanOptions(
            names=tuple(names),
            hazards=policy.hazards,
            rule_dirs=policy.rule_dirs,
            severity_overrides=dict(policy.severity),
            use_cache=use_cache,
        ),
    )
    threshold: Severity | None = policy.fail_on
    if fail_on is not None:  # --fail-on: as the gate, the command line over the policy
        threshold = None if fail_on == "none" else Severity(fail_on)
    verdict = judge(report, policy, threshold)
    pending = pending_runs(env)
    if pending:  # half-restored files: the node fails, as its own gate would, naming the command that finishes it
        where = f"--python {env.python}" if env.python else f"--path {env.site_dirs[0]}"
        problem = interrupted(pending, f"{RESUME_COMMAND} {where}")
        verdict = replace(verdict, exit_code=ExitCode.PROBLEMS, problems=(problem, *verdict.problems))
    return {
        "schema": SCHEMA,
        "python": env.python,
        "report": report.to_dict(),
        "verdict": {"exit_code": verdict.exit_code, "problems": [p.to_list() for p in verdict.problems]},
        "fingerprints": {k: v.to_dict() for k, v in fingerprints(env, chosen, report, detail=detail).items()},
    }
