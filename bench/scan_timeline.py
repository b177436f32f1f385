"""Where a cold `patchaudit scan` spends its time: the main process against its workers, on one time line.

Run by hand, with the Python that runs patchaudit:
    python bench/scan_timeline.py --python VENV/bin/python vllm          # scan vllm --no-cache --no-hazards
    python bench/scan_timeline.py --python VENV/bin/python --rounds 9 --workers 16

Each round runs the scan in a fresh process (its report to /dev/null, as JSON) with marks set around the
worker pool's own functions, and prints, from the instant before that process was started: when the
command line had loaded (the scan's modules imported), when the pool started, when the first task reached
a worker, when the last result came back, the exit (its atexit handlers) and the end (the process gone,
as this one saw it); and the CPU of the main process (RUSAGE_SELF at
exit) beside that of every process it waited for (RUSAGE_CHILDREN: the workers and the interpreter probe).
Medians over the rounds; on a shared machine the CPU figures are the steady ones.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Runs `patchaudit ARGS` in this process, with marks (monotonic seconds) written as JSON to $MARKS at exit.
_TIMED = r"""
import atexit, json, os, resource, sys, time
marks = {"start": time.monotonic()}
import patchaudit.parallel.workers as workers

serve, recv, start = workers._serve, workers._Reader.recv, workers.Pool._start
first_task = os.environ["MARKS"] + ".first"

def timed_serve(fn, tasks, shared, numbers, out, inherited):
    def first(s, task, _once=[True]):
        if _once[0]:
            _once[0] = False
            fd = os.open(first_task, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(fd, b"%.6f\n" % time.monotonic())
            os.close(fd)
        return fn(s, task)
    return serve(first, tasks, shared, numbers, out, inherited)

def timed_recv(self):
    message = recv(self)
    marks["last result"] = time.monotonic()
    return message

def timed_start(self):
    marks.setdefault("pool start", time.monotonic())
    marks.setdefault("main cpu before the pool", time.process_time())
    return start(self)

workers._serve, workers._Reader.recv, workers.Pool._start = timed_serve, timed_recv, timed_start

def done():
    marks["exit"] = time.monotonic()
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    marks["main cpu"] = me.ru_utime + me.ru_stime
    marks["children cpu"] = kids.ru_utime + kids.ru_stime
    try:
        with open(first_task) as f:
            marks["first task"] = min(float(line) for line in f)
    except (OSError, ValueError):
        pass
    with open(os.environ["MARKS"], "w") as f:
        json.dump(marks, f)

atexit.register(done)
sys.argv = ["patchaudit", *sys.argv[1:]]
from patchaudit.cli import main
main()
"""

EVENTS = ("pool start", "first task", "last result", "exit", "end")


def one_round(cmd: list[str], scratch: Path) -> dict[str, float]:
    marks = scratch / "marks.json"
    for stale in (marks, scratch / "marks.json.first"):
        stale.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["MARKS"] = str(marks)
    begun = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False)
    ended = time.monotonic()
    if proc.returncode not in (0, 1):
        sys.exit(f"bench: the scan failed with exit {proc.returncode}: {proc.stderr.decode(errors='replace')[-500:]}")
    got = json.loads(marks.read_text())
    out = {name: got[name] - begun for name in ("start", *EVENTS) if name in got}
    out["end"] = ended - begun  # the process gone, its interpreter's teardown included
    out.update({k: got[k] for k in ("main cpu before the pool", "main cpu", "children cpu") if k in got})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True, help="the scanned env's interpreter")
    parser.add_argument("dists", nargs="*", help="distributions (default: all)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--workers", type=int, help="patchaudit --workers (default: patchaudit's own)")
    args = parser.parse_args()

    scan = ["scan", *args.dists, "--python", args.python, "--no-cache", "--no-hazards", "--format", "json"]
    if args.workers:
        scan += ["--workers", str(args.workers)]
    cmd = [sys.executable, "-c", _TIMED, *scan]
    print(f"patchaudit {' '.join(scan)}")
    with tempfile.TemporaryDirectory(prefix="pa-scan-timeline-") as tmp:
        one_round(cmd, Path(tmp))  # warm-up: the page cache, the bytecode
        load = os.getloadavg()
        rounds = [one_round(cmd, Path(tmp)) for _ in range(args.rounds)]
    print(f"{'ms from the start':28s} " + " ".join(f"{e:>12s}" for e in EVENTS))
    for r in rounds:
        print(f"{'':28s} " + " ".join(f"{1e3 * r[e]:12.0f}" if e in r else f"{'-':>12s}" for e in EVENTS))
    pooled = all("last result" in r for r in rounds)
    for r in rounds:
        if pooled:
            r["tail"] = r["exit"] - r["last result"]
    medians = {k: statistics.median(r[k] for r in rounds) for k in rounds[0] if all(k in r for r in rounds)}
    print(f"{'median':28s} " + " ".join(f"{1e3 * medians[e]:12.0f}" if e in medians else f"{'-':>12s}" for e in EVENTS))
    main_cpu = f"main-process CPU {1e3 * medians['main cpu']:.0f} ms"
    if pooled:
        main_cpu += f" ({1e3 * medians['main cpu before the pool']:.0f} before the pool); last result to exit "
        main_cpu += f"{1e3 * medians['tail']:.0f} ms"
    else:
        main_cpu += " (no worker pool: every file hashed in the main process)"
    print(
        f"interpreter start {1e3 * medians['start']:.0f} ms; {main_cpu}; children's CPU "
        f"{1e3 * medians['children cpu']:.0f} ms; load average {load[0]:.1f} before"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
