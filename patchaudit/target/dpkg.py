"""Distributions that Debian's package manager installed: their owner package and its md5sums."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped, read_capped_text
from patchaudit.parallel.hashing import hash_many
from patchaudit.parallel.statcache import StatCache
from patchaudit.report import Drift, DriftState, Unverified
from patchaudit.target.record import encode_digest

INFO_DIR = Path("/var/lib/dpkg/info")


def may_own(location: Path) -> bool:
    """Whether dpkg may have installed distributions in this site directory (below /usr, never /usr/local)."""
    where = str(location)
    return where.startswith("/usr/") and not where.startswith("/usr/local/") and INFO_DIR.is_dir()


@dataclass(frozen=True, kw_only=True, slots=True)
class OsPackage:
    """The dpkg package that installed one distribution, and what it says about that distribution's files."""

    name: str
    files: tuple[str, ...]  # absolute paths of regular files below the distribution's site directory
    md5: dict[str, str]  # absolute path -> hex md5 from the package's md5sums


class Dpkg:
    """dpkg's database, read on first question; one per scan."""

    def __init__(self, info_dir: Path = INFO_DIR) -> None:
        self.info_dir = info_dir
        self._lists: dict[str, bytes] | None = None

    def _read_lists(self, names: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for name in names:
            try:  # an image's dpkg database is the image's to write: read like any file of the target
                out[name[: -len(".list")]] = read_capped(self.info_dir / name, Cap.RECORD)
            except UnreadableFile:
                continue
        return out

    def _owner_of(self, path: str) -> tuple[str, bytes] | None:
        needle = b"\n" + os.fsencode(path) + b"\n"
        if self._lists is None:
            try:
                names = sorted(n for n in os.listdir(self.info_dir) if n.endswith(".list"))
            except OSError:
                self._lists = {}
                return None
            # Python files nearly always come in python3-* packages: read those first, the rest if needed.
            first = [n for n in names if n.startswith("python")]
            self._lists = self._read_lists(first)
            found = self._search(needle)
            self._lists.update(self._read_lists([n for n in names if not n.startswith("python")]))
            if found is not None:
                return found
        return self._search(needle)

    def _search(self, needle: bytes) -> tuple[str, bytes] | None:
        assert self._lists is not None
        for package, data in self._lists.items():
            if needle in b"\n" + data:
                return package, data
        return None

    def owner(self, meta_dir: Path, location: Path, top_level: set[str]) -> OsPackage | None:
        """The package that lists `meta_dir`, with its files below `location` that belong to it.

        A package may ship several distributions: then only files under the distribution's top-level
        names (top_level.txt) and its own metadata directory are its.
        """
        found = self._owner_of(str(meta_dir))
        if found is None:
            return None
        package, data = found
        prefix = str(location) + "/"
        below = [line for line in os.fsdecode(data).splitlines() if line.startswith(prefix)]
        metas = [p for p in below if "/" not in p[len(prefix) :] and p.endswith((".dist-info", ".egg-info"))]
        if len(metas) > 1 and top_level:
            keep = {meta_dir.name, *top_level}
            below = [p for p in below if _top(p[len(prefix) :]) in keep]
        files = tuple(p for p in below if _is_file(p))
        return OsPackage(name=package, files=files, md5=self._md5sums(package))

    def _md5sums(self, package: str) -> dict[str, str]:
        out: dict[str, str] = {}
        try:
            data = read_capped(self.info_dir / f"{package}.md5sums", Cap.RECORD)
        except UnreadableFile:
            return out
        for line in os.fsdecode(data).splitlines():
            digest, sep, rel = line.partition("  ")
            if sep and len(digest) == 32:
                out["/" + rel] = digest.lower()
        return out


def _top(rel: str) -> str:
    first = rel.partition("/")[0]
    return first[:-3] if first.endswith(".py") else first.partition(".")[0] if first.endswith(".so") else first


def _is_file(path: str) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return True  # listed but gone: the caller reports it missing
    return not stat.S_ISDIR(st.st_mode)


def verify(
    db: Dpkg, meta_dir: Path, location: Path, *, cache: StatCache | None = None, workers: int | None = None
) -> tuple[str, list[Drift], Unverified, int] | None:
    """A distribution without RECORD checked against dpkg's md5sums: (package, drift, note, files checked).

    md5 is weak: files that agree are not trusted, so the distribution stays unverifiable; a file that
    disagrees (or is gone) is drift all the same.
    """
    package = db.owner(meta_dir, location, top_level(meta_dir))
    if package is None:
        return None
    listed = [p for p in package.files if p in package.md5]
    states = hash_many([(p, "md5") for p in listed], cache=cache, workers=workers)
    drift: list[Drift] = []
    prefix = str(location) + "/"
    for path in listed:
        rel = path[len(prefix) :]
        expected = "md5=" + encode_digest(bytes.fromhex(package.md5[path]))
        state = states[path, "md5"]
        if state.missing:
            drift.append(Drift(path=rel, state=DriftState.MISSING, expected=expected, note=_note(package.name)))
        elif state.digest != expected:
            note = _note(package.name) if state.symlink is None else f"replaced by a symlink to {state.symlink}"
            drift.append(Drift(path=rel, state=DriftState.MODIFIED, expected=expected, actual=state.digest, note=note))
    agree = len(listed) - len(drift)
    reason = (
        f"installed by OS package {package.name} (dpkg): {agree} of {len(listed)} files agree with its md5sums;"
        " md5 is weak, not trusted"
    )
    return package.name, drift, Unverified(path=meta_dir.name, reason=reason), len(listed)


def _note(package: str) -> str:
    return f"differs from the md5sums of OS package {package}"


def top_level(meta_dir: Path) -> set[str]:
    try:
        text = read_capped_text(meta_dir / "top_level.txt", Cap.SMALL)
    except UnreadableFile:
        return set()
    return {line.strip() for line in text.splitlines() if line.strip()}
