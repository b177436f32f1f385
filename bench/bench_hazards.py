"""Time the hazard pack over a source tree against `bandit -r` on the same tree (run by hand).

    python bench/bench_hazards.py TREE [--bandit PATH] [--workers N] [--skip-bandit]

The pack runs as `scan --all-files --no-cache` does: every .py file, drifted=False, no result
cache. Prints both times, the ratio (target: at most 0.5x bandit), and the pack's findings by
severity with every `high` listed (target on a pristine vLLM tree: none).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import time
from pathlib import Path

from patchaudit.hazards import SourceFile, check_files, load_rules


def run_pack(tree: Path, workers: int | None) -> tuple[float, list, int]:
    start = time.perf_counter()
    files = [
        SourceFile(path=p.relative_to(tree).as_posix(), installed=p.read_bytes(), pristine=None, drifted=False)
        for p in sorted(tree.rglob("*.py"))
    ]
    findings = check_files(files, workers=workers)
    return time.perf_counter() - start, findings, len(files)


def run_bandit(tree: Path, bandit: str) -> float:
    start = time.perf_counter()
    # bandit exits 1 when it finds issues; only its time matters here.
    subprocess.run([bandit, "-r", "-q", "-f", "json", "-o", "/dev/null", str(tree)], check=False)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument(
        "--bandit", default=shutil.which("bandit"), help="bandit executable (install it in a venv of its own)"
    )
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--skip-bandit", action="store_true")
    args = parser.parse_args()

    load_rules()  # import and load outside the timed part, as a warm CLI would have
    pack_time, findings, n_files = run_pack(args.tree, args.workers)
    severities = collections.Counter(f.severity.value for f in findings)
    print(f"patchaudit pack: {n_files} files in {pack_time:.1f} s; findings {dict(severities)}")
    for rule, count in sorted(collections.Counter(f.rule for f in findings).items()):
        print(f"  {rule:<20} {count}")
    highs = [f for f in findings if f.severity.value == "high"]
    for finding in highs:
        print(f"  HIGH {finding.path}:{finding.line} {finding.rule}: {finding.message}")
    if args.skip_bandit:
        return 0
    if not args.bandit:
        print("no bandit on PATH: pass --bandit PATH (or --skip-bandit)", file=sys.stderr)
        return 2
    bandit_time = run_bandit(args.tree, args.bandit)
    print(f"bandit -r:       {bandit_time:.1f} s")
    print(f"ratio patchaudit/bandit: {pack_time / bandit_time:.2f}x (target <= 0.50x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
