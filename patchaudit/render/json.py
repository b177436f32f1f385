"""The JSON report (schema patchaudit/report/v1), and the one way any JSON output is written."""

from __future__ import annotations

import json
import math
from typing import Any

from patchaudit.report import Report

_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def finite(value: Any) -> Any:
    """`value` with every NaN and infinity spelled as a string, as strict JSON has no word for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else _NON_FINITE[value]
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """Strict JSON (RFC 8259): a parser that refuses `NaN` accepts everything patchaudit writes."""
    return json.dumps(finite(value), allow_nan=False, **options)


def render_json(report: Report) -> str:
    return dumps(report.to_dict(), indent=2, sort_keys=False) + "\n"
