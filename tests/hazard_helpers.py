"""The findings of a vendor module and its patched copy, as a scan gives them for a drifted file."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from patchaudit.hazards import SourceFile, check_file
from patchaudit.report import Severity
from patchaudit.rule import Rule

__all__ = ["drifted_findings"]


def drifted_findings(vendor: str, patched: str, rules: Sequence[type[Rule]]) -> list[tuple[str, Severity, int]]:
    """(rule, severity, line) of every finding not suppressed; both texts dedented. A patched text
    that does not parse fails here: a case that does not parse would prove nothing."""
    vendor, patched = textwrap.dedent(vendor).lstrip("\n"), textwrap.dedent(patched).lstrip("\n")
    compile(patched, "patched.py", "exec")
    file = SourceFile(path="vllm/patched.py", installed=patched.encode(), pristine=vendor.encode(), drifted=True)
    return [(f.rule, f.severity, f.line) for f in check_file(file, rules) if not f.suppressed]
