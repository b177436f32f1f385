"""What a node found, reduced to one digest per distribution: the hashes on disk, not only RECORD's.

Clean files hash as RECORD says, so RECORD's strong hash stands in for them; drifted files carry the
hash found; weakly hashed entries are hashed here. Hashless entries (RECORD itself, installer-written
bytecode whose header holds the install time) are left out: they differ between two good installs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass, field

from patchaudit.fs.beneath import read_below
from patchaudit.fs.safefs import Cap, UnreadableFile
from patchaudit.parallel.hashing import hash_file
from patchaudit.report import Report
from patchaudit.target.environment import Environment, InstalledDist
from patchaudit.target.record import parse_record

ENVIRONMENT = "(environment)"  # startup hooks and unowned files, fingerprinted like a distribution
MISSING = "missing"


@dataclass(frozen=True, kw_only=True, slots=True)
class DistFingerprint:
    version: str
    digest: str  # sha256 over the sorted (path, hash) pairs; "no-record" where there is nothing to list
    files: dict[str, str] = field(default_factory=dict)  # only for distributions asked for in detail

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"version": self.version, "digest": self.digest}
        if self.files:
            out["files"] = self.files
        return out


def _found(dist: InstalledDist) -> dict[str, str] | None:
    record_path = dist.record_path
    if record_path is None:
        return None
    try:
        record = parse_record(read_below(record_path, Cap.RECORD))
    except UnreadableFile:
        return None
    files: dict[str, str] = {}
    for entry in record.entries:
        if entry.hash is None:
            continue
        if entry.hash.trusted:
            files[entry.path] = str(entry.hash)
        else:
            state = hash_file(str(dist.location / entry.path))
            files[entry.path] = state.digest or MISSING
    return files


def _digest(files: dict[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode("utf-8", "surrogateescape") + b"\0" + files[path].encode() + b"\n")
    return h.hexdigest()


def fingerprints(
    env: Environment, dists: Collection[InstalledDist], report: Report, *, detail: Collection[str] = ()
) -> dict[str, DistFingerprint]:
    """One fingerprint per distribution of `report` (by name), plus ENVIRONMENT; `detail` names get files."""
    from packaging.utils import canonicalize_name

    wanted = {canonicalize_name(n) for n in detail}
    by_key = {(d.name, d.version): d for d in dists}
    out: dict[str, DistFingerprint] = {}
    for dist_report in report.distributions:
        dist = by_key.get((dist_report.name, dist_report.version))
        files = _found(dist) if dist is not None else None
        if files is None:
            out[dist_report.name] = DistFingerprint(version=dist_report.version, digest="no-record")
            continue
        for d in dist_report.drift:
            files[d.path] = d.actual or MISSING
        keep = canonicalize_name(dist_report.name) in wanted
        out[dist_report.name] = DistFingerprint(
            version=dist_report.version, digest=_digest(files), files=files if keep else {}
        )
    hooks = {d.path: d.actual or MISSING for d in report.environment.drift}
    out[ENVIRONMENT] = DistFingerprint(version="", digest=_digest(hooks), files=hooks if ENVIRONMENT in detail else {})
    return out
