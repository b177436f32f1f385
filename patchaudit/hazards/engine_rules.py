"""Findings the engine itself raises: not rule files, but with metadata for renderers."""

from __future__ import annotations

from patchaudit.report import Severity

__all__ = ["PARSE_ERROR", "UNUSED_IGNORE", "RULE_ERROR", "ENGINE_RULES"]

PARSE_ERROR = "parse-error"
UNUSED_IGNORE = "unused-ignore"
RULE_ERROR = "rule-error"
ENGINE_RULES: dict[str, tuple[Severity, str]] = {
    PARSE_ERROR: (
        Severity.MEDIUM,
        "The file does not parse as Python (syntax error, undecodable bytes, or a binary).",
    ),
    UNUSED_IGNORE: (Severity.LOW, "A `# patchaudit: ignore[...]` comment matches no finding."),
    RULE_ERROR: (Severity.LOW, "A rule raised an error on this file; its findings are missing."),
}
