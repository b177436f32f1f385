"""How evenly the workers of a cold verify would finish, from the pieces of an environment (run by hand).

    python bench/piece_balance.py --python VENV/bin/python [--workers 2 8 16]

Cuts every RECORD of the environment into the pieces a cold `scan` hands its workers
(patchaudit.check.pieces) and plays them out on W workers, each taking the next piece as it
finishes one, as the pool does. A piece costs the bytes it lists over this Python's sha256 speed
on one CPU, plus a fixed cost per file (open, fstat, read, close). Prints, per worker count, when
the first and the last worker would be done against the even share of the work (the whole cost
over W, or the largest piece where that is longer): the imbalance is what the cut and its order
add to a cold scan that no more workers can take off.
"""

from __future__ import annotations

import argparse
import heapq
import re
from pathlib import Path

from _harness import sha256_rate

from patchaudit.check.ownership import read_record_or_why
from patchaudit.check.pieces import pieces
from patchaudit.target import environment

PER_FILE = 15e-6  # seconds per file besides its bytes: open, fstat, read calls, close, the RECORD line
_SIZE = re.compile(rb",(\d+)\r?$", re.MULTILINE)


def finish_times(costs: list[float], workers: int) -> list[float]:
    """When each worker is done, taking the pieces in order, each the next as it finishes one."""
    free = [0.0] * workers
    for cost in costs:
        heapq.heappush(free, heapq.heappop(free) + cost)
    return sorted(free)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, required=True)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 8, 16])
    parser.add_argument("--rate", type=float, help="sha256 bytes per second on one CPU (default: measured)")
    args = parser.parse_args()
    rate = args.rate or sha256_rate()
    env = environment.resolve(args.python, None)
    records = [(str(d.location), read_record_or_why(d)[0]) for d in environment.distributions(env)]
    held = [(location, data) for location, data in records if data]
    costs = []
    for piece in pieces(held):
        text = held[piece.record][1][piece.start : piece.stop]
        costs.append(sum(map(int, _SIZE.findall(text))) / rate + (text.count(b"\n") or 1) * PER_FILE)
    total = sum(costs)
    print(f"{len(costs)} pieces, {total:.2f} s of work on one CPU at {rate / 1e9:.2f} GB/s; largest {max(costs):.3f} s")
    for workers in args.workers:
        done = finish_times(costs, workers)
        even = max(total / workers, max(costs))
        print(
            f"{workers:3d} workers: first done {done[0]:.3f} s, last {done[-1]:.3f} s, even share {even:.3f} s, "
            f"imbalance {done[-1] / even - 1:+.1%}"
        )


if __name__ == "__main__":
    main()
