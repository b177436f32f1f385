"""Run the pack over a source tree with and without prefilters and compare (run by hand).

    python bench/check_prefilters.py TREE

Every .py file is checked twice: as `scan --all-files` does, and with every file, statement and
class member parsed and positions taken from libcst for the whole module. Prints the files whose
findings differ (none is the expected answer) and exits 1 if there is any.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from patchaudit.hazards import SourceFile, check_file, load_rules


def main() -> int:
    tree = Path(sys.argv[1])
    rules = load_rules()
    differ = 0
    fast_time = slow_time = 0.0
    paths = sorted(tree.rglob("*.py"))
    for path in paths:
        file = SourceFile(
            path=path.relative_to(tree).as_posix(), installed=path.read_bytes(), pristine=None, drifted=False
        )
        start = time.perf_counter()
        fast = check_file(file, rules)
        middle = time.perf_counter()
        slow = check_file(file, rules, prefilter=False)
        slow_time += time.perf_counter() - middle
        fast_time += middle - start
        if fast != slow:
            differ += 1
            print(f"DIFFERS {file.path}: {sorted(set(fast) ^ set(slow), key=str)[:3]}")
    print(f"{len(paths)} files, {differ} differ; with prefilters {fast_time:.1f} s, without {slow_time:.1f} s")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
