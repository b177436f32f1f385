"""RECORD files: parse them into typed entries, collecting every bad line instead of stopping at one."""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path

from patchaudit.errors import InvalidRecord

# Algorithms at least as strong as sha256; md5, sha1 and sha224 entries are not trusted.
STRONG_ALGORITHMS = (
    frozenset({"sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s"})
    & hashlib.algorithms_guaranteed
)


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordHash:
    algorithm: str
    value: str  # urlsafe base64 without padding, as RECORD writes it

    def __str__(self) -> str:
        return f"{self.algorithm}={self.value}"

    @property
    def trusted(self) -> bool:
        return self.algorithm in STRONG_ALGORITHMS


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordEntry:
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

    def raise_for_problems(self, where: str) -> None:
        if self.problems:
            raise InvalidRecord(where, [str(p) for p in self.problems])


def parse_hash(text: str) -> RecordHash:
    """`algo=urlsafe-b64` -> RecordHash; ValueError with the reason when it is not one."""
    algorithm, sep, value = text.partition("=")
    if not sep or not algorithm or not value:
        raise ValueError(f"hash {text!r} is not algorithm=value")
    algorithm = algorithm.lower()
    try:
        digest = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"hash {text!r} is not urlsafe base64") from None
    if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != value.rstrip("="):
        raise ValueError(f"hash {text!r} is not urlsafe base64")
    if algorithm in hashlib.algorithms_guaranteed:
        expected = hashlib.new(algorithm).digest_size
        if algorithm.startswith("shake"):
            expected = len(digest)
        if len(digest) != expected:
            raise ValueError(f"hash {text!r} has {len(digest)} bytes, {algorithm} has {expected}")
    return RecordHash(algorithm=algorithm, value=value.rstrip("="))


def parse_record(data: bytes) -> Record:
    """Parse RECORD bytes; bad lines become problems, good lines entries."""
    entries: list[RecordEntry] = []
    problems: list[RecordProblem] = []
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            problems.append(RecordProblem(line=number, path=None, reason="not UTF-8"))
            continue
        try:
            rows = list(csv.reader([line]))
        except csv.Error as exc:
            problems.append(RecordProblem(line=number, path=None, reason=f"not CSV ({exc})"))
            continue
        row = rows[0] if rows else []
        if len(row) != 3:
            problems.append(
                RecordProblem(line=number, path=row[0] if row else None, reason=f"{len(row)} fields, not 3")
            )
            continue
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
            try:
                size = int(size_text)
                if size < 0:
                    raise ValueError
            except ValueError:
                reasons.append(f"size {size_text!r} is not a non-negative integer")
        if reasons:
            problems.append(RecordProblem(line=number, path=path or None, reason="; ".join(reasons)))
            continue
        entries.append(RecordEntry(path=path, hash=record_hash, size=size))
    return Record(entries=tuple(entries), problems=tuple(problems))


def read_record(path: Path) -> Record:
    return parse_record(path.read_bytes())


def encode_digest(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
