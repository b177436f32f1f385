"""Time a warm `patchaudit gate DIST --python PY` against `PY -m pip show DIST` in the same env.

Run by hand (on a copy COPY of the env: the edit check changes one byte of one file and puts it back):
    python bench/bench_gate.py --python COPY/bin/python vllm [--rounds 9]
    python bench/bench_gate.py --python ENV/bin/python vllm --all --no-edit-check   # gate every distribution
The env needs pip for the anchor (`PY -m ensurepip` in the copy). Both commands run pair by pair in
one process after one warm-up each; prints every pair and the median ratio (target <= 0.33x).
Then it changes one byte of a file of DIST keeping its size and mtime (as `touch -r` would) and
checks that the warm gate still fails, and passes again once the byte is back.
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

TARGET = 0.33


def timed(cmd: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start, proc.returncode


def gate_code(cmd: list[str]) -> tuple[int, str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr.strip()


def edit_check(ours: list[str], python: str, dist: str) -> bool:
    """Flip one byte of one of DIST's files, keep size and mtime; the warm gate must still see it."""
    from patchaudit import environment

    env = environment.from_python(Path(python))
    (installed,) = environment.select(environment.distributions(env), [dist])
    assert installed.record_path is not None
    from patchaudit.record import parse_record

    record = parse_record(installed.record_path.read_bytes())
    rel = next(e.path for e in record.entries if e.path.endswith("__init__.py") and e.hash is not None)
    target = installed.location / rel
    original = target.read_bytes()
    st = target.stat()
    flipped = original[:-1] + (b" " if original[-1:] != b" " else b"\n")
    print(f"edit check on {target} ({st.st_size} bytes)")
    try:
        target.write_bytes(flipped)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        after = target.stat()
        assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
        code, line = gate_code(ours)
        print(f"  after the edit:   exit {code}  {line}")
        caught = code == 1
    finally:
        target.write_bytes(original)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    time.sleep(0.1)
    code, line = gate_code(ours)
    print(f"  after restoring:  exit {code}  {line}")
    return caught and code == 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", required=True)
    parser.add_argument("dist")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-edit-check", action="store_true")
    parser.add_argument("--all", action="store_true", help="gate every distribution (no names), anchor unchanged")
    args = parser.parse_args()

    patchaudit = shutil.which("patchaudit") or str(Path(sys.executable).parent / "patchaudit")
    anchor = [args.python, "-m", "pip", "show", args.dist]
    ours = [patchaudit, "gate", *([] if args.all else [args.dist]), "--python", args.python]

    _, code = timed(anchor)
    if code != 0:
        sys.exit(f"the anchor failed: {' '.join(anchor)} (install pip into the env: {args.python} -m ensurepip)")
    timed(ours)  # cold run: verifies everything and writes the caches
    time.sleep(0.1)
    _, code = timed(ours)
    if code != 0:
        sys.exit(f"the gate does not pass on this env: {' '.join(ours)}")
    pairs = []
    for _ in range(args.rounds):
        a, _ = timed(anchor)
        b, _ = timed(ours)
        pairs.append((a, b))
        print(f"  pip show {a:6.3f}s   gate {b:6.3f}s   ratio {b / a:5.2f}")
    ratio = statistics.median(b / a for a, b in pairs)
    print(f"anchor: {' '.join(anchor)}")
    print(f"ours:   {' '.join(ours)}")
    print(
        f"median pip show {statistics.median(a for a, _ in pairs):.3f}s, "
        f"gate {statistics.median(b for _, b in pairs):.3f}s, ratio {ratio:.2f}x (target <= {TARGET}x)"
    )
    if not args.no_edit_check:
        ok = edit_check(ours, args.python, args.dist)
        print("edit check: " + ("caught, and clean again once restored" if ok else "FAILED"))
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
