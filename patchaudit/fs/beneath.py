"""The one way patchaudit touches a path below a root that someone else may write: by descriptors.

A tree another user can write may change between any two system calls. Every write, rename, unlink,
mkdir, chmod and read below such a tree starts from a trusted root (a directory patchaudit computed and
checked itself), walks down one component at a time with `O_DIRECTORY | O_NOFOLLOW`, and acts with
`dir_fd=` on the last directory it opened, never on the path string again. A component that is a
symlink, is not a directory, or is `..` ends the walk with `UnsafePath`, so a directory swapped for a
link mid-run can never lead a write out of the tree; what a swap can still do is move a directory
patchaudit holds open, and then the write lands in that directory, wherever it now lies: a place the
user who moved it could write already.

Reads go the same way. `DirCache` opens the directory of each file a worker hashes or reads from the
directory above it, one `openat(O_NOFOLLOW)` per directory and kept for the task, so a cold verify pays
one system call per directory, not a walk per file. A symlink met on the way is followed only when the
directory that holds it is root's or the runner's and nobody else can write it (a venv's `lib64 -> lib`,
a distribution's `/usr/lib64`); a link in a directory another user can write is `UnsafePath`.

`chase` resolves a path inside a tree that is not the host's (an image rootfs, `/proc/PID/root`, a
`--root` tree) by the same steps: absolute links mean the tree's top, `..` stops there.

Root's own state directories (caches, partial downloads, quarantine, journal, manifests) are made
here too: 0700, and checked on the descriptor to belong to the runner and be writable by nobody else.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchaudit.errors import UnsafePath
from patchaudit.fs.safefs import UnreadableFile, Why, read_capped

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


# --- reads below a directory on the host, one descriptor per directory ---

FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def trusted_dir(fd: int) -> bool:
    """Whether a symlink in directory `fd` may be followed: the directory is root's or the runner's,
    and no one else can write it (a sticky /tmp-like directory is never trusted)."""
    st = os.fstat(fd)
    return st.st_uid in (0, os.geteuid()) and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


class DirCache:
    """Directory descriptors by absolute path, each opened from the one above it with O_NOFOLLOW.

    A symlink on the way is followed (by `chase` from `/`) only out of a `trusted_dir`; elsewhere it is
    UnsafePath. At most `limit` descriptors stay open, the least recently used closed first. Make one per
    task and close it: a descriptor kept for longer would go on naming a directory since replaced.
    """

    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self._fds: OrderedDict[str, tuple[int, str]] = OrderedDict()  # path -> (fd, its path without links)

    def get(self, directory: str) -> int:
        """The descriptor of the absolute `directory` (the cache's: do not close it)."""
        return self._entry(directory)[0]

    def _entry(self, directory: str) -> tuple[int, str]:
        hit = self._fds.get(directory)
        if hit is not None:
            self._fds.move_to_end(directory)
            return hit
        parent, name = os.path.split(directory)
        if not name:
            entry = (os.open(directory, DIR_FLAGS), "/")
        else:
            pfd, real = self._entry(parent)
            try:
                entry = (os.open(name, DIR_FLAGS, dir_fd=pfd), os.path.join(real, name))
            except OSError as exc:  # a link opened O_DIRECTORY | O_NOFOLLOW: ENOTDIR (ELOOP on some kernels)
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not _is_link(pfd, name):
                    raise
                entry = _through_link(os.path.join(real, name), directory)
        self._fds[directory] = entry
        while len(self._fds) > self.limit:
            os.close(self._fds.popitem(last=False)[1][0])
        return entry

    def real(self, directory: str) -> str:
        """The absolute `directory`'s path without links, as its descriptor was reached."""
        return self._entry(directory)[1]

    def open_file(self, path: str) -> tuple[int, str]:
        """(descriptor of `path`'s directory, `path`'s name), for a `dir_fd=` open of the file."""
        if path[:1] == "/" and "/." not in path and "//" not in path and path[-1:] != "/":
            directory, _, name = path.rpartition("/")  # already what abspath() makes of it: split as it is
            return self.get(directory or "/"), name
        directory, name = os.path.split(os.path.abspath(path))
        return self.get(directory), name

    def close(self) -> None:
        while self._fds:
            os.close(self._fds.popitem()[1][0])

    def __enter__(self) -> DirCache:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _is_link(fd: int, name: str) -> bool:
    found = lstat_at(fd, name)
    return found is not None and stat.S_ISLNK(found.st_mode)


def _through_link(real: str, shown: str) -> tuple[int, str]:
    slash = os.open("/", DIR_FLAGS)
    try:
        try:
            found = chase(slash, real, trust=trusted_dir)
        except UnreadableFile as exc:
            if exc.why is Why.MISSING:
                raise FileNotFoundError(errno.ENOENT, "missing", shown) from None
            raise UnsafePath(f"{shown}: {exc.detail or exc.why.value}") from None
        return open_dir(slash, found.path), found.path
    finally:
        os.close(slash)


def real_dir(path: str | os.PathLike[str]) -> str:
    """`path` without links, for a decision about it: its directories reached by descriptors from `/`
    (a link followed only out of a `trusted_dir`, else UnsafePath); missing trailing names kept as
    they are, since none of them can be a link. The os.path.realpath of this module."""
    path = os.path.abspath(path)
    missing: list[str] = []
    with DirCache(limit=8) as dirs:
        while True:
            try:
                real = dirs.real(path)
                break
            except FileNotFoundError:
                path, name = os.path.split(path)
                if not name:
                    raise
                missing.append(name)
    return os.path.join(real, *reversed(missing))


def stat_below(path: str, dirs: DirCache | None = None) -> os.stat_result | None:
    """lstat of `path` by its directory's descriptor (None when missing)."""
    with contextlib.ExitStack() as stack:
        cache = dirs if dirs is not None else stack.enter_context(DirCache(limit=4))
        try:
            fd, name = cache.open_file(path)
        except FileNotFoundError:
            return None
        return lstat_at(fd, name)


def readlink_below(path: str | os.PathLike[str]) -> str:
    """The target of the symlink at `path`, its directory reached by descriptors (OSError, UnsafePath)."""
    with DirCache(limit=4) as dirs:
        fd, name = dirs.open_file(os.fspath(path))
        return os.readlink(name, dir_fd=fd)


def read_below(path: str | os.PathLike[str], cap: int, dirs: DirCache | None = None) -> bytes:
    """The regular file at `path`, its directory reached by descriptors (safefs rules for the file)."""
    path = os.fspath(path)
    with contextlib.ExitStack() as stack:
        cache = dirs if dirs is not None else stack.enter_context(DirCache(limit=4))
        try:
            fd, name = cache.open_file(path)
        except FileNotFoundError:
            raise UnreadableFile(path, Why.MISSING) from None
        except NotADirectoryError:
            raise UnreadableFile(path, Why.MISSING, "a directory on the way is not one") from None
        except UnsafePath as exc:
            raise UnreadableFile(path, Why.SYMLINK, str(exc)) from None
        try:
            return read_capped(name, cap, dir_fd=fd)
        except UnreadableFile as exc:
            raise UnreadableFile(path, exc.why, exc.detail) from None


# --- paths inside a tree that is not the host's ---

MAX_LINKS = 40  # as the kernel's own limit on links followed in one lookup


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


def chase(root_fd: int, path: str, *, follow_last: bool = True, trust: Callable[[int], bool] | None = None) -> Chased:
    """Resolve `path` inside the tree whose top is `root_fd`: links and `..` never leave it.

    An image, `/proc/PID/root` or a backup holds absolute links that mean a path inside the tree
    (`/usr/lib64 -> /usr/lib`); each link is read here and resolved against the tree's top, so no path
    string from the tree is handed to the kernel whole. With `trust`, a link is followed only out of a
    directory `trust(fd)` accepts. Raises UnreadableFile: MISSING when a component does not exist or is
    not a directory, SYMLINK when links loop, nest past MAX_LINKS or sit where they are not trusted.
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
                raise _chase_error(path, exc) from None
            last = not todo
            if stat.S_ISLNK(st.st_mode) and (follow_last or not last):
                links += 1
                if links > MAX_LINKS:
                    raise UnreadableFile(path, Why.SYMLINK, f"more than {MAX_LINKS} links")
                if trust is not None and not trust(fds[-1]):
                    where = "/" + "/".join([*done, name])
                    raise UnreadableFile(path, Why.SYMLINK, f"{where} is a link in a directory others can write")
                try:
                    target = os.readlink(name, dir_fd=fds[-1])
                except OSError as exc:
                    raise _chase_error(path, exc) from None
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
                fds.append(os.open(name, DIR_FLAGS, dir_fd=fds[-1]))
            except OSError as exc:  # swapped for a link since the lstat: refused, never followed
                raise _chase_error(path, exc) from None
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
            nxt = os.open(name, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as exc:
        os.close(fd)
        raise _chase_error(path, exc) from None
    return fd


def _split(path: str) -> list[str]:
    return [part for part in path.split("/") if part and part != "."]


def _chase_error(path: str, exc: OSError) -> UnreadableFile:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return UnreadableFile(path, Why.MISSING)
    if exc.errno == errno.ELOOP:
        return UnreadableFile(path, Why.SYMLINK, "changed while it was read")
    return UnreadableFile(path, Why.ERROR, exc.strerror or str(exc))


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
    "FILE_FLAGS",
    "MAX_LINKS",
    "Chased",
    "DirCache",
    "chase",
    "open_dir",
    "open_root",
    "read_below",
    "readlink_below",
    "real_dir",
    "stat_below",
    "trusted_dir",
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
