"""The serving path's costs on an installed framework: the import graph cold, the walk warm, the warm gate.

Run by hand against an environment with vLLM installed (read only: caches go to a temp directory):
    python bench/bench_serving.py --path SITE --serve MODEL_DIR [--dist vllm] [--rounds 5]

1. The import graph built from the files' bytes with no cache (2 workers), against reading the same
   bytes (the anchor): target under 1 s.
2. `--serve` on a report when the caches are warm (RECORD, drift and model unchanged), in process.
3. A warm `patchaudit gate DIST --path SITE` with and without `--serve MODEL`, pair by pair, timed from
   the outside: `--serve` must add under 20 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _harness import Pairs, cpus, run

GRAPH_TARGET_S = 1.0
WARM_ADD_TARGET_S = 0.020


def _cpu() -> float:
    """CPU seconds of this process and of the workers it has waited for."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--path", type=Path, required=True, help="the site-packages directory holding the framework")
    parser.add_argument("--serve", type=Path, required=True, help="a model directory with a config.json")
    parser.add_argument("--dist", default="vllm")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    from patchaudit.report import DistReport, Report, Source, Target
    from patchaudit.serving.annotate import ServeOptions, annotate
    from patchaudit.serving.graph import build
    from patchaudit.target import environment
    from patchaudit.target.record import parse_record

    env = environment.from_path(args.path)
    (dist,) = environment.select(environment.distributions(env), [args.dist])
    assert dist.record_path is not None
    record = dist.record_path.read_bytes()
    paths = [e.path for e in parse_record(record).entries]
    py = [p for p in paths if p.endswith(".py")]

    reads, builds, cpu = [], [], []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for p in py:
            with open(args.path / p, "rb") as fh:
                fh.read()
        reads.append(time.perf_counter() - start)
        start, before = time.perf_counter(), _cpu()
        graph = build(args.path, paths, record=record, workers=args.workers)
        builds.append(time.perf_counter() - start)
        cpu.append(_cpu() - before)
    read_s, build_s = statistics.median(reads), statistics.median(builds)
    print(
        f"graph: {len(graph.modules)} modules, built in {build_s:.3f}s on {args.workers} workers "
        f"(target < {GRAPH_TARGET_S}s), CPU {statistics.median(cpu):.3f}s; "
        f"reading their bytes alone {read_s:.3f}s; ratio {build_s / read_s:.2f}x"
    )

    with tempfile.TemporaryDirectory() as cache:
        report = Report(
            target=Target(python=None, paths=(str(args.path),)),
            distributions=(
                DistReport(name=dist.name, version=dist.version, location=str(args.path), source=Source.WHEEL),
            ),
        )
        options = ServeOptions(model=str(args.serve), cache_dir=Path(cache), workers=args.workers)
        start = time.perf_counter()
        annotate(report, env, options)
        first = time.perf_counter() - start
        warm = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            annotate(report, env, options)
            warm.append(time.perf_counter() - start)
        print(f"--serve on a report: {first:.3f}s with empty caches, {statistics.median(warm) * 1000:.1f} ms warm")

        exe = [sys.executable, "-m", "patchaudit"]
        plain = [*exe, "gate", args.dist, "--path", str(args.path), "--cache-dir", cache]
        served = [*plain, "--serve", str(args.serve)]
        run(plain, ok=(0, 1))  # warm-up: fills the caches
        run(served, ok=(0, 1))
        pairs = Pairs("gate", "gate --serve")
        pairs.measure(lambda: run(plain, ok=(0, 1)), lambda: run(served, ok=(0, 1)), args.rounds)
        s = pairs.report()
        added = s["ours_wall"] - s["anchor_wall"]
        print(f"--serve adds {added * 1000:.1f} ms to a warm gate (target < {WARM_ADD_TARGET_S * 1000:.0f} ms)")
    print(f"load average {os.getloadavg()[0]:.1f} on {cpus()} CPUs")


if __name__ == "__main__":
    main()
