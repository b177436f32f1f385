"""What every bench shares: run two commands pair by pair, check every exit status, report medians.

Each command is timed from the outside (interpreter start included) with the CPU time of all its
processes beside the wall time: on a shared machine the CPU time says what load did to the wall time.
Every command runs as installed software does: with its bytecode. PYTHONDONTWRITEBYTECODE is dropped
from the environment, so a bench's warm-up run writes the `.pyc` files of a source checkout (which a
wheel install writes at install time) and no timed run compiles Python source.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Timing:
    wall: float
    cpu: float  # user + system of the command and every process it waited for
    code: int


def run(
    cmd: Sequence[str] | str,
    *,
    ok: Sequence[int] = (0,),
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> Timing:
    """Run once, output discarded; a status outside `ok` stops the bench with the command's stderr."""
    shell = isinstance(cmd, str)
    argv: Sequence[str] | str = ["bash", "-o", "pipefail", "-c", cmd] if shell else cmd
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in ok:
        shown = cmd if shell else shlex.join(cmd)
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-5:]
        sys.exit(f"bench: command failed with exit {proc.returncode}: {shown}\n" + "\n".join(tail))
    return Timing(wall, cpu, proc.returncode)


@dataclass
class Pairs:
    """Anchor and ours, alternating which goes first, so that neither always runs on a warmer machine."""

    anchor_name: str
    ours_name: str
    rows: list[tuple[Timing, Timing]] = field(default_factory=list)
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def measure(self, anchor: Callable[[], Timing], ours: Callable[[], Timing], rounds: int) -> None:
        self.load_before = os.getloadavg()
        for n in range(rounds):
            if n % 2 == 0:
                a, b = anchor(), ours()
            else:
                b, a = ours(), anchor()
            self.rows.append((a, b))
            print(
                f"  {self.anchor_name} {a.wall:7.3f}s (cpu {a.cpu:6.2f}s)   {self.ours_name} {b.wall:7.3f}s "
                f"(cpu {b.cpu:6.2f}s)   ratio {b.wall / a.wall:5.3f}",
                flush=True,
            )
        self.load_after = os.getloadavg()

    def summary(self) -> dict[str, float]:
        return {
            "anchor_wall": statistics.median(a.wall for a, _ in self.rows),
            "ours_wall": statistics.median(b.wall for _, b in self.rows),
            "anchor_cpu": statistics.median(a.cpu for a, _ in self.rows),
            "ours_cpu": statistics.median(b.cpu for _, b in self.rows),
            "ratio": statistics.median(b.wall / a.wall for a, b in self.rows),
            "cpu_ratio": statistics.median(b.cpu / a.cpu for a, b in self.rows if a.cpu > 0),
            "load_before": self.load_before[0],
            "load_after": self.load_after[0],
        }

    def report(self, target: float | None = None) -> dict[str, float]:
        s = self.summary()
        goal = f" (target <= {target}x)" if target is not None else ""
        print(
            f"median {self.anchor_name} {s['anchor_wall']:.3f}s, {self.ours_name} {s['ours_wall']:.3f}s, "
            f"ratio {s['ratio']:.3f}x{goal}; CPU ratio {s['cpu_ratio']:.3f}x; "
            f"load average {s['load_before']:.1f} before, {s['load_after']:.1f} after "
            f"on {cpus()} CPUs",
            flush=True,
        )
        return s


def sha256_rate() -> float:
    """Bytes per second of this Python's sha256 on one CPU (64 MiB in memory, best of three)."""
    data = os.urandom(64 << 20)
    best = 0.0
    for _ in range(3):
        start = time.process_time()
        hashlib.sha256(data).digest()
        best = max(best, len(data) / max(time.process_time() - start, 1e-9))
    return best


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def peak_rss_mb(cmd: Sequence[str], ok: Sequence[int] = (0, 1)) -> float | None:
    """Peak resident set size of `cmd` (the largest of its processes) by GNU time -v, in MB."""
    if not os.path.exists("/usr/bin/time"):
        return None
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if proc.returncode not in ok:
        sys.exit(f"bench: {shlex.join(cmd)} failed with exit {proc.returncode}")
    for line in proc.stderr.decode(errors="replace").splitlines():
        if "Maximum resident set size" in line:
            return int(line.rsplit(":", 1)[1]) / 1024
    return None
