"""Bytecode headers (PEP 552) judged for the target interpreter, whatever Python runs patchaudit."""

from __future__ import annotations

import enum
import importlib.util
import marshal
import os
import re
import sys
from dataclasses import dataclass

from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped

# Final magic numbers of CPython releases (Lib/importlib/_bootstrap_external.py), by cache tag. A target
# runs the `.pyc` named for its own tag only, so the tag in the file name says which magic it must carry.
_MAGIC_BY_TAG = {
    "cpython-38": 3413,
    "cpython-39": 3425,
    "cpython-310": 3439,
    "cpython-311": 3495,
    "cpython-312": 3531,
    "cpython-313": 3571,
}
_PYC_NAME = re.compile(r"(?P<stem>[^.]+)\.(?P<tag>[a-z]+-\d+)(?:\.opt-(?P<opt>[12]))?\.pyc")
HEADER_SIZE = 16


class Flavor(enum.StrEnum):
    """How the interpreter decides that a .pyc is current (PEP 552)."""

    TIMESTAMP = "timestamp"
    CHECKED_HASH = "checked-hash"
    UNCHECKED_HASH = "unchecked-hash"


def magic_for(cache_tag: str) -> bytes | None:
    """The 4-byte magic a .pyc for `cache_tag` carries; None for a Python this table does not know."""
    if cache_tag == sys.implementation.cache_tag:
        return importlib.util.MAGIC_NUMBER
    number = _MAGIC_BY_TAG.get(cache_tag)
    return None if number is None else number.to_bytes(2, "little") + b"\r\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class PycName:
    """`pkg/__pycache__/mod.cpython-311.opt-1.pyc` taken apart."""

    source: str  # `pkg/mod.py`, relative like the .pyc's path
    cache_tag: str
    optimize: int


def parse_pyc_path(rel: str) -> PycName | None:
    parent, _, name = rel.rpartition("/")
    directory, _, cache = parent.rpartition("/")
    if cache != "__pycache__":
        return None
    match = _PYC_NAME.fullmatch(name)
    if match is None:
        return None
    source = f"{directory}/{match['stem']}.py" if directory else f"{match['stem']}.py"
    return PycName(source=source, cache_tag=match["tag"], optimize=int(match["opt"] or 0))


def flavor(header: bytes) -> Flavor | None:
    if len(header) < HEADER_SIZE:
        return None
    flags = int.from_bytes(header[4:8], "little")
    if flags & ~0b11 or flags == 0b10:
        return None
    if flags == 0:
        return Flavor.TIMESTAMP
    return Flavor.CHECKED_HASH if flags & 0b10 else Flavor.UNCHECKED_HASH


def source_hash(magic: bytes, source: bytes) -> bytes:
    """The PEP 552 hash of `source` as the interpreter of `magic` computes it (SipHash keyed by its magic)."""
    import _imp

    return _imp.source_hash(int.from_bytes(magic, "little"), source)


def header_matches(header: bytes, magic: bytes, source: bytes, source_stat: os.stat_result) -> bool:
    """The header is the one the target interpreter writes for this source (and accepts without recompiling)."""
    kind = flavor(header)
    if kind is None or header[:4] != magic:
        return False
    if kind is Flavor.TIMESTAMP:
        mtime = int(source_stat.st_mtime) & 0xFFFFFFFF
        size = source_stat.st_size & 0xFFFFFFFF
        return header[8:12] == mtime.to_bytes(4, "little") and header[12:16] == size.to_bytes(4, "little")
    return header[8:16] == source_hash(magic, source)


def same_code(pyc: bytes, source: bytes, filename: str, optimize: int) -> bool:
    """The .pyc's code object equals a fresh compile of `source` (only for this interpreter's own tag)."""
    try:
        code = marshal.loads(pyc[HEADER_SIZE:])
        fresh = compile(source, filename, "exec", dont_inherit=True, optimize=optimize)
    except (ValueError, EOFError, TypeError, SyntaxError):
        return False
    return bool(code == fresh)


def regenerated(location: str, rel: str) -> str | None:
    """Why `rel` (a .pyc) is a valid compile of the installed source next to it; None when it is not.

    The magic comes from the cache tag in the file name (the target's Python, not this one). For this
    interpreter's own tag the code itself is compared with a fresh compile; for another Python only the
    header can be checked, and the reason says so.
    """
    name = parse_pyc_path(rel)
    if name is None:
        return None
    magic = magic_for(name.cache_tag)
    if magic is None:
        return None
    pyc_path = f"{location}/{rel}"
    source_path = f"{location}/{name.source}"
    try:
        pyc = read_capped(pyc_path, Cap.SOURCE)
        source = read_capped(source_path, Cap.SOURCE)
    except UnreadableFile:
        return None
    try:
        source_stat = os.lstat(source_path)
    except OSError:
        return None
    if not header_matches(pyc[:HEADER_SIZE], magic, source, source_stat):
        return None
    kind = flavor(pyc)
    if name.cache_tag == sys.implementation.cache_tag:
        if not same_code(pyc, source, source_path, name.optimize):
            return None
        return f"{kind} bytecode recompiled from {name.source} (code equals a fresh compile)"
    return f"{kind} bytecode of {name.source} for {name.cache_tag} (header checked; code not compared)"
