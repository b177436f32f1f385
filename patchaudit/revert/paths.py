"""Where a revert may write, and the names it gives things: destinations, staged files, run directories.

Every path here is computed from the environment (and the run id); a path read back from a journal or
manifest is only ever compared with what these functions compute, never trusted on its own.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import re
import secrets
from collections.abc import Sequence
from pathlib import Path

from patchaudit.errors import UnsafePath
from patchaudit.fs.beneath import real_dir
from patchaudit.pristine.zipwheel import unsafe_member
from patchaudit.target.environment import Environment


def _roots(env: Environment) -> list[str]:
    return [os.path.realpath(r) for r in env.writable_roots()]


def root_write_problem(env: Environment) -> str | None:
    """As root, why this environment may not be written (None: it may, or patchaudit is not root).

    check_destination resolves the scheme directories: a user-owned environment whose site-packages
    is a symlink to /etc would make /etc a place to write. As root, every scheme directory, the state
    directory and each directory above them up to the prefix must be a real directory, and each of
    them (and everything above) root's alone.
    """
    from patchaudit.target import trust

    if not trust.running_as_root():
        return None
    prefix = os.path.abspath(env.prefix)
    # a container's /proc/PID/root is the kernel's door into its root, not a link anyone planted
    door = str(env.tree) if env.tree is not None and re.fullmatch(r"/proc/\d+/root", str(env.tree)) else None
    dirs = [os.path.abspath(d) for d in (*env.writable_roots(), env.state_dir)]
    for directory in dirs:
        current = directory
        while True:
            if os.path.islink(current) and current != door:
                return f"{current} is a symlink"
            parent = os.path.dirname(current)
            if current == prefix or not current.startswith(prefix + "/") or parent == current:
                break
            current = parent
    reason = trust.foreign_writer(dirs)
    return f"not root-only: {reason}" if reason is not None else None


def refuse_unsafe_root(env: Environment) -> None:
    """UnsafePath (exit 2, nothing written) when root may not write this environment."""
    from patchaudit.errors import UnsafePath

    reason = root_write_problem(env)
    if reason is not None:
        raise UnsafePath(
            f"refusing to write into {env.prefix} as root: {reason}",
            hint="run as the environment's owner, or make the environment root-only without symlinked directories",
        )


def check_destination(env: Environment, dest: Path, extra_roots: Sequence[str] = ()) -> str | None:
    """Why `dest` may not be written (None when it may): only inside the env's scheme directories.

    The parent is resolved by directory descriptors (beneath.real_dir: a link is followed only out of
    a directory no other user can write, and one that leads out is refused); the final component is
    never followed, because it is replaced or unlinked by `dir_fd=`. The roots are the environment's
    own, computed by patchaudit (as root, refuse_unsafe_root has checked them).
    """
    if not dest.is_absolute():
        return "not an absolute path"
    try:
        parent = real_dir(dest.parent)
    except UnsafePath as exc:
        return str(exc)
    except OSError as exc:
        return f"{dest.parent}: {exc.strerror}"
    roots = _roots(env) + [os.path.realpath(r) for r in extra_roots]
    state = os.path.realpath(env.state_dir)
    inside = any(parent == r or parent.startswith(r.rstrip("/") + "/") for r in roots)
    if not inside:
        return "outside the environment's directories"
    if parent == state or parent.startswith(state + "/"):
        return "inside patchaudit's own state directory"
    if os.path.join(parent, dest.name) in roots:
        return "is a scheme directory itself"
    if "/.git/" in parent + "/" or dest.name == ".git":
        return "inside a git directory"
    return None


def destination(location: Path, path: str) -> Path:
    return Path(os.path.normpath(os.path.join(location, path)))


def quarantine_name(env: Environment, path: str, dest: Path) -> str:
    """Where below the run's `files/` a destination's old bytes are kept."""
    if not os.path.isabs(path) and not unsafe_member(path.replace(os.sep, "/")):
        return path
    rel = os.path.relpath(dest, env.prefix)
    if rel.startswith(".."):
        rel = dest.as_posix().lstrip("/")
    return "_outside/" + rel


def staged_name(dest: Path, run_id: str) -> Path:
    """A short name beside `dest` (any legal file name must still be stageable): `.pa-<hash>.tmp`."""
    tag = hashlib.sha256(f"{run_id}\0{dest.name}".encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return dest.with_name(f".pa-{tag}.tmp")


def dist_problem(name: str, version: str) -> str | None:
    """Why a distribution's METADATA name or version cannot name a directory (None when both can).

    They come from the environment; a name is used below the quarantine, so it must be a name in
    packaging's grammar (a letter or digit first, no separator), and the version a version.
    """
    from packaging.utils import InvalidName, canonicalize_name
    from packaging.version import InvalidVersion, Version

    try:
        canonicalize_name(name, validate=True)
    except InvalidName:
        return f"its METADATA names it {name!r}, which is not a distribution name"
    try:
        Version(version)
    except InvalidVersion:
        return f"its METADATA version {version!r} is not a version"
    return None


def new_run_id(dist: str) -> str:
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in dist)
    return f"{stamp}-{safe}-{secrets.token_hex(3)}"


def valid_run_id(run_id: str) -> bool:
    """A run id names one entry of a directory: no separator, not `.`/`..`, no NUL."""
    return bool(run_id) and run_id not in (".", "..") and "/" not in run_id and "\0" not in run_id


def quarantine_root(env: Environment) -> Path:
    return env.state_dir / "quarantine"


def journal_dir(env: Environment) -> Path:
    return env.state_dir / "journal"


def run_dir(env: Environment, run_id: str) -> Path:
    return quarantine_root(env) / run_id


def run_dir_problem(env: Environment, run_id: str) -> str | None:
    """Why `<quarantine>/<run_id>` is not a run directory of this environment (None when it is).

    It must be a directory directly below the quarantine directory, not a symlink: one could lead a
    manifest write or a restore anywhere.
    """
    if not valid_run_id(run_id):
        return f"{run_id!r} is not a run id"
    root = quarantine_root(env)
    where = run_dir(env, run_id)
    if os.path.islink(where):
        return f"{where} is a symlink"
    if os.path.realpath(where) != os.path.join(os.path.realpath(root), run_id):
        return f"{where} does not lie in {root}"
    return None
