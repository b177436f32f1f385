"""The least time N processes take to hash an environment's files, for N in a list: the floor of any
Python verifier, and so the best `--workers` curve a cold scan could show on this machine.

Run by hand, with any Python (the target's site-packages are walked, nothing of it is imported):
    python bench/hash_floor.py --python ENV/bin/python                    # N = 1, 2, 4, 8, 16
    python bench/hash_floor.py --python ENV/bin/python --workers 8,16 --rounds 5 --chunk 262144

Every regular file below the site-packages directories (as `find -type f` sees them) is read once to
warm the page cache, then dealt to N bins, largest first, each to the bin with the fewest bytes so far
(the best static split there is); N processes are forked and each hashes its bin with hashlib.sha256
through one read buffer (`--chunk`, 1 MiB as patchaudit's workers). The time is from before the first
fork to the last exit: no interpreter start, no imports, no RECORD, no report. Beside it: the largest
file hashed alone, which no N shortens (SHA-256 of one file is one sequential stream), and the ratio
from each N to the next. A cold scan's curve can be no steeper than this one.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import stat
import statistics
import subprocess
import time
from pathlib import Path


def site_dirs(python: str) -> list[Path]:
    code = "import json, site; print(json.dumps(site.getsitepackages()))"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
    return [Path(p) for p in json.loads(out) if Path(p).is_dir()]


def regular_files(tops: list[Path]) -> list[tuple[int, str]]:
    """(size, path) of every regular file below the tops, links not followed."""
    found = []
    for top in tops:
        for root, _, names in os.walk(top):
            for name in names:
                path = os.path.join(root, name)
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode):
                    found.append((st.st_size, path))
    return found


def deal(files: list[tuple[int, str]], n: int) -> list[list[str]]:
    """Largest first, each to the bin holding the fewest bytes."""
    bins: list[list[str]] = [[] for _ in range(n)]
    loads = [0] * n
    for size, path in sorted(files, reverse=True):
        i = loads.index(min(loads))
        bins[i].append(path)
        loads[i] += size
    return bins


def hash_all(paths: list[str], buf: bytearray) -> None:
    """Each file read into `buf` and hashed, as patchaudit's workers read: by its directory's descriptor,
    with os.readv, no file object."""
    view = memoryview(buf)
    dir_fd, opened = -1, None
    for path in sorted(paths):  # a directory's files together, opened by its descriptor
        head, name = os.path.split(path)
        if head != opened:
            if dir_fd >= 0:
                os.close(dir_fd)
            dir_fd, opened = os.open(head, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), head
        h = hashlib.sha256()
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            while n := os.readv(fd, [buf]):
                h.update(view[:n])
        finally:
            os.close(fd)


def forked(bins: list[list[str]], chunk: int) -> float:
    """Seconds from before the first fork to the last child's exit."""
    start = time.perf_counter()
    pids = []
    for paths in bins:
        pid = os.fork()
        if pid == 0:
            try:
                hash_all(paths, bytearray(chunk))
            finally:
                os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="the environment's interpreter")
    parser.add_argument("--workers", default="1,2,4,8,16", help="the process counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=1 << 20, help="read buffer in bytes")
    args = parser.parse_args()

    tops = site_dirs(args.python)
    files = regular_files(tops)
    total = sum(size for size, _ in files)
    largest, big = max(files)
    print(f"{len(files)} files, {total / 1e9:.2f} GB, largest {largest / 1e6:.0f} MB; chunk {args.chunk} bytes")
    hash_all([p for _, p in files], bytearray(args.chunk))  # the page cache warm

    alone = statistics.median(forked([[big]], args.chunk) for _ in range(args.rounds))
    print(f"largest file alone: {alone:.3f} s ({largest / alone / 1e9:.2f} GB/s)")
    counts = [int(n) for n in args.workers.split(",")]
    medians: dict[int, float] = {}
    for n in counts:
        bins = deal(files, n)
        times = [forked(bins, args.chunk) for _ in range(args.rounds)]
        medians[n] = statistics.median(times)
        rounds = " ".join(f"{t:.3f}" for t in times)
        print(f"N={n:<3d} {medians[n]:.3f} s  (rounds {rounds}; {total / n / 1e9:.2f} GB a process)", flush=True)
    for a, b in itertools.pairwise(counts):
        print(f"{a} -> {b}: {medians[a] / medians[b]:.2f}x")


if __name__ == "__main__":
    main()
