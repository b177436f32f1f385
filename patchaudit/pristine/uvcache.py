"""Pristine source: uv's cache of unpacked wheels (`archive-v0/<id>/`, what uv hardlinks installs from).

uv unpacks each wheel once into `<cache>/archive-v0/<id>/` (members at their wheel paths, the wheel's own
RECORD in its dist-info) and links or copies from there. The cache is `UV_CACHE_DIR`, else
`$XDG_CACHE_HOME/uv`, else `~/.cache/uv`. A member that is the very inode of the installed file (uv's
default hard link) is the installed file, not evidence about it: it is never read as pristine bytes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

from packaging.tags import Tag, parse_tag
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from patchaudit.errors import PristineNotFound, UnsafePath
from patchaudit.parallel.hashing import read_regular
from patchaudit.pristine.zipwheel import MEMBER_CAP, installed_tags, member_for, unsafe_member
from patchaudit.target.environment import InstalledDist
from patchaudit.target.record import Record, parse_record

ARCHIVE = "archive-v0"


def uv_cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    if environ.get("UV_CACHE_DIR"):
        return Path(environ["UV_CACHE_DIR"]).expanduser()
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "uv"


def _wheel_tags(dist_info: Path) -> frozenset[Tag]:
    text = (read_regular(dist_info / "WHEEL", 1 << 16) or b"").decode("utf-8", "replace")
    tags: set[Tag] = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "tag":
            tags.update(parse_tag(value.strip()))
    return frozenset(tags)


class UvWheel:
    """PristineWheel over one unpacked wheel in uv's cache."""

    def __init__(self, root: Path, dist_info: str, dist: InstalledDist, tags: frozenset[Tag]) -> None:
        self.root = root
        self._dist_info = dist_info
        self._location = dist.location
        tag = min(str(t) for t in tags) if tags else "py3-none-any"
        self._filename = f"{dist_info.removesuffix('.dist-info')}-{tag}.whl"
        self._record: Record | None = None

    @property
    def filename(self) -> str:
        return self._filename

    @property
    def origin(self) -> str:
        return f"uv cache {self.root}"

    @property
    def authentic(self) -> bool:
        return False

    def record(self) -> Record:
        if self._record is None:
            data = read_regular(self.root / self._dist_info / "RECORD", 256 << 20)
            if data is None:
                raise PristineNotFound(f"{self.origin}: no readable RECORD")
            self._record = parse_record(data)
        return self._record

    def _path(self, member: str) -> Path:
        if unsafe_member(member):
            raise UnsafePath(f"{self.origin}: RECORD names {member!r}")
        return self.root / member

    def has(self, member: str) -> bool:
        """A regular file that is not the installed file itself (so another source may be asked)."""
        try:
            st = os.lstat(self._path(member))
        except (OSError, UnsafePath):
            return False
        return stat.S_ISREG(st.st_mode) and not self._is_installed(member, st)

    def _is_installed(self, member: str, st: os.stat_result) -> bool:
        target = member_for(member)
        if target is None:
            return False
        try:
            installed = os.lstat(self._location / target)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == (installed.st_dev, installed.st_ino)

    def mode(self, member: str) -> int:
        try:
            return 0o755 if os.lstat(self._path(member)).st_mode & 0o111 else 0o644
        except OSError:
            return 0o644

    def read(self, member: str, *, limit: int) -> bytes:
        path = self._path(member)
        if os.path.realpath(path.parent) != os.path.realpath(self.root / os.path.dirname(member)):
            raise UnsafePath(f"{self.origin}: {member} lies behind a symlinked directory")
        try:
            mine = os.lstat(path)
        except OSError as exc:
            raise PristineNotFound(f"{self.origin}: cannot read {member}: {exc.strerror}") from None
        if self._is_installed(member, mine):
            raise PristineNotFound("the uv cache's copy is this very file (a hard link), not evidence about it")
        limit = min(limit, MEMBER_CAP)
        data = read_regular(path, limit + 1)
        if data is None:
            raise PristineNotFound(f"{self.origin}: {member} is not a regular file")
        if len(data) > limit:
            raise PristineNotFound(f"{self.origin}: {member} is longer than {limit} bytes")
        return data

    def close(self) -> None:
        pass


# (archive dir, its mtime_ns) -> (canonical name, version) -> [(entry dir, dist-info name)]
_INDEX: dict[tuple[Path, int], dict[tuple[str, Version], list[tuple[Path, str]]]] = {}


def _index(archive: Path) -> dict[tuple[str, Version], list[tuple[Path, str]]]:
    try:
        key = (archive, os.stat(archive).st_mtime_ns)
    except OSError:
        return {}
    found = _INDEX.get(key)
    if found is not None:
        return found
    found = {}
    with os.scandir(archive) as entries:
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            try:
                names = os.listdir(entry.path)
            except OSError:
                continue
            for name in names:
                if not name.endswith(".dist-info"):
                    continue
                project, _, version = name.removesuffix(".dist-info").rpartition("-")
                try:
                    parsed = Version(version)
                except InvalidVersion:
                    continue
                found.setdefault((canonicalize_name(project), parsed), []).append((Path(entry.path), name))
    _INDEX.clear()
    _INDEX[key] = found
    return found


class UvCache:
    """Wheels uv unpacked into its cache, matched by name, version and the installed WHEEL tags."""

    name = "uv-cache"

    def __init__(self, root: Path) -> None:
        self.root = root

    def all_wheels(self, dist: InstalledDist, needed: Collection[str] = ()) -> Iterator[UvWheel]:
        try:
            version = Version(dist.version)
        except InvalidVersion:
            return
        wanted = installed_tags(dist)
        want = wanted[0] if wanted is not None else frozenset()
        ranked: list[tuple[int, UvWheel]] = []
        for root, dist_info in _index(self.root / ARCHIVE).get((dist.key, version), []):
            tags = _wheel_tags(root / dist_info)
            if want and tags and not (tags & want):
                continue
            ranked.append((0 if tags == want else 1, UvWheel(root, dist_info, dist, tags)))
        ranked.sort(key=lambda item: item[0])
        for _, wheel in ranked:
            yield wheel

    def find(self, dist: InstalledDist, needed: Collection[str] = ()) -> UvWheel | None:
        return next(iter(self.all_wheels(dist, needed)), None)
