"""The one way patchaudit touches a path below a root that someone else may write: by descriptors.

A tree another user can write may change between any two system calls. Every write, rename, unlink,
mkdir, chmod and read below such a tree starts from a trusted root (a directory patchaudit computed and
checked itself), walks down one component at a time with `O_DIRECTORY | O_NOFOLLOW`, and acts with
`dir_fd=` on the last directory it opened, never on the path string again. A component that is a
symlink, is not a directory, or is `..` ends the walk with `UnsafePath`, so a directory swapped for a
link mid-run can never lead a write out of the tree; what a swap can still do is move a directory
patchaudit holds open, and then the write lands in that directory, wherever it now lies: a place the
user who moved it could write already.

Root's own state directories (caches, partial downloads, quarantine, journal, manifests) are made
here too: 0700, and checked on the descriptor to belong to the runner and be writable by nobody else.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from patchaudit.errors import UnsafePath
from patchaudit.safefs import read_capped

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _check_part(part: str) -> None:
    if part in ("", ".", "..") or "/" in part or "\0" in part:
        raise UnsafePath(f"{part!r} is not a name inside a directory")


def open_dir_at(fd: int, name: str, *, create: bool = False, mode: int = 0o755) -> int:
    """The directory `name` in directory `fd`, never through a symlink (created when `create`)."""
    _check_part(name)
    try:
        return os.open(name, DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, mode, dir_fd=fd)
    return os.open(name, DIR_FLAGS, dir_fd=fd)


def walk(root: str | os.PathLike[str], parts: Sequence[str], *, create: bool = False, mode: int = 0o755) -> int:
    """A descriptor of `root/parts...`: the root opened as given (it is trusted), each part without
    following a symlink. A symlink or non-directory on the way is UnsafePath; a missing part is
    FileNotFoundError unless `create`. The caller closes the descriptor."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            try:
                nxt = open_dir_at(fd, part, create=create, mode=mode)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    where = os.path.join(root, *parts)
                    raise UnsafePath(f"{where}: {part!r} is a symlink or not a directory") from None
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def split_under(path: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]]) -> tuple[str, list[str]]:
    """(the innermost root that holds `path`, the components below it), both from real paths.

    The real path of what exists is taken once, to find the root; the walk then re-checks every
    component on its descriptor, so a swap after this call is caught there.
    """
    real = os.path.realpath(path)
    best: str | None = None
    for root in roots:
        r = os.path.realpath(root)
        if (real == r or real.startswith(r.rstrip("/") + "/")) and (best is None or len(r) > len(best)):
            best = r
    if best is None:
        raise UnsafePath(f"{path}: outside the directories patchaudit may write")
    rest = os.path.relpath(real, best)
    return best, [] if rest == "." else rest.split("/")


@contextlib.contextmanager
def parent_of(
    dest: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]], *, create: bool = False
) -> Iterator[tuple[int, str]]:
    """(descriptor of `dest`'s directory, `dest`'s name), walked from the root of `roots` that holds it."""
    dest = os.fspath(dest)
    name = os.path.basename(dest)
    _check_part(name)
    root, parts = split_under(os.path.dirname(dest), roots)
    # from `/`, the root's own components too: a root that is another user's directory (an editable
    # project) could itself be swapped for a link between split_under's realpath and the walk
    above = [p for p in root.split("/") if p]
    fd = walk("/", above + parts, create=create)
    try:
        yield fd, name
    finally:
        os.close(fd)


# --- operations on (directory descriptor, name) ---


def lstat_at(fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def read_at(fd: int, name: str, cap: int) -> bytes:
    """The regular file `name` in `fd`, at most `cap` bytes, never through a symlink (safefs)."""
    return read_capped(name, cap, dir_fd=fd)


def readlink_at(fd: int, name: str) -> str:
    return os.readlink(name, dir_fd=fd)


def write_new_at(fd: int, name: str, data: bytes, mode: int, *, durable: bool = True) -> None:
    """Create `name` in `fd` exclusively (never through a symlink), write `data`, set `mode`, fsync."""
    out = os.open(name, _NEW_FILE, 0o600, dir_fd=fd)
    try:
        view = memoryview(data)
        while view:
            n = os.write(out, view)
            view = view[n:]
        os.fchmod(out, safe_mode(mode))
        if durable:
            os.fsync(out)
    except BaseException:
        os.close(out)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=fd)
        raise
    os.close(out)


def replace_at(fd: int, src: str, dst: str) -> None:
    os.replace(src, dst, src_dir_fd=fd, dst_dir_fd=fd)


def unlink_at(fd: int, name: str, *, missing_ok: bool = True) -> None:
    try:
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        if not missing_ok:
            raise


def symlink_at(fd: int, target: str, name: str) -> None:
    os.symlink(target, name, dir_fd=fd)


def fsync_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.fsync(fd)


def safe_mode(mode: int) -> int:
    """A mode given to a file patchaudit writes: permission bits only, never setuid, setgid or sticky."""
    return stat.S_IMODE(mode) & 0o777


# --- root's own private directories ---


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Make `path` (and missing parents) 0700 and check on its descriptor that it is the runner's alone.

    Existing parents are taken as they are; the last directory must be owned by this user and give no
    one else any access, else UnsafePath.
    """
    path = Path(path).absolute()
    missing = []
    current = path
    while not os.path.lexists(current) and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):  # each one made here is 0700, not only the last
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
    fd = os.open(path, DIR_FLAGS)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise UnsafePath(f"{path} is owned by uid {st.st_uid}, not by this user")
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return path


def owned_privately(path: str | os.PathLike[str]) -> str | None:
    """Why the directory `path` is not this user's alone (None when it is, or does not exist)."""
    try:
        fd = os.open(path, DIR_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if st.st_uid != os.geteuid():
        return f"{path} is owned by uid {st.st_uid}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by others"
    return None


__all__ = [
    "DIR_FLAGS",
    "lstat_at",
    "open_dir_at",
    "owned_privately",
    "parent_of",
    "private_dir",
    "read_at",
    "readlink_at",
    "replace_at",
    "safe_mode",
    "split_under",
    "symlink_at",
    "unlink_at",
    "walk",
    "write_new_at",
]
