"""The packaging-fact classification costs clean files nothing: warm verify with it vs without it.

Run by hand:
    python bench/bench_facts.py --python ENV/bin/python [--rounds 7]
Both sides run `verify` over every distribution of ENV with the warm stat cache, pair by pair in one
process; the anchor is the same verify with the classification step replaced by the identity. Prints
each pair, the median ratio, and how many files the classification was handed (only files that already
disagree with their RECORD; a clean file never reaches it).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from patchaudit.check import audit, facts, ownership, verify
from patchaudit.target import environment


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", required=True)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    env = environment.from_python(Path(args.python))
    every = environment.distributions(env)
    options = audit.ScanOptions()
    handed: list[int] = []
    classify = facts.classify

    def counting(location, drift, **kw):  # type: ignore[no-untyped-def]
        handed.append(len(drift))
        return classify(location, drift, **kw)

    def identity(item, drift, ownership):  # type: ignore[no-untyped-def]
        return drift, []

    with_facts = verify._facts

    def run(step) -> float:  # type: ignore[no-untyped-def]
        verify._facts = step
        start = time.perf_counter()
        verify.verify(env, every, every=every, cache=audit.stat_cache(env, options))
        return time.perf_counter() - start

    run(with_facts)  # warm the stat cache
    pairs = []
    for _ in range(args.rounds):
        a = run(identity)
        facts.classify = counting
        handed.clear()
        b = run(with_facts)
        facts.classify = classify
        pairs.append((a, b))
        print(f"  without {a:6.3f}s   with {b:6.3f}s   ratio {b / a:5.2f}")
    verify._facts = with_facts
    ratio = statistics.median(b / a for a, b in pairs)
    files = sum(len(d.entries) for d in [ownership.load(x) for x in every])
    print(f"{len(every)} distributions, {files} RECORD entries; classification handed {sum(handed)} files")
    print(f"median ratio with/without classification: {ratio:.3f}x")


if __name__ == "__main__":
    main()
