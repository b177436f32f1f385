"""What an image's drift is, beyond its layers: the errata (wheels known to ship a wrong RECORD) and the
operator's wheelhouse (pristine bytes of a file patched in the very layer that installed it).

Nothing here reads the host's copy of an image's file: the image's bytes are the digests its layers gave.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from patchaudit.errors import PristineNotFound, UnsafePath, WheelMismatch
from patchaudit.pristine.check import digest, wheel_index
from patchaudit.pristine.zipwheel import MEMBER_CAP, ZipWheel, open_local
from patchaudit.report import DistReport, Drift, DriftState, Unverified
from patchaudit.target.record import Record


def from_wheelhouse(
    houses: Sequence[Path], dist: DistReport, record: Record, sizes: Mapping[str, int]
) -> tuple[DistReport, dict[str, bytes]]:
    """The distribution's wheel from the wheelhouses: (the report with stale RECORD lines made facts,
    pristine bytes of its modified and missing files by path). A wheel of another build (its RECORD
    disagrees with the image's) is never used, and is named in `unverified` when none other is found.
    `sizes`: the image's size of each modified file, which bounds a member that may equal it (a wheel's
    RECORD may understate a member's size)."""
    refusals: list[str] = []
    for wheel_path in _candidates(houses, dist):
        try:
            wheel = open_local(wheel_path, "wheelhouse")
        except (PristineNotFound, UnsafePath):
            continue
        try:
            return _checked(wheel, dist, record, sizes)
        except (PristineNotFound, UnsafePath, WheelMismatch) as exc:
            refusals.append(str(exc))
        finally:
            wheel.close()
    if refusals:
        note = Unverified(path=f"{dist.name} {dist.version}", reason=f"no wheel accepted: {refusals[0]}")
        dist = dataclasses.replace(dist, unverified=(*dist.unverified, note))
    return dist, {}


def _candidates(houses: Sequence[Path], dist: DistReport) -> list[Path]:
    """Wheels of this name and version in the wheelhouses (not recursive), by file name."""
    found = []
    for house in houses:
        try:
            names = sorted(os.listdir(house))
        except OSError:
            continue
        for name in names:
            try:
                project, version, _build, _tags = parse_wheel_filename(name)
            except InvalidWheelFilename:
                continue
            if project == canonicalize_name(dist.name) and str(version) == dist.version:
                found.append(house / name)
    return found


def _checked(
    wheel: ZipWheel, dist: DistReport, record: Record, sizes: Mapping[str, int]
) -> tuple[DistReport, dict[str, bytes]]:
    index = wheel_index(wheel)
    for entry in record.entries:
        theirs = index.get(os.path.normpath(entry.path))
        if entry.hash is None or theirs is None or theirs[1].hash is None or "dist-info/" in entry.path:
            continue
        if theirs[1].hash.algorithm == entry.hash.algorithm and theirs[1].hash.value != entry.hash.value:
            raise WheelMismatch(
                f"{wheel.origin} is another build: {entry.path} is {entry.hash} in the image's RECORD "
                f"but {theirs[1].hash} in the wheel's"
            )
    pristine: dict[str, bytes] = {}
    drift: list[Drift] = []
    facts: list[Drift] = []
    for d in dist.drift:
        found = index.get(os.path.normpath(d.path)) if d.state is not DriftState.ADDED and d.expected else None
        if found is None:
            drift.append(d)
            continue
        member, entry = found
        bounds = [s for s in (entry.size, sizes.get(d.path)) if s is not None]
        data = wheel.read(member, limit=max(bounds) if bounds else MEMBER_CAP)
        got = digest(data, (d.expected or "sha256=").partition("=")[0])
        if got == d.expected:
            pristine[d.path] = data
            drift.append(d)
        elif d.state is DriftState.MODIFIED and got == d.actual:
            note = f"installed bytes equal the member of {wheel.origin}; its RECORD is wrong about them"
            facts.append(dataclasses.replace(d, state=DriftState.RECORD_MISMATCH, wheel=wheel.filename, note=note))
        else:
            raise WheelMismatch(f"{wheel.origin}: {d.path} should be {d.expected} but the wheel's member is {got}")
    report = dataclasses.replace(dist, drift=tuple(drift), facts=dist.facts + tuple(facts))
    return report, pristine


__all__ = ["from_wheelhouse"]
