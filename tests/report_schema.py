"""The report's JSON Schema (shipped in the package), held against every JSON report the suite's commands write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from patchaudit.report import SCHEMA, schema_path

VALIDATOR = jsonschema.Draft202012Validator(
    json.loads(Path(schema_path()).read_text(encoding="utf-8")),
    format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
)


def check_report(data: Any) -> None:
    """Raise unless `data` is a report that the shipped schema accepts."""
    VALIDATOR.validate(data)


def check_output(stdout: str) -> None:
    """Validate the command's output when it is a report; anything else (journal lines, SARIF) passes."""
    text = stdout.lstrip()
    if not text.startswith("{"):
        return
    try:
        data = json.loads(text)
    except ValueError:
        return
    if not isinstance(data, dict):
        return
    if data.get("schema") == SCHEMA:
        check_report(data)
    elif data.get("schema") == "patchaudit/cluster/v1":  # each node's own report
        for node in data.get("nodes", []):
            if node.get("report") is not None:
                check_report(node["report"])
