"""Wall time of `patchaudit cluster scan` on a real Ray cluster of 1, 2 and 4 nodes on this machine,
against a single-node `patchaudit scan` of the same environment in the same run (the anchor).

Run by hand:  python bench/bench_cluster.py --python ENV/bin/python [DIST ...] [--rounds 5]
Every node audits ENV (all nodes live on this machine, so the per-node work is shared by its cores:
the overhead figure is what matters, not the absolute time). Both commands run pair by pair after
a warm-up; prints every pair, the medians and the overhead (target: <= 2 s over the single scan).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # keep the cluster on loopback


def timed(cmd: list[str], ok: tuple[int, ...] = (0, 1)) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return elapsed, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", required=True)
    parser.add_argument("dists", nargs="*")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nodes", default="1,2,4")
    args = parser.parse_args()

    from ray.cluster_utils import Cluster

    exe = str(Path(sys.executable).parent / "patchaudit")
    single = [exe, "scan", "--python", args.python, "--format", "json", *args.dists]
    print(f"anchor: {' '.join(single)}")
    for count in [int(n) for n in args.nodes.split(",")]:
        cluster = Cluster()
        try:
            for _ in range(count):
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            ours = [exe, "cluster", "scan", "--address", cluster.address, "--python", args.python, "--format", "json"]
            ours += args.dists
            timed(single)
            _, out = timed(ours)
            answered = json.loads(out)["summary"]["answered"]
            if answered != count:
                sys.exit(f"{answered} of {count} nodes answered")
            pairs = []
            for _ in range(args.rounds):
                a, _ = timed(single)
                b, out = timed(ours)
                pairs.append((a, b, len(out)))
                print(f"  {count} nodes: scan {a:.2f}s  cluster scan {b:.2f}s  ({len(out) // count} bytes per node)")
            a_med = statistics.median(p[0] for p in pairs)
            b_med = statistics.median(p[1] for p in pairs)
            print(f"{count} nodes: median scan {a_med:.2f}s, cluster scan {b_med:.2f}s, overhead {b_med - a_med:+.2f}s")
        finally:
            cluster.shutdown()


if __name__ == "__main__":
    main()
