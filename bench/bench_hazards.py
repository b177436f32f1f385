"""Time the hazard pack through the CLI against `bandit -r` on the same tree, pair by pair (run by hand).

    python bench/bench_hazards.py --python ENV/bin/python [--dist vllm] [--bandit PATH] [--pairs 5]
                                  [--drift]

Each pair runs `bandit -r` over the distribution's package directory and
`patchaudit scan DIST --all-files --no-cache` over the same distribution, one after the other;
both exit statuses are checked (bandit: 0 or 1; the scan of a pristine install: 0). Prints every
pair, the medians, and the median of the per-pair ratios (target: at most 0.30x bandit).

--drift (the environment must be writable, e.g. a venv with the wheel installed by
`pip install --no-deps`): pair by pair, a default scan of the clean environment against a
default scan with the two largest .py files drifted (the field report's debug dump appended,
different in every pair so no cache answers it, and found as high by the rules). Prints the median
of what the drift adds (target: at most 1 s). The files are put back after every pair.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PATCHAUDIT = [sys.executable, "-m", "patchaudit"]


CPU: list[float] = []  # CPU seconds (user + system, the command and its children) of each timed run


def timed(cmd: list[str], ok: tuple[int, ...]) -> float:
    """Wall seconds of one run; its CPU seconds go to CPU (steadier than wall on a shared host)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}, expected {ok}: {proc.stderr.strip()[-500:]}")
    return elapsed


def package_dir(python: str, dist: str) -> Path:
    out = subprocess.run(
        [python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip()) / dist


def bench_all_files(args: argparse.Namespace, tree: Path) -> int:
    bandit = [args.bandit, "-r", "-q", "-f", "json", "-o", "/dev/null", str(tree)]
    scan = [*PATCHAUDIT, "scan", args.dist, "--python", args.python, "--all-files", "--no-cache", "--format", "json"]
    scan += ["--out", "/dev/null"]
    timed(scan, (0,))  # warm the page cache for both
    pairs: list[tuple[float, float]] = []
    cpus: list[tuple[float, float]] = []
    for index in range(args.pairs):
        b = timed(bandit, (0, 1))
        p = timed(scan, (0,))
        pairs.append((b, p))
        cpus.append((CPU[-2], CPU[-1]))
        print(
            f"pair {index + 1}: bandit -r {b:.1f} s ({CPU[-2]:.1f} s CPU), "
            f"scan --all-files --no-cache {p:.1f} s ({CPU[-1]:.1f} s CPU), ratio {p / b:.2f}x"
        )
    ratio = statistics.median(p / b for b, p in pairs)
    cpu_ratio = statistics.median(p / b for b, p in cpus)
    print(
        f"median: bandit -r {statistics.median(b for b, _ in pairs):.1f} s, "
        f"scan {statistics.median(p for _, p in pairs):.1f} s; median ratio {ratio:.2f}x (target <= 0.30x); "
        f"CPU ratio {cpu_ratio:.2f}x"
    )
    return 0 if ratio <= 0.30 else 1


def bench_drift(args: argparse.Namespace, tree: Path) -> int:
    scan = [*PATCHAUDIT, "scan", args.dist, "--python", args.python, "--format", "json", "--out", "/dev/null"]
    largest = sorted(tree.rglob("*.py"), key=lambda p: p.stat().st_size)[-2:]
    saved = {p: p.read_bytes() for p in largest}
    keep = Path(tempfile.mkdtemp(prefix="bench-hazards-"))  # outside the environment: no added files
    backup = {p: keep / f"{i}.py" for i, p in enumerate(largest)}
    for p in largest:
        shutil.copy2(p, backup[p])
    print("drifted files: " + ", ".join(f"{p.relative_to(tree.parent)} ({len(saved[p]) // 1024} KiB)" for p in largest))
    added: list[float] = []
    cpu_added: list[float] = []
    run = time.time_ns()  # in the patch: an earlier run's cached verdict answers none of this run's
    try:
        timed(scan, (0,))  # warm caches: the clean scan a gate would run every start
        for index in range(args.pairs):
            clean = timed(scan, (0,))
            for p in largest:
                # the field report's patch: a dump to a fixed path when N tokens are processed, which
                # every prefilter lets through to the full analysis
                patch = (
                    f"\n\ndef _bench_{run}_{index}(x, num_tokens):\n    if num_tokens == {index + 5}:\n"
                    f"        import torch\n        torch.save(x, '/tmp/bench_dump_{index}.pt')\n"
                )
                p.write_bytes(saved[p] + patch.encode())
            drifted = timed(scan, (1,))
            cpu_added.append(CPU[-1] - CPU[-2])
            for p in largest:
                shutil.copy2(backup[p], p)
            added.append(drifted - clean)
            print(f"pair {index + 1}: clean {clean:.2f} s, two large files drifted {drifted:.2f} s, +{added[-1]:.2f} s")
    finally:
        for p in largest:
            shutil.copy2(backup[p], p)
        shutil.rmtree(keep)
    median = statistics.median(added)
    print(
        f"median added by two drifted large files: {median:.2f} s (target <= 1 s); "
        f"CPU {statistics.median(cpu_added):.2f} s"
    )
    return 0 if median <= 1.0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True, help="the target environment's interpreter")
    parser.add_argument("--dist", default="vllm")
    parser.add_argument("--bandit", default=shutil.which("bandit"), help="bandit executable (a venv of its own)")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--drift", action="store_true", help="measure what two drifted large files add")
    args = parser.parse_args()
    tree = package_dir(args.python, args.dist)
    if args.drift:
        return bench_drift(args, tree)
    if not args.bandit:
        print("no bandit on PATH: pass --bandit PATH", file=sys.stderr)
        return 2
    return bench_all_files(args, tree)


if __name__ == "__main__":
    sys.exit(main())
