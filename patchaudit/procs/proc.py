"""Reading /proc: one process's executable, command line, environment, start time, cgroup and mapped files.

Nothing here judges a process; a process that cannot be read (another user's, or one that exited
meanwhile) comes back with `state` saying so, never as an exception.
"""

from __future__ import annotations

import enum
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from patchaudit.fs.safefs import Cap

PROC = "/proc"
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PYTHON_NAME = re.compile(r"^(python|pypy)[0-9.]*[dmt]?$")
DELETED = " (deleted)"


class ProcState(enum.StrEnum):
    OK = "ok"
    DENIED = "denied"  # another user's process, or a kernel that hides it
    GONE = "gone"  # exited between listing and reading


@dataclass(frozen=True, kw_only=True, slots=True)
class MappedFile:
    """One file mapped into a process, as /proc/PID/maps names it (device, inode, path)."""

    path: str
    dev: int
    inode: int
    deleted: bool = False
    start: int = 0  # the address of its first mapping: a forked child shares it, an exec'd one does not


@dataclass(frozen=True, kw_only=True, slots=True)
class ProcInfo:
    pid: int
    state: ProcState
    reason: str | None = None
    ppid: int = 0
    comm: str = ""
    started: float = 0.0  # seconds since the epoch, to the clock tick
    exe: str | None = None
    exe_deleted: bool = False
    argv: tuple[str, ...] = ()
    cgroup: str | None = None
    maps: tuple[MappedFile, ...] = field(default_factory=tuple)

    # The working directory and the environment are read only when asked for: most interpreters are
    # started by absolute path from a venv, and need neither to be placed.
    def cwd(self) -> str | None:
        try:
            return os.readlink(f"{PROC}/{self.pid}/cwd")
        except OSError:
            return None

    def environ(self) -> Mapping[str, str] | None:
        raw = self._environ_raw()
        return parse_environ(raw) if raw is not None else None

    def _environ_raw(self) -> bytes | None:
        try:
            return _read(f"{PROC}/{self.pid}/environ")
        except OSError:
            return None

    def getenv(self, name: str) -> str | None:
        """One variable, without parsing the whole environment."""
        raw = self._environ_raw()
        if raw is None:
            return None
        key = os.fsencode(name) + b"="
        start = 0 if raw.startswith(key) else raw.find(b"\0" + key) + 1
        if start == 0 and not raw.startswith(key):
            return None
        end = raw.find(b"\0", start)
        return os.fsdecode(raw[start + len(key) : end if end >= 0 else len(raw)])

    @property
    def is_python(self) -> bool:
        """An interpreter process: by its executable's name, else (unreadable exe) by argv[0] or comm."""
        for name in (self.exe, self.argv[0] if self.argv else None, self.comm):
            if name and _PYTHON_NAME.match(os.path.basename(name)):
                return True
        return False


def boot_time() -> float:
    """The epoch second the system booted, precise to the microsecond (/proc/stat's btime is whole seconds)."""
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


def all_pids() -> list[int]:
    return sorted(int(n) for n in os.listdir(PROC) if n.isdigit())


def _read(path: str) -> bytes:
    """The whole file, up to Cap.PROC: /proc's seq files hand out one page per read."""
    chunks: list[bytes] = []
    left = int(Cap.PROC)
    with open(path, "rb", buffering=0) as fh:
        while left > 0:
            chunk = fh.read(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    return b"".join(chunks)


def _failure(pid: int, exc: OSError) -> ProcInfo:
    if isinstance(exc, FileNotFoundError | ProcessLookupError):
        return ProcInfo(pid=pid, state=ProcState.GONE, reason="exited")
    return ProcInfo(pid=pid, state=ProcState.DENIED, reason=exc.strerror or str(exc))


def stat_line(pid: int) -> tuple[str, int, int] | None:
    """(comm, ppid, start time in clock ticks after boot), or None when the process is gone."""
    got = _stat_fields(pid)
    return None if got is None else got[:3]


def _stat_fields(pid: int) -> tuple[str, int, int, str] | None:
    """stat_line's fields and the state letter (`Z`: a zombie)."""
    try:
        raw = _read(f"{PROC}/{pid}/stat")
    except OSError:
        return None
    # comm may hold spaces and parentheses: the fields resume after the last ')'.
    head, _, rest = raw.rpartition(b")")
    fields = rest.split()
    comm = head.partition(b"(")[2].decode("utf-8", "replace")
    return comm, int(fields[1]), int(fields[19]), fields[0].decode("ascii", "replace")


def read(pid: int, *, boot: float | None = None, python_only: bool = False) -> ProcInfo:
    """Everything patchaudit needs of one process; `python_only` stops early for other programs."""
    base = f"{PROC}/{pid}"
    stat = _stat_fields(pid)
    if stat is None:
        return ProcInfo(pid=pid, state=ProcState.GONE, reason="exited")
    comm, ppid, ticks, letter = stat
    if letter == "Z":  # it runs no code any more; only its exit status waits for its parent
        return ProcInfo(pid=pid, state=ProcState.GONE, ppid=ppid, comm=comm, reason="exited (a zombie not yet reaped)")
    started = (boot if boot is not None else boot_time()) + ticks / _CLK_TCK
    try:
        argv = tuple(os.fsdecode(a) for a in _read(f"{base}/cmdline").split(b"\0")[:-1])
    except OSError as exc:
        return _failure(pid, exc)
    info = ProcInfo(pid=pid, state=ProcState.OK, ppid=ppid, comm=comm, started=started, argv=argv)
    try:
        exe = os.readlink(f"{base}/exe")
    except FileNotFoundError:
        # A kernel thread or a zombie has no executable; a process that exited has no stat either.
        if stat_line(pid) is None:
            return _failure(pid, ProcessLookupError())
        return replace(info, state=ProcState.DENIED, reason="no executable (kernel thread or zombie)")
    except OSError as exc:
        failed = _failure(pid, exc)
        return replace(info, state=failed.state, reason=failed.reason)
    info = replace(info, exe=exe.removesuffix(DELETED), exe_deleted=exe.endswith(DELETED))
    if python_only and not info.is_python:
        return info
    try:
        return replace(
            info,
            cgroup=parse_cgroup(_read(f"{base}/cgroup")),
            maps=tuple(parse_maps(_read(f"{base}/maps"))),
        )
    except OSError as exc:
        failed = _failure(pid, exc)
        return replace(info, state=failed.state, reason=failed.reason)


def parse_environ(raw: bytes) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env


def parse_cgroup(raw: bytes) -> str | None:
    """The process's cgroup path: the unified (v2) one, else systemd's named v1 hierarchy."""
    found: dict[str, str] = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        hier, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hier == "0" and controllers == "":
            found["unified"] = path
        elif controllers == "name=systemd":
            found["systemd"] = path
    # On a hybrid host without systemd the unified path is "/" while the named hierarchy may say more.
    for key in ("unified", "systemd"):
        if found.get(key) not in (None, "/"):
            return found[key]
    return found.get("unified") or found.get("systemd")


# `start-end perms offset major:minor inode   path`, file-backed lines only (inode > 0, absolute path).
_MAPS_LINE = re.compile(
    rb"^([0-9a-f]+)-[0-9a-f]+ \S+ \S+ ([0-9a-f]+):([0-9a-f]+) ([1-9][0-9]*) +(/[^\n]*)$", re.MULTILINE
)


def parse_maps(raw: bytes) -> Iterable[MappedFile]:
    """Each file-backed mapping once (a library is mapped four or five times), in address order."""
    first: dict[tuple[bytes, bytes, bytes, bytes], bytes] = {}
    for start, major, minor, inode, raw_path in _MAPS_LINE.findall(raw):
        first.setdefault((major, minor, inode, raw_path), start)
    for (major, minor, inode, raw_path), start in first.items():
        path = os.fsdecode(raw_path)
        deleted = path.endswith(DELETED)
        yield MappedFile(
            path=path.removesuffix(DELETED),
            dev=os.makedev(int(major, 16), int(minor, 16)),
            inode=int(inode),
            deleted=deleted,
            start=int(start, 16),
        )
