"""Time a full no-cache `patchaudit scan DIST` against `find | xargs -P<cores> sha256sum` on the same tree.

Run by hand:  python bench/bench_scan.py --python /path/to/venv/bin/python vllm [--rounds 5]
Both commands run pair by pair in one process; the page cache is warmed first. Prints the median ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(cmd: list[str] | str, **kw: object) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, **kw)  # type: ignore[call-overload]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", required=True)
    parser.add_argument("dist")
    parser.add_argument("--package-dir", help="directory to hash with sha256sum (default: the dist's name)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from patchaudit.environment import from_python

    site = str(from_python(Path(args.python)).site_dirs[0])
    package = args.package_dir or args.dist.replace("-", "_")
    cores = os.cpu_count() or 1
    anchor = f"find {package} -type f -print0 | xargs -0 -P{cores} sha256sum"
    patchaudit = shutil.which("patchaudit") or str(Path(sys.executable).parent / "patchaudit")
    ours = [patchaudit, "scan", args.dist, "--python", args.python, "--no-cache", "--format", "json"]

    timed(anchor, shell=True, cwd=site)  # warm the page cache
    timed(ours)
    pairs = []
    for _ in range(args.rounds):
        a = timed(anchor, shell=True, cwd=site)
        b = timed(ours)
        pairs.append((a, b))
        print(f"  sha256sum {a:6.3f}s   patchaudit {b:6.3f}s   ratio {b / a:5.2f}")
    ratio = statistics.median(b / a for a, b in pairs)
    print(f"anchor: (cd {site} && {anchor})")
    print(f"ours:   {' '.join(ours)}")
    print(
        f"median sha256sum {statistics.median(a for a, _ in pairs):.3f}s, "
        f"patchaudit {statistics.median(b for _, b in pairs):.3f}s, ratio {ratio:.2f}x (target <= 0.5x)"
    )


if __name__ == "__main__":
    main()
