"""Real debugging code from public inference servers, and the legitimate code beside it.

Each case in data/corpus/cases.json is an excerpt (the module's imports and the definition that
holds the line, or the whole module) of a file of a public repository, with the verdict a careful
reviewer gives that line: the highest severity it deserves (`none` for a look-alike) and the rule
that should say so. A case names its source by a commit of the repository (lightllm and
text-generation-inference histories, where debug code was added or removed; vLLM and SGLang
histories as their forks carry them, and the forks' own commits: HabanaAI/vllm-fork, ROCm/vllm,
tenstorrent/vllm, vllm-project/vllm-ascend, vllm-project/vllm-gaudi, HYGON-AI/sglang-das,
meituan-longcat/SGLang-FluentLLM) or by a released
wheel of it and the file's sha256 (vLLM 0.33.0 and SGLang 0.5.23: their shipped debug tools, test
kits and the legitimate writes and size checks beside them).

A case the rules are known to get wrong carries `known_miss` (why): the table prints it as `miss`
(or `FIXD` once the rules agree with the reviewer, time to drop the mark), and its own test is an
expected failure. Every other case is held to the reviewer's verdict.

    pytest tests/test_corpus.py -s -k table   # every case, its source and its result
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchaudit.hazards import SourceFile, check_file, load_rules
from patchaudit.report import Severity

CASES = json.loads((Path(__file__).parent / "data" / "corpus" / "cases.json").read_text())
# Public vLLM and SGLang repositories and their vendor forks.
SERVERS = (
    "vllm-project/vllm",
    "sgl-project/sglang",
    "HabanaAI/vllm-fork",
    "ROCm/vllm",
    "tenstorrent/vllm",
    "vllm-project/vllm-ascend",
    "vllm-project/vllm-gaudi",
    "HYGON-AI/sglang-das",
    "meituan-longcat/SGLang-FluentLLM",
)
RULES = load_rules()
ORDER = {"none": 0, "low": 1, "medium": 2, "high": 3}


def _source(case: dict) -> str:
    at = case["commit"][:12] if "commit" in case else f"{case['release']} sha256:{case['sha256'][:12]}"
    return f"{case['repo']}@{at} {case['path']}:{case['line']}"


def _worst(case: dict) -> tuple[int, list[tuple[str, str]]]:
    file = SourceFile(path=case["path"], installed=case["code"].encode(), pristine=None, drifted=True)
    found = [f for f in check_file(file, RULES) if f.line == case["excerpt_line"] and f.severity is not Severity.INFO]
    return max((ORDER[f.severity.value] for f in found), default=0), [(f.rule, f.severity.value) for f in found]


def test_the_corpus_is_large_and_sourced() -> None:
    assert len(CASES) >= 40
    for case in CASES:
        sourced = len(case.get("commit", "")) == 40 or (case.get("release") and len(case.get("sha256", "")) == 64)
        assert case["repo"] and sourced and case["path"] and case["line"] > 0, case["path"]
        assert case["verdict"] in ORDER and case["reason"]
    shipped = [c for c in CASES if c["repo"] in ("vllm-project/vllm", "sgl-project/sglang")]
    assert len(shipped) >= 15
    mined = [c for c in CASES if c["repo"] in SERVERS and "commit" in c]
    assert len(mined) >= 25
    assert all(c["known_miss"] for c in CASES if "known_miss" in c)


def test_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Every case with its source, the reviewer's verdict and what the rules say."""
    names = {v: k for k, v in ORDER.items()}
    wrong = 0
    with capsys.disabled():
        for case in CASES:
            worst, got = _worst(case)
            right = worst == ORDER[case["verdict"]]
            known = "known_miss" in case
            wrong += not right and not known
            mark = ("FIXD" if right else "miss") if known else ("ok  " if right else "DIFF")
            print(f"{mark} {case['verdict']:6} -> {names[worst]:6} {_source(case)}  {got}")
            if known and not right:
                print(f"     known miss: {case['known_miss']}")
    assert wrong == 0


def _id(case: dict) -> str:
    at = case["commit"][:8] if "commit" in case else case["release"]
    return f"{at}-{Path(case['path']).stem}-{case['line']}"


def _param(case: dict):
    if "known_miss" in case:
        return pytest.param(case, marks=pytest.mark.xfail(reason=case["known_miss"], strict=False))
    return case


@pytest.mark.parametrize("case", [_param(c) for c in CASES], ids=[_id(c) for c in CASES])
def test_real_code_gets_the_reviewers_verdict(case) -> None:
    worst, got = _worst(case)
    assert worst == ORDER[case["verdict"]], (_source(case), got)
    if case["rule"]:
        assert any(rule == case["rule"] and ORDER[severity] == worst for rule, severity in got), got
