"""An environment read from a whole filesystem tree as if it were `/`: an unpacked image, a container's
`/proc/PID/root`, a mounted snapshot. Nothing in the tree is run; its site directories are found where
images put them, every link and `..` on the way resolved inside the tree (beneath.chase).

The rest of patchaudit then reads the site directories by host paths. That is the same file only when
the host resolves those paths as the tree would: the site directories themselves are canonical paths
inside the tree (no link on the way), and `guard` refuses a tree whose site directories hold a link
to a directory, a link in place of metadata or a startup hook, or a RECORD path, that the host would
resolve elsewhere (an absolute link, a `..` past the top). A package file that is a link is never
followed (its hash is checked with O_NOFOLLOW, and a link there is drift), so it needs no check.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from patchaudit.errors import EnvironmentNotFound, UnsafePath
from patchaudit.fs.beneath import chase, open_dir, open_root
from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped
from patchaudit.target.environment import Environment

# Where images keep Python's site directories, as paths inside the tree; `*` matches one name.
SITE_PATTERNS = (
    "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
    "/usr/local/lib64/python3*/site-packages",
    "/usr/lib/python3/dist-packages",
    "/usr/lib/python3*/site-packages",
    "/usr/lib/python3*/dist-packages",
    "/usr/lib64/python3*/site-packages",
    "/opt/*/lib/python3*/site-packages",  # /opt/venv, /opt/conda, /opt/python
    "/opt/*/envs/*/lib/python3*/site-packages",  # conda environments
    "/*/lib/python3*/site-packages",  # /venv, /app (a venv at the top)
    "/*/.venv/lib/python3*/site-packages",  # /app/.venv (uv, poetry)
    "/*/venv/lib/python3*/site-packages",
    "/root/.local/lib/python3*/site-packages",
    "/home/*/.local/lib/python3*/site-packages",
)
_PROC_ROOT = re.compile(r"/proc/\d+/root")
MAX_MATCHES = 64  # site directories: more is a hostile tree, not an image


def from_root(root: Path) -> Environment:
    """The Python environments of a tree, as one environment holding every site directory found."""
    # /proc/PID/root is a door into the process's own root: resolving it as a link would give the
    # path the process sees ("/"), that is the host's root
    top = str(root) if _PROC_ROOT.fullmatch(str(root)) else os.path.realpath(root)
    if not os.path.isdir(top):
        if _PROC_ROOT.fullmatch(top):
            raise EnvironmentNotFound(f"no process {top.split('/')[2]} whose root can be read")
        raise EnvironmentNotFound(f"{root} is not a directory", hint="pass --root the top of an unpacked tree")
    root_fd = open_root(top)
    try:
        found = _find_sites(root_fd)
    finally:
        os.close(root_fd)
    if not found:
        tried = ", ".join(SITE_PATTERNS[:4])
        raise EnvironmentNotFound(f"no site-packages holding distributions in {root} (looked in {tried}, ...)")
    site_dirs = tuple(Path(top + inside) for inside in found)
    first = found[0]
    prefix = _prefix_of(first)
    scheme: dict[str, Path] = {"purelib": site_dirs[0], "platlib": site_dirs[0]}
    bin_dir = Path(top + prefix) / "bin"
    if bin_dir.is_dir() and not bin_dir.is_symlink():
        scheme["scripts"] = bin_dir
        scheme["data"] = Path(top + prefix)
    env = Environment(
        python=None,
        prefix=Path(top),
        site_dirs=site_dirs,
        scheme=scheme,
        not_executed="the tree is not this host's: nothing in it is run",
        tree=Path(top),
    )
    guard(env, Path(top))
    return env


def _prefix_of(site: str) -> str:
    """/usr/local for /usr/local/lib/python3.12/site-packages; /usr for /usr/lib/python3/dist-packages."""
    parts = site.split("/")
    return "/".join(parts[:-3]) or "/"


def _find_sites(root_fd: int) -> list[str]:
    found: list[str] = []
    seen: set[tuple[int, int]] = set()
    for pattern in SITE_PATTERNS:
        for inside in _glob(root_fd, pattern):
            try:
                fd = open_dir(root_fd, inside)
            except UnreadableFile:
                continue
            try:
                st = os.fstat(fd)
                key = (st.st_dev, st.st_ino)
                if key in seen or not _holds_distributions(fd):
                    continue
                seen.add(key)
                found.append(chase(root_fd, inside).path)
            finally:
                os.close(fd)
            if len(found) >= MAX_MATCHES:
                return found
    return found


def _holds_distributions(fd: int) -> bool:
    try:
        return any(name.endswith((".dist-info", ".egg-info")) for name in os.listdir(fd))
    except OSError:
        return False


def _glob(root_fd: int, pattern: str) -> Iterator[str]:
    """Canonical paths inside the tree that match `pattern` (each component a name or an fnmatch glob)."""
    paths = ["/"]
    for part in [p for p in pattern.split("/") if p]:
        nxt: list[str] = []
        for base in paths:
            if not any(c in part for c in "*?["):
                nxt.append(f"{base.rstrip('/')}/{part}")
                continue
            try:
                fd = open_dir(root_fd, base)
            except UnreadableFile:
                continue
            try:
                names = sorted(os.listdir(fd))
            except OSError:
                names = []
            finally:
                os.close(fd)
            nxt += [f"{base.rstrip('/')}/{n}" for n in names if fnmatch.fnmatchcase(n, part)][:MAX_MATCHES]
        paths = nxt
    for path in paths:
        try:
            if chase(root_fd, path).is_dir:
                yield path
        except UnreadableFile:
            continue


def guard(env: Environment, top: Path) -> None:
    """Refuse a tree where reading the site directories by host path would leave the tree (see above)."""
    root_fd = open_root(top)
    try:
        for site in env.site_dirs:
            inside = "/" + site.relative_to(top).as_posix()
            for base, dirs, files in os.walk(site):  # never follows a link
                for name in (*dirs, *files):
                    host = os.path.join(base, name)
                    if stat.S_ISLNK(os.lstat(host).st_mode):
                        _check_link(root_fd, top, inside + host[len(str(site)) :], host)
            _check_records(site, top)
    finally:
        os.close(root_fd)


def _check_link(root_fd: int, top: Path, inside: str, host: str) -> None:
    try:
        target = chase(root_fd, inside)
    except UnreadableFile:
        target = None
    host_target = os.path.realpath(host)
    metadata = any(p.endswith((".dist-info", ".egg-info")) for p in inside.split("/")[:-1])
    startup = inside.endswith(".pth") or inside.rpartition("/")[2].startswith(("sitecustomize.", "usercustomize."))
    if not (metadata or startup) and not os.path.isdir(host_target) and (target is None or not target.is_dir):
        return  # a link to a package's file is never followed: its hash is checked with O_NOFOLLOW
    if target is not None and host_target == str(top) + (target.path if target.path != "/" else ""):
        return
    raise UnsafePath(
        f"{inside} in {top} is a link to {os.readlink(host)!r}, which leaves the tree when read from the host",
        hint="audit the container through `patchaudit scan --image`, or remove the link",
    )


def _check_records(site: Path, top: Path) -> None:
    from patchaudit.target.record import parse_record

    prefix = str(top).rstrip("/") + "/"
    for entry in sorted(os.listdir(site)):
        if not entry.endswith(".dist-info"):
            continue
        try:
            data = read_capped(site / entry / "RECORD", Cap.RECORD)
        except UnreadableFile:
            continue
        for item in parse_record(data).entries:
            where = os.path.normpath(os.path.join(site, item.path))
            if not (where + "/").startswith(prefix):
                raise UnsafePath(
                    f"{entry}/RECORD lists {item.path!r}, outside {top}",
                    hint="a RECORD of an image names paths inside it; this one is hostile or broken",
                )


__all__ = ["SITE_PATTERNS", "from_root", "guard"]
