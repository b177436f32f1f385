"""The target environment: its site directories, scheme directories and installed distributions."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from patchaudit.errors import DistributionNotFound, EnvironmentNotFound
from patchaudit.fs.beneath import DirCache, read_below
from patchaudit.fs.safefs import Cap, UnreadableFile, parse_json
from patchaudit.report import Source

if TYPE_CHECKING:
    from packaging.utils import NormalizedName

SCHEME_KEYS = ("purelib", "platlib", "scripts", "data", "include", "platinclude")


@dataclass(frozen=True, kw_only=True, slots=True)
class Environment:
    """Where a Python environment keeps its files."""

    python: str | None
    prefix: Path
    site_dirs: tuple[Path, ...]
    scheme: dict[str, Path] = field(default_factory=dict)
    # Site directories of the base interpreter (include-system-site-packages): read, never written.
    borrowed: tuple[Path, ...] = ()
    # Set when the layout was read from pyvenv.cfg and the tree instead of asking the interpreter: why.
    not_executed: str | None = None
    # Set when the environment was read from a tree that is not this host's (--root): its top. Nothing
    # of patchaudit's own (caches) is written below it.
    tree: Path | None = None

    @property
    def state_dir(self) -> Path:
        """patchaudit's state for this environment (quarantine, caches, journal): `<prefix>/.patchaudit`,
        or as root over an environment that is not root's alone, root's own directory for it; for a
        tree read as `/` (--root), always a directory outside the tree."""
        from patchaudit.target.cachedir import outside_state, tree_state

        return outside_state(self.tree) if self.tree is not None else tree_state(self.prefix)

    def interrupted_runs(self) -> list[str]:
        """Run ids of reverts a kill interrupted here: the journals in the state directory, by name only
        (nothing read or changed). Here, not in the revert package, so a scan asks it without loading that."""
        try:
            names = os.listdir(self.state_dir / "journal")
        except OSError:
            return []
        return sorted(n.removesuffix(".json") for n in names if n.endswith(".json"))

    def writable_roots(self) -> tuple[Path, ...]:
        """The only directories patchaudit may ever write below."""
        roots = {p for p in self.site_dirs if p not in self.borrowed}
        for key in ("purelib", "platlib", "scripts", "include", "platinclude"):
            if key in self.scheme:
                roots.add(self.scheme[key])
        return tuple(sorted(roots))


def from_python(python: Path, *, tree_only: bool = False) -> Environment:
    """The environment of an interpreter: asked in one isolated subprocess, or read from the tree.

    As root, an interpreter that another user could have replaced or edited (or anything it reads to
    answer) is never executed: its layout is read from pyvenv.cfg and the directory tree instead.
    `tree_only` reads the tree whoever runs patchaudit.
    """
    from patchaudit.target import layout, probe, trust

    exe = probe.interpreter(python)
    not_executed = None
    if tree_only:
        not_executed = "the caller asked for the layout without running the interpreter"
    elif trust.running_as_root() and not probe.started(exe):  # started: probe_ahead() decided the same
        not_executed = layout.foreign_input(exe, layout.version_hint(exe))
    answer = probe.ask(exe, python) if not_executed is None else layout.derive(exe, python)
    paths = {k: v for k, v in answer.paths.items() if k in SCHEME_KEYS}
    candidates = [paths.get("purelib"), paths.get("platlib"), *answer.site, *answer.base_site]
    site_dirs = _unique_dirs(candidates)
    if not site_dirs:
        raise EnvironmentNotFound(f"{python} has no site-packages directory")
    own = _unique_dirs([paths.get("purelib"), paths.get("platlib"), *answer.site])
    borrowed = tuple(d for d in site_dirs if d not in own)
    return Environment(
        python=str(exe),
        prefix=answer.prefix,
        site_dirs=site_dirs,
        scheme=paths,
        borrowed=borrowed,
        not_executed=not_executed,
    )


def probe_ahead(python: Path) -> None:
    """Start asking the interpreter `python` names where its environment lives (probe.ahead), for
    from_python() to take the answer. As root only an interpreter no other user could have replaced or
    edited is started, as from_python() decides (and, finding it started, need not decide again)."""
    from patchaudit.target import layout, probe, trust

    try:
        exe = probe.interpreter(python)
    except EnvironmentNotFound:
        return
    if trust.running_as_root() and layout.foreign_input(exe, layout.version_hint(exe)) is not None:
        return
    probe.ahead(exe)


def from_path(site_dir: Path) -> Environment:
    """An environment named by one site-packages directory."""
    site_dir = site_dir.absolute()
    if not site_dir.is_dir():
        raise EnvironmentNotFound(f"{site_dir} is not a directory", hint="pass a site-packages directory")
    prefix = site_dir
    parts = site_dir.parts
    if len(parts) >= 3 and parts[-1] in ("site-packages", "dist-packages") and parts[-2].startswith("python"):
        prefix = site_dir.parents[2] if parts[-3] in ("lib", "lib64") else site_dir.parent
    scheme = {"purelib": site_dir, "platlib": site_dir}
    if prefix != site_dir and (prefix / "bin").is_dir():
        scheme["scripts"] = prefix / "bin"
        scheme["data"] = prefix
    return Environment(python=None, prefix=prefix, site_dirs=(site_dir,), scheme=scheme)


def current() -> Environment:
    return from_python(Path(sys.executable))


def resolve(python: Path | None, site_path: Path | None, root: Path | None = None) -> Environment:
    if python is not None and site_path is not None:
        raise EnvironmentNotFound("give --python or --path, not both")
    if root is not None:
        if python is not None or site_path is not None:
            raise EnvironmentNotFound("give --root alone: its site directories are found inside the tree")
        from patchaudit.target import rootfs

        return rootfs.from_root(root)
    if site_path is not None:
        return from_path(site_path)
    if python is not None:
        return from_python(python)
    return current()


def _unique_dirs(candidates: Iterable[Path | None]) -> tuple[Path, ...]:
    seen: list[Path] = []
    for candidate in candidates:
        if candidate is None or not candidate.is_dir():
            continue
        if any(os.path.samefile(candidate, s) for s in seen):
            continue
        seen.append(candidate)
    return tuple(seen)


def canonical_name(name: str) -> NormalizedName:
    """A project name as PEP 503 normalizes it (packaging.utils.canonicalize_name's answer).

    Worked out here: importing packaging.utils imports packaging.tags, and with it logging, subprocess
    and platform, which a scan of a clean environment has no other use for."""
    value = name.lower().replace("_", "-").replace(".", "-")
    while "--" in value:
        value = value.replace("--", "-")
    return cast("NormalizedName", value)


@dataclass(frozen=True, kw_only=True, slots=True)
class InstalledDist:
    """One *.dist-info or *.egg-info directory found in a site directory."""

    name: str
    version: str
    location: Path  # the site directory that holds the metadata directory
    meta_dir: Path

    @property
    def key(self) -> NormalizedName:
        return canonical_name(self.name)

    @property
    def record_path(self) -> Path | None:
        path = self.meta_dir / "RECORD"
        return path if self.meta_dir.suffix == ".dist-info" else None

    @property
    def direct_url(self) -> dict[str, object] | None:
        try:
            data = parse_json(read_below(self.meta_dir / "direct_url.json", Cap.SMALL))
        except (UnreadableFile, ValueError):
            return None
        return data if isinstance(data, dict) else None

    @property
    def source(self) -> Source:
        if self.meta_dir.suffix != ".dist-info":
            return Source.LEGACY
        info = self.direct_url
        if info is None:
            return Source.WHEEL
        dir_info = info.get("dir_info")
        if isinstance(dir_info, dict) and dir_info.get("editable"):
            return Source.EDITABLE
        if "vcs_info" in info:
            return Source.VCS
        return Source.WHEEL


def _read_name_version(meta_dir: Path, dirs: DirCache) -> tuple[str, str] | None:
    """Name and Version from the metadata, else from the directory name (`name-version.dist-info`)."""
    from patchaudit.target.metadata import name_version

    name, version = name_version(meta_dir, dirs)
    if name and version:
        return name, version
    stem = meta_dir.name.rsplit(".", 1)[0]
    name, sep, version = stem.partition("-")
    if not sep:
        return None
    return name, version.split("-", 1)[0]


def distributions(env: Environment) -> list[InstalledDist]:
    """Every distribution in the environment's site directories, in sys.path order."""
    found: list[InstalledDist] = []
    with DirCache() as dirs:  # one descriptor per directory for every metadata directory, not a walk each
        for site_dir in env.site_dirs:
            found.extend(_in_site_dir(site_dir, dirs))
    return found


def _in_site_dir(site_dir: Path, dirs: DirCache) -> list[InstalledDist]:
    """The distributions of one site directory, in name order."""
    found: list[InstalledDist] = []
    try:
        names = sorted(os.listdir(site_dir))
    except OSError as exc:
        raise EnvironmentNotFound(f"cannot list {site_dir}: {exc.strerror}") from None
    for entry in names:
        if not entry.endswith((".dist-info", ".egg-info")):
            continue
        meta_dir = site_dir / entry
        if not meta_dir.is_dir():
            continue
        nv = _read_name_version(meta_dir, dirs)
        if nv is None:
            continue
        found.append(InstalledDist(name=nv[0], version=nv[1], location=site_dir, meta_dir=meta_dir))
    return found


def require_any(env: Environment, found: Sequence[InstalledDist], site_path: Path | None = None) -> None:
    """A target holding no distribution has nothing to vouch for: an error in every command (a scan of
    the wrong directory must not pass), raised before anything (a cache, a journal) is written there."""
    if found:
        return
    if site_path is not None or env.python is None:
        where = site_path if site_path is not None else ", ".join(str(s) for s in env.site_dirs)
        raise EnvironmentNotFound(f"no distributions in {where}: is this the site-packages directory?")
    where = ", ".join(str(s) for s in env.site_dirs)
    raise EnvironmentNotFound(f"no distributions in {where}: is this the right interpreter?")


def select(dists: Sequence[InstalledDist], names: Sequence[str]) -> list[InstalledDist]:
    """The distributions named (all when none are); an unknown name is an error."""
    if not names:
        return list(dists)
    by_key: dict[str, list[InstalledDist]] = {}
    for dist in dists:
        by_key.setdefault(dist.key, []).append(dist)
    chosen: list[InstalledDist] = []
    for name in names:
        matches = by_key.get(canonical_name(name))
        if not matches:
            raise DistributionNotFound(f"{name} is not installed in this environment")
        chosen.extend(m for m in matches if m not in chosen)
    return chosen
