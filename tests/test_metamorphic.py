"""Metamorphic tests: every rule's examples, rewritten without changing what the code does.

Every INVALID example of every rule goes through seeded semantics-preserving rewrites (rename,
alias the import, a local helper, `functools.partial`, a lambda, the test inverted into `else`,
Yoda order, a chained comparison, walrus, a constant hoisted to module level, `with
torch.no_grad()`, `try`) and chains of two or three of them: the finding must survive, and a high
stays high. Every VALID example goes through the same rewrites and must not become high.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from metamorphic import one_line, variants

from patchaudit.hazards import SourceFile, check_file, load_rules
from patchaudit.hazards.examples import as_example
from patchaudit.report import Severity

RULES = [rule for rule in load_rules() if any(as_example(e).path.endswith(".py") for e in rule.INVALID)]
PER_EXAMPLE = 24  # variants per example: every class once, then random chains
SEED = 20261204
# (rule, INVALID index) whose finding knowingly does not survive the `helper` rewrite: the callee
# or the destination reaches the helper as an argument, and values are not followed into calls.
KNOWN = {
    ("debugger", 5): "the debugger module is passed to the helper (`dbg = __import__('pdb')`)",
    ("file-write", 5): "the lambda that opens is passed to the helper",
    ("print-call", 2): "`p = print` is passed to the helper",
    ("torch-save", 12): "the lambda that saves is passed to the helper",
    ("torch-save", 14): "a save whose destination is the helper's parameter is a save function (by design)",
    ("torch-save", 21): "`fh.write` of a local file object through a lambda: the object is not followed",
    ("torch-save", 22): "the lambda that calls `logging.basicConfig` is passed to the helper",
    ("torch-save", 34): "the lambda that calls `ndarray.dump` is passed to the helper",
    ("torch-save", 51): "the closure's save moved into a helper whose destination is its parameter (by design)",
}


def _findings(rule, code: str, pristine: str | None, path: str):
    file = SourceFile(
        path=path,
        installed=code.encode(),
        pristine=pristine.encode() if pristine is not None else None,
        drifted=True,
    )
    return [f for f in check_file(file, [rule]) if f.rule == rule.ID and not f.suppressed]


def _pairs(example, rng: random.Random):
    """(classes, installed, pristine) variants; with a pristine file both get the same rewrite."""
    if example.pristine is None:
        for classes, code in variants(example.code, rng, PER_EXAMPLE):
            yield classes, code, None
        return
    for seed in range(PER_EXAMPLE // 2):
        left, right = random.Random(seed), random.Random(seed)
        pairs = dict(variants(example.code, left, 1))
        pristine = dict(variants(example.pristine, right, 1))
        for name in ("padded", "no-grad", "try", "alias-import"):
            if name in pairs and name in pristine:
                yield name, pairs[name], pristine[name]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.ID)
def test_invalid_examples_survive_every_rewrite(rule) -> None:
    rng = random.Random(f"{SEED}-{rule.ID}")
    tried: Counter[str] = Counter()
    lost: list[str] = []
    for index, raw in enumerate(rule.INVALID):
        example = as_example(raw)
        if not example.path.endswith(".py"):
            continue
        before = _findings(rule, example.code, example.pristine, example.path)
        assert before, (rule.ID, index)
        high = any(f.severity is Severity.HIGH for f in before)
        for classes, code, pristine in _pairs(example, rng):
            tried[classes] += 1
            after = _findings(rule, code, pristine, example.path)
            if not after or (high and not any(f.severity is Severity.HIGH for f in after)):
                if (rule.ID, index) in KNOWN and ("helper" in classes or "lambda" in classes):
                    continue
                lost.append(f"{rule.ID} #{index} [{classes}]: {one_line(code)}")
    assert sum(tried.values()) >= 5 * len(rule.INVALID)
    assert not lost, "\n".join(lost[:20]) + f"\n({len(lost)} of {sum(tried.values())} lost)"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.ID)
def test_valid_examples_stay_benign(rule) -> None:
    rng = random.Random(f"{SEED}-{rule.ID}-valid")
    raised: list[str] = []
    total = 0
    for index, raw in enumerate(rule.VALID):
        example = as_example(raw)
        if not example.path.endswith(".py"):
            continue
        for classes, code, pristine in _pairs(example, rng):
            total += 1
            after = _findings(rule, code, pristine, example.path)
            if any(f.severity is Severity.HIGH for f in after):
                raised.append(f"{rule.ID} #{index} [{classes}]: {one_line(code)} -> {after[0].message}")
    assert total >= len(rule.VALID)
    assert not raised, "\n".join(raised[:20]) + f"\n({len(raised)} of {total} raised)"
