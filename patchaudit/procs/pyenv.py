"""Which Python environment a running process uses, found without running anything of it.

/proc/PID/exe names the resolved interpreter binary (a venv's `bin/python` is a symlink to it), so the
environment comes from what Python itself looks at: the path the process was started as (argv[0],
against its cwd or PATH) and a `pyvenv.cfg` beside it or one directory up. The site-packages of the
extension modules it has mapped are added: they are the directories it really imports from.
The site directories are those the interpreter's `site` builds, read from its tree as `--python`
does where it may not run the interpreter, so a system Python's dist-packages and a
`--system-site-packages` venv's base environment are examined too.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped_text
from patchaudit.procs.proc import ProcInfo

_SITE = re.compile(r"^(.*?/(?:site|dist)-packages)/")
_VERSION = re.compile(r"python(\d+\.\d+)")


@dataclass(frozen=True, kw_only=True, slots=True)
class ProcEnv:
    """Where a process's Python code comes from."""

    executable: str | None  # as Python computes sys.executable (the venv's path, not the resolved binary)
    prefix: str | None  # sys.prefix: the venv (pyvenv.cfg) or the interpreter's installation
    site_dirs: tuple[str, ...]  # its site-packages, then those its extension modules came from


def executable(proc: ProcInfo) -> str | None:
    """sys.executable as the process computed it: argv[0] made absolute, or found on its PATH."""
    argv0 = proc.argv[0] if proc.argv else ""
    cwd = proc.cwd() if "/" in argv0 and not argv0.startswith("/") else None
    return _executable(argv0, cwd, proc.getenv("PATH") if "/" not in argv0 else None, proc.exe)


@functools.lru_cache(maxsize=1024)
def _executable(argv0: str, cwd: str | None, search: str | None, exe: str | None) -> str | None:
    if "/" in argv0:
        path = argv0 if argv0.startswith("/") else os.path.join(cwd or "/", argv0)
        return os.path.normpath(path)
    if argv0 and search is not None:
        for directory in search.split(":"):
            candidate = os.path.join(directory or ".", argv0)
            if directory.startswith("/") and os.access(candidate, os.X_OK):
                return candidate
    return exe


def locate(proc: ProcInfo) -> ProcEnv:
    exe = executable(proc)
    home = None if _venv(exe) else proc.getenv("PYTHONHOME")  # without a pyvenv.cfg, PYTHONHOME decides
    asked = _asked(exe) if exe is not None and home is None else None
    prefix, site = asked if asked is not None else _prefix(exe, proc.exe, home)
    found = list(site)
    for mapped in proc.maps:
        match = _SITE.match(mapped.path)
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return ProcEnv(executable=exe, prefix=prefix, site_dirs=_distinct(found))


@functools.lru_cache(maxsize=256)
def _asked(exe: str) -> tuple[str, tuple[str, ...]] | None:
    """(sys.prefix, every site directory on its sys.path) as the interpreter's own `site` computes them:
    the venv's, the base installation's of a `--system-site-packages` venv, a system Python's
    dist-packages. Read from the tree (pyvenv.cfg, the installation's layout; the reading `--python`
    falls back to), never by running it: a host runs dozens of interpreters, and `ps` must stay fast."""
    from patchaudit.errors import PatchAuditError
    from patchaudit.target.environment import from_python

    try:
        env = from_python(Path(exe), tree_only=True)
    except PatchAuditError:
        return None
    return str(env.prefix), tuple(str(d) for d in env.site_dirs)


def _distinct(dirs: Sequence[str]) -> tuple[str, ...]:
    """Each directory once, however it was reached (a venv through a symlink and by its real path)."""
    seen: set[object] = set()
    out: list[str] = []
    for d in dirs:
        try:
            st = os.stat(d)
            key: object = (st.st_dev, st.st_ino)
        except OSError:
            key = d
        if key not in seen:
            seen.add(key)
            out.append(d)
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _venv(exe: str | None) -> bool:
    return exe is not None and any(
        os.path.isfile(os.path.join(d, "pyvenv.cfg"))
        for d in (os.path.dirname(exe), os.path.dirname(os.path.dirname(exe)))
    )


@functools.lru_cache(maxsize=1024)
def _prefix(exe: str | None, binary: str | None, home: str | None) -> tuple[str | None, tuple[str, ...]]:
    """(sys.prefix, its site-packages) as site.py finds them: a pyvenv.cfg beside the executable or
    one level up, else PYTHONHOME, else the installation the binary belongs to."""
    prefix: str | None = None
    version: str | None = None
    if exe is not None:
        for directory in (os.path.dirname(exe), os.path.dirname(os.path.dirname(exe))):
            cfg = os.path.join(directory, "pyvenv.cfg")
            if os.path.isfile(cfg):
                prefix = directory
                version = _cfg_version(cfg)
                break
    if prefix is None:
        prefix = home.split(":")[0] if home else (os.path.dirname(os.path.dirname(binary)) if binary else None)
    match = _VERSION.search(os.path.basename(binary or ""))
    version = version or (match.group(1) if match else None)
    return prefix, tuple(_prefix_site_dirs(prefix, version)) if prefix is not None else ()


@functools.lru_cache(maxsize=256)
def _cfg_version(cfg: str) -> str | None:
    try:
        text = read_capped_text(cfg, Cap.SMALL)
    except UnreadableFile:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("version", "version_info"):
            parts = value.strip().split(".")
            if len(parts) >= 2:
                return ".".join(parts[:2])
    return None


@functools.lru_cache(maxsize=256)
def _prefix_site_dirs(prefix: str, version: str | None) -> Sequence[str]:
    found: list[str] = []
    for lib in ("lib", "lib64"):
        pattern = f"python{version}" if version else None
        base = os.path.join(prefix, lib)
        try:
            names = sorted(os.listdir(base))
        except OSError:
            continue
        for name in names:
            if not name.startswith("python") or (pattern is not None and name not in (pattern, pattern + "t")):
                continue
            for leaf in ("site-packages", "dist-packages"):
                site = os.path.join(base, name, leaf)
                if os.path.isdir(site) and not any(os.path.samefile(site, s) for s in found):
                    found.append(site)
    return found
