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

from patchaudit.diff import read_installed
from patchaudit.environment import Environment
from patchaudit.errors import LockBusy, QuarantineFailed
from patchaudit.revert.model import Original
from patchaudit.revert.paths import check_destination, refuse_unsafe_root

LOCK_WAIT = 10.0


def snapshot(dest: Path) -> tuple[Original, bytes | str | None, int | None]:
    """(kind, content, mode) of what is at dest now: file bytes, symlink target, or nothing."""
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return Original.MISSING, None, None
    if stat.S_ISLNK(st.st_mode):
        return Original.SYMLINK, os.readlink(dest), None
    if not stat.S_ISREG(st.st_mode):
        return Original.OTHER, None, None
    content = read_installed(dest)
    return Original.FILE, content if isinstance(content, bytes) else b"", stat.S_IMODE(st.st_mode)


def drop_bytecode(env: Environment, dest: Path, roots: Sequence[str] = ()) -> list[str]:
    """Remove `__pycache__/<module>.*.pyc` of a restored or removed module source.

    Only regular files in a real `__pycache__` directory inside the environment's directories: a
    symlinked `__pycache__` (or one whose real path leads out) is left alone, never followed.
    """
    if dest.suffix != ".py":
        return []
    cache = dest.parent / "__pycache__"
    try:
        if not stat.S_ISDIR(os.lstat(cache).st_mode):
            return []
        fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    dropped = []
    try:
        prefix = dest.stem + "."
        for name in os.listdir(fd):
            if not (name.startswith(prefix) and name.endswith(".pyc")):
                continue
            if check_destination(env, cache / name, roots) is not None:
                continue
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.lstat(name, dir_fd=fd).st_mode):
                    os.unlink(name, dir_fd=fd)
                    dropped.append(name)
    finally:
        os.close(fd)
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
        env.state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
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
