"""Ask an interpreter where its environment lives, without running anything of that environment."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from patchaudit.errors import EnvironmentNotFound

# Run with -I -S: no .pth file runs and nothing of site-packages is imported. -S also skips
# site.venv(), which is what turns a venv's sys.prefix into the venv (Debian's patched sysconfig answers
# with its posix_local scheme otherwise). site.venv() itself cannot be called: it ends in
# addsitepackages(), which executes the .pth files. So do its pyvenv.cfg part here, as it does it.
_PROBE = r"""
import json, os, sys
exe = sys.executable
exe_dir = os.path.dirname(os.path.abspath(exe))
site_prefix = os.path.dirname(exe_dir)
venv = None
for d in (exe_dir, site_prefix):
    cfg = os.path.join(d, "pyvenv.cfg")
    if os.path.isfile(cfg):
        venv = cfg
        break
system_site = True
if venv is not None:
    with open(venv, encoding="utf-8") as f:
        for line in f:
            key, sep, value = line.partition("=")
            if sep and key.strip().lower() == "include-system-site-packages":
                system_site = value.strip().lower() == "true"
    sys.prefix = sys.exec_prefix = site_prefix
prefix = sys.prefix
import site, sysconfig
v = {"base": prefix, "platbase": prefix, "installed_base": prefix, "installed_platbase": prefix}
paths = sysconfig.get_paths(vars=v)
site_dirs = site.getsitepackages([prefix])
base_dirs = []
if venv is not None and system_site:
    base_dirs = site.getsitepackages([sys.base_prefix, sys.base_exec_prefix])
print(json.dumps({"executable": exe, "prefix": prefix, "venv": venv, "paths": paths, "site": site_dirs,
                  "base_site": base_dirs, "version": "%d.%d" % sys.version_info[:2]}))
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class Answer:
    """What the interpreter said about itself."""

    executable: str
    prefix: Path
    venv: bool
    paths: dict[str, Path]
    site: tuple[Path, ...]
    base_site: tuple[Path, ...]
    version: str


def _check_venv_cfg(exe: Path, shown: Path) -> None:
    """The interpreter reads pyvenv.cfg beside it (or one level up) before anything else, following links:
    a FIFO or a device there would hold it, and the probe with it, so such a file is refused first."""
    for directory in (exe.parent, exe.parent.parent):
        cfg = directory / "pyvenv.cfg"
        try:
            mode = os.stat(cfg).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            raise EnvironmentNotFound(f"{cfg} is not a regular file: {shown} would wait on it, so it is not run")


def interpreter(python: Path) -> Path:
    """The interpreter `python` names: itself (relative to the working directory), or the bin/python of a
    directory; EnvironmentNotFound when there is none."""
    exe = python if python.is_absolute() else Path.cwd() / python
    if exe.is_dir():
        for candidate in (exe / "bin" / "python", exe / "bin" / "python3"):
            if candidate.exists():
                exe = candidate
                break
    if not exe.exists():
        raise EnvironmentNotFound(f"no interpreter at {python}", hint="pass --python /path/to/venv/bin/python")
    return exe


_ahead: dict[str, subprocess.Popen[str]] = {}  # interpreter -> its probe, started before ask() was called


def ahead(exe: Path) -> None:
    """Start the probe of `exe` now, for ask() to take its answer: the command line starts it before it
    loads the rest of itself, and the interpreter starts up meanwhile. The caller has decided that `exe`
    may run (environment.probe_ahead). Nothing is raised here: ask() runs the probe again and says what
    is wrong."""
    from patchaudit.parallel.children import start_child

    try:
        _check_venv_cfg(exe, exe)
        _ahead[str(exe)] = start_child(_command(exe))
    except (EnvironmentNotFound, OSError):
        pass


def started(exe: Path) -> bool:
    """Whether ahead() started the probe of `exe` and ask() has not taken its answer yet."""
    return str(exe) in _ahead


def _command(exe: Path) -> list[str]:
    return [str(exe), "-I", "-S", "-c", _PROBE]


def ask(exe: Path, shown: Path) -> Answer:
    """Run the probe in `exe` (one isolated subprocess), or take the answer of the one ahead() started;
    `shown` is the name the user gave."""
    _check_venv_cfg(exe, shown)
    from patchaudit.parallel.children import finish_child, start_child

    try:
        child = _ahead.pop(str(exe), None) or start_child(_command(exe))
        status, stdout, stderr = finish_child(child, timeout=30)
    except subprocess.TimeoutExpired:
        raise EnvironmentNotFound(f"{shown} did not answer within 30 s") from None
    except OSError as exc:
        raise EnvironmentNotFound(f"cannot run {shown}: {exc.strerror or exc}") from None
    if status != 0:
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvironmentNotFound(f"{shown} did not answer: {last}")
    try:
        info = json.loads(stdout)
        return Answer(
            executable=str(info["executable"]),
            prefix=Path(info["prefix"]),
            venv=info.get("venv") is not None,
            paths={str(k): Path(v) for k, v in dict(info["paths"]).items() if isinstance(v, str) and v},
            site=tuple(Path(p) for p in info.get("site") or ()),
            base_site=tuple(Path(p) for p in info.get("base_site") or ()),
            version=str(info["version"]),
        )
    except (ValueError, KeyError, TypeError):
        raise EnvironmentNotFound(f"{shown} answered something that is not the probe's JSON") from None
