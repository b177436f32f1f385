"""Editable and VCS installs: the git working tree against the commit it was installed from (gitpython).

Paths are relative to the project directory that direct_url.json names. The commit is `vcs_info.commit_id`
when recorded; for a plain editable install (`dir_info.editable`, no commit recorded) it is the
checkout's HEAD, so drift means uncommitted changes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from patchaudit.pristine.http import local_path
from patchaudit.report import Drift, DriftState
from patchaudit.target.environment import InstalledDist
from patchaudit.target.record import encode_digest

_SKIP_PARTS = ("__pycache__",)


@dataclass(frozen=True, kw_only=True, slots=True)
class Checkout:
    repo: object  # git.Repo
    root: Path  # the repository's working tree
    project: Path  # the project directory inside it (what direct_url.json names)
    commit: str


def _project_dir(dist: InstalledDist) -> Path | None:
    info = dist.direct_url
    if not info or not isinstance(info.get("url"), str):
        return None
    url = str(info["url"])
    dir_info = info.get("dir_info")
    vcs_info = info.get("vcs_info")
    if isinstance(dir_info, dict) and dir_info.get("editable"):
        return local_path(url)
    if isinstance(vcs_info, dict) and vcs_info.get("vcs") == "git":
        # `pip install -e git+URL` clones into <prefix>/src/<name>
        prefix = dist.location.parents[2] if len(dist.location.parents) > 2 else dist.location
        candidate = prefix / "src" / canonicalize_name(dist.name)
        if candidate.is_dir():
            return candidate
        path = local_path(url.removeprefix("git+"))
        if path is not None and (path / ".git").exists() and _is_editable_target(dist, path):
            return path
    return None


def _is_editable_target(dist: InstalledDist, path: Path) -> bool:
    """A non-editable VCS install lives in site-packages with a RECORD: its repo is not its tree."""
    return not any(dist.location.glob(f"{canonicalize_name(dist.name).replace('-', '_')}/__init__.py"))


def checkout(dist: InstalledDist) -> Checkout | None:
    """The git checkout an editable/VCS install runs from, and its commit; None when there is none."""
    project = _project_dir(dist)
    if project is None or not project.is_dir():
        return None
    import git

    try:
        repo = git.Repo(project, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    if repo.bare or repo.working_tree_dir is None:
        return None
    info = dist.direct_url or {}
    vcs_info = info.get("vcs_info")
    commit = vcs_info.get("commit_id") if isinstance(vcs_info, dict) else None
    if not commit:
        try:
            commit = repo.head.commit.hexsha
        except ValueError:
            return None
    try:
        repo.commit(commit)
    except (ValueError, git.BadName):
        return None
    return Checkout(repo=repo, root=Path(repo.working_tree_dir), project=project.resolve(), commit=str(commit))


def _rel(co: Checkout, path_in_repo: str) -> str | None:
    absolute = co.root / path_in_repo
    try:
        rel = absolute.relative_to(co.project)
    except ValueError:
        return None
    text = rel.as_posix()
    if any(part in _SKIP_PARTS or part.endswith(".egg-info") for part in rel.parts):
        return None
    return text


def _sha256(data: bytes) -> str:
    return f"sha256={encode_digest(hashlib.sha256(data).digest())}"


def _blob(co: Checkout, path_in_repo: str) -> tuple[bytes, int] | None:
    import git

    try:
        blob = co.repo.commit(co.commit).tree / path_in_repo  # type: ignore[attr-defined]
    except KeyError:
        return None
    if not isinstance(blob, git.Blob):
        return None
    return blob.data_stream.read(), (0o755 if blob.mode & 0o111 else 0o644)


def committed_bytes(co: Checkout, path_in_repo: str) -> bytes | None:
    """A file's bytes at the install's commit; None when the commit does not have it."""
    blob = _blob(co, path_in_repo)
    return blob[0] if blob is not None else None


def _changes(co: Checkout) -> list[tuple[str, str]]:
    """(status letter, path in repo) for the working tree vs the commit, plus untracked files as `?`."""
    scope = os.path.relpath(co.project, co.root)
    out = co.repo.git.diff(co.commit, "--name-status", "--no-renames", "-z", "--", scope)  # type: ignore[attr-defined]
    fields = [f for f in out.split("\0") if f]
    changes = list(zip(fields[::2], fields[1::2], strict=False))
    for path in co.repo.untracked_files:  # type: ignore[attr-defined]
        if _rel(co, path) is not None:
            changes.append(("?", path))
    return changes


def working_tree_drift(dist: InstalledDist) -> tuple[Drift, ...] | None:
    """Drift of an editable/VCS install's working tree against its commit; None when not a git checkout."""
    co = checkout(dist)
    if co is None:
        return None
    drift: list[Drift] = []
    for status, path in _changes(co):
        rel = _rel(co, path)
        if rel is None:
            continue
        current = co.root / path
        actual = _sha256(current.read_bytes()) if current.is_file() and not current.is_symlink() else None
        if status in ("?", "A"):
            drift.append(Drift(path=rel, state=DriftState.ADDED, actual=actual, note=f"not in commit {co.commit[:12]}"))
            continue
        pristine = _blob(co, path)
        expected = _sha256(pristine[0]) if pristine else None
        if status == "D" or not current.exists():
            drift.append(Drift(path=rel, state=DriftState.MISSING, expected=expected))
        else:
            drift.append(Drift(path=rel, state=DriftState.MODIFIED, expected=expected, actual=actual))
    return tuple(sorted(drift, key=lambda d: d.path))


def working_tree_diff(dist: InstalledDist, paths: Collection[str] = ()) -> str | None:
    """git's diff of the working tree against the commit (untracked files included), `patch -p0` style.

    Paths are relative to the repository root; None when the install is not a git checkout.
    """
    co = checkout(dist)
    if co is None:
        return None
    scope = [os.path.relpath(co.project / p, co.root) for p in paths] or [os.path.relpath(co.project, co.root)]
    git_ = co.repo.git  # type: ignore[attr-defined]
    text = git_.diff(co.commit, "--no-prefix", "--no-renames", "--", *scope, strip_newline_in_stdout=False)
    wanted = {os.path.normpath(s) for s in scope}
    for status, path in _changes(co):
        if status != "?" or not any(path == w or path.startswith(w.rstrip("/") + "/") or w == "." for w in wanted):
            continue
        extra = git_.diff(
            "--no-index", "--no-prefix", "--", "/dev/null", path, with_exceptions=False, strip_newline_in_stdout=False
        )
        text += extra.replace(f"+++ {path}", f"+++ {path}", 1)
    return text


@dataclass(frozen=True, kw_only=True, slots=True)
class TreeRestore:
    """What restoring a working tree to its commit writes: `(path, dest, bytes or None to remove, mode)`."""

    project: Path
    commit: str
    files: tuple[tuple[str, Path, bytes | None, int], ...]


def working_tree_restore(dist: InstalledDist, paths: Collection[str] = ()) -> TreeRestore | None:
    """The committed bytes of every drifted file (or of `paths`); None when the install is not a git checkout."""
    co = checkout(dist)
    if co is None:
        return None
    wanted = {os.path.normpath(p) for p in paths}
    files: list[tuple[str, Path, bytes | None, int]] = []
    for status, path in _changes(co):
        rel = _rel(co, path)
        if rel is None or (wanted and os.path.normpath(rel) not in wanted):
            continue
        dest = co.root / path
        if status in ("?", "A"):
            files.append((rel, dest, None, 0))
            continue
        pristine = _blob(co, path)
        if pristine is None:
            continue
        files.append((rel, dest, *pristine))
    return TreeRestore(project=co.project, commit=co.commit, files=tuple(files))


def project_roots(dists: Iterable[InstalledDist]) -> tuple[str, ...]:
    """The project directories that editable and VCS installs of an environment run from.

    Derived from each install's own direct_url.json, as a revert of that install is; a revert journal
    or quarantine manifest that names a directory outside these and the scheme is refused.
    """
    roots = set()
    for dist in dists:
        if dist.direct_url is None:
            continue
        project = _project_dir(dist)
        if project is not None and project.is_dir():
            roots.add(str(project.resolve()))
    return tuple(sorted(roots))


__all__ = [
    "Checkout",
    "TreeRestore",
    "checkout",
    "project_roots",
    "working_tree_restore",
    "working_tree_diff",
    "working_tree_drift",
]
