"""The JSON report (schema patchaudit/report/v1)."""

from __future__ import annotations

import json

from patchaudit.report import Report


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=False) + "\n"
