"""Time a cold `patchaudit scan` (no cache, no hazards) against `find | xargs -0 -P<cpus> -n 500 sha256sum`.

Run by hand:
    python bench/bench_scan.py --python VENV/bin/python              # every distribution, whole site-packages
    python bench/bench_scan.py --python VENV/bin/python vllm         # one distribution, its package directories
    python bench/bench_scan.py --python VENV/bin/python --rss        # also the peak RSS of one cold scan

Both commands run pair by pair (the page cache warmed first), each timed from the outside with its
interpreter start, every exit status checked. `-n 500`: without it GNU xargs packs ~2,000 paths into
one sha256sum, so a few thousand files get two or three processes whatever -P says. Prints every
pair, the median ratio, the CPU time of both, the load average, and the hashing limit: the bytes the
anchor reads over (CPUs x this Python's sha256 speed), and the largest file alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import stat
import sys
from pathlib import Path

from _harness import Pairs, cpus, peak_rss_mb, run, sha256_rate

TARGET = 0.30


def files_under(site: Path, tops: list[str]) -> tuple[int, int, int]:
    """(files, bytes, largest) of regular files below the given directories, as `find -type f` sees them."""
    count = total = largest = 0
    for top in tops:
        for root, _, names in os.walk(site / top):
            for name in names:
                st = os.lstat(os.path.join(root, name))
                if stat.S_ISREG(st.st_mode):
                    count += 1
                    total += st.st_size
                    largest = max(largest, st.st_size)
    return count, total, largest


def package_dirs(python: str | None, path: str | None, dists: list[str]) -> tuple[Path, list[str]]:
    from patchaudit.target import environment
    from patchaudit.target.record import parse_record

    env = environment.resolve(Path(python) if python else None, Path(path) if path else None)
    site = env.site_dirs[0]
    if not dists:
        return site, ["."]
    tops: set[str] = set()
    for dist in environment.select(environment.distributions(env), dists):
        tops.add(dist.meta_dir.name)
        if dist.record_path is not None:
            for entry in parse_record(dist.record_path.read_bytes()).entries:
                first, sep, _ = entry.path.partition("/")
                if sep and first not in ("..", "") and (site / first).is_dir():
                    tops.add(first)
    return site, sorted(tops)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--python")
    where.add_argument("--path")
    parser.add_argument("dists", nargs="*", help="distributions (default: all, against the whole site-packages)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--procs", type=int, default=cpus(), help="xargs -P (default: the CPUs this bench may use)")
    parser.add_argument("--workers", type=int, help="patchaudit --workers (default: patchaudit's own)")
    parser.add_argument(
        "--patchaudit",
        default=shutil.which("patchaudit") or str(Path(sys.executable).parent / "patchaudit"),
        help="the command that runs patchaudit, e.g. 'python3 -m patchaudit'",
    )
    parser.add_argument("--rss", action="store_true", help="also measure the peak RSS of one cold scan")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()

    site, tops = package_dirs(args.python, args.path, args.dists)
    count, total, largest = files_under(site, tops)
    anchor = f"find {shlex.join(tops)} -type f -print0 | xargs -0 -P{args.procs} -n 500 sha256sum > /dev/null"
    target = ["--python", args.python] if args.python else ["--path", args.path]
    ours = [*shlex.split(args.patchaudit), "scan", *args.dists, *target, "--no-cache", "--no-hazards"]
    ours += ["--format", "json"]
    if args.workers:
        ours += ["--workers", str(args.workers)]
    ok = (0, 1)  # 1: drift found; the time is what matters, a usage error or a crash is not

    print(f"anchor: (cd {site} && {anchor})")
    print(f"ours:   {shlex.join(ours)}")
    print(f"{count} files, {total / 1e9:.2f} GB, largest {largest / 1e6:.0f} MB", flush=True)
    run(anchor, cwd=str(site))  # warm the page cache
    run(ours, ok=ok)
    pairs = Pairs("sha256sum", "patchaudit")
    pairs.measure(lambda: run(anchor, cwd=str(site)), lambda: run(ours, ok=ok), args.rounds)
    figures: dict[str, object] = dict(pairs.report(TARGET))
    rate = sha256_rate()
    limit = max(total / (args.procs * rate), largest / rate)
    print(
        f"hashing limit: {limit:.3f}s (max of {total / 1e9:.2f} GB / ({args.procs} x {rate / 1e9:.2f} GB/s) "
        f"and the largest file alone); patchaudit at {figures['ours_wall'] / limit:.2f}x the limit, "  # type: ignore[operator]
        f"the limit is {limit / figures['anchor_wall']:.3f}x sha256sum"  # type: ignore[operator]
    )
    figures.update(files=count, bytes=total, largest=largest, sha256_rate=rate, limit=limit, anchor=anchor, ours=ours)
    if args.rss:
        rss = peak_rss_mb(ours)
        print(f"peak RSS of one cold scan: {rss:.0f} MB (target <= 300 MB)")
        figures["peak_rss_mb"] = rss
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
