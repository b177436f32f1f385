"""Wheels whose RECORD is wrong about their own members, known ahead for hosts that lack the wheel.

A fresh install of such a wheel differs from its RECORD, and with no copy of the wheel at hand a patch
cannot be told from the wheel's own mistake (uv's cache does not help: it is the installed inode). An
erratum is read off the wheel itself (`patchaudit errata WHEEL`): for each member its RECORD is wrong
about, the installed path, the line RECORD gives, and the member's real digest. An installed file whose
RECORD line is that line and whose bytes are that member is `record-mismatch`, naming the wheel, exactly
as if the wheel were at hand; any other bytes stay `modified`.

patchaudit ships the errata of wheels met in the field (errata.toml, beside this module); an operator adds
their own files (`scan --errata`, policy key `errata`). Errata never come from the target environment.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from patchaudit.errors import InvalidPolicy, PatchAuditError
from patchaudit.fs.safefs import Cap, UnreadableFile, parse_toml, read_capped
from patchaudit.report import DistReport, Drift, DriftState
from patchaudit.target.record import parse_hash, unsafe_member

SHIPPED = Path(__file__).with_name("errata.toml")


class Erratum(NamedTuple):
    project: str  # canonical name
    version: Version
    wheel: str  # the wheel's filename
    wheel_sha256: str  # hex digest of the whole wheel file the erratum was read from
    path: str  # installed path, relative to site-packages
    record: str  # what the wheel's RECORD says of it: "sha256=..."
    member: str  # what the member really is, in the same algorithm


class Errata:
    """Errata indexed by (project, installed path)."""

    def __init__(self, items: Iterable[Erratum] = ()) -> None:
        self._by_path: dict[tuple[str, str], list[Erratum]] = {}
        for item in items:
            self._by_path.setdefault((item.project, item.path), []).append(item)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_path.values())

    def covers(self, project: str, path: str) -> bool:
        """Whether any erratum names this file of this project (then its digest is worth working out)."""
        return (canonicalize_name(project), path) in self._by_path

    def explain(
        self, project: str, version: str, path: str, expected: str | None, actual: str | None
    ) -> Erratum | None:
        """The erratum that accounts for this file: same distribution and version, RECORD line and bytes."""
        if expected is None or actual is None:
            return None
        candidates = self._by_path.get((canonicalize_name(project), path))
        if not candidates:
            return None
        try:
            installed = Version(version)
        except InvalidVersion:
            return None
        for item in candidates:
            if item.version == installed and item.record == expected and item.member == actual:
                return item
        return None


def shipped() -> list[Erratum]:
    """The errata patchaudit ships (errata.toml beside this module)."""
    return _read(SHIPPED)


def digest() -> str:
    """The shipped errata's version: the first 16 hex digits of errata.toml's sha256."""
    import hashlib

    return hashlib.sha256(SHIPPED.read_bytes()).hexdigest()[:16]


def load(extra: Sequence[Path] = ()) -> Errata:
    """The shipped errata and the operator's files; a file that cannot be read is InvalidPolicy."""
    items: list[Erratum] = []
    for path in (SHIPPED, *extra):
        items += _read(path)
    return Errata(items)


def _read(path: Path) -> list[Erratum]:
    try:
        data = parse_toml(read_capped(path, Cap.SMALL, follow=True))
    except UnreadableFile as exc:
        raise InvalidPolicy(f"errata {path}: cannot read it ({exc.why.value})") from None
    except ValueError as exc:
        raise InvalidPolicy(f"errata {path}: not TOML ({exc})") from None
    wheels = data.get("wheel", [])
    if set(data) - {"wheel"} or not isinstance(wheels, list):
        raise InvalidPolicy(f"errata {path}: expected only [[wheel]] tables")
    out: list[Erratum] = []
    for n, table in enumerate(wheels, 1):
        where = f"errata {path}: wheel {n}"
        if not isinstance(table, dict) or set(table) != {"filename", "sha256", "members"}:
            raise InvalidPolicy(f"{where}: needs exactly filename, sha256 and members")
        filename, sha256, members = table["filename"], table["sha256"], table["members"]
        try:
            name, version, _build, _tags = parse_wheel_filename(str(filename))
        except InvalidWheelFilename as exc:
            raise InvalidPolicy(f"{where}: {exc}") from None
        if not isinstance(sha256, str) or len(sha256) != 64 or not _is_hex(sha256):
            raise InvalidPolicy(f"{where}: sha256 must be 64 hex digits")
        if not isinstance(members, list) or not members:
            raise InvalidPolicy(f"{where}: members must be a non-empty list")
        for member in members:
            if not isinstance(member, dict) or set(member) != {"path", "record", "actual"}:
                raise InvalidPolicy(f"{where}: each member needs exactly path, record and actual")
            rel, record, actual = member["path"], member["record"], member["actual"]
            if not isinstance(rel, str) or not _safe(rel):
                raise InvalidPolicy(f"{where}: member path {rel!r} is not a relative path inside site-packages")
            try:
                claimed, real = parse_hash(str(record)), parse_hash(str(actual))
            except ValueError as exc:
                raise InvalidPolicy(f"{where}: {exc}") from None
            if claimed.algorithm != real.algorithm or not claimed.trusted:
                raise InvalidPolicy(f"{where}: {rel}: record and actual must use one strong algorithm")
            out.append(Erratum(name, version, filename, sha256.lower(), rel, str(claimed), str(real)))
    return out


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


def _safe(rel: str) -> bool:
    return not unsafe_member(rel)


def read_wheel(path: Path) -> tuple[str, list[tuple[str, str, str]]]:
    """A wheel's sha256 and each (installed path, RECORD's digest, member's digest) RECORD is wrong about.

    A RECORD line's size is checked too: a member whose size differs is listed even if the digest agrees.
    """
    from patchaudit.pristine.check import digest, wheel_index
    from patchaudit.pristine.zipwheel import MEMBER_CAP, open_local

    whole = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                whole.update(chunk)
    except OSError as exc:
        raise PatchAuditError(f"cannot read {path}: {exc.strerror}") from None
    wrong: list[tuple[str, str, str]] = []
    wheel = open_local(path, "wheel")
    try:
        for target, (member, entry) in sorted(wheel_index(wheel).items()):
            if entry.hash is None or not wheel.has(member):
                continue
            data = wheel.read(member, limit=MEMBER_CAP)
            real = digest(data, entry.hash.algorithm)
            if real != str(entry.hash) or (entry.size is not None and entry.size != len(data)):
                wrong.append((target, str(entry.hash), real))
    finally:
        wheel.close()
    return whole.hexdigest(), wrong


def to_toml(filename: str, sha256: str, wrong: Sequence[tuple[str, str, str]]) -> str:
    """One [[wheel]] table, as errata files hold them."""
    lines = ["[[wheel]]", f"filename = {json.dumps(filename)}", f'sha256 = "{sha256}"', "members = ["]
    lines += [f"  {{path = {json.dumps(p)}, record = {json.dumps(r)}, actual = {json.dumps(a)}}}," for p, r, a in wrong]
    lines.append("]")
    return "\n".join(lines) + "\n"


__all__ = ["SHIPPED", "Errata", "Erratum", "digest", "load", "read_wheel", "to_toml"]


def _as_reported(d: Drift) -> str | None:
    return d.actual


def with_errata(
    dist: DistReport, errata: Errata, actual_of: Callable[[Drift], str | None] = _as_reported
) -> DistReport:
    """Modified files that a known erratum accounts for (RECORD line and bytes both as the wheel has
    them) are record-mismatch facts, naming the wheel; no wheel needs to be at hand. `actual_of`: the
    installed digest of a modified file (a host hashes one that was judged by size alone)."""
    drift: list[Drift] = []
    facts: list[Drift] = []
    for d in dist.drift:
        known = None
        if d.state is DriftState.MODIFIED:
            actual = actual_of(d)
            known = errata.explain(dist.name, dist.version, d.path, d.expected, actual)
        if known is None:
            drift.append(d)
            continue
        note = f"installed bytes equal the member of {known.wheel} (sha256 {known.wheel_sha256[:16]}...), "
        note += "an erratum patchaudit knows; its RECORD is wrong about them"
        fact = dataclasses.replace(d, state=DriftState.RECORD_MISMATCH, actual=actual, wheel=known.wheel, note=note)
        facts.append(fact)
    if not facts:
        return dist
    return dataclasses.replace(dist, drift=tuple(drift), facts=dist.facts + tuple(facts))
