"""The gate's verdict cache: a fingerprint of every file the audit read, by stat, and the verdict it gave.

A warm gate does not re-verify: it keeps the last verdict together with a fingerprint of every
file the audit looked at (path, mode, size, mtime_ns, ctime_ns, inode, device) and reuses the
verdict only while that fingerprint is unchanged. ctime cannot be set from user space, so an
edit hidden with `touch -r` still changes the fingerprint and the audit runs again.
"""

from __future__ import annotations

import json
import os
import posixpath
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from patchaudit.atomic import atomic_write
from patchaudit.gate.verdict import Verdict, from_dict, to_dict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from patchaudit.environment import Environment

CACHE_NAME = "gate-v1.json"
CACHE_VERSION = 1
CACHE_KEEP = 8


# --- the fingerprint: everything the audit reads, by stat ---


@dataclass(frozen=True, kw_only=True, slots=True)
class FilePlan:
    """Which paths the audit reads: site dirs (top level), walked trees, and single files."""

    site_dirs: tuple[str, ...]
    roots: tuple[str, ...]
    files: tuple[str, ...]

    @classmethod
    def build(
        cls, env: Environment, names: Sequence[str], *, extra_files: Sequence[Path], extra_roots: Sequence[Path]
    ) -> tuple[FilePlan, int, int]:
        """The plan for these distributions, with its fingerprint and newest timestamp, in one walk."""
        from patchaudit import environment
        from patchaudit.record import parse_record
        from patchaudit.report import Source

        chosen = environment.select(environment.distributions(env), names)
        roots: set[str] = set()
        record_paths: set[str] = set()
        os_db = None
        for dist in chosen:
            location = str(dist.location)
            roots.add(str(dist.meta_dir))
            if dist.source in (Source.EDITABLE, Source.VCS):
                # verify reads the git checkout such an install runs from (working tree and .git).
                from patchaudit import vcs

                co = vcs.checkout(dist)
                if co is not None:
                    roots.add(str(co.root))
            try:
                if dist.record_path is None:
                    raise FileNotFoundError
                record = parse_record(dist.record_path.read_bytes())
            except OSError:
                # verify checks a distribution without RECORD against its OS package's files.
                from patchaudit import dpkg

                if not dpkg.may_own(dist.location):
                    continue
                os_db = os_db or dpkg.Dpkg()
                owner = os_db.owner(dist.meta_dir, dist.location, dpkg.top_level(dist.meta_dir))
                record_paths.update(owner.files if owner is not None else ())
                continue
            for entry in record.entries:
                record_paths.add(os.path.normpath(os.path.join(location, entry.path)))
                first, sep, _ = posixpath.normpath(entry.path.replace("\\", "/")).partition("/")
                if sep and first not in ("", "..", "__pycache__") and not os.path.isabs(entry.path):
                    roots.add(os.path.join(location, first))
        package = Path(__file__).resolve().parent.parent
        # patchaudit's own code and built-in rules (`_rules` in a wheel, `<checkout>/rules` otherwise).
        tools = [str(package)]
        if not (package / "_rules").is_dir() and (package.parent / "rules").is_dir():
            tools.append(str(package.parent / "rules"))
        tools += [str(p.absolute()) for p in extra_roots]
        plan = cls(site_dirs=tuple(str(s) for s in env.site_dirs), roots=tuple(sorted(roots)) + tuple(tools), files=())
        # RECORD entries that the walk does not reach (scripts in bin/, files below a symlinked
        # directory) are stat'ed one by one.
        seen: set[str] = set()
        rows = plan._tree_rows(seen)
        files = tuple(sorted(record_paths - seen)) + tuple(str(p.absolute()) for p in extra_files)
        rows.extend(_row(p) for p in files)
        fingerprint, newest = _digest(rows)
        return cls(site_dirs=plan.site_dirs, roots=plan.roots, files=files), fingerprint, newest

    def to_dict(self) -> dict[str, Any]:
        return {"site_dirs": list(self.site_dirs), "roots": list(self.roots), "files": list(self.files)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FilePlan:
        return cls(site_dirs=tuple(data["site_dirs"]), roots=tuple(data["roots"]), files=tuple(data["files"]))

    def fingerprint(self) -> tuple[int, int]:
        """(fingerprint of every stat the audit depends on, newest mtime/ctime seen in ns)."""
        rows = self._tree_rows(None)
        rows.extend(_row(p) for p in self.files)
        return _digest(rows)

    def _tree_rows(self, seen: set[str] | None) -> list[tuple[int, ...]]:
        rows: list[tuple[int, ...]] = []
        for site in self.site_dirs:
            rows.append(_row(site))
            try:
                with os.scandir(site) as it:
                    entries = list(it)
            except OSError:
                continue
            for entry in entries:
                rows.append(_entry_row(entry))
                if entry.name.endswith((".dist-info", ".egg-info")):
                    for member in ("RECORD", "METADATA", "PKG-INFO", "direct_url.json"):
                        rows.append(_row(os.path.join(entry.path, member)))
        _walk_rows(self.roots, rows, seen)
        return rows


def _digest(rows: list[tuple[int, ...]]) -> tuple[int, int]:
    """Rows hold only integers, whose hash() is the same in every process (no hash seed), so the
    fingerprint needs neither hashlib nor names: a directory's own mtime/ctime row changes whenever
    an entry in it is added, removed or renamed. Rows follow directory order, which is stable while
    a directory is unchanged; a new order costs one audit, never a stale verdict."""
    return hash(tuple(rows)), max((max(r[2], r[3]) for r in rows if len(r) > 3), default=0)


def _row(path: str) -> tuple[int, ...]:
    try:
        st = os.lstat(path)
    except OSError as exc:
        return (exc.errno or 0,)
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _entry_row(entry: os.DirEntry[str]) -> tuple[int, ...]:
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError as exc:
        return (exc.errno or 0,)
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _walk_rows(roots: Sequence[str], rows: list[tuple[int, ...]], seen: set[str] | None) -> None:
    """Append a row for every entry below each root; symlinked directories are not entered."""
    for root in roots:
        rows.append(_row(root))
        stack = [root]
        while stack:
            current = stack.pop()
            try:
                with os.scandir(current) as it:
                    entries = list(it)
            except OSError as exc:
                rows.append((exc.errno or 0,))
                continue
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    rows.append((exc.errno or 0,))
                    continue
                rows.append((st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                if seen is not None:
                    seen.add(entry.path)


# --- the verdict cache, beside the environment's stat cache (where: patchaudit.cachedir) ---


def predicted_prefix(python: Path | None, site_path: Path | None) -> Path:
    """Where the environment's prefix most likely is, without running its interpreter."""
    if site_path is not None:
        site = site_path.absolute()
        parts = site.parts
        if len(parts) >= 3 and parts[-2].startswith("python") and parts[-3] in ("lib", "lib64"):
            return site.parents[2]
        return site.parent if parts[-1] in ("site-packages", "dist-packages") else site
    exe = (python if python is not None else Path(sys.executable)).absolute()
    if exe.is_dir():
        exe = exe / "bin" / "python"
    for d in (exe.parent, exe.parent.parent):
        if (d / "pyvenv.cfg").is_file():
            return d
    return exe.parent.parent


def _resolution_stat(python: Path | None, site_path: Path | None) -> list[Any]:
    """What the resolved environment depends on: the interpreter (and its pyvenv.cfg) or the site dir."""
    paths = [str(site_path.absolute())] if site_path is not None else []
    if site_path is None:
        exe = (python if python is not None else Path(sys.executable)).absolute()
        paths = [str(exe), str(exe.parent / "pyvenv.cfg"), str(exe.parent.parent / "pyvenv.cfg")]
    rows: list[Any] = [list(_row(p)) for p in paths]
    if site_path is None:
        rows.append(list(_row(os.path.realpath(paths[0]))))
    return rows


class VerdictCache:
    def __init__(self, path: Path, data: dict[str, Any], python: Path | None, site_path: Path | None) -> None:
        self.path = path
        self.data = data
        self.python = python
        self.site_path = site_path

    @classmethod
    def open(cls, directory: Path, python: Path | None, site_path: Path | None) -> VerdictCache | None:
        path = directory / CACHE_NAME
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
            return None
        return cls(path, data, python, site_path)

    def lookup(self, key: str) -> Verdict | None:
        entry = self.data.get("entries", {}).get(key)
        if not isinstance(entry, dict):
            return None
        try:
            if entry["resolved"] != _resolution_stat(self.python, self.site_path):
                return None
            plan = FilePlan.from_dict(entry["plan"])
            fingerprint, _ = plan.fingerprint()
            if fingerprint != entry["fingerprint"]:
                return None
            return from_dict(entry["verdict"])
        except (KeyError, TypeError, ValueError):
            return None

    @staticmethod
    def store(
        directory: Path,
        python: Path | None,
        site_path: Path | None,
        key: str,
        plan: FilePlan,
        fingerprint: int,
        verdict: Verdict,
    ) -> None:
        """Keep the verdict; a cache that cannot be written is simply not kept."""
        path = directory / CACHE_NAME
        try:
            data = json.loads(path.read_bytes())
            entries = data["entries"] if data.get("version") == CACHE_VERSION else {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            entries = {}
        entries.pop(key, None)
        while len(entries) >= CACHE_KEEP:
            entries.pop(next(iter(entries)))
        entries[key] = {
            "resolved": _resolution_stat(python, site_path),
            "plan": plan.to_dict(),
            "fingerprint": fingerprint,
            "verdict": to_dict(verdict),
        }
        try:
            text = json.dumps({"version": CACHE_VERSION, "entries": entries}, separators=(",", ":"))
            atomic_write(path, text, durable=False)
        except OSError:
            pass
