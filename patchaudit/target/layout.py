"""An environment's layout read from pyvenv.cfg and the directory tree, without running its interpreter.

Used where running the interpreter is not safe (as root, on an environment another user can write).
It reproduces what CPython's site and sysconfig answer for the common layouts: venvs (venv, virtualenv,
uv), Debian/Ubuntu's patched system Python (dist-packages, /usr/local), and plain installations (pyenv,
standalone builds, conda prefixes, python.org builds).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from patchaudit.errors import EnvironmentNotFound
from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped_text
from patchaudit.target.probe import Answer

_VERSION = re.compile(r"^(\d+)\.(\d+)")
_BINARY = re.compile(r"^python(\d+\.\d+)")
_STDLIB_DIR = re.compile(r"python(\d+\.\d+)")


def derive(exe: Path, shown: Path) -> Answer:
    """The layout of the environment of `exe`, from files only."""
    exe_dir = Path(os.path.abspath(exe)).parent
    site_prefix = exe_dir.parent
    cfg = next((c for c in (exe_dir / "pyvenv.cfg", site_prefix / "pyvenv.cfg") if c.is_file()), None)
    if cfg is not None:
        return _venv(exe, site_prefix, read_cfg(cfg), shown)
    real = Path(os.path.realpath(exe))
    prefix = real.parent.parent
    version = _version_from_names(real, prefix)
    if version is None or not (prefix / "lib" / f"python{version}" / "os.py").is_file():
        raise EnvironmentNotFound(
            f"cannot tell the layout of {shown} without running it (no pyvenv.cfg, no lib/pythonX.Y/os.py)",
            hint="pass --path SITE-PACKAGES instead",
        )
    paths = _scheme(prefix, version, debian=_is_debian(prefix, version))
    return Answer(
        executable=str(exe),
        prefix=prefix,
        venv=False,
        paths=paths,
        site=tuple(_site_candidates(prefix, version)),
        base_site=(),
        version=version,
    )


def version_hint(exe: Path) -> str | None:
    """X.Y as pyvenv.cfg or the binary's name tell it, when they do (no directory listing)."""
    exe_dir = Path(os.path.abspath(exe)).parent
    for cfg in (exe_dir / "pyvenv.cfg", exe_dir.parent / "pyvenv.cfg"):
        if cfg.is_file():
            return _version_from_cfg(read_cfg(cfg))
    match = _BINARY.match(Path(os.path.realpath(exe)).name)
    return match.group(1) if match else None


def _venv(exe: Path, prefix: Path, cfg: dict[str, str], shown: Path) -> Answer:
    version = _version_from_cfg(cfg) or _version_from_names(Path(os.path.realpath(exe)), prefix)
    if version is None:
        raise EnvironmentNotFound(f"cannot tell the Python version of {shown} from its pyvenv.cfg or lib/")
    base_site: list[Path] = []
    if cfg.get("include-system-site-packages", "false").lower() == "true":
        home = cfg.get("home")
        if home:
            base = Path(os.path.realpath(home)).parent
            base_site = _site_candidates(base, version)
    return Answer(
        executable=str(exe),
        prefix=prefix,
        venv=True,
        paths=_scheme(prefix, version, debian=False),
        site=tuple(_site_candidates(prefix, version)),
        base_site=tuple(base_site),
        version=version,
    )


def read_cfg(cfg: Path) -> dict[str, str]:
    """pyvenv.cfg as site.venv() reads it: key = value lines, keys lower-cased."""
    out: dict[str, str] = {}
    try:
        text = read_capped_text(cfg, Cap.SMALL)
    except UnreadableFile:
        return out
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def _version_from_cfg(cfg: dict[str, str]) -> str | None:
    # venv writes `version`, virtualenv and uv write `version_info` (3.11.2 or 3.11.2.final.0)
    for key in ("version_info", "version"):
        match = _VERSION.match(cfg.get(key, ""))
        if match:
            return f"{match.group(1)}.{match.group(2)}"
    return None


def _version_from_names(real: Path, prefix: Path) -> str | None:
    """X.Y from the binary's name (python3.11), else from the only lib/pythonX.Y/ of the prefix."""
    match = _BINARY.match(real.name)
    if match:
        return match.group(1)
    try:
        names = os.listdir(prefix / "lib")
    except OSError:
        return None
    found = [m.group(1) for m in map(_STDLIB_DIR.fullmatch, names) if m]
    return found[0] if len(found) == 1 else None


def _is_debian(prefix: Path, version: str) -> bool:
    """Debian and Ubuntu patch sysconfig: pip installs into /usr/local/lib/pythonX.Y/dist-packages."""
    stdlib = prefix / "lib" / f"python{version}"
    for source in (stdlib / "sysconfig.py", stdlib / "sysconfig" / "__init__.py"):  # a package from 3.13
        try:
            with open(source, "rb") as fh:
                return b"'posix_local'" in fh.read()
        except OSError:
            continue
    return False


def _scheme(prefix: Path, version: str, *, debian: bool) -> dict[str, Path]:
    base = prefix / "local" if debian else prefix
    lib = "dist-packages" if debian else "site-packages"
    purelib = base / "lib" / f"python{version}" / lib
    platlib = purelib
    lib64 = base / "lib64" / f"python{version}" / lib
    if lib64.is_dir() and not lib64.is_symlink() and not (purelib.is_dir() and os.path.samefile(lib64, purelib)):
        platlib = lib64
    return {
        "purelib": purelib,
        "platlib": platlib,
        "scripts": base / "bin",
        "data": base,
        "include": prefix / "include" / f"python{version}",
        "platinclude": prefix / "include" / f"python{version}",
    }


def _site_candidates(prefix: Path, version: str) -> list[Path]:
    """site.getsitepackages() for one prefix, the union of CPython's and Debian's lists."""
    out = [prefix / "lib" / f"python{version}" / "site-packages"]
    out.append(prefix / "lib64" / f"python{version}" / "site-packages")
    out.append(prefix / "local" / "lib" / f"python{version}" / "dist-packages")
    out.append(prefix / "lib" / "python3" / "dist-packages")
    out.append(prefix / "lib" / f"python{version}" / "dist-packages")
    return out


# Stdlib packages the probe imports beside the frozen core (json, sysconfig, site); their bytecode too.
_STDLIB_SUBDIRS = ("encodings", "json", "re", "collections", "importlib", "sysconfig", "lib-dynload")


def foreign_input(exe: Path, version: str | None) -> str | None:
    """Why running the probe in `exe` would execute something a user other than root can change.

    Checked: the interpreter and each link to it, pyvenv.cfg and the `home` it names (it decides where
    the stdlib is loaded from), and in each base installation the shared library, the stdlib directory,
    the packages the probe imports and their bytecode caches.
    """
    from patchaudit.target import trust

    exe = Path(os.path.abspath(exe))
    files: list[Path] = [exe]
    prefixes = [Path(os.path.realpath(exe)).parent.parent]
    for cfg in (exe.parent / "pyvenv.cfg", exe.parent.parent / "pyvenv.cfg"):
        if cfg.exists():
            files.append(cfg)
            home = read_cfg(cfg).get("home")
            if home:
                files.append(Path(home))
                prefixes.append(Path(os.path.realpath(home)).parent)
    reason = trust.foreign_writer(files)
    if reason is not None:
        return reason
    directories: list[Path] = []
    for prefix in dict.fromkeys(prefixes):
        lib = prefix / "lib"
        directories.append(lib)
        names = [f"python{version}"] if version else _stdlib_names(lib)
        for name in names:
            stdlib = lib / name
            for sub in ("", *_STDLIB_SUBDIRS):
                directories.append(stdlib / sub if sub else stdlib)
                directories.append(stdlib / sub / "__pycache__" if sub else stdlib / "__pycache__")
    return trust.foreign_writer_in(directories)


def _stdlib_names(lib: Path) -> list[str]:
    try:
        return [n for n in os.listdir(lib) if n.startswith("python3")]
    except OSError:
        return []
