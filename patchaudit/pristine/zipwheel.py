"""A wheel read as a zip through any seekable file: local, spooled, or fetched by range requests."""

from __future__ import annotations

import contextlib
import posixpath
import stat
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO

from packaging.tags import Tag, parse_tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from patchaudit.errors import PristineNotFound, UnsafePath, WheelMismatch
from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped_text
from patchaudit.target.environment import InstalledDist
from patchaudit.target.record import Record, parse_record, unsafe_member

# No single member of any wheel is trusted beyond this, whatever its headers say.
MEMBER_CAP = 2 << 30


class ZipWheel:
    """PristineWheel over a zip file object."""

    def __init__(
        self,
        fileobj: IO[bytes],
        filename: str,
        origin: str,
        *,
        authentic: bool = False,
        on_read: Callable[[str, bytes, int], None] | None = None,
    ) -> None:
        self._fileobj = fileobj
        self._filename = filename
        self._origin = origin
        self._authentic = authentic
        self._on_read = on_read
        try:
            self._zip = zipfile.ZipFile(fileobj)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            fileobj.close()
            raise PristineNotFound(f"{origin}: not a readable wheel ({exc})") from None
        self._infos = {}
        for info in self._zip.infolist():
            if unsafe_member(info.filename):
                self.close()
                raise UnsafePath(f"{origin}: member {info.filename!r} would escape the install directory")
            self._infos[info.filename] = info
        records = [n for n in self._infos if n.count("/") == 1 and n.endswith(".dist-info/RECORD")]
        if len(records) != 1:
            self.close()
            raise PristineNotFound(f"{origin}: {len(records)} dist-info/RECORD files, expected 1")
        self.record_name = records[0]
        self._record: Record | None = None

    @property
    def filename(self) -> str:
        return self._filename

    @property
    def origin(self) -> str:
        return self._origin

    @property
    def authentic(self) -> bool:
        return self._authentic

    def record(self) -> Record:
        if self._record is None:
            data = self.read(self.record_name, limit=256 << 20)
            self._record = parse_record(data)
        return self._record

    def has(self, member: str) -> bool:
        return member in self._infos

    def mode(self, member: str) -> int:
        info = self._infos[member]
        return 0o755 if (info.external_attr >> 16) & 0o111 else 0o644

    def read(self, member: str, *, limit: int) -> bytes:
        info = self._infos.get(member)
        if info is None:
            raise PristineNotFound(f"{self._origin}: no member {member}")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise UnsafePath(f"{self._origin}: member {member} is a symlink entry")
        limit = min(limit, MEMBER_CAP)
        if info.file_size > limit:
            raise WheelMismatch(f"{self._origin}: member {member} claims {info.file_size} bytes, more than {limit}")
        try:
            with self._zip.open(info) as fh:
                data = fh.read(limit + 1)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
            raise WheelMismatch(f"{self._origin}: member {member} is corrupt ({exc})") from None
        if len(data) > limit:
            raise WheelMismatch(f"{self._origin}: member {member} is longer than {limit} bytes")
        if self._on_read is not None:
            self._on_read(member, data, self.mode(member))
        return data

    def close(self) -> None:
        with contextlib.suppress(AttributeError):
            self._zip.close()
        self._fileobj.close()


def open_local(path: Path, origin: str, *, authentic: bool = False, filename: str | None = None) -> ZipWheel:
    try:
        fh = open(path, "rb")  # noqa: SIM115 - owned by the ZipWheel
    except OSError as exc:
        raise PristineNotFound(f"cannot open {path}: {exc.strerror}") from None
    return ZipWheel(fh, filename or path.name, f"{origin} {path}", authentic=authentic)


def installed_tags(dist: InstalledDist) -> tuple[frozenset[Tag], str | None] | None:
    """The tags and build number of the installed WHEEL file; None when it cannot be read."""
    try:
        text = read_capped_text(dist.meta_dir / "WHEEL", Cap.SMALL)
    except UnreadableFile:
        return None
    tags: set[Tag] = set()
    build = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "tag":
            tags.update(parse_tag(value))
        elif key == "build":
            build = value
    return frozenset(tags), build


def _linux_arch(platform: str) -> str | None:
    """`x86_64` for linux_x86_64, manylinux1_x86_64, manylinux_2_28_x86_64, musllinux_1_2_x86_64."""
    for prefix in ("linux_", "manylinux1_", "manylinux2010_", "manylinux2014_"):
        if platform.startswith(prefix):
            return platform[len(prefix) :]
    for prefix in ("manylinux_", "musllinux_"):
        if platform.startswith(prefix):
            parts = platform[len(prefix) :].split("_", 2)
            return parts[2] if len(parts) == 3 else None
    return None


def _loose(tag: Tag) -> tuple[str, str, str]:
    # auditwheel renames a wheel to manylinux_* but may leave `linux_*` in its WHEEL file
    return tag.interpreter, tag.abi, _linux_arch(tag.platform) or tag.platform


def wheel_match(filename: str, dist: InstalledDist) -> int:
    """0: not this dist; 1: name, version, build match and tags match up to the Linux platform
    family; 2: the exact tag set of the installed WHEEL file (or that file is unreadable)."""
    try:
        name, version, build, tags = parse_wheel_filename(filename)
        installed_version = Version(dist.version)
    except (InvalidWheelFilename, InvalidVersion):
        return 0
    if name != dist.key or version != installed_version:
        return 0
    wanted = installed_tags(dist)
    if wanted is None:
        return 2
    wanted_tags, wanted_build = wanted
    build_text = f"{build[0]}{build[1]}" if build else None
    if wanted_build is not None and wanted_build != build_text:
        return 0
    if not wanted_tags or frozenset(tags) == wanted_tags:
        return 2
    return 1 if {_loose(t) for t in tags} & {_loose(t) for t in wanted_tags} else 0


def wheel_matches(filename: str, dist: InstalledDist) -> bool:
    """The wheel filename names this dist's name, version, build and tags (see wheel_match)."""
    return wheel_match(filename, dist) > 0


def member_for(wheel_record_path: str) -> str | None:
    """Where a wheel member installs, relative to site-packages (None for scripts/headers/data)."""
    first, sep, rest = wheel_record_path.partition("/")
    if sep and first.endswith(".data"):
        kind, sep2, inner = rest.partition("/")
        if sep2 and kind in ("purelib", "platlib"):
            return posixpath.normpath(inner)
        return None
    return posixpath.normpath(wheel_record_path)
