"""`hf download --local-dir` trees: `.cache/huggingface/download/<path>.metadata` holds each file's
commit, etag and download time; the etag is the expected hash (sha256 for LFS files, else git sha1)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped
from patchaudit.models.digests import Algorithm, Digest, hash_files
from patchaudit.models.hubcache import read_tree
from patchaudit.models.layout import HF_LOCAL, STATE_DIR, LayoutScan, ModelTarget, Tracked
from patchaudit.parallel.statcache import StatCache
from patchaudit.report import DriftState

METADATA_SUFFIX = ".metadata"


@dataclass(frozen=True, kw_only=True, slots=True)
class Metadata:
    commit: str
    etag: str
    timestamp: float | None


def read_metadata(path: Path) -> Metadata | None:
    try:
        lines = read_capped(path, Cap.SMALL).decode("utf-8").splitlines()
    except (UnreadableFile, UnicodeDecodeError):
        return None
    if len(lines) < 2:
        return None
    try:
        timestamp = float(lines[2]) if len(lines) > 2 else None
    except ValueError:
        timestamp = None
    return Metadata(commit=lines[0].strip(), etag=lines[1].strip(), timestamp=timestamp)


def all_metadata(root: Path) -> dict[str, Metadata | None]:
    """repo path -> its metadata (None: unreadable)."""
    base = root / HF_LOCAL / "download"
    found: dict[str, Metadata | None] = {}
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            if name.endswith(METADATA_SUFFIX):
                path = Path(dirpath) / name
                rel = path.relative_to(base).as_posix()[: -len(METADATA_SUFFIX)]
                found[rel] = read_metadata(path)
    return found


def walk_files(root: Path, skip: tuple[Path, ...]) -> Iterator[tuple[str, Path, os.stat_result]]:
    """Every non-directory below root (directory links included), except below `skip`."""
    skipped = {str(p) for p in skip}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if os.path.join(dirpath, d) not in skipped)
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]):
            path = Path(dirpath) / name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            yield path.relative_to(root).as_posix(), path, st


def scan(target: ModelTarget, *, cache: StatCache | None, workers: int | None = None) -> LayoutScan:
    root = target.root
    meta = all_metadata(root)
    on_disk = list(walk_files(root, (root / HF_LOCAL, root / STATE_DIR)))
    commits = sorted({m.commit for m in meta.values() if m is not None})
    listings = {c: read_tree(root / HF_LOCAL, c) for c in commits}
    expected: dict[str, Digest | None] = {}
    for rel, m in meta.items():
        expected[rel] = Digest.from_name(m.etag) if m is not None else None
    jobs = []
    for rel, path, st in on_disk:
        if stat.S_ISREG(st.st_mode):
            digest = expected.get(rel)
            jobs.append((path, digest.algorithm if digest is not None else Algorithm.SHA256))
    hashed = hash_files(jobs, cache=cache, workers=workers)
    files: list[Tracked] = []
    seen = set()
    for rel, path, st in on_disk:
        seen.add(rel)
        m = meta.get(rel)
        digest = expected.get(rel)
        base = Tracked(path=rel, disk=path, repo_path=rel, expected=digest, commit=m.commit if m else None)
        if not stat.S_ISREG(st.st_mode):
            kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a regular file"
            files.append(_with(base, state=DriftState.MODIFIED, note=kind))
            continue
        algorithm = digest.algorithm if digest is not None else Algorithm.SHA256
        actual = hashed[(path, algorithm)][0]
        if rel not in meta:
            files.append(_with(base, state=DriftState.ADDED, actual=actual, content=path, note="no download metadata"))
        elif m is None or digest is None:
            note = "unreadable download metadata" if m is None else f"etag {m.etag!r} is not a content hash"
            files.append(_with(base, state=DriftState.MODIFIED, actual=actual, content=path, note=note))
        elif actual != digest:
            files.append(_with(base, state=DriftState.MODIFIED, actual=actual, content=path))
        else:
            files.append(_with(base, actual=actual, content=path))
    for rel, m in sorted(meta.items()):
        if rel not in seen:
            files.append(
                Tracked(
                    path=rel,
                    disk=root / rel,
                    repo_path=rel,
                    expected=expected.get(rel),
                    state=DriftState.MISSING,
                    commit=m.commit if m else None,
                    note="download metadata without its file",
                )
            )
            seen.add(rel)
    for commit, listing in listings.items():
        for rel, digest in sorted((listing or {}).items()):
            if rel not in seen:
                seen.add(rel)
                files.append(
                    Tracked(
                        path=rel,
                        disk=root / rel,
                        repo_path=rel,
                        expected=digest,
                        state=DriftState.MISSING,
                        commit=commit,
                        note=f"in the file list of {commit}, not on disk",
                    )
                )
    return LayoutScan(target=target, files=tuple(files), commits=tuple(commits))


def _with(item: Tracked, **changes: object) -> Tracked:
    import dataclasses

    return dataclasses.replace(item, **changes)  # type: ignore[arg-type]
