"""Prometheus text exposition (node_exporter's textfile collector) of a scan or a gate verdict.

Label sets stay bounded: distribution, drift state, rule and severity. Paths never become labels; they
stay in the JSON report.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

TYPE_CHECKING = False  # `gate --format prometheus` renders with this module: no typing import
if TYPE_CHECKING:
    from patchaudit.gate.verdict import Verdict
    from patchaudit.report import Report

FILE_PREFIX = "patchaudit_"
LAST_SUCCESS = "patchaudit_last_success_timestamp_seconds"
DRIFT_STATES = ("modified", "missing", "added")
FACT_STATES = ("overwritten", "record-mismatch", "regenerated")
SEVERITIES = ("high", "medium", "low", "info")
PROBLEM_KINDS = ("env-added", "env-changed", "env-removed", "interrupted-revert", "error")


@dataclass(frozen=True, kw_only=True, slots=True)
class Metrics:
    """What one run says, reduced to the series a dashboard alerts on."""

    version: str
    target: str
    ok: bool
    timestamp: float = field(default_factory=time.time)
    distributions: int = 0
    files_checked: int = 0
    drifted: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (distribution, state) -> files
    findings: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (rule, severity) -> findings
    unverifiable: int = 0
    facts: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (distribution, state) -> files
    problems: Mapping[str, int] = field(default_factory=dict)  # other reasons to fail: kind -> count
    duration: float = 0.0  # seconds the run took
    last_success: float | None = None  # when a run last passed; None: this one, if it did, else never known


def textfile_name(target: str, name: str | None = None) -> str:
    """One file per audited target (`patchaudit_<name>.prom`): a second environment never overwrites
    the first one's verdict. Without `name`, the target's path spelled in the characters node_exporter
    and every shell take without quoting."""
    import re

    if name is not None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,100}", name):
            from patchaudit.errors import PatchAuditError

            raise PatchAuditError(
                f"--name {name!r}: use letters, digits, '_', '.' and '-' (it names the .prom file)",
                hint="--name vllm",
            )
        return f"{FILE_PREFIX}{name}.prom"
    slug = re.sub(r"[^A-Za-z0-9]+", "_", target).strip("_")[:100] or "default"
    return f"{FILE_PREFIX}{slug}.prom"


def previous_success(path: Path) -> float | None:
    """The last success a textfile written before recorded, so a failing run keeps it (node_exporter's
    convention); None when there is no such file or value."""
    from patchaudit.errors import PatchAuditError
    from patchaudit.fs.safefs import read_capped_or_none

    try:
        data = read_capped_or_none(path, 1 << 20)
    except PatchAuditError:
        return None
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        if line.startswith(LAST_SUCCESS + " "):
            try:
                return float(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def _count(counts: dict[tuple[str, str], int], key: tuple[str, str]) -> None:
    counts[key] = counts.get(key, 0) + 1


def from_report(report: Report, *, ok: bool, target: str, duration: float = 0.0) -> Metrics:
    from patchaudit import __version__

    drifted: dict[tuple[str, str], int] = {}
    facts: dict[tuple[str, str], int] = {}
    for dist in report.distributions:
        for d in dist.drift:
            _count(drifted, (dist.name, d.state.value))
        for d in dist.facts:
            _count(facts, (dist.name, d.state.value))
    for d in report.environment.drift:
        _count(drifted, ("", d.state.value))
    findings: dict[tuple[str, str], int] = {}
    for f in report.active_findings():
        _count(findings, (f.rule, f.severity.value))
    problems: dict[str, int] = {}
    for v in report.environment.variables:
        kind = {"added": "env-added", "missing": "env-removed"}.get(v.state.value, "env-changed")
        problems[kind] = problems.get(kind, 0) + 1
    if report.environment.interrupted_runs:
        problems["interrupted-revert"] = len(report.environment.interrupted_runs)
    summary = report.summary()
    return Metrics(
        version=__version__,
        target=target,
        ok=ok,
        distributions=summary["distributions"],
        files_checked=summary["files_checked"],
        drifted=drifted,
        findings=findings,
        unverifiable=summary["unverifiable"],
        facts=facts,
        problems=problems,
        duration=duration,
    )


def from_verdict(verdict: Verdict, *, target: str, last_success: float | None = None) -> Metrics:
    from patchaudit import __version__
    from patchaudit.report import FACT_STATES, DriftState

    drift_kinds = {s.value for s in DriftState if s not in FACT_STATES}
    fact_kinds = {s.value for s in FACT_STATES}
    drifted: dict[tuple[str, str], int] = {}
    facts: dict[tuple[str, str], int] = {}
    findings: dict[tuple[str, str], int] = {}
    problems: dict[str, int] = {}
    unverifiable = 0
    for p in verdict.problems:
        where = "" if p.where == "environment" else p.where
        if p.kind == "finding":
            _count(findings, (p.rule or "?", p.severity or "?"))
        elif p.kind == "unverifiable":
            unverifiable += 1
        elif p.kind in drift_kinds:
            _count(drifted, (where, p.kind))
        elif p.kind in fact_kinds:  # a policy that raised a packaging fact to a failure
            _count(facts, (where, p.kind))
        else:
            problems[p.kind] = problems.get(p.kind, 0) + 1
    return Metrics(
        version=__version__,
        target=target,
        ok=verdict.ok,
        distributions=verdict.distributions,
        files_checked=verdict.files_checked,
        drifted=drifted,
        findings=findings,
        unverifiable=unverifiable,
        facts=facts,
        problems=problems,
        duration=verdict.seconds,
        last_success=last_success,
    )


def _label(value: str) -> str:
    # the exposition format is UTF-8: a name's undecodable bytes (surrogate escapes) are spelled \xNN
    value = os.fsencode(value).decode("utf-8", "backslashreplace")
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{_label(v)}"' for k, v in pairs)
    return "{" + inner + "}" if inner else ""


def _gauge(name: str, help_text: str, samples: Iterable[tuple[Iterable[tuple[str, str]], float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    for labels, value in samples:
        number = repr(float(value)) if isinstance(value, float) and not value.is_integer() else str(int(value))
        lines.append(f"{name}{_labels(labels)} {number}")
    return lines


def _totals(counts: Mapping[tuple[str, str], int], keys: Iterable[str], index: int) -> dict[str, int]:
    """Counts summed by one label, every key of a closed set present (0 when none)."""
    totals = dict.fromkeys(keys, 0)
    for key, n in counts.items():
        totals[key[index]] = totals.get(key[index], 0) + n
    return totals


def _filled(counts: Mapping[tuple[str, str], int], states: Iterable[str]) -> dict[tuple[str, str], int]:
    """Per-distribution counts with the environment's row (distribution "") present for every state."""
    return {**{("", state): 0 for state in states}, **counts}


def render_prometheus(metrics: Metrics) -> str:
    """The text format, one HELP and TYPE per family. Every series an alert needs is present with 0 when
    all is clean (no `absent()` needed): the unlabelled ones, each closed label set in full (state,
    severity, kind), and the environment's row of the per-distribution families."""
    success = metrics.timestamp if metrics.ok else (metrics.last_success or 0.0)
    lines: list[str] = []
    lines += _gauge(
        "patchaudit_info",
        "patchaudit version and the environment it audited.",
        [((("version", metrics.version), ("target", metrics.target)), 1)],
    )
    lines += _gauge(
        "patchaudit_last_run_timestamp_seconds",
        "When this file was written, seconds since the epoch.",
        [((), round(metrics.timestamp, 3))],
    )
    lines += _gauge(
        LAST_SUCCESS,
        "When a run last passed, seconds since the epoch (0: none has, as far as this file knows).",
        [((), round(success, 3))],
    )
    lines += _gauge(
        "patchaudit_run_duration_seconds", "How long the run took, in seconds.", [((), round(metrics.duration, 3))]
    )
    lines += _gauge("patchaudit_distributions", "Distributions audited.", [((), metrics.distributions)])
    lines += _gauge("patchaudit_files_checked", "RECORD entries checked.", [((), metrics.files_checked)])
    lines += _gauge(
        "patchaudit_drifted_files",
        "Files that differ from what their distribution shipped, by distribution and state "
        '(distribution "" is the environment: startup hooks, unowned files).',
        [
            ((("distribution", dist), ("state", state)), n)
            for (dist, state), n in sorted(_filled(metrics.drifted, DRIFT_STATES).items())
        ],
    )
    lines += _gauge(
        "patchaudit_drifted_files_by_state",
        "Drifted files of every distribution and the environment together, by state (each state always present).",
        [((("state", state),), n) for state, n in _totals(metrics.drifted, DRIFT_STATES, 1).items()],
    )
    lines += _gauge(
        "patchaudit_drifted_distributions",
        "Distributions with at least one drifted file.",
        [((), len({dist for dist, _ in metrics.drifted if dist}))],
    )
    lines += _gauge(
        "patchaudit_findings",
        "Hazard findings by rule and severity.",
        [((("rule", rule), ("severity", sev)), n) for (rule, sev), n in sorted(metrics.findings.items())],
    )
    lines += _gauge(
        "patchaudit_findings_by_severity",
        "Hazard findings of every rule together, by severity (each severity always present).",
        [((("severity", sev),), n) for sev, n in _totals(metrics.findings, SEVERITIES, 1).items()],
    )
    lines += _gauge(
        "patchaudit_packaging_facts",
        "Files that differ from RECORD for a packaging reason, not a patch (overwritten, record-mismatch, "
        "regenerated), by distribution and state.",
        [
            ((("distribution", dist), ("state", state)), n)
            for (dist, state), n in sorted(_filled(metrics.facts, FACT_STATES).items())
        ],
    )
    lines += _gauge(
        "patchaudit_problems",
        "Other reasons the run failed, by kind (env-added, env-changed, env-removed, interrupted-revert, error).",
        [((("kind", kind),), n) for kind, n in sorted({**dict.fromkeys(PROBLEM_KINDS, 0), **metrics.problems}.items())],
    )
    lines += _gauge(
        "patchaudit_unverifiable_distributions",
        "Distributions that cannot be verified (no RECORD, weak hashes only).",
        [((), metrics.unverifiable)],
    )
    lines += _gauge(
        "patchaudit_gate_ok", "1 when the run passed (the gate's verdict), else 0.", [((), int(metrics.ok))]
    )
    return "\n".join(lines) + "\n"


def write_textfile(path: Path, text: str) -> Path:
    """Replace `path` atomically (temp file in the same directory, fsync, rename): the collector never
    reads half a file."""
    from patchaudit.errors import PatchAuditError
    from patchaudit.fs.atomic import atomic_write

    try:
        atomic_write(path, text, mode=0o644, parents=False)
    except OSError as exc:
        raise PatchAuditError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path
