"""A process whose root is not ours (a container, a chroot): its paths, read through /proc/PID/root.

/proc/PID/maps, /proc/PID/exe and the command line name files as the process sees them. For a process
in another mount namespace or a chroot those names mean files below its own root, which the host
reaches through the `/proc/PID/root` door. Each path is prefixed with that door, so every later stat
and read lands on the process's file, not on the host's file of the same name.
"""

from __future__ import annotations

import os
from dataclasses import replace

from patchaudit.procs.proc import PROC, ProcInfo


def foreign_root(pid: int) -> str | None:
    """`/proc/PID/root` when the process's root is not this one's, else None."""
    door = f"{PROC}/{pid}/root"
    try:
        theirs, ours = os.stat(door), os.stat("/")
    except OSError:
        return None
    return None if (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino) else door


def through(proc: ProcInfo, door: str) -> ProcInfo:
    """The process with every path it names made a path through its root."""
    argv = list(proc.argv)
    if argv and "/" not in argv[0]:  # found on its PATH, inside its own tree
        for directory in (proc.getenv("PATH") or "").split(":"):
            if directory.startswith("/") and os.access(f"{door}{directory}/{argv[0]}", os.X_OK):
                argv[0] = f"{directory}/{argv[0]}"
                break
    if argv and argv[0].startswith("/"):
        argv[0] = door + argv[0]
    elif argv and "/" in argv[0]:
        cwd = proc.cwd()
        argv[0] = door + os.path.normpath(os.path.join(cwd or "/", argv[0])) if cwd else argv[0]
    maps = tuple(replace(m, path=_placed(door, m.path, (m.dev, m.inode))) for m in proc.maps)
    exe = None
    if proc.exe:
        try:
            st = os.stat(f"{PROC}/{proc.pid}/exe")
            exe = _placed(door, proc.exe, (st.st_dev, st.st_ino))
        except OSError:
            exe = door + proc.exe
    return replace(proc, exe=exe, maps=maps, argv=tuple(argv))


def _placed(door: str, path: str, key: tuple[int, int]) -> str:
    """The path through the door; or, where the kernel named the file from this side of it (a mount
    this namespace also sees), the path as named. The file's device and inode decide; a file that is
    gone is looked for through the door."""
    try:
        # a chroot: the kernel names files from the top of the mount tree, the process's root included
        top = os.readlink(door).rstrip("/")
    except OSError:
        top = ""
    inside = [door + path[len(top) :]] if top and path.startswith(top + "/") else []
    for candidate in (*inside, door + path, path):
        try:
            st = os.stat(candidate)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == key or key[1] == 0:
            return candidate
    return door + path
