"""Per rule: INVALID examples, metamorphic variants, survival rate, and what does not survive (run by hand).

    python bench/metamorphic_survival.py

Uses the rewrites and the seed of tests/test_metamorphic.py. A variant survives when the rule
still finds something, and a high stays high. Prints one row per rule, then every variant class
that lost its finding with the example it came from.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_metamorphic import KNOWN, RULES, SEED, _findings, _pairs  # noqa: E402

from patchaudit.hazards.examples import as_example  # noqa: E402
from patchaudit.report import Severity  # noqa: E402


def main() -> int:
    print(f"{'rule':22} {'INVALID':>7} {'variants':>8} {'survived':>8} {'rate':>7}")
    lost_classes: list[str] = []
    for rule in RULES:
        rng = random.Random(f"{SEED}-{rule.ID}")
        examples = tried = survived = 0
        for index, raw in enumerate(rule.INVALID):
            example = as_example(raw)
            if not example.path.endswith(".py"):
                continue
            examples += 1
            high = any(
                f.severity is Severity.HIGH for f in _findings(rule, example.code, example.pristine, example.path)
            )
            for classes, code, pristine in _pairs(example, rng):
                tried += 1
                after = _findings(rule, code, pristine, example.path)
                if after and (not high or any(f.severity is Severity.HIGH for f in after)):
                    survived += 1
                    continue
                why = KNOWN.get((rule.ID, index), "not known")
                lost_classes.append(f"{rule.ID} #{index} [{classes}]: {why}")
        rate = survived / tried if tried else 1.0
        print(f"{rule.ID:22} {examples:7} {tried:8} {survived:8} {rate:7.1%}")
    print()
    for line in lost_classes:
        print("lost:", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
