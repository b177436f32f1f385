"""RECORDs in pieces, each checked on a worker process: parse it, hash what it lists, send back the rest.

A worker is handed a byte range of a RECORD it already holds (see patchaudit.parallel.workers) and parses it
with the same parser the report uses. It sends back only what a user may need to see: the files that
do not have the digest their line names, with what was found; for a clean file, the stat key its
digest may be cached under; whether every line of the piece was a simple one: the main process
reads a RECORD's paths off its lines unchecked, and parses again only a RECORD with any other; and,
of a simple piece, the first parts of the paths it lists, which is all that the added-file pass needs
of a clean RECORD. Where
the report parses a RECORD whole (it drifted), that parse and the pieces' list the same entries (a piece
is whole rows, cut only where every newline ends a row); verify checks that they agree: as many entries
checked, and every file sent back one that the report lists.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from patchaudit.check import bytecode
from patchaudit.check.ownership import file_digest, listed_paths, normalize, walk_list
from patchaudit.fs.beneath import DirCache
from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped
from patchaudit.parallel.hashing import (
    BATCH_BYTES,
    BIG_FILE,
    KeyTuple,
    Raw,
    buffer,
    cached_state,
    hash_raw,
    read_regular,
)
from patchaudit.parallel.statcache import StatCache
from patchaudit.report import Drift, DriftState, Unverified
from patchaudit.target.record import SIMPLE_LINE, STRONG_ALGORITHMS, RecordEntry, parse_record_simple

PIECE_TEXT = 32 << 10  # RECORD bytes per piece: about 250 lines
# Tasks the package directories are walked in: each worker that walks reads the first parts of every
# RECORD once (first_parts), so a few workers walk, not every one.
WALK_TASKS = 4
_SIZE_FIELD = re.compile(rb",(\d{7,})\r?$", re.MULTILINE)  # a RECORD line's size, when 1 MB or more


class Piece(NamedTuple):
    """Lines [start, stop) of RECORD number `record`; `largest`: the biggest size they list (1 MB or more, else
    0); `weight`: the sizes of 1 MB or more they list, added up."""

    record: int
    start: int
    stop: int
    largest: int
    weight: int


@dataclass(frozen=True, slots=True)
class Shared:
    """What every worker reads: each RECORD's site directory and bytes, and the stat cache."""

    records: list[tuple[str, bytes]]
    cache: StatCache | None
    # RECORD number -> the paths it lists (normalized), parsed by a worker when a walk first needs them
    listed: dict[int, dict[str, str | None]] = field(default_factory=dict, compare=False)
    # RECORD number -> the first parts of the paths it lists (first_parts), made when a walk first needs them
    heads: dict[int, frozenset[bytes] | None] = field(default_factory=dict, compare=False)


@dataclass(slots=True)
class Checked:
    """What a worker found in one piece."""

    checked: int = 0  # entries with a trusted hash, checked
    found: list[tuple[str, str, Raw]] = field(default_factory=list)  # (RECORD path, expected, what is there)
    clean: list[tuple[str, str, KeyTuple]] = field(default_factory=list)  # (absolute path, digest, stat key)
    stale: list[Drift] = field(default_factory=list)  # unchecked-hash bytecode that disagrees with its source
    foreign: list[Unverified] = field(default_factory=list)
    simple: bool = True  # every line of the piece is a simple one (SIMPLE_LINE), in UTF-8
    firsts: set[str] = field(default_factory=set)  # of a simple piece: the first parts of its paths (Loaded.firsts)
    tops: set[str] = field(default_factory=set)  # of a simple piece: the files it lists directly in the site directory


def pieces(records: list[tuple[str, bytes]]) -> list[Piece]:
    """Every RECORD cut into pieces, in the order to start them: a file of 4 MB or more is a piece of its
    own, biggest first, so that no big file is left for the end; then the rest, cut every PIECE_TEXT
    bytes and wherever what a piece lists would pass BATCH_BYTES, heaviest first by the sizes of 1 MB
    or more they list (the last worker is not left a heavy piece), else in RECORD order."""
    big: list[Piece] = []
    rest: list[Piece] = []
    for number, (_, data) in enumerate(records):
        for start, stop, largest, weight in _cut(data):
            piece = Piece(number, start, stop, largest, weight)
            (big if largest >= BIG_FILE else rest).append(piece)
    big.sort(key=lambda p: -p.largest)
    rest.sort(key=lambda p: -p.weight)
    return big + rest


def _cut(data: bytes) -> list[tuple[int, int, int, int]]:
    """(start, stop, largest size listed, sizes of 1 MB or more added up) of the pieces of one RECORD,
    whole lines each."""
    if b'"' in data and not _rows_are_lines(data):
        sizes = list(map(int, _SIZE_FIELD.findall(data)))
        return [(0, len(data), max(sizes, default=0), sum(sizes))]
    out: list[tuple[int, int, int, int]] = []
    start = weight = largest = 0

    def close(stop: int) -> None:
        nonlocal start, weight, largest
        if stop > start:
            out.append((start, stop, largest, weight))
        start, weight, largest = stop, 0, 0

    def text_up_to(limit: int) -> None:
        while limit - start > PIECE_TEXT:
            stop = data.find(b"\n", start + PIECE_TEXT, limit) + 1
            if stop == 0:
                return
            close(stop)

    for match in _SIZE_FIELD.finditer(data):
        size = int(match[1])
        line = data.rfind(b"\n", 0, match.start()) + 1
        end = data.find(b"\n", match.end()) + 1 or len(data)
        text_up_to(line)
        if size >= BIG_FILE:
            close(line)
            out.append((line, end, size, size))
            start = end
            continue
        if weight + size > BATCH_BYTES:
            close(line)
        weight += size
        largest = max(largest, size)
    text_up_to(len(data))
    close(len(data))
    return out


def _rows_are_lines(data: bytes) -> bool:
    """Whether every line that holds a quote is a whole simple row: a quoted path with no newline in it.

    Then no quoted field runs on past its line, every newline ends a row, and the RECORD may be cut at
    any of them (vLLM quotes the paths of its fused-MoE configs, which hold commas). A quoted path
    holding a newline, or anything odder, keeps the RECORD whole: the csv reader reads it in one piece.
    """
    at = data.find(b'"')
    while at != -1:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end == -1 else end
        if not SIMPLE_LINE.fullmatch(data[start:end].decode("utf-8", "surrogateescape")):
            return False
        at = data.find(b'"', end)
    return True


def run_task(shared: Shared, task: Piece | list[tuple[Path, str]]) -> Any:
    """A worker's task: a piece of a RECORD to check (Checked), or package directories to walk (a list of
    what walk_unlisted() finds in each)."""
    if isinstance(task, Piece):
        return check(shared, task)
    return [walk_unlisted(shared, location, top) for location, top in task]


def walk_unlisted(shared: Shared, location: Path, top: str) -> list[tuple[str, bool]]:
    """What walk_list() finds below location/top, less the files a RECORD in `shared` lists there.

    Such a file is owned whoever asks (Walks.unowned passes it over), so it need not travel back to
    the main process, where each one cost a lookup: on a clean environment nothing comes back. A
    symlink always comes back (a linked `__pycache__` is judged by what it holds). RECORDs the workers
    do not hold (of distributions not scanned) are the main process's to look up, as before.
    """
    found = walk_list(location, top)
    if not found:
        return found
    site = str(location)
    name = top.encode("utf-8", "surrogateescape")
    records = enumerate(shared.records)
    lists = [_listed(shared, number) for number, (at, _) in records if at == site and _may_list(shared, number, name)]
    if not lists:
        return found
    return [(rel, is_link) for rel, is_link in found if is_link or not any(rel in listed for listed in lists)]


def _may_list(shared: Shared, number: int, top: bytes) -> bool:
    """Whether RECORD `number` may list a path below `top` (first_parts, made on first use)."""
    if number not in shared.heads:
        shared.heads[number] = first_parts(shared.records[number][1])
    heads = shared.heads[number]
    return heads is None or top in heads


_PARTS = re.compile(rb'[/\\"\r]')
_SLASHES = re.compile(rb"[/\\\r]")
# What marks a line whose path normalize() changes, or a quoted one (a line starting with "." or "/" too)
_ODD = (b'"', b"\\", b"/.", b"//")


def first_parts(data: bytes) -> frozenset[bytes] | None:
    """At least the first part of every path a RECORD lists, as listed_paths() keys it (normalized);
    None for a RECORD with a quoted path that runs past its line (any part may be one).

    A plain line's first part is what comes before its first slash; of any other line (a quoted path,
    a backslash, a dot or a double slash that normalizing takes out) every part is taken: normalizing
    drops parts, never makes one up. One pass over the RECORD, where looking for each top-level
    directory of the site in every RECORD cost the workers a second of CPU on a full stack.
    """
    heads = {line.partition(b"/")[0] for line in data.split(b"\n")}
    for start in _odd_lines(data):
        end = data.find(b"\n", start)
        line = data[start : len(data) if end == -1 else end]
        if line.count(b'"') % 2:
            return None
        heads.update(_PARTS.split(line))
        heads.update(_SLASHES.split(line.removeprefix(b'"').replace(b'""', b'"')))  # a quoted path, unquoted
    return frozenset(heads)


def _odd_lines(data: bytes) -> set[int]:
    """Where each line that starts with "." or "/", or holds one of _ODD, starts."""
    starts = {0} if data[:1] in (b".", b"/") else set()
    for mark in (b"\n.", b"\n/"):
        at = data.find(mark)
        while at != -1:
            starts.add(at + 1)
            at = data.find(mark, at + 1)
    for mark in _ODD:
        at = data.find(mark)
        while at != -1:
            starts.add(data.rfind(b"\n", 0, at) + 1)
            at = data.find(mark, at + 1)
    return starts


def _listed(shared: Shared, number: int) -> dict[str, str | None]:
    listed = shared.listed.get(number)
    if listed is None:
        listed = shared.listed[number] = listed_paths(shared.records[number][1])[0]
    return listed


def check(shared: Shared, piece: Piece) -> Checked:
    location, data = shared.records[piece.record]
    record, simple = parse_record_simple(data[piece.start : piece.stop])
    cache = shared.cache
    buf = buffer()
    started = time.time_ns()  # before every read of the piece: a stricter racy check, never a looser one
    out = Checked(simple=simple)
    if simple:  # what the main process would read off every line of a clean RECORD to walk its directories
        for entry in record.entries:  # and to tell who owns a file beside the packages (a .pth)
            key = normalize(entry.path)
            head, sep, _ = key.partition("/")
            if sep:
                out.firsts.add(head)
            else:
                out.tops.add(key)
    with DirCache() as dirs:  # one descriptor per directory for the piece, not a walk per file
        _check_entries(record.entries, location, cache, buf, started, dirs, out)
    # The sources bytecode may stand for: every .py the piece names inside the site directory, on a
    # bad line too.
    named = [entry.path for entry in record.entries] + [p.path for p in record.problems if p.path]
    sources = [key for path in named if path.endswith(".py") and not (key := normalize(path)).startswith(("../", "/"))]
    out.stale, out.foreign = unchecked_bytecode(Path(location), sources)
    return out


def _check_entries(
    entries: Sequence[RecordEntry],
    location: str,
    cache: StatCache | None,
    buf: bytearray,
    started: int,
    dirs: DirCache,
    out: Checked,
) -> None:
    for path, record_hash, size in entries:
        if record_hash is None or record_hash.algorithm not in STRONG_ALGORITHMS:
            continue
        algorithm, value = record_hash
        expected = f"{algorithm}={value}"
        absolute = absolute_path(location, path)
        out.checked += 1
        if cache is not None:
            hit = cached_state(absolute, algorithm, cache)
            if hit is not None:
                if hit.digest != expected:
                    out.found.append((path, expected, hit))
                continue
        raw = hash_raw(absolute, algorithm, buf, started, size, dirs)
        if isinstance(raw, tuple) and raw[0] == expected:
            if cache is not None and raw[3] is not None:
                out.clean.append((absolute, expected, raw[3]))
        else:
            out.found.append((path, expected, raw))


def _source(path: str) -> bytes:
    """A source's bytes within Cap.SOURCE; b"" (which no bytecode stands for) for anything else."""
    try:
        return read_capped(path, Cap.SOURCE)
    except UnreadableFile:
        return b""


def absolute_path(location: Path | str, path: str) -> str:
    if path.startswith("/"):
        return path
    if "/." in path or path.startswith("."):
        return os.path.normpath(f"{location}/{path}")
    return f"{location}/{path}"


_UNCHECKED_HASH = 0b01  # PEP 552 flags: hash-based, check_source off


def unchecked_bytecode(location: Path, sources: list[str]) -> tuple[list[Drift], list[Unverified]]:
    """Bytecode that Python runs without ever looking at its source, and that disagrees with it.

    Timestamp and checked-hash .pyc files are revalidated by the interpreter, so an edit of the source
    wins; an unchecked-hash .pyc (PEP 552) is used as it is, whatever the source now says.
    """
    stems: dict[str, set[str]] = {}
    for key in sources:
        parent, _, name = key.rpartition("/")
        stems.setdefault(parent, set()).add(name[:-3])
    drift: list[Drift] = []
    foreign: list[Unverified] = []
    for parent, names in stems.items():
        cache_dir = f"{location}/{parent}/__pycache__" if parent else f"{location}/__pycache__"
        try:
            entries = os.listdir(cache_dir)
        except OSError:
            continue
        for entry in entries:
            stem = entry.partition(".")[0]
            if not entry.endswith(".pyc") or stem not in names:
                continue
            header = read_regular(f"{cache_dir}/{entry}", 16) or b""
            if len(header) < 16 or int.from_bytes(header[4:8], "little") & 0b11 != _UNCHECKED_HASH:
                continue
            rel = f"{parent}/__pycache__/{entry}" if parent else f"__pycache__/{entry}"
            pyc_name = bytecode.parse_pyc_path(rel)
            magic = bytecode.magic_for(pyc_name.cache_tag) if pyc_name is not None else None
            source = _source(f"{location}/{parent}/{stem}.py" if parent else f"{location}/{stem}.py")
            if magic is None or header[:4] != magic:
                reason = "unchecked-hash bytecode of a Python version it is not named for, or one unknown here"
                foreign.append(Unverified(path=rel, reason=reason))
            elif header[8:16] != bytecode.source_hash(magic, source):
                note = "unchecked-hash bytecode that disagrees with its source: Python runs it, not the source"
                drift.append(
                    Drift(path=rel, state=DriftState.MODIFIED, actual=file_digest(Path(cache_dir, entry)), note=note)
                )
    return drift, foreign
