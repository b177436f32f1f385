"""Paths inside a tree that is not the host's, resolved as if the tree were `/`.

An image rootfs, `/proc/PID/root` or a mounted backup holds absolute symlinks that mean a path inside
the tree (`/usr/lib64 -> /usr/lib`), and `..` that must stop at the tree's top. The kernel, asked for
`TREE/usr/lib64/x`, would follow such a link to the host's `/usr/lib`. `chase` walks one component at
a time by directory descriptors opened with O_NOFOLLOW, reads each link itself and resolves it against
the tree's root descriptor, so no path string from the tree is ever handed to the kernel whole.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

from patchaudit.safefs import UnreadableFile, Why

MAX_LINKS = 40  # as the kernel's own limit on links followed in one lookup
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Chased:
    """Where a path leads inside a tree: its canonical path there (no links, no `..`) and its type."""

    path: str  # "/usr/lib/python3.12", always absolute within the tree
    mode: int  # st_mode of what is there (never a symlink unless asked not to follow the last one)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


def open_root(root: str | os.PathLike[str]) -> int:
    """A directory descriptor for the tree's top (the user named it: a link to it is followed)."""
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        why = Why.MISSING if exc.errno in (errno.ENOENT, errno.ENOTDIR) else Why.ERROR
        raise UnreadableFile(root, why, exc.strerror or "") from None


def chase(root_fd: int, path: str, *, follow_last: bool = True) -> Chased:
    """Resolve `path` inside the tree whose top is `root_fd`: links and `..` never leave it.

    Raises UnreadableFile (MISSING) when a component does not exist or is not a directory, SYMLINK
    when links loop or nest past MAX_LINKS.
    """
    todo = _split(path)
    done: list[str] = []
    fds = [os.dup(root_fd)]  # fds[i]: the directory done[:i]
    links = 0
    try:
        while todo:
            name = todo.pop(0)
            if name == "..":
                if done:
                    done.pop()
                    os.close(fds.pop())
                continue
            try:
                st = os.lstat(name, dir_fd=fds[-1])
            except OSError as exc:
                raise _error(path, exc) from None
            last = not todo
            if stat.S_ISLNK(st.st_mode) and (follow_last or not last):
                links += 1
                if links > MAX_LINKS:
                    raise UnreadableFile(path, Why.SYMLINK, f"more than {MAX_LINKS} links")
                try:
                    target = os.readlink(name, dir_fd=fds[-1])
                except OSError as exc:
                    raise _error(path, exc) from None
                if target.startswith("/"):
                    while len(fds) > 1:
                        os.close(fds.pop())
                    done.clear()
                todo[:0] = _split(target)
                continue
            done.append(name)
            if last:
                return Chased(path="/" + "/".join(done), mode=st.st_mode)
            if not stat.S_ISDIR(st.st_mode):
                raise UnreadableFile(path, Why.MISSING, f"/{'/'.join(done)} is not a directory")
            try:
                fds.append(os.open(name, _DIR, dir_fd=fds[-1]))
            except OSError as exc:  # swapped for a link since the lstat: refused, never followed
                raise _error(path, exc) from None
        return Chased(path="/" + "/".join(done), mode=os.fstat(fds[-1]).st_mode)
    finally:
        for fd in fds:
            os.close(fd)


def open_dir(root_fd: int, path: str) -> int:
    """A descriptor of the directory `path` leads to inside the tree (caller closes it)."""
    found = chase(root_fd, path)
    if not found.is_dir:
        raise UnreadableFile(path, Why.NOT_REGULAR, "not a directory")
    fd = os.dup(root_fd)
    try:
        for name in _split(found.path):
            nxt = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as exc:
        os.close(fd)
        raise _error(path, exc) from None
    return fd


def _split(path: str) -> list[str]:
    return [part for part in path.split("/") if part and part != "."]


def _error(path: str, exc: OSError) -> UnreadableFile:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return UnreadableFile(path, Why.MISSING)
    if exc.errno == errno.ELOOP:
        return UnreadableFile(path, Why.SYMLINK, "changed while it was read")
    return UnreadableFile(path, Why.ERROR, exc.strerror or str(exc))


__all__ = ["MAX_LINKS", "Chased", "chase", "open_dir", "open_root"]
