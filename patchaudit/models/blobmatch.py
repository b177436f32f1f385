"""Which blob a snapshot file edited in place came from, when the commit's file list is not cached.

`sed -i` on a snapshot link leaves a regular file and the blob it replaced. The Hub client's cache
models a repo as revisions (snapshots) whose paths point at content-named blobs, so the candidates for
an edited `config.json` are the blobs any revision links (or lists) at that same path and the blobs no
revision links any more. Identical bytes decide first (a copy put in place of the link); otherwise the
candidate of which the edit kept most, each orphan blob given to one file at most.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchaudit.fs.safefs import UnreadableFile, read_capped
from patchaudit.models.digests import Digest

SIMILAR_LIMIT = 1 << 20  # files larger than this are matched by identical bytes only
MIN_SIMILARITY = 0.5  # of the original still there after the edit
BYTEWISE_LIMIT = 16 << 10


@dataclass(frozen=True, kw_only=True, slots=True)
class Edited:
    """A regular file standing where a snapshot link was."""

    index: int  # its place in the caller's list
    repo_path: str
    disk: Path


@dataclass(frozen=True, kw_only=True, slots=True)
class Match:
    blob: str
    exact: bool


def match_blobs(
    edited: Sequence[Edited],
    *,
    by_path: Mapping[str, Collection[str]],
    orphans: Collection[str],
    blob_names: Mapping[str, Digest],
    blobs_dir: Path,
    digest_of: Callable[[Path, Digest], Digest | None],
) -> dict[int, Match]:
    """index -> the blob each edited file most likely was; files with no likely blob are left out.

    `by_path`: repo path -> intact blobs some revision links or lists there; `orphans`: intact blobs no
    snapshot links; `digest_of(path, like)`: the file's digest in the algorithm of `like` (or None).
    """
    scored: list[tuple[float, int, str]] = []
    held: dict[Path, bytes | None] = {}

    def content(path: Path) -> bytes | None:
        if path not in held:
            try:
                held[path] = read_capped(path, SIMILAR_LIMIT)
            except UnreadableFile:
                held[path] = None
        return held[path]

    for item in edited:
        candidates = sorted(set(by_path.get(item.repo_path, ())) | set(orphans))
        for name in candidates:
            if digest_of(item.disk, blob_names[name]) == blob_names[name]:
                scored.append((2.0, item.index, name))
                continue
            mine, theirs = content(item.disk), content(blobs_dir / name)
            if mine is None or theirs is None:
                continue
            kept = survived(theirs, mine)
            if kept >= MIN_SIMILARITY:
                scored.append((kept, item.index, name))
    found: dict[int, Match] = {}
    taken: set[str] = set()
    orphan_set = set(orphans)
    # best pairs first; ties broken by name so the answer never depends on listing order
    for score, index, name in sorted(scored, key=lambda s: (-s[0], s[1], s[2])):
        if index in found or (name in orphan_set and name in taken):
            continue
        found[index] = Match(blob=name, exact=score == 2.0)
        taken.add(name)
    return found


def survived(original: bytes, edited: bytes) -> float:
    """The share of `original` still present, in order, in `edited` (1.0: only additions were made).

    Byte by byte for small files; line by line for larger ones, where a byte-level match costs too much.
    """
    if not original:
        return 0.0
    a: Sequence[object]
    b: Sequence[object]
    if len(original) <= BYTEWISE_LIMIT and len(edited) <= BYTEWISE_LIMIT:
        a, b = original, edited
        total = len(original)
    else:
        a, b = original.splitlines(keepends=True), edited.splitlines(keepends=True)
        total = len(a)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) / total
