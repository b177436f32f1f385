"""SARIF 2.1.0: findings for code-scanning tools, locations relative to site-packages."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any
from urllib.parse import quote

from patchaudit import __version__
from patchaudit.hazards import ENGINE_RULES
from patchaudit.report import Drift, DriftState, Finding, Report, Severity
from patchaudit.rule import Rule

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {Severity.HIGH: "error", Severity.MEDIUM: "warning", Severity.LOW: "note", Severity.INFO: "note"}
FINGERPRINT_KEY = "patchaudit/v1"
# GitHub code scanning ranks a rule by `security-severity`, a score from 0.0 to 10.0 (7.0 and up: high).
SECURITY_SEVERITY = {Severity.HIGH: "8.0", Severity.MEDIUM: "5.0", Severity.LOW: "2.0", Severity.INFO: "0.0"}
SITE_BASE = "SITEPACKAGES"
MODEL_BASE = "MODELDIR"
# A drifted file is a result of its own, under one rule per state, whether or not a finding lies in it.
DRIFT_RULES: dict[DriftState, tuple[str, str, str]] = {
    DriftState.MODIFIED: (
        "modified-file",
        "File differs from what its distribution shipped (RECORD's hash or the model's record)",
        "The file's bytes are not the ones its distribution or model repository recorded: it was patched "
        "by hand, rewritten, or corrupted. `patchaudit diff` shows the change, `patchaudit revert` puts it back.",
    ),
    DriftState.MISSING: (
        "missing-file",
        "File its distribution shipped is gone",
        "A file RECORD (or the model's record) lists is not on disk. `patchaudit revert` restores it.",
    ),
    DriftState.ADDED: (
        "added-file",
        "File no distribution owns, inside a package or model directory",
        "A file that no RECORD lists sits among a package's files (or a model's): Python may import it, a "
        "loader may read it. `patchaudit revert` removes it, keeping a copy in the quarantine.",
    ),
}
DRIFT_SEVERITY = Severity.HIGH  # the gate fails on any drift by default


def _camel(rule_id: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[-_]", rule_id))


def _descriptor(rule_id: str, severity: Severity, message: str, explanation: str, source: str) -> dict[str, Any]:
    text = explanation.strip() or message
    return {
        "id": rule_id,
        "name": _camel(rule_id),
        "shortDescription": {"text": message},
        "fullDescription": {"text": text},
        "help": {
            "text": f"{text}\n\n`patchaudit rules explain {rule_id}` shows it with examples.",
            "markdown": f"{text}\n\n`patchaudit rules explain {rule_id}` shows it with examples.",
        },
        # The file that defines the rule, where its explanation and examples live (no web page is assumed).
        "helpUri": Path(source).resolve().as_uri(),
        "defaultConfiguration": {"level": LEVELS[severity]},
        "properties": {
            "severity": severity.value,
            "security-severity": SECURITY_SEVERITY[severity],
            "tags": ["security"] if severity.at_least(Severity.MEDIUM) else ["maintainability"],
        },
    }


def _base_uri(location: str) -> str:
    if PureWindowsPath(location).drive:
        return PureWindowsPath(location).as_uri().rstrip("/") + "/"
    return "file://" + quote(os.fsencode(PurePosixPath(location).as_posix().rstrip("/"))) + "/"


def _fingerprint(finding: Finding, occurrence: int) -> str:
    # No line number: a finding keeps its fingerprint when lines above it move.
    key = "\0".join((finding.rule, finding.path, finding.message, str(occurrence)))
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def render_sarif(report: Report, rules: Sequence[type[Rule]], *, base_path_id: str = SITE_BASE) -> dict[str, Any]:
    """The report's findings (suppressed ones marked inSource) and every drifted file, as one SARIF 2.1.0 run.

    Locations are relative to a base per directory: SITEPACKAGES for site-packages directories,
    MODELDIR for model directories (numbered from the second of a kind on).
    """
    from patchaudit.hazards import engine_rules

    descriptors: list[dict[str, Any]] = []
    index: dict[str, int] = {}

    def add(rule_id: str, severity: Severity, message: str, explanation: str, source: str = __file__) -> None:
        if rule_id not in index:
            index[rule_id] = len(descriptors)
            descriptors.append(_descriptor(rule_id, severity, message, explanation, source))

    for rule in rules:
        add(rule.ID, rule.SEVERITY, rule.MESSAGE, rule.EXPLANATION, rule.SOURCE_FILE or __file__)
    for rule_id, (severity, message) in ENGINE_RULES.items():
        add(rule_id, severity, message, message, engine_rules.__file__ or __file__)
    for rule_id, message, explanation in DRIFT_RULES.values():
        add(rule_id, DRIFT_SEVERITY, message, explanation)

    bases: dict[str, str] = {}
    kinds: dict[str, int] = {}

    def base_for(location: str, kind: str = base_path_id) -> str:
        if location not in bases:
            n = kinds.get(kind, 0)
            kinds[kind] = n + 1
            bases[location] = kind if not n else f"{kind}{n}"
        return bases[location]

    env_location = report.target.paths[0] if report.target.paths else ""
    located: list[tuple[Finding, str]] = []
    drifted: list[tuple[Drift, str, str]] = []  # (drift, location, where: distribution or model name)
    for dist in report.distributions:
        located.extend((f, dist.location) for f in dist.findings)
        drifted.extend((d, dist.location, dist.name) for d in dist.drift)
    located.extend((f, env_location) for f in report.environment.findings)
    drifted.extend((d, env_location, "environment") for d in report.environment.drift)
    if report.models:
        from patchaudit.models import configrules

        for config_rule in configrules.catalog():
            source = configrules.__file__ or __file__
            add(config_rule.ID, config_rule.SEVERITY, config_rule.MESSAGE, config_rule.EXPLANATION, source)
        for model in report.models:
            base_for(model.location, MODEL_BASE)
            located.extend((f, model.location) for f in model.findings)
            drifted.extend((d, model.location, f"model {model.name}") for d in model.drift)
    located.sort(key=lambda item: (item[1], item[0].path, item[0].line, item[0].column, item[0].rule))

    seen: dict[tuple[str, str, str, str], int] = {}
    results = []
    for finding, location in located:
        add(finding.rule, finding.severity, finding.message, finding.message)
        key = (location, finding.rule, finding.path, finding.message)
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        result: dict[str, Any] = {
            "ruleId": finding.rule,
            "ruleIndex": index[finding.rule],
            "level": LEVELS[finding.severity],
            "message": {"text": finding.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": quote(os.fsencode(finding.path)), "uriBaseId": base_for(location)},
                        "region": {"startLine": max(finding.line, 1), "startColumn": finding.column + 1},
                    }
                }
            ],
            "partialFingerprints": {FINGERPRINT_KEY: _fingerprint(finding, occurrence)},
            "properties": {"severity": finding.severity.value, "inChange": finding.in_change},
        }
        if finding.suppressed:
            result["suppressions"] = [{"kind": "inSource"}]
        results.append(result)

    for drift, location, where in sorted(drifted, key=lambda item: (item[1], item[0].path)):
        if drift.state not in DRIFT_RULES:
            continue
        results.append(_drift_result(drift, location, where, index, base_for(location)))

    if env_location:
        base_for(env_location)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "patchaudit",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": descriptors,
                    }
                },
                "originalUriBaseIds": {
                    base_id: {"uri": _base_uri(location)} for location, base_id in bases.items() if location
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def _drift_result(drift: Drift, location: str, where: str, index: dict[str, int], base: str) -> dict[str, Any]:
    rule_id, message, _ = DRIFT_RULES[drift.state]
    text = f"{where}: {drift.state.value} {drift.path}"
    if drift.expected or drift.actual:
        text += f" (expected {drift.expected or 'absent'}, found {drift.actual or 'absent'})"
    if drift.note:
        text += f"; {drift.note}"
    key = "\0".join((rule_id, location, drift.path, drift.actual or ""))
    result: dict[str, Any] = {
        "ruleId": rule_id,
        "ruleIndex": index[rule_id],
        "level": LEVELS[DRIFT_SEVERITY],
        "message": {"text": text},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": quote(os.fsencode(drift.path)), "uriBaseId": base},
                    "region": {"startLine": 1},
                }
            }
        ],
        "partialFingerprints": {
            FINGERPRINT_KEY: hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
        },
        "properties": {"severity": DRIFT_SEVERITY.value, "state": drift.state.value, "where": where},
    }
    return result
