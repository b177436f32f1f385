"""Who besides root can change a path: before root executes a file, it must be root's alone."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

_SYMLINK_HOPS = 40


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def foreign_writer(paths: Iterable[str | os.PathLike[str]]) -> str | None:
    """Why a user other than root could replace or edit one of `paths` (None: none can).

    Each path is followed hop by hop through its symbolic links; every link, the final file and every
    directory above each of them must be owned by root and writable by nobody else. A world- or
    group-writable directory counts only with the sticky bit and an entry owned by root (as in /tmp).
    """
    seen: set[str] = set()
    for path in paths:
        for hop in _hops(os.path.abspath(path)):
            reason = _check_with_parents(hop, seen)
            if reason is not None:
                return reason
    return None


def _hops(path: str) -> list[str]:
    """The path, each symlink target along the way, and the fully resolved path."""
    out = [path]
    current = path
    for _ in range(_SYMLINK_HOPS):
        try:
            target = os.readlink(current)
        except OSError:
            break
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
        out.append(current)
    real = os.path.realpath(path)
    if real not in out:
        out.append(real)
    return out


def _check_with_parents(path: str, seen: set[str]) -> str | None:
    child = path
    reason = _check_entry(child, None)
    if reason is not None:
        return reason
    while True:
        parent = os.path.dirname(child)
        if parent == child:
            return None
        key = f"{parent}\0{child}"
        if key not in seen:
            seen.add(key)
            reason = _check_entry(parent, child)
            if reason is not None:
                return reason
        child = parent


def _check_entry(path: str, child: str | None) -> str | None:
    """`path` itself; as a directory holding `child`, whether someone else may swap that entry."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be inspected ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return None  # a link cannot be edited; its directory decides who may replace it
    if st.st_uid != 0:
        return f"{path} is owned by uid {st.st_uid}"
    others_write = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if not others_write:
        return None
    if child is None or not stat.S_ISDIR(st.st_mode):
        return f"{path} is writable by {_who(st)}"
    if st.st_mode & stat.S_ISVTX:
        try:
            child_uid = os.lstat(child).st_uid
        except OSError:
            return None
        if child_uid == 0:
            return None
        return f"{child} is owned by uid {child_uid} in sticky directory {path}"
    return f"{path} is writable by {_who(st)}"


def _who(st: os.stat_result) -> str:
    if st.st_mode & stat.S_IWOTH:
        return "every user"
    return f"group {st.st_gid}"


def foreign_writer_in(directories: Iterable[str | os.PathLike[str]]) -> str | None:
    """As foreign_writer, for each directory and every entry directly in it (cheaper than one by one)."""
    dirs = [os.path.abspath(d) for d in directories]
    reason = foreign_writer(d for d in dirs if os.path.lexists(d))
    if reason is not None:
        return reason
    links: list[str] = []
    for directory in dirs:
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISLNK(st.st_mode):
                        links.append(entry.path)
                    elif st.st_uid != 0:
                        return f"{entry.path} is owned by uid {st.st_uid}"
                    elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                        return f"{entry.path} is writable by {_who(st)}"
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"{directory} cannot be inspected ({exc.strerror})"
    return foreign_writer(links)
