"""Where a warm `patchaudit gate` spends its time, against the least any program can spend on the same stats.

Run by hand, with the Python that runs patchaudit (its interpreter start is part of both):
    python bench/gate_floor.py --python ENV/bin/python               # the gate over every distribution
    python bench/gate_floor.py --python ENV/bin/python --rounds 9 --json floor.json

The warm gate's work is one stat per entry of its kept plan. This bench reads that plan from the gate's
own cache file and times, round by round and alternating, the same entries stat'ed:
  - by `find ROOTS -printf` over the plan's walked roots (C, one getdents per directory and a stat per
    entry), split over the CPUs: the stat floor of any program;
  - by the smallest Python that can do it (`python -S`, a fork per CPU, one os.stat per entry by its
    directory's descriptor, nothing kept): the floor of a Python gate;
  - by the gate itself, in phases (imports, cache read, plan, fingerprint, verdict; CPU of the
    fingerprint's forked processes beside the parent's);
beside `python -S -c pass`, `python -c pass`, the whole gate and `PY -m pip show ANCHOR`, and prints the
medians (wall and CPU) and each as a ratio of `pip show`, then the gate's top imports (`-X importtime`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import Timing, cpus, run

# Stat every entry of the plan, listed in FILE as "<directory>\t<names joined by />" lines (a file on
# its own: an empty directory and the path), over N processes; nothing is kept.
_PY_FLOOR = r"""
import os, sys
lines = open(sys.argv[1], encoding="utf-8", errors="surrogateescape").read().split("\n")
n = int(sys.argv[2])
part = 0
for part in range(1, n):
    if os.fork() == 0:
        break
else:
    part = 0
flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
for line in lines[part::n]:
    d, _, names = line.partition("\t")
    if not d:
        if names:
            try:
                os.lstat(names)
            except OSError:
                pass
        continue
    try:
        fd = os.open(d, flags)
    except OSError:
        continue
    os.fstat(fd)
    for name in names.split("/") if names else ():
        try:
            os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            pass
    os.close(fd)
if part:
    os._exit(0)
for _ in range(1, n):
    os.wait()
"""

# The same in C (when a C compiler is at hand): the stat floor of any program.
_C_FLOOR = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int n = atoi(argv[2]), part = 0;
  FILE *f = fopen(argv[1], "rb");
  if (!f) return 2;
  fseek(f, 0, SEEK_END); long size = ftell(f); rewind(f);
  char *buf = malloc(size + 2);
  if (fread(buf, 1, size, f) != (size_t)size) return 2;
  buf[size] = '\n'; buf[size + 1] = 0;
  for (int i = 1; i < n; i++) if (fork() == 0) { part = i; break; }
  struct stat st;
  long line = 0;
  for (char *p = buf; *p; line++) {
    char *nl = strchr(p, '\n'), *tab = strchr(p, '\t');
    *nl = 0;
    if (line % n == part && tab && tab < nl) {
      *tab = 0;
      if (!*p) { if (tab[1]) lstat(tab + 1, &st); }
      else {
        int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
          fstat(fd, &st);
          for (char *q = tab + 1; *q;) {
            char *slash = strchr(q, '/');
            if (slash) *slash = 0;
            fstatat(fd, q, &st, AT_SYMLINK_NOFOLLOW);
            if (!slash) break;
            q = slash + 1;
          }
          close(fd);
        }
      }
    }
    p = nl + 1;
  }
  if (part) _exit(0);
  while (wait(NULL) > 0) {}
  return 0;
}
"""

# The warm gate's phases, as fastgate runs them, timed in one fresh process: a JSON line of
# {phase: [wall s, cpu s]}, the fingerprint's with its forked processes' CPU.
_PHASES = r"""
import json, os, resource, sys, time
def now():
    return time.perf_counter(), time.process_time()
marks = {}
w, c = now()
import gc
gc.disable()
from pathlib import Path
from patchaudit.gate import warm
from patchaudit.gate.cache import VerdictCache, _resolution_stat, kept, predicted_prefix
from patchaudit.gate.plan import FilePlan
from patchaudit.target.cacheplace import place
def mark(name, w, c):
    w2, c2 = now()
    marks[name] = [w2 - w, c2 - c]
    return w2, c2
w, c = mark("imports", w, c)
python = Path(sys.argv[1])
key = warm.gate_key(None, python, None, [], "high", None)
where, _ = place(predicted_prefix(python, None), None)
cache = VerdictCache.open(where, key, python, None)
w, c = mark("cache read", w, c)
entry = cache.entry
same = entry["resolved"] == _resolution_stat(python, None)
plan = FilePlan.from_dict(entry["plan"])
w, c = mark("plan", w, c)
found = plan.fingerprint(int(sys.argv[2]))
w, c = mark("fingerprint", w, c)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
marks["fingerprint"][1] += kids.ru_utime + kids.ru_stime
verdict = kept(entry["verdict"]) if same and found == entry["fingerprint"] else None
w, c = mark("verdict", w, c)
marks["entries"] = sum(b[3] for b in plan.blocks) + len(plan.files)
marks["cached"] = verdict is not None
print(json.dumps(marks))
"""


def plan_listing(python: str, out: Path) -> tuple[list[str], int]:
    """Write the warm gate's entries (see _PY_FLOOR) to `out`: (its walked roots, its entries)."""
    from patchaudit.gate import warm
    from patchaudit.gate.cache import VerdictCache, predicted_prefix
    from patchaudit.gate.plan import FilePlan
    from patchaudit.target.cacheplace import place

    key = warm.gate_key(None, Path(python), None, [], "high", None)
    where, _ = place(predicted_prefix(Path(python), None), None)
    cache = VerdictCache.open(where, key, Path(python), None) if where is not None else None
    if cache is None:
        sys.exit("bench: no kept verdict of `gate --python PY` to read the plan of")
    plan = FilePlan.from_dict(cache.entry["plan"])
    lines, entries = [], len(plan.files)
    for root, listing in zip(plan.roots, plan.listings, strict=True):
        parts = listing.split("\0")
        for rel, names in zip(parts[0::2], parts[1::2], strict=True):
            lines.append(f"{root}/{rel}\t{names}" if rel else f"{root}\t{names}")
            entries += 1 + (names.count("/") + 1 if names else 0)
    lines += [f"\t{path}" for path in plan.files]
    out.write_text("\n".join(lines), encoding="utf-8", errors="surrogateescape")
    return list(plan.roots), entries


def find_command(roots: list[str], procs: int) -> str:
    """`find -printf` over the roots, cut into `procs` runs of about the same number of roots."""
    printf = "-printf '%m %s\\n'"  # a stat per entry (the mode and size are in none of the directory's records)
    runs = [roots[i::procs] for i in range(procs)]
    jobs = [f"find {shlex.join(r)} {printf} > /dev/null" for r in runs if r]
    return " & ".join(jobs) + " & wait"


def phases(python: str, procs: int) -> dict[str, list[float]]:
    proc = subprocess.run(
        [sys.executable, "-c", _PHASES, python, str(procs)],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    )
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def importtime(cmd: list[str], rounds: int) -> list[tuple[int, str]]:
    """The top imports of `cmd` (min over rounds of each module's cumulative microseconds, top level)."""
    best: dict[str, int] = {}
    for _ in range(rounds):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        for line in proc.stderr.splitlines():
            if not line.startswith("import time:") or "| imported package" in line:
                continue
            _, cumulative, name = line.split("|")
            if name.startswith("  "):  # imported by another module: counted in its cumulative time
                continue
            value = int(cumulative)
            best[name.strip()] = min(best.get(name.strip(), value), value)
    return sorted(((us, name) for name, us in best.items()), reverse=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True, help="the env's interpreter (pip show runs with it)")
    parser.add_argument("--anchor", default="vllm", help="the distribution `pip show` is asked about")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--procs", type=int, default=cpus(), help="processes of the floors (default: the CPUs)")
    parser.add_argument(
        "--patchaudit",
        default=shutil.which("patchaudit") or str(Path(sys.executable).parent / "patchaudit"),
        help="the command that runs patchaudit",
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--allow-drift", action="store_true", help="time a gate that fails (exit 1) too")
    args = parser.parse_args()

    gate = [*shlex.split(args.patchaudit), "gate", "--python", args.python]
    gate_ok = (0, 1) if args.allow_drift else (0,)
    run(gate, ok=gate_ok)  # keeps the verdict, then answers from it
    run(gate, ok=gate_ok)
    scratch = Path(tempfile.mkdtemp(prefix="pa-gate-floor-"))
    listing = scratch / "entries.txt"
    roots, entries = plan_listing(args.python, listing)
    py = sys.executable
    commands: dict[str, list[str] | str] = {
        "pip show": [args.python, "-m", "pip", "show", args.anchor],
        "gate": gate,
        "python -S -c pass": [py, "-S", "-c", "pass"],
        "python -c pass": [py, "-c", "pass"],
        f"python -S stats x{args.procs}": [py, "-S", "-c", _PY_FLOOR, str(listing), str(args.procs)],
        f"find -printf x{args.procs}": find_command(roots, args.procs),
    }
    compiler = shutil.which("cc")
    if compiler is not None:
        (scratch / "floor.c").write_text(_C_FLOOR)
        subprocess.run([compiler, "-O2", "-o", str(scratch / "floor"), str(scratch / "floor.c")], check=True)
        commands[f"C stats x{args.procs}"] = [str(scratch / "floor"), str(listing), str(args.procs)]
    print(f"{entries} entries below {len(roots)} walked roots; floors over {args.procs} processes")
    times: dict[str, list[Timing]] = {name: [] for name in commands}
    parts: list[dict[str, list[float]]] = []
    load_before = os.getloadavg()
    for n in range(args.rounds):
        names = list(commands) if n % 2 == 0 else list(reversed(commands))
        for name in names:
            times[name].append(run(commands[name], ok=gate_ok if name == "gate" else (0,)))
        parts.append(phases(args.python, args.procs))
    load_after = os.getloadavg()
    shutil.rmtree(scratch, ignore_errors=True)
    if not all(p["cached"] for p in parts):
        sys.exit("bench: the gate's phases did not find the kept verdict")
    pip_wall = statistics.median(t.wall for t in times["pip show"])
    figures: dict[str, object] = {"entries": entries, "load_before": load_before[0], "load_after": load_after[0]}
    print(f"{'':28s} {'wall ms':>8s} {'cpu ms':>8s} {'x pip show':>10s}")
    for name, rows in times.items():
        wall = statistics.median(t.wall for t in rows)
        cpu = statistics.median(t.cpu for t in rows)
        figures[name] = {"wall": wall, "cpu": cpu, "ratio": wall / pip_wall}
        print(f"{name:28s} {1e3 * wall:8.1f} {1e3 * cpu:8.1f} {wall / pip_wall:10.3f}")
    print("the gate, phase by phase (one fresh process; interpreter start: `python -c pass` above):")
    for phase in ("imports", "cache read", "plan", "fingerprint", "verdict"):
        wall = statistics.median(p[phase][0] for p in parts)
        cpu = statistics.median(p[phase][1] for p in parts)
        figures[f"phase {phase}"] = {"wall": wall, "cpu": cpu}
        print(f"  {phase:26s} {1e3 * wall:8.1f} {1e3 * cpu:8.1f}")
    print(f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after on {cpus()} CPUs")
    top = importtime([py, "-X", "importtime", "-m", "patchaudit", "gate", "--python", args.python], args.rounds)
    print("top-level imports of the warm gate (cumulative us, min over rounds):")
    for us, name in top[:15]:
        print(f"  {us:7d}  {name}")
    figures["imports"] = dict((name, us) for us, name in top[:15])
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - started:.0f} s)")
    sys.exit(code)
