"""One site-packages directory as `ps` needs it: every RECORD-tracked file's change time, and the
quarantine runs that replaced files there (read through the quarantine code's public functions and
the manifest reader: which files a run wrote, and the digest of what it wrote)."""

from __future__ import annotations

import bisect
import datetime as _dt
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from patchaudit.errors import PatchAuditError
from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped


@dataclass(frozen=True, kw_only=True, slots=True)
class RunFiles:
    """One quarantine run: when it was made and the absolute paths it wrote."""

    run_id: str
    created: str
    created_at: float
    dests: frozenset[str]
    written: Mapping[str, str | None] = field(default_factory=dict)  # dest -> digest of what the run wrote


@dataclass(frozen=True, kw_only=True, slots=True)
class SiteFiles:
    site_dir: str
    ctimes: tuple[int, ...] = ()  # ascending, parallel to `entries`
    entries: tuple[tuple[str, str], ...] = ()  # (absolute path, distribution)
    runs: tuple[RunFiles, ...] = field(default_factory=tuple)

    def changed_after(self, since_ns: int) -> Iterator[tuple[str, int, str]]:
        """(path, ctime_ns, distribution) of each tracked file whose ctime is after `since_ns`."""
        start = bisect.bisect_right(self.ctimes, since_ns)
        for n in range(start, len(self.ctimes)):
            path, dist = self.entries[n]
            yield path, self.ctimes[n], dist

    def run_for(self, path: str, not_before: float) -> RunFiles | None:
        """The latest run at or after `not_before` that wrote `path`, when `path` still holds what that run
        wrote (bytes compared): a file edited by hand after a revert is changed, not reverted."""
        for run in reversed(self.runs):
            if run.created_at >= not_before and path in run.dests:
                return run if _holds(path, run.written.get(path)) else None
        return None


def _holds(path: str, digest: str | None) -> bool:
    """`path` is what a run left there: the bytes it wrote, or (digest None) nothing at all."""
    from patchaudit.parallel.hashing import hash_file

    state = hash_file(path, "sha256")
    return state.missing if digest is None else state.digest == digest


def load_site(site_dir: str, *, quarantine: bool = True) -> SiteFiles:
    """stat every file the RECORDs in `site_dir` list (one pass); a directory that is gone is empty."""
    from patchaudit.target import environment
    from patchaudit.target.record import record_paths

    try:
        env = environment.from_path(Path(site_dir))
        dists = environment.distributions(env)
    except PatchAuditError:
        return SiteFiles(site_dir=site_dir)
    rows: list[tuple[int, str, str]] = []
    seen: set[str] = set()
    lstat, prefix = os.lstat, site_dir.rstrip("/") + "/"
    for dist in dists:
        if dist.record_path is None:
            continue
        try:
            paths = record_paths(read_capped(dist.record_path, Cap.RECORD))
        except UnreadableFile:
            continue
        listed = set(paths)
        for rel in paths:
            if _derived_bytecode(rel, listed):
                continue
            plain = not rel.startswith("/") and "/." not in rel and not rel.startswith(".")
            path = prefix + rel if plain else os.path.normpath(os.path.join(site_dir, rel))
            if path in seen:
                continue
            seen.add(path)
            try:
                st = lstat(path)
            except OSError:
                continue
            rows.append((st.st_ctime_ns, path, dist.name))
    rows.sort()
    return SiteFiles(
        site_dir=site_dir,
        ctimes=tuple(r[0] for r in rows),
        entries=tuple((r[1], r[2]) for r in rows),
        # The quarantine code is imported only for an environment that has runs.
        runs=tuple(quarantine_runs(env)) if quarantine and (env.state_dir / "quarantine").is_dir() else (),
    )


def _derived_bytecode(rel: str, listed: set[str]) -> bool:
    """`pkg/__pycache__/mod.cpython-311.pyc` when `pkg/mod.py` is listed too: bytecode is rewritten from its
    source, so a change that matters shows on the source (an unchecked-hash .pyc that disagrees with its
    source is `scan`'s drift). Skipping them halves the stat calls on a large stack."""
    if not rel.endswith(".pyc"):
        return False
    head, _, name = rel.rpartition("/__pycache__/")
    if not head and not rel.startswith("__pycache__/"):
        return False
    source = name.split(".", 1)[0] + ".py"
    return (f"{head}/{source}" if head else source) in listed


def quarantine_runs(env: object) -> list[RunFiles]:
    """Every run that changed files, oldest first. The only place `ps` reads quarantine manifests:
    through `list_runs` (ids, times, status) and `plan_undo` (the files a run wrote)."""
    from patchaudit.revert import list_runs, plan_undo
    from patchaudit.revert.state import read_manifest

    runs = []
    for info in list_runs(env):  # type: ignore[arg-type]
        if info.status.startswith("unreadable") or info.status == "rolled-back":
            continue
        try:
            plan = plan_undo(env, info.run_id)  # type: ignore[arg-type]
            created_at = _dt.datetime.fromisoformat(info.created).timestamp()
        except (PatchAuditError, ValueError):
            continue
        dests = frozenset(os.path.normpath(str(a.dest)) for a in plan.actions)
        manifest, _problem = read_manifest(info.path)
        written = {
            os.path.normpath(item["dest"]): item.get("new_digest")
            for item in (manifest or {"files": []})["files"]
            if os.path.normpath(item["dest"]) in dests
        }
        runs.append(
            RunFiles(run_id=info.run_id, created=info.created, created_at=created_at, dests=dests, written=written)
        )
    return runs
