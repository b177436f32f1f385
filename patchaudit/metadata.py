"""Installed distributions' core metadata, read through importlib_metadata with bounded reads.

METADATA comes from the target environment and is input: only its header block is read (the
description that follows can be megabytes), at most HEAD_LIMIT bytes, never following a symlink
out of the metadata directory's own files.
"""

from __future__ import annotations

import os
from pathlib import Path

import importlib_metadata

HEAD_LIMIT = 64 << 10
_HEADER_FILES = ("METADATA", "PKG-INFO")


class BoundedDistribution(importlib_metadata.Distribution):
    """A `.dist-info`/`.egg-info` directory as importlib_metadata sees it, read within limits."""

    def __init__(self, meta_dir: Path) -> None:
        self.meta_dir = meta_dir

    def read_text(self, filename: str | os.PathLike[str]) -> str | None:
        name = os.fspath(filename)
        if not name or "/" in name or name in (".", ".."):
            return None
        try:
            fd = os.open(self.meta_dir / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
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

    def locate_file(self, path: str | os.PathLike[str]) -> Path:
        return self.meta_dir.parent / path


def installed_metadata(meta_dir: Path) -> importlib_metadata.PackageMetadata | None:
    """The core metadata headers of one installed distribution; None when it has none readable."""
    try:
        return BoundedDistribution(meta_dir).metadata
    except importlib_metadata.MetadataNotFound:
        return None
