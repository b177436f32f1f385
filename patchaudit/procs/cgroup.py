"""A systemd unit's processes, found through its cgroup, whether or not systemd runs on this host."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from patchaudit.errors import UnitNotFound

CGROUP_ROOT = Path("/sys/fs/cgroup")
# Where a unit's cgroup may live: the unified hierarchy (mounted at the root, or under unified/ on a
# hybrid host) and systemd's own named v1 hierarchy.
HIERARCHIES = ("", "unified", "systemd")
_MAX_DEPTH = 8


def systemd_running() -> bool:
    return os.path.isdir("/run/systemd/system")


def unit_of(cgroup: str | None) -> str | None:
    """The service (or scope) a cgroup path belongs to: its deepest `*.service`/`*.scope` component."""
    if not cgroup:
        return None
    for part in reversed(cgroup.strip("/").split("/")):
        if part.endswith((".service", ".scope")):
            return part
    return None


# The container a cgroup path names, as runtimes lay them out (systemd and cgroupfs drivers alike):
# docker-<id>.scope, /docker/<id>, cri-containerd-<id>.scope, crio-<id>.scope, libpod-<id>.scope,
# a Kubernetes pod<uid> (systemd writes its dashes as underscores) and systemd-nspawn@<name>.service.
_CONTAINER = re.compile(
    r"(?:^|/)(?:(?P<runtime>docker|cri-containerd|crio|libpod)-(?P<id>[0-9a-f]{12,64})\.scope"
    r"|(?P<v1runtime>docker|libpod)/(?P<v1id>[0-9a-f]{64}))(?:/|$)"
)
_POD = re.compile(
    r"pod(?P<uid>[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?(?:/|$)"
)
_K8S_BARE = re.compile(r"(?:^|/)kubepods\b.*/(?P<id>[0-9a-f]{64})(?:/|$)")
_NSPAWN = re.compile(r"(?:^|/)systemd-nspawn@(?P<name>[^/]+)\.service(?:/|$)")
_RUNTIMES = {"docker": "docker", "cri-containerd": "containerd", "crio": "cri-o", "libpod": "podman"}


def container_of(cgroup: str | None) -> str | None:
    """`docker 0123456789ab`, `containerd 0123456789ab (pod <uid>)`, `podman ...`, `nspawn NAME`; None
    for a process in no container."""
    if not cgroup:
        return None
    found = _CONTAINER.search(cgroup)
    runtime: str | None = None
    ident = ""
    if found is not None:
        runtime = _RUNTIMES[found.group("runtime") or found.group("v1runtime")]
        ident = (found.group("id") or found.group("v1id"))[:12]
    elif (bare := _K8S_BARE.search(cgroup)) is not None:
        runtime, ident = "kubernetes", bare.group("id")[:12]  # cgroupfs driver: the runtime is not named
    elif (nspawn := _NSPAWN.search(cgroup)) is not None:
        return f"nspawn {nspawn.group('name')}"
    if runtime is None:
        return None
    pod = _POD.search(cgroup)
    return f"{runtime} {ident}" + (f" (pod {pod.group('uid').replace('_', '-')})" if pod else "")


def unit_cgroups(unit: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """Every cgroup directory of `unit` (one per mounted hierarchy holding it)."""
    found: list[Path] = []
    control = _control_group(unit) if systemd_running() and root == CGROUP_ROOT else None
    for hierarchy in HIERARCHIES:
        base = root / hierarchy if hierarchy else root
        if not (base / "cgroup.procs").exists():
            continue
        if control:
            candidate = base / control.lstrip("/")
            if candidate.is_dir():
                found.append(candidate)
            continue
        found.extend(_search(base, unit))
    return found


def unit_pids(unit: str, root: Path = CGROUP_ROOT) -> list[int]:
    """The processes of `unit` and of every cgroup below it (workers a service spawned are there too)."""
    groups = unit_cgroups(unit, root)
    if not groups:
        where = "systemd knows no running unit" if systemd_running() else f"no cgroup named {unit} under {root}"
        raise UnitNotFound(f"{unit}: {where}", hint="is the unit running on this host? (`--pid PID` names processes)")
    pids: set[int] = set()
    for group in groups:
        for directory, _dirs, files in os.walk(group):
            if "cgroup.procs" not in files:
                continue
            try:
                text = Path(directory, "cgroup.procs").read_text()
            except OSError:
                continue
            pids.update(int(p) for p in text.split() if p.isdigit())
    return sorted(pids)


def _control_group(unit: str) -> str | None:
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return None
    try:
        proc = subprocess.run(
            [systemctl, "show", "--property=ControlGroup", "--value", "--", unit],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = proc.stdout.strip()
    return value or None


def _search(base: Path, unit: str) -> list[Path]:
    """Directories named `unit` below `base`, breadth first, without entering a unit's own subtree."""
    found: list[Path] = []
    level = [base]
    for _ in range(_MAX_DEPTH):
        following: list[Path] = []
        for directory in level:
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if entry.name == unit:
                    found.append(Path(entry.path))
                elif not entry.name.endswith(".service"):
                    following.append(Path(entry.path))
        if found or not following:
            return found
        level = following
    return found
