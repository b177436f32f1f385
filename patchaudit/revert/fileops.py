"""File operations of a revert: what is at a path now, stale bytecode, the environment's lock."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from patchaudit.errors import LockBusy, QuarantineFailed
from patchaudit.fs import beneath
from patchaudit.revert.model import Original
from patchaudit.revert.paths import refuse_unsafe_root
from patchaudit.target.environment import Environment

LOCK_WAIT = 10.0
FILE_CAP = 1 << 40  # what a revert copies is any file of the environment; the type check is what matters


def write_roots(env: Environment, roots: Sequence[str] = ()) -> list[str]:
    """The directories a run walks down from: the scheme directories and the editable projects' roots."""
    return [str(r) for r in env.writable_roots()] + list(roots)


def snapshot_at(fd: int, name: str) -> tuple[Original, bytes | str | None, int | None]:
    """(kind, content, mode) of entry `name` of directory `fd` now: file bytes, symlink target, or nothing."""
    st = beneath.lstat_at(fd, name)
    if st is None:
        return Original.MISSING, None, None
    if stat.S_ISLNK(st.st_mode):
        return Original.SYMLINK, beneath.readlink_at(fd, name), None
    if not stat.S_ISREG(st.st_mode):
        return Original.OTHER, None, None
    return Original.FILE, beneath.read_at(fd, name, FILE_CAP), stat.S_IMODE(st.st_mode)


def snapshot(dest: Path, roots: Sequence[str]) -> tuple[Original, bytes | str | None, int | None]:
    """snapshot_at of `dest`, its directory walked down from `roots` (a missing directory: MISSING)."""
    try:
        with beneath.parent_of(dest, roots) as (fd, name):
            return snapshot_at(fd, name)
    except FileNotFoundError:
        return Original.MISSING, None, None


def drop_bytecode_at(fd: int, module: str) -> list[str]:
    """Remove `__pycache__/<module>.*.pyc` below directory `fd`, for a restored or removed `module.py`.

    Only regular files in a real `__pycache__` directory: a symlinked one is left alone, never followed.
    """
    if not module.endswith(".py"):
        return []
    try:
        cache = beneath.open_dir_at(fd, "__pycache__")
    except OSError:
        return []
    dropped = []
    try:
        prefix = module[: -len(".py")] + "."
        for name in os.listdir(cache):
            if not (name.startswith(prefix) and name.endswith(".pyc")):
                continue
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.lstat(name, dir_fd=cache).st_mode):
                    os.unlink(name, dir_fd=cache)
                    dropped.append(name)
    finally:
        os.close(cache)
    return dropped


@contextlib.contextmanager
def locked(env: Environment, *, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold the environment's revert lock (fcntl.flock); LockBusy after `wait` seconds.

    Every write into the environment holds it: as root, an environment that is not root's alone (or
    has a symlinked scheme directory) is refused here, before anything is written.
    """
    refuse_unsafe_root(env)
    path = env.state_dir / "lock"
    try:
        beneath.private_dir(env.state_dir)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:  # a read-only or full filesystem: nothing has been written yet
        raise QuarantineFailed(f"cannot take the lock {path}: {exc.strerror or exc}; nothing was changed") from None
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                    raise LockBusy(
                        f"another patchaudit run (pid {holder}) is changing {env.prefix}",
                        hint="wait for it to finish, then run again",
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
