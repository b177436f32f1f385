"""Atomic file writes: a temporary file in the same directory, fsync'd, then os.replace, never through a link."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path


def write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data` in one step; a reader sees the old or the new file, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def write_json(path: Path, value: object) -> None:
    write_bytes(path, json.dumps(value, indent=1, sort_keys=True).encode() + b"\n")
