"""Installed distributions' core metadata, read through importlib_metadata with bounded reads.

METADATA comes from the target environment and is input: only its header block is read (the
description that follows can be megabytes), at most HEAD_LIMIT bytes, never following a symlink
out of the metadata directory's own files.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from pathlib import Path

from patchaudit.errors import UnsafePath
from patchaudit.fs.beneath import FILE_FLAGS, DirCache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    import importlib_metadata

HEAD_LIMIT = 64 << 10
_HEADER_FILES = ("METADATA", "PKG-INFO")


# A header line as the email parser reads it: a field name of printable ASCII but the colon, a colon, the value.
_HEADER_LINE = re.compile(r"([\x21-\x39\x3b-\x7e]+):[ \t]*(.*)")


def read_bounded(meta_dir: Path, filename: str | os.PathLike[str], dirs: DirCache | None = None) -> str | None:
    """A file of the metadata directory as text, within limits; of METADATA/PKG-INFO the header block only.

    `dirs`: the directory descriptors of a read of many metadata directories (one walk from `/` for all)."""
    name = os.fspath(filename)
    if not name or "/" in name or name in (".", ".."):
        return None
    try:
        with contextlib.ExitStack() as stack:  # meta_dir reached by descriptors, never through another user's link
            cache = dirs if dirs is not None else stack.enter_context(DirCache(limit=4))
            fd = os.open(name, FILE_FLAGS, dir_fd=cache.get(os.path.abspath(meta_dir)))
    except (OSError, UnsafePath):
        return None
    try:
        data = os.read(fd, HEAD_LIMIT)
    except OSError:
        return None
    finally:
        os.close(fd)
    if name in _HEADER_FILES:
        data = data.replace(b"\r\n", b"\n").split(b"\n\n", 1)[0] + b"\n\n"
    return data.decode("utf-8", "replace")


def installed_metadata(meta_dir: Path) -> importlib_metadata.PackageMetadata | None:
    """The core metadata headers of one installed distribution; None when it has none readable."""
    import importlib_metadata

    try:
        return _bounded_distribution()(meta_dir).metadata
    except importlib_metadata.MetadataNotFound:
        return None


@functools.cache
def _bounded_distribution() -> Callable[[Path], importlib_metadata.Distribution]:
    """The importlib_metadata Distribution that reads within limits, made once importlib_metadata is needed
    (a scan or gate names its distributions without it, see name_version)."""
    import importlib_metadata

    class BoundedDistribution(importlib_metadata.Distribution):
        """A `.dist-info`/`.egg-info` directory as importlib_metadata sees it, read within limits."""

        def __init__(self, meta_dir: Path) -> None:
            self.meta_dir = meta_dir

        def read_text(self, filename: str | os.PathLike[str]) -> str | None:
            return read_bounded(self.meta_dir, filename)

        def locate_file(self, path: str | os.PathLike[str]) -> Path:
            return self.meta_dir.parent / path

    return BoundedDistribution


def name_version(meta_dir: Path, dirs: DirCache | None = None) -> tuple[str | None, str | None]:
    """(Name, Version) as `installed_metadata` gives them (None where missing or unreadable).

    Every distribution of an environment is named at every scan and gate start: a header block of
    plain `Field: value` lines (what installers write) is read here directly, and anything else
    (a folded Name or Version, a line that is no header) through the email parser as before.
    """
    text = None
    for filename in _HEADER_FILES:
        text = read_bounded(meta_dir, filename, dirs)
        if text is not None:
            break
    if text is not None and "\r" not in text:  # the email parser also ends lines at a lone CR
        found = _plain_name_version(text)
        if found is not None:
            return found
    meta = installed_metadata(meta_dir)
    if meta is None:
        return None, None
    return meta.get("Name"), meta.get("Version")


def _plain_name_version(block: str) -> tuple[str | None, str | None] | None:
    """Name and Version of a header block whose every line is a header or a continuation of one other
    than Name's or Version's; None for any other block."""
    values: dict[str, str] = {}
    last = ""
    for line in block.split("\n"):
        if not line:
            continue
        if line[0] in " \t":
            if last in ("name", "version"):
                return None
            continue
        match = _HEADER_LINE.fullmatch(line)
        if match is None:
            return None
        last = match[1].lower()
        values.setdefault(last, match[2])
    return values.get("name"), values.get("version")
