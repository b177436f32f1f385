"""The one way patchaudit replaces a file: a new temp file beside it, written, fsync'd, `os.replace`d."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

Writer = Callable[[BinaryIO], None]


def fsync_dir(directory: Path) -> None:
    """Make a rename or unlink in `directory` durable; a directory that cannot be opened is skipped."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_new(path: Path, data: bytes, mode: int) -> None:
    """Create `path` exclusively (never following a symlink), write `data`, set `mode`, fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(
    path: Path,
    content: bytes | str | Writer,
    *,
    mode: int = 0o644,
    durable: bool = True,
    parents: bool = True,
) -> None:
    """Replace `path` with `content` (bytes, text as UTF-8, or a function writing to a binary file).

    Readers see the old file or the new one, never a part. The temp file is created exclusively in the
    same directory, never through a symlink, and removed when anything fails (the OSError propagates).
    `durable=False` skips the fsyncs: for caches, where losing the newest write to a power cut only costs
    time.
    """
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    # the directory is resolved once: the temp file, the rename and the fsync all act on that descriptor
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _write_at(dir_fd, path.name, content, mode=mode, durable=durable)
    finally:
        os.close(dir_fd)


def _write_at(dir_fd: int, name: str, content: bytes | str | Writer, *, mode: int, durable: bool) -> None:
    tmp = f".{name[:200]}.{os.getpid()}.{os.urandom(3).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(content):
                content(fh)
            else:
                # surrogateescape: a file name's undecodable bytes go out as the bytes they were
                fh.write(content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if durable:
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)


__all__ = ["atomic_write", "fsync_dir", "write_new"]
