"""Is a candidate wheel the very build that was installed? Checked before a byte is written."""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Collection
from dataclasses import dataclass, field

from patchaudit.errors import PristineNotFound, UnsafePath, WheelMismatch
from patchaudit.fs.beneath import stat_below
from patchaudit.pristine.interface import PristineWheel
from patchaudit.pristine.zipwheel import MEMBER_CAP, member_for
from patchaudit.report import Drift, DriftState
from patchaudit.target.environment import InstalledDist
from patchaudit.target.record import Record, RecordEntry, encode_digest

# Files pip writes or rewrites at install time: their hashes are not the wheel's.
GENERATED_METADATA = frozenset({"RECORD", "INSTALLER", "REQUESTED", "direct_url.json", "RECORD.jws", "RECORD.p7s"})
RECORD_MISMATCH = "record-mismatch"


def is_generated(path: str) -> bool:
    parent, _, name = path.rpartition("/")
    if name.endswith(".pyc") or "__pycache__" in parent.split("/"):
        return True
    return parent.endswith(".dist-info") and "/" not in parent and name in GENERATED_METADATA


def digest(data: bytes, algorithm: str) -> str:
    return f"{algorithm}={encode_digest(hashlib.new(algorithm, data).digest())}"


@dataclass(frozen=True, kw_only=True, slots=True)
class PristineFile:
    """Bytes a wheel provides for one installed path, already checked against the installed RECORD."""

    path: str
    data: bytes
    mode: int
    digest: str


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildCheck:
    """The verdict on a wheel that passed: pristine bytes per path, and what it explains otherwise."""

    wheel: PristineWheel
    files: dict[str, PristineFile] = field(default_factory=dict)
    record_mismatch: tuple[str, ...] = ()  # installed bytes equal the wheel's; both RECORDs are stale
    record_edited: tuple[Drift, ...] = ()  # the installed file itself disagrees with the installed RECORD
    unavailable: tuple[tuple[str, str], ...] = ()  # (path, reason): the wheel does not ship it


def _size_on_disk(dist: InstalledDist, path: str) -> int:
    try:
        found = stat_below(os.path.join(dist.location, path))
    except (OSError, UnsafePath):
        return 0
    return found.st_size if found is not None else 0


def _normalize(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/"))


def wheel_index(wheel: PristineWheel) -> dict[str, tuple[str, RecordEntry]]:
    """Installed path (relative to site-packages) -> (member name, wheel RECORD entry)."""
    out: dict[str, tuple[str, RecordEntry]] = {}
    for entry in wheel.record().entries:
        target = member_for(entry.path)
        if target is not None:
            out[target] = (entry.path, entry)
    return out


def check_same_build(
    dist: InstalledDist,
    installed: Record,
    wheel: PristineWheel,
    drift: Collection[Drift] = (),
) -> BuildCheck:
    """Accept `wheel` for `dist` or raise WheelMismatch naming the first file and both hashes.

    Every file both RECORDs list (generated ones aside) must carry the same hash; every member needed
    for a `modified`/`missing` drift entry must hash to the installed RECORD's value.

    A RECORD disagreement has two possible causes that the two RECORDs alone cannot tell apart: the
    wheel is another build, or the installed RECORD was edited (to hide a patch). The rule:

    - Only an *authentic* wheel may explain disagreements as "installed RECORD edited": its whole-file
      sha256 equals the one pip recorded for this very install (direct_url.json). That wheel is the
      installed file, so every line the installed RECORD disagrees on was changed after install.
    - Any other wheel that disagrees is refused (WheelMismatch), however it was obtained: from a
      wheelhouse, a cache, or an index, fetched whole or by range requests. A hash the index publishes
      proves the file is what the index serves, not that it is the build that was installed; an index
      may serve another build under the same file name. Nothing is written from a refused wheel.
    """
    index = wheel_index(wheel)
    by_path = {_normalize(e.path): e for e in installed.entries}
    edited: list[Drift] = []
    disagreements: list[tuple[str, str, str]] = []
    for path, entry in by_path.items():
        if entry.hash is None or is_generated(path):
            continue
        found = index.get(path)
        if found is None or found[1].hash is None or found[1].hash.algorithm != entry.hash.algorithm:
            continue
        if found[1].hash.value != entry.hash.value:
            disagreements.append((path, str(entry.hash), str(found[1].hash)))
    if disagreements:
        if not wheel.authentic:
            path, mine, theirs = disagreements[0]
            more = f" (and {len(disagreements) - 1} more)" if len(disagreements) > 1 else ""
            raise WheelMismatch(
                f"{wheel.origin} is another build: {path} is {mine} in the installed RECORD "
                f"but {theirs} in the wheel's{more}",
                hint="give --wheelhouse with the exact wheel that was installed "
                "(or the installed RECORD was edited: only that wheel can tell)",
            )
        for path, mine, theirs in disagreements:
            edited.append(
                Drift(
                    path=path,
                    state=DriftState.MODIFIED,
                    expected=theirs,
                    actual=mine,
                    note="installed RECORD edited: the authentic wheel ships another hash",
                )
            )

    files: dict[str, PristineFile] = {}
    mismatch: list[str] = []
    unavailable: list[tuple[str, str]] = []
    wanted: list[tuple[Drift, str]] = []
    for item in drift:
        if item.state is DriftState.ADDED:
            continue
        wanted.append((item, item.expected or ""))
    for item in edited:
        wanted.append((item, item.expected or ""))
    for item, expected in wanted:
        path = _normalize(item.path)
        found = index.get(path)
        if found is None:
            unavailable.append((item.path, "not in the wheel (written at install time)"))
            continue
        member, wheel_entry = found
        installed_entry = by_path.get(path)
        sizes = [s for s in (installed_entry.size if installed_entry else None, wheel_entry.size) if s is not None]
        if sizes and item.state is DriftState.MODIFIED and item.actual is not None:
            # a wheel's RECORD may understate a member's size: the installed file bounds what may equal it
            sizes.append(_size_on_disk(dist, item.path))
        limit = max(sizes) if sizes else MEMBER_CAP
        try:
            data = wheel.read(member, limit=limit)
        except PristineNotFound as exc:
            unavailable.append((item.path, str(exc)))
            continue
        algorithm = expected.partition("=")[0] or "sha256"
        if algorithm not in hashlib.algorithms_available:
            unavailable.append((item.path, f"unknown hash algorithm {algorithm}"))
            continue
        got = digest(data, algorithm)
        if got == expected:
            files[item.path] = PristineFile(path=item.path, data=data, mode=wheel.mode(member), digest=got)
            continue
        if item.state is DriftState.MODIFIED and item.actual is not None and got == item.actual:
            mismatch.append(item.path)
            continue
        raise WheelMismatch(
            f"{wheel.origin}: {item.path} should be {expected or 'unknown'} (installed RECORD) "
            f"but the wheel's member is {got}",
            hint="the wheel is damaged or another build; nothing was written",
        )
    return BuildCheck(
        wheel=wheel,
        files=files,
        record_mismatch=tuple(mismatch),
        record_edited=tuple(edited),
        unavailable=tuple(unavailable),
    )
