"""SARIF 2.1.0: findings for code-scanning tools, locations relative to site-packages."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any
from urllib.parse import quote

from patchaudit import __version__
from patchaudit.hazards import ENGINE_RULES
from patchaudit.report import Finding, Report, Severity
from patchaudit.rule import Rule

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {Severity.HIGH: "error", Severity.MEDIUM: "warning", Severity.LOW: "note", Severity.INFO: "note"}
FINGERPRINT_KEY = "patchaudit/v1"


def _camel(rule_id: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[-_]", rule_id))


def _descriptor(rule_id: str, severity: Severity, message: str, explanation: str) -> dict[str, Any]:
    return {
        "id": rule_id,
        "name": _camel(rule_id),
        "shortDescription": {"text": message},
        "fullDescription": {"text": explanation.strip() or message},
        "defaultConfiguration": {"level": LEVELS[severity]},
        "properties": {"severity": severity.value},
    }


def _base_uri(location: str) -> str:
    if PureWindowsPath(location).drive:
        return PureWindowsPath(location).as_uri().rstrip("/") + "/"
    return "file://" + quote(os.fsencode(PurePosixPath(location).as_posix().rstrip("/"))) + "/"


def _fingerprint(finding: Finding, occurrence: int) -> str:
    # No line number: a finding keeps its fingerprint when lines above it move.
    key = "\0".join((finding.rule, finding.path, finding.message, str(occurrence)))
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def render_sarif(report: Report, rules: Sequence[type[Rule]], *, base_path_id: str = "SITEPACKAGES") -> dict[str, Any]:
    """The report's findings (suppressed ones marked inSource) as one SARIF 2.1.0 run."""
    descriptors: list[dict[str, Any]] = []
    index: dict[str, int] = {}

    def add(rule_id: str, severity: Severity, message: str, explanation: str) -> None:
        if rule_id not in index:
            index[rule_id] = len(descriptors)
            descriptors.append(_descriptor(rule_id, severity, message, explanation))

    for rule in rules:
        add(rule.ID, rule.SEVERITY, rule.MESSAGE, rule.EXPLANATION)
    for rule_id, (severity, message) in ENGINE_RULES.items():
        add(rule_id, severity, message, message)

    bases: dict[str, str] = {}

    def base_for(location: str) -> str:
        if location not in bases:
            bases[location] = base_path_id if not bases else f"{base_path_id}{len(bases)}"
        return bases[location]

    env_location = report.target.paths[0] if report.target.paths else ""
    located: list[tuple[Finding, str]] = []
    for dist in report.distributions:
        located.extend((f, dist.location) for f in dist.findings)
    located.extend((f, env_location) for f in report.environment.findings)
    if report.models:
        from patchaudit.models.configrules import catalog

        for config_rule in catalog():
            add(config_rule.ID, config_rule.SEVERITY, config_rule.MESSAGE, config_rule.EXPLANATION)
        for model in report.models:
            located.extend((f, model.location) for f in model.findings)
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
