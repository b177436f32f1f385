"""How many CPUs this process may use: its affinity mask, capped by its cgroup's CPU quota.

`os.cpu_count()` counts the host's CPUs; a service started by systemd with `CPUQuota=200%` or pinned
with `taskset` gets fewer, and more workers than CPUs only adds switching and memory.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def quota_cpus(cpu_max: str) -> int | None:
    """CPUs allowed by a cgroup v2 `cpu.max` line ("QUOTA PERIOD", or "max PERIOD"); None when unlimited."""
    fields = cpu_max.split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    if quota <= 0 or period <= 0:
        return None
    return max(1, math.ceil(quota / period))


def cgroup_quota(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = CGROUP_ROOT) -> int | None:
    """The tightest cgroup v2 CPU quota on the path from this process's cgroup up to the root."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    relative = next((line[3:] for line in lines if line.startswith("0::")), None)
    if relative is None:
        return None
    tightest: int | None = None
    current = (root / relative.lstrip("/")).resolve()
    root = root.resolve()
    while True:
        try:
            allowed = quota_cpus((current / "cpu.max").read_text())
        except OSError:
            allowed = None
        if allowed is not None:
            tightest = allowed if tightest is None else min(tightest, allowed)
        if current == root or root not in current.parents:
            return tightest
        current = current.parent


def available_cpus() -> int:
    """CPUs this process may run on (affinity), no more than its cgroup quota allows; at least 1."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    quota = cgroup_quota()
    if quota is not None:
        count = min(count, quota)
    return max(1, count)
