"""Which running Python processes still run code that changed on disk since they started.

A process is stale when a file it is known to have loaded changed after it started: a file it has
mapped (an extension module, a vendored library, the interpreter) replaced, deleted or changed, or the
entry module its command line names. When only other RECORD-tracked files of an environment it imports
from changed (ctime, which no one can set back), it *may* run changed code: /proc does not tell which
pure-Python modules were imported. A child forked without exec inherits its parent's modules, so it
counts from its parent's start; one that exec'd (told apart by where its libraries are mapped) counts
from its own. Quarantine runs name the revert behind a change, when the file still holds its bytes.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchaudit.procs import cgroup
from patchaudit.procs.entry import loaded_files
from patchaudit.procs.foreign import foreign_root, through
from patchaudit.procs.proc import ProcInfo, ProcState, all_pids, boot_time, read
from patchaudit.procs.pyenv import ProcEnv, locate
from patchaudit.procs.sitefiles import SiteFiles, load_site

# A quarantine run's time is kept to the second: one that may have happened after the start counts.
RUN_SLACK = 1.0
TICK = 1 / os.sysconf("SC_CLK_TCK")


class ProcStatus(enum.StrEnum):
    CURRENT = "current"  # runs what is on disk
    STALE = "stale"  # runs code that changed since it started: restart it
    MAYBE = "may-run-changed-code"  # files it may have imported changed; /proc cannot say whether it did
    UNINSPECTABLE = "uninspectable"  # another user's process: cannot tell
    GONE = "gone"  # exited meanwhile
    NOT_PYTHON = "not-python"  # named with --pid, but no Python interpreter


class ChangeKind(enum.StrEnum):
    CHANGED = "changed"  # its ctime is after the process started
    REVERTED = "reverted"  # ... by a patchaudit revert or restore (run named)
    REPLACED = "replaced"  # mapped, and the path now holds another file
    DELETED = "deleted"  # mapped, and the path no longer exists


@dataclass(frozen=True, kw_only=True, slots=True)
class ChangedFile:
    path: str  # absolute
    site_dir: str | None  # the site-packages it lies in, when it does
    kind: ChangeKind
    when: float | None = None  # ctime (epoch seconds) when known
    distribution: str | None = None
    mapped: bool = False
    run_id: str | None = None
    run_created: str | None = None
    loaded: bool = False  # known to be loaded: mapped, or the entry module its command line names

    @property
    def rel(self) -> str:
        if self.site_dir is None:
            return self.path
        rel = os.path.relpath(self.path, self.site_dir)
        return self.path if rel.startswith("..") else rel

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "site_dir": self.site_dir,
            "kind": self.kind.value,
            "when": self.when,
            "distribution": self.distribution,
            "mapped": self.mapped,
            "run_id": self.run_id,
            "run_created": self.run_created,
            "loaded": self.loaded or self.mapped,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ProcessReport:
    pid: int
    status: ProcStatus
    reason: str | None = None
    ppid: int = 0
    unit: str | None = None
    started: float | None = None
    code_since: float | None = None  # when its code was loaded: its own start, or a forking parent's
    argv: tuple[str, ...] = ()
    env: ProcEnv | None = None
    changed: tuple[ChangedFile, ...] = field(default_factory=tuple)
    container: str | None = None  # "docker 0123456789ab", "containerd <id> (pod <uid>)", "nspawn NAME"

    def to_dict(self) -> dict[str, object]:
        return {
            "pid": self.pid,
            "container": self.container,
            "ppid": self.ppid,
            "status": self.status.value,
            "reason": self.reason,
            "unit": self.unit,
            "started": self.started,
            "code_since": self.code_since,
            "argv": list(self.argv),
            "executable": self.env.executable if self.env else None,
            "prefix": self.env.prefix if self.env else None,
            "site_dirs": list(self.env.site_dirs) if self.env else [],
            "changed": [c.to_dict() for c in self.changed],
        }


class Assessor:
    """Judges processes; environments are read once however many processes share them."""

    def __init__(self, *, quarantine: bool = True) -> None:
        self._sites: dict[str, SiteFiles] = {}
        self._stats: dict[str, os.stat_result | None] = {}  # a library mapped by 500 workers is stat'ed once
        self._procs: dict[int, ProcInfo] = {}
        self._boot = boot_time()
        self._quarantine = quarantine

    def info(self, pid: int) -> ProcInfo:
        got = self._procs.get(pid)
        if got is None:
            got = self._procs[pid] = read(pid, boot=self._boot, python_only=True)
        return got

    def site(self, site_dir: str) -> SiteFiles:
        got = self._sites.get(site_dir)
        if got is None:
            got = self._sites[site_dir] = load_site(site_dir, quarantine=self._quarantine)
        return got

    def assess(self, pid: int, *, named: bool = False) -> ProcessReport | None:
        """One process's verdict; None for a process that is not Python (unless it was named)."""
        proc = self.info(pid)
        if proc.state is ProcState.GONE:
            return ProcessReport(pid=pid, status=ProcStatus.GONE, reason=proc.reason) if named else None
        if not proc.is_python:
            if not named:
                return None
            return ProcessReport(pid=pid, status=ProcStatus.NOT_PYTHON, reason=f"runs {proc.exe or proc.comm}")
        unit = cgroup.unit_of(proc.cgroup)
        container = cgroup.container_of(proc.cgroup)
        base = {"pid": pid, "ppid": proc.ppid, "started": proc.started, "argv": proc.argv, "container": container}
        if proc.state is ProcState.DENIED:
            return ProcessReport(status=ProcStatus.UNINSPECTABLE, reason=proc.reason, **base)  # type: ignore[arg-type]
        since = self._code_since(proc)
        door = foreign_root(pid)
        if door is not None:  # a container's process: its paths mean files below its own root
            proc = through(proc, door)
        env = locate(proc)
        changed = self._changed(proc, env, since)
        if any(c.mapped or c.loaded for c in changed):
            status = ProcStatus.STALE
        else:
            status = ProcStatus.MAYBE if changed else ProcStatus.CURRENT
        return ProcessReport(status=status, unit=unit, code_since=since, env=env, changed=changed, **base)  # type: ignore[arg-type]

    def _stat(self, path: str) -> os.stat_result | None:
        if path not in self._stats:
            try:
                self._stats[path] = os.stat(path)
            except OSError:
                self._stats[path] = None
        return self._stats[path]

    def _code_since(self, proc: ProcInfo) -> float:
        """A child forked without exec runs the modules its parent had loaded: count from the parent."""
        since = proc.started
        seen = {proc.pid}
        current = proc
        while current.ppid > 1 and current.ppid not in seen:
            parent = self.info(current.ppid)
            seen.add(parent.pid)
            if parent.state is not ProcState.OK or parent.exe != current.exe or not _forked(parent, current):
                break
            since = min(since, parent.started)
            current = parent
        return since

    def _changed(self, proc: ProcInfo, env: ProcEnv, since: float) -> tuple[ChangedFile, ...]:
        # The start time is truncated to a clock tick: the process began within the tick after it, and
        # an interpreter imports nothing from site-packages that early, so count from the tick's end.
        since_ns = int((since + TICK) * 1e9)
        found: dict[str, ChangedFile] = {}
        entry: set[str] | None = None
        for site_dir in env.site_dirs:
            files = self.site(site_dir)
            for path, ctime_ns, dist in files.changed_after(since_ns):
                if entry is None:  # read the command line only for a process something changed under
                    entry = loaded_files(proc.argv, proc.cwd(), env.site_dirs)
                run = files.run_for(path, since - RUN_SLACK)
                found[path] = ChangedFile(
                    path=path,
                    site_dir=site_dir,
                    kind=ChangeKind.REVERTED if run else ChangeKind.CHANGED,
                    when=ctime_ns / 1e9,
                    distribution=dist,
                    run_id=run.run_id if run else None,
                    run_created=run.created if run else None,
                    loaded=path in entry,
                )
        # Site directories only: a system interpreter's prefix (/usr) holds libc, which is needrestart's job.
        # Both spellings of each: the kernel names mapped files by their real path.
        roots = tuple(dict.fromkeys([*env.site_dirs, *(os.path.realpath(s) for s in env.site_dirs)]))
        for mapped in proc.maps:
            if not (mapped.path == proc.exe or _below(mapped.path, roots)):
                continue
            if mapped.deleted:
                mapped = _with(mapped, path=_before_pip_moved_it(mapped.path))
            mapped = _with(mapped, path=_as_listed(mapped.path, env.site_dirs))
            kind, when = _mapped_state(self._stat(mapped.path), mapped.dev, mapped.inode, mapped.deleted, since_ns)
            previous = found.get(mapped.path)
            if kind is None and previous is None:
                continue
            within = next((s for s in roots if _below(mapped.path, (s,))), None)
            if previous is not None:
                found[mapped.path] = _with(previous, mapped=True, kind=kind or previous.kind)
            else:
                found[mapped.path] = ChangedFile(
                    path=mapped.path, site_dir=within, kind=kind or ChangeKind.CHANGED, when=when, mapped=True
                )
        if proc.exe_deleted and proc.exe and proc.exe not in found:
            kind = ChangeKind.REPLACED if os.path.exists(proc.exe) else ChangeKind.DELETED
            found[proc.exe] = ChangedFile(path=proc.exe, site_dir=None, kind=kind, mapped=True)
        return tuple(sorted(found.values(), key=lambda c: (not c.mapped, c.path)))


def _forked(parent: ProcInfo, child: ProcInfo) -> bool:
    """The child is a fork of the parent that did not exec: with address-space randomisation, an exec'd
    process maps its libraries at new addresses, while a fork keeps the parent's. Files mapped by both
    (same device and inode) decide; with none in common, an identical command line does."""
    theirs = {(m.dev, m.inode): m.start for m in parent.maps if m.path != parent.exe}
    common = [(m.start, theirs[(m.dev, m.inode)]) for m in child.maps if (m.dev, m.inode) in theirs]
    if not common:
        return parent.argv == child.argv
    return any(mine == at_parent for mine, at_parent in common)


def _with(change: Any, **values: object) -> Any:
    import dataclasses

    return dataclasses.replace(change, **values)


def _before_pip_moved_it(path: str) -> str:
    """pip uninstalls by renaming a directory to `~<name minus its first letters>` before deleting it, so
    a mapping of a file pip replaced names that directory: give back the path the file was loaded from."""
    parts = path.split("/")
    for n, part in enumerate(parts):
        if not part.startswith("~"):
            continue
        tail = part.lstrip("~")
        parent = "/".join(parts[:n]) or "/"
        try:
            names = [e for e in os.listdir(parent) if len(e) == len(part) and e.endswith(tail) and e[0] != "~"]
        except OSError:
            return path
        if len(names) == 1:
            return "/".join([*parts[:n], names[0], *parts[n + 1 :]])
    return path


def _as_listed(path: str, site_dirs: Sequence[str]) -> str:
    """A mapped file's path (the kernel's, through no symlink) spelled below the site directory as listed."""
    for site in site_dirs:
        real = os.path.realpath(site)
        if real != site and _below(path, (real,)):
            return site.rstrip("/") + path[len(real.rstrip("/")) :]
    return path


def _below(path: str, roots: Iterable[str]) -> bool:
    return any(path.startswith(r.rstrip("/") + "/") for r in roots)


def _mapped_state(
    st: os.stat_result | None, dev: int, inode: int, deleted: bool, since_ns: int
) -> tuple[ChangeKind | None, float | None]:
    if st is None:
        return ChangeKind.DELETED, None
    if deleted or st.st_ino != inode or st.st_dev != dev:
        return ChangeKind.REPLACED, st.st_ctime_ns / 1e9
    if st.st_ctime_ns > since_ns:
        return ChangeKind.CHANGED, st.st_ctime_ns / 1e9
    return None, None


def select_pids(*, unit: str | None = None, pids: Sequence[int] = ()) -> tuple[list[int], bool]:
    """(pids to look at, whether they were named): a unit's, the given ones, or every process."""
    if unit is not None:
        return cgroup.unit_pids(unit), True
    if pids:
        return sorted(set(pids)), True
    return all_pids(), False


def assess(
    *, unit: str | None = None, pids: Sequence[int] = (), assessor: Assessor | None = None
) -> list[ProcessReport]:
    chosen, named = select_pids(unit=unit, pids=pids)
    judge = assessor or Assessor()
    reports = [judge.assess(pid, named=named) for pid in chosen if pid != os.getpid()]
    return [r for r in reports if r is not None]


def running_from(site_dirs: Sequence[Path | str]) -> list[ProcessReport]:
    """Stale processes that import from any of these site directories (after a revert or a restore)."""
    wanted = {os.path.realpath(s) for s in site_dirs}
    judge = Assessor()
    out = []
    for pid in all_pids():
        if pid == os.getpid():
            continue
        proc = judge.info(pid)
        if proc.state is not ProcState.OK or not proc.is_python:
            continue
        env = locate(proc)
        if not wanted.intersection(os.path.realpath(s) for s in env.site_dirs):
            continue
        report = judge.assess(pid)
        if report is not None and report.status in (ProcStatus.STALE, ProcStatus.MAYBE):
            out.append(report)
    return out


def counts(reports: Iterable[ProcessReport]) -> Mapping[str, int]:
    tally = {s.value: 0 for s in ProcStatus}
    for r in reports:
        tally[r.status.value] += 1
    return tally
