"""The Hub client's cache of one repo: `snapshots/<commit>/<path>` links into content-named `blobs/`.

Every snapshot entry must be a symlink to `blobs/<name>`, and every blob must hash to its name (64 hex:
sha256 of the content, as LFS names files; 40 hex: the git blob id). huggingface_hub 2.x also keeps the
commit's file list in `trees/<commit>.json`: when it is there, missing and added files are known too.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from patchaudit.errors import ModelNotFound
from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped_text, read_json
from patchaudit.models.blobmatch import Edited, match_blobs
from patchaudit.models.digests import Algorithm, Digest, hash_files
from patchaudit.models.layout import LayoutScan, ModelTarget, Problem, Tracked, is_commit
from patchaudit.parallel.hashing import FileState
from patchaudit.parallel.statcache import StatCache
from patchaudit.report import DriftState

INCOMPLETE = ".incomplete"


def read_refs(root: Path) -> dict[str, str]:
    """ref name (`main`, `refs/pr/1`) -> what its file says."""
    refs: dict[str, str] = {}
    base = root / "refs"
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            path = Path(dirpath) / name
            try:
                refs[path.relative_to(base).as_posix()] = read_capped_text(path, Cap.SMALL).strip()
            except UnreadableFile:
                refs[path.relative_to(base).as_posix()] = ""
    return refs


def snapshot_commits(root: Path) -> list[str]:
    try:
        return sorted(p.name for p in (root / "snapshots").iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


def select_commits(target: ModelTarget, refs: dict[str, str], commits: list[str]) -> list[str]:
    """The snapshots a revision names (all of them when none is given)."""
    rev = target.revision
    if rev is None:
        return commits
    if rev in refs:
        if not is_commit(refs[rev]):  # a ref file is input: what it holds names a snapshot directory
            raise ModelNotFound(f"{target.name}: ref {rev!r} holds {refs[rev][:60]!r}, not a commit")
        return [refs[rev]]
    if rev in commits:
        return [rev]
    matches = [c for c in commits if len(rev) >= 7 and c.startswith(rev)]
    if len(matches) == 1:
        return matches
    raise ModelNotFound(f"{target.name}: no ref or snapshot {rev!r} in {target.root}")


def read_tree(root: Path, commit: str) -> dict[str, Digest] | None:
    """The commit's file list as the client cached it (`trees/<commit>.json`), or None."""
    try:
        data = read_json(root / "trees" / f"{commit}.json")
        files = data["files"]
        listing = {}
        for path, info in files.items():
            name = info.get("lfs_sha256") or info["blob_id"]
            digest = Digest.from_name(name)
            if digest is None:
                return None
            listing[path] = digest
        return listing
    except (UnreadableFile, ValueError, KeyError, TypeError, AttributeError):
        return None


def _entries(snapshot: Path) -> Iterator[tuple[str, Path, os.stat_result]]:
    """(repo path, path, lstat) of every non-directory below a snapshot; directory links are entries."""
    for dirpath, dirs, files in os.walk(snapshot):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            path = Path(dirpath) / name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            yield path.relative_to(snapshot).as_posix(), path, st


def scan(target: ModelTarget, *, cache: StatCache | None, workers: int | None = None) -> LayoutScan:
    root = target.root
    blobs_dir = root / "blobs"
    refs = read_refs(root)
    commits = snapshot_commits(root)
    chosen = select_commits(target, refs, commits)
    problems: list[Problem] = []
    notes: list[str] = []
    wanted_refs = refs if target.revision is None else {k: v for k, v in refs.items() if v in chosen}
    for ref, commit in sorted(wanted_refs.items()):
        if not is_commit(commit):
            problems.append(Problem(path=f"refs/{ref}", state=DriftState.MODIFIED, note=f"ref {ref} holds {commit!r}"))
        elif commit not in commits:
            problems.append(
                Problem(
                    path=f"refs/{ref}",
                    state=DriftState.MISSING,
                    note=f"ref {ref} -> {commit}: no such snapshot",
                    commit=commit,
                )
            )

    # links of every snapshot (a blob no snapshot links to is a candidate for a link replaced by a file)
    linked: dict[str, list[str]] = {}
    raw: dict[str, list[tuple[str, Path, os.stat_result]]] = {}
    for commit in commits:
        entries = list(_entries(root / "snapshots" / commit))
        raw[commit] = entries
        for rel, path, st in entries:
            if stat.S_ISLNK(st.st_mode):
                name = _blob_name(blobs_dir, path)
                if name is not None:
                    linked.setdefault(name, []).append(f"snapshots/{commit}/{rel}")
    blob_names = _blob_names(blobs_dir)
    orphans = sorted(set(blob_names) - set(linked))
    listings = {c: read_tree(root, c) for c in chosen if c in raw}
    # what every revision has at each path (links and cached file lists): an edited file's candidates
    by_path: dict[str, set[str]] = {}
    for commit, entries in raw.items():
        for rel, path, st in entries:
            name = _blob_name(blobs_dir, path) if stat.S_ISLNK(st.st_mode) else None
            if name is not None and name in blob_names:
                by_path.setdefault(rel, set()).add(name)
        listing = listings[commit] if commit in listings else read_tree(root, commit)
        for rel, digest in (listing or {}).items():
            if digest.hex in blob_names:
                by_path.setdefault(rel, set()).add(digest.hex)

    jobs: set[tuple[Path, Algorithm]] = set()
    for commit in chosen:
        for rel, path, st in raw.get(commit, []):
            if stat.S_ISLNK(st.st_mode):
                name = _blob_name(blobs_dir, path)
                if name is not None and name in blob_names:
                    jobs.add((blobs_dir / name, blob_names[name].algorithm))
            elif stat.S_ISREG(st.st_mode):
                known = listings.get(commit) or {}
                algorithm = known[rel].algorithm if rel in known else Algorithm.SHA256
                jobs.add((path, algorithm))
                if rel not in known:
                    candidates = [*orphans, *by_path.get(rel, ())]
                    jobs.update((path, blob_names[o].algorithm) for o in candidates)
                    jobs.update((blobs_dir / o, blob_names[o].algorithm) for o in candidates)
        for digest in (listings.get(commit) or {}).values():
            if digest.hex in blob_names:
                jobs.add((blobs_dir / digest.hex, digest.algorithm))
    jobs.update((blobs_dir / o, blob_names[o].algorithm) for o in orphans)
    hashed = hash_files(jobs, cache=cache, workers=workers)

    def blob_ok(name: str) -> bool:
        got = hashed.get((blobs_dir / name, blob_names[name].algorithm))
        return got is not None and got[0] == blob_names[name]

    intact_orphans = [o for o in orphans if blob_ok(o)]
    files: list[Tracked] = []
    edited: list[Edited] = []
    for commit in chosen:
        if commit not in raw:
            continue
        listing = listings.get(commit)
        if listing is None:
            notes.append(f"no file list for snapshot {commit} (trees/{commit}.json): missing files cannot be seen")
        seen: set[str] = set()
        for rel, path, st in sorted(raw[commit]):
            seen.add(rel)
            expected = listing.get(rel) if listing is not None else None
            item = _judge(root, commit, rel, path, st, expected, blob_names, linked, hashed)
            if listing is not None and rel not in listing:
                item = _replace(item, state=DriftState.ADDED, note="not in the commit's file list")
            if item.state is DriftState.MODIFIED and item.expected is None and stat.S_ISREG(st.st_mode):
                edited.append(Edited(index=len(files), repo_path=rel, disk=path))
            files.append(item)
        for rel, digest in sorted((listing or {}).items()):
            if rel in seen:
                continue
            files.append(
                Tracked(
                    path=f"snapshots/{commit}/{rel}",
                    disk=root / "snapshots" / commit / rel,
                    repo_path=rel,
                    expected=digest,
                    state=DriftState.MISSING,
                    note="in the commit's file list, not in the snapshot",
                    commit=commit,
                    blob=blobs_dir / digest.hex if digest.hex in blob_names and blob_ok(digest.hex) else None,
                )
            )
    matches = match_blobs(
        edited,
        by_path={rel: [n for n in names if blob_ok(n)] for rel, names in by_path.items()},
        orphans=intact_orphans,
        blob_names=blob_names,
        blobs_dir=blobs_dir,
        digest_of=lambda path, like: _digest(hashed, path, like.algorithm),
    )
    for i, match in matches.items():
        how = "holds its bytes" if match.exact else "is the closest in content"
        files[i] = _replace(
            files[i],
            expected=blob_names[match.blob],
            actual=_digest(hashed, files[i].disk, blob_names[match.blob].algorithm),
            blob=blobs_dir / match.blob,
            note=f"{files[i].note}; of the blobs at this path or linked by no snapshot, blobs/{match.blob} {how}",
        )
    return LayoutScan(
        target=target, files=tuple(files), problems=tuple(problems), notes=tuple(notes), commits=tuple(chosen)
    )


def _digest(
    hashed: dict[tuple[Path, Algorithm], tuple[Digest | None, FileState]], path: Path, algorithm: Algorithm
) -> Digest | None:
    got = hashed.get((path, algorithm))
    return got[0] if got is not None else None


def _replace(item: Tracked, **changes: object) -> Tracked:
    import dataclasses

    return dataclasses.replace(item, **changes)  # type: ignore[arg-type]


def _blob_names(blobs_dir: Path) -> dict[str, Digest]:
    names: dict[str, Digest] = {}
    try:
        listing = os.listdir(blobs_dir)
    except OSError:
        return names
    for name in listing:
        digest = Digest.from_name(name) if not name.endswith(INCOMPLETE) and name == name.lower() else None
        if digest is not None:
            names[name] = digest
    return names


def _blob_name(blobs_dir: Path, link: Path) -> str | None:
    """The blob a snapshot link names, when it points (lexically) into blobs/; else None."""
    try:
        target = os.readlink(link)
    except OSError:
        return None
    resolved = Path(os.path.normpath(os.path.join(link.parent, target)))
    if resolved.parent != blobs_dir:
        return None
    return resolved.name if Digest.from_name(resolved.name) is not None else None


def _judge(
    root: Path,
    commit: str,
    rel: str,
    path: Path,
    st: os.stat_result,
    expected: Digest | None,
    blob_names: dict[str, Digest],
    linked: dict[str, list[str]],
    hashed: dict[tuple[Path, Algorithm], tuple[Digest | None, FileState]],
) -> Tracked:
    blobs_dir = root / "blobs"
    report_path = f"snapshots/{commit}/{rel}"
    base = Tracked(path=report_path, disk=path, repo_path=rel, expected=expected, commit=commit)
    expected_blob = blobs_dir / expected.hex if expected is not None else None
    if stat.S_ISREG(st.st_mode):
        algorithm = expected.algorithm if expected is not None else Algorithm.SHA256
        actual = _digest(hashed, path, algorithm)
        same = " (same bytes as its blob)" if expected is not None and actual == expected else ""
        return _replace(
            base,
            state=DriftState.MODIFIED,
            actual=actual,
            content=path,
            blob=expected_blob,
            note=f"snapshot link replaced by a regular file{same}",
        )
    if not stat.S_ISLNK(st.st_mode):
        return _replace(base, state=DriftState.MODIFIED, note="not a link into blobs/", blob=expected_blob)
    target = os.readlink(path)
    name = _blob_name(blobs_dir, path)
    if name is None:
        return _replace(base, state=DriftState.MODIFIED, note=f"links to {target}, not into blobs/", blob=expected_blob)
    digest = blob_names.get(name) or Digest.from_name(name)
    assert digest is not None  # _blob_name returns only digest-shaped names
    if expected is not None and expected != digest:
        return _replace(
            base,
            state=DriftState.MODIFIED,
            actual=digest,
            blob=expected_blob,
            note=f"links to blobs/{name}; the commit's file list says {expected.hex}",
        )
    blob = blobs_dir / name
    try:
        bst = os.lstat(blob)
    except OSError:
        return _replace(
            base, expected=digest, state=DriftState.MISSING, note=f"dangling link to blobs/{name}", blob=blob
        )
    if not stat.S_ISREG(bst.st_mode):
        return _replace(
            base, expected=digest, state=DriftState.MODIFIED, note=f"blobs/{name} is not a regular file", blob=blob
        )
    actual = _digest(hashed, blob, digest.algorithm)
    if actual != digest:
        others = [p for p in linked.get(name, []) if p != report_path]
        shared = f"; shared by {', '.join(others)}" if others else ""
        return _replace(
            base,
            expected=digest,
            actual=actual,
            state=DriftState.MODIFIED,
            content=blob,
            blob=blob,
            note=f"blob {name} no longer matches its name{shared}",
        )
    return _replace(base, expected=digest, actual=actual, content=blob, blob=blob)
