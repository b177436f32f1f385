"""RECORD files: parse them into typed entries, collecting every bad line instead of stopping at one."""

from __future__ import annotations

import csv
import hashlib
import io
import re
from dataclasses import dataclass
from typing import NamedTuple

from patchaudit.parallel.hashing import encode_digest as encode_digest  # RECORD's digest form

# Algorithms at least as strong as sha256; md5, sha1 and sha224 entries are not trusted.
STRONG_ALGORITHMS = (
    frozenset({"sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s"})
    & hashlib.algorithms_guaranteed
)


# RECORD has one entry per installed file (61k in a vLLM stack): entries are tuples, cheap to make.
class RecordHash(NamedTuple):
    algorithm: str
    value: str  # urlsafe base64 without padding, as RECORD writes it

    def __str__(self) -> str:
        return f"{self.algorithm}={self.value}"

    @property
    def trusted(self) -> bool:
        return self.algorithm in STRONG_ALGORITHMS


class RecordEntry(NamedTuple):
    path: str
    hash: RecordHash | None
    size: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordProblem:
    line: int
    path: str | None
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Record:
    entries: tuple[RecordEntry, ...]
    problems: tuple[RecordProblem, ...]


_B64_URL = re.compile(r"[A-Za-z0-9_-]+")
_DIGEST_SIZES = {name: hashlib.new(name).digest_size for name in hashlib.algorithms_guaranteed if "shake" not in name}


_SHA256 = re.compile(r"sha256=([A-Za-z0-9_-]{43})")  # what nearly every RECORD line holds


def parse_hash(text: str) -> RecordHash:
    """`algo=urlsafe-b64` -> RecordHash; ValueError with the reason when it is not one."""
    common = _SHA256.fullmatch(text)
    if common is not None:
        return RecordHash("sha256", common[1])
    algorithm, sep, value = text.partition("=")
    if not sep or not algorithm or not value:
        raise ValueError(f"hash {text!r} is not algorithm=value")
    algorithm = algorithm.lower()
    value = value.rstrip("=")
    if not _B64_URL.fullmatch(value) or len(value) % 4 == 1:
        raise ValueError(f"hash {text!r} is not urlsafe base64")
    size = _DIGEST_SIZES.get(algorithm)
    if size is not None and len(value) != -(-size * 4 // 3):
        raise ValueError(f"hash {text!r} has {len(value) * 3 // 4} bytes, {algorithm} has {size}")
    return RecordHash(algorithm, value)


# A line as installers write nearly all of them: `path,sha256=<digest>,size` (hash and size may be empty),
# the path quoted when it holds a comma or a quote. Anchored to whole lines (re.M), so a file whose every
# line matches is read exactly as csv reads it.
SIMPLE_LINE = re.compile(
    r'^(?:([^",\r\n\x00]++)|"((?:[^"\r\n\x00]|"")++)"),(?:sha256=([A-Za-z0-9_-]{43}))?,([0-9]*+)\r?$', re.M
)


def parse_record(data: bytes) -> Record:
    """Parse RECORD bytes; bad rows become problems, good rows entries.

    One csv reader runs over the whole file, as installers read it: a quoted path that holds a
    newline is one entry. Problems name the line their row starts on. A file whose every line is a
    simple one (see SIMPLE_LINE) is read with one regular expression instead, to the same entries.
    """
    return parse_record_simple(data)[0]


def parse_record_simple(data: bytes) -> tuple[Record, bool]:
    """parse_record(data), and whether every line was simple and UTF-8 (what simple_rows reads)."""
    try:
        text, mixed = data.decode("utf-8"), False
    except UnicodeDecodeError:  # keep the rows that are UTF-8; the others become problems
        text, mixed = data.decode("utf-8", "surrogateescape"), True
    if not mixed:
        simple = _parse_simple(text)
        if simple is not None:
            return simple, True
    return _parse_csv(text, mixed), False


def simple_rows(data: bytes) -> list[tuple[str, str, str, str]] | None:
    """(path, quoted path, sha256 digest, size) of every line of a RECORD whose every line is simple
    and UTF-8, as SIMPLE_LINE's groups; None for any other RECORD (parse_record reads it all)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return _simple_rows(text)


def _simple_rows(text: str) -> list[tuple[str, str, str, str]] | None:
    found = SIMPLE_LINE.findall(text)
    if len(found) != text.count("\n") + (1 if text and not text.endswith("\n") else 0):
        return None
    return found


def _parse_simple(text: str) -> Record | None:
    """The entries of a RECORD whose every line is simple; None when any line is not."""
    found = _simple_rows(text)
    if found is None:
        return None
    new = tuple.__new__  # what the NamedTuples' own constructors call, without a Python frame per entry
    entries = tuple(
        [
            new(
                RecordEntry,
                (
                    path or quoted.replace('""', '"'),
                    new(RecordHash, ("sha256", digest)) if digest else None,
                    int(size) if size else None,
                ),
            )
            for path, quoted, digest, size in found
        ]
    )
    return Record(entries=entries, problems=())


def _parse_csv(text: str, mixed: bool) -> Record:
    entries: list[RecordEntry] = []
    problems: list[RecordProblem] = []
    reader = csv.reader(io.StringIO(text, newline=""))
    number = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.append(RecordProblem(line=number, path=None, reason=f"not CSV ({exc})"))
            number = reader.line_num + 1
            continue
        start, number = number, reader.line_num + 1
        if not "".join(row).strip() and len(row) <= 1:
            continue
        if mixed and any(_undecodable(field) for field in row):
            problems.append(RecordProblem(line=start, path=None, reason="not UTF-8"))
            continue
        entry = _entry(start, row, problems)
        if entry is not None:
            entries.append(entry)
    return Record(entries=tuple(entries), problems=tuple(problems))


def _undecodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _entry(number: int, row: list[str], problems: list[RecordProblem]) -> RecordEntry | None:
    if len(row) != 3:
        problems.append(RecordProblem(line=number, path=row[0] if row else None, reason=f"{len(row)} fields, not 3"))
        return None
    path, hash_text, size_text = row
    reasons: list[str] = []
    if not path or "\x00" in path:
        reasons.append("empty or NUL path")
    record_hash = None
    if hash_text:
        try:
            record_hash = parse_hash(hash_text)
        except ValueError as exc:
            reasons.append(str(exc))
    size = None
    if size_text:
        if size_text.isdigit() and size_text.isascii():
            size = int(size_text)
        else:
            reasons.append(f"size {size_text!r} is not a non-negative integer")
    if reasons:
        problems.append(RecordProblem(line=number, path=path or None, reason="; ".join(reasons)))
        return None
    return RecordEntry(path, record_hash, size)


def record_paths(data: bytes) -> list[str]:
    """Only the paths a RECORD lists, for callers that need no hash (one C-level csv pass); the same
    paths `parse_record` accepts, lines it rejects included (a stat of a bad path costs nothing)."""
    text = data.decode("utf-8", "surrogateescape")
    try:
        return [row[0] for row in csv.reader(text.splitlines()) if row and row[0] and "\x00" not in row[0]]
    except csv.Error:
        return [e.path for e in parse_record(data).entries]


def unsafe_member(name: str) -> bool:
    """A zip member or RECORD path that is absolute or climbs out with `..`."""
    if not name or name.startswith(("/", "\\")) or "\\" in name or "\x00" in name:
        return True
    if len(name) > 1 and name[1] == ":":
        return True
    return any(part == ".." for part in name.split("/"))
