"""Real debugging code from public inference servers, and the legitimate code beside it.

Each case in data/corpus/cases.json is an excerpt (the module's imports and the definition that
holds the line) of a file at a commit of a public repository (lightllm, text-generation-inference)
where debug code was added or removed, with the verdict a careful reviewer gives that line: the
highest severity it deserves (`none` for a look-alike) and the rule that should say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchaudit.hazards import SourceFile, check_file, load_rules
from patchaudit.report import Severity

CASES = json.loads((Path(__file__).parent / "data" / "corpus" / "cases.json").read_text())
RULES = load_rules()
ORDER = {"none": 0, "low": 1, "medium": 2, "high": 3}


def test_the_corpus_is_large_and_sourced() -> None:
    assert len(CASES) >= 40
    for case in CASES:
        assert case["repo"] and len(case["commit"]) == 40 and case["path"] and case["line"] > 0
        assert case["verdict"] in ORDER and case["reason"]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['commit'][:8]}-{Path(c['path']).stem}-{c['line']}" for c in CASES])
def test_real_code_gets_the_reviewers_verdict(case) -> None:
    file = SourceFile(path=case["path"], installed=case["code"].encode(), pristine=None, drifted=True)
    found = [f for f in check_file(file, RULES) if f.line == case["excerpt_line"] and f.severity is not Severity.INFO]
    worst = max((ORDER[f.severity.value] for f in found), default=0)
    got = [(f.rule, f.severity.value) for f in found]
    assert worst == ORDER[case["verdict"]], (case["repo"], case["commit"][:12], case["path"], case["line"], got)
    if case["rule"]:
        assert any(f.rule == case["rule"] and ORDER[f.severity.value] == worst for f in found), got
