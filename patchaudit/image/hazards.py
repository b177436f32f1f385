"""Bytes of an image's drifted files, read again from their layers (with the lower version of each that
still matches RECORD, as its pristine bytes): for the hazard rules and for `diff --image`."""

from __future__ import annotations

import base64
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from patchaudit.image.source import Image
from patchaudit.image.stream import Member, read_layer
from patchaudit.image.view import Entry, View
from patchaudit.report import DistReport, Finding, Report

Pair = tuple[bytes | None, bytes | None]  # (pristine, installed); None: no bytes on that side


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def drifted_bytes(
    image: Image,
    view: View,
    dists: Collection[DistReport],
    *,
    python_only: bool,
    pristine: Mapping[str, bytes] | None = None,
) -> dict[str, Pair]:
    """(pristine, installed) bytes of each drifted file, keyed by its path inside the image; the pristine
    side from a lower layer that still matches RECORD, else from `pristine` (the wheelhouse's)."""
    wanted: dict[str, Entry | None] = {}
    expected: dict[str, str] = {}
    for dist in dists:
        for d in dist.drift:
            path = os.path.normpath(f"{dist.location.lstrip('/')}/{d.path}")
            if python_only and not path.endswith(".py"):
                continue
            entry = view.lookup(path)
            if entry is not None and entry.member.kind == "f":
                wanted[path] = entry
            elif entry is None and path in view.removed:
                wanted[path] = None  # deleted: only its lower versions have bytes
            if d.expected:
                expected[path] = d.expected
    by_layer: dict[int, set[str]] = {}
    pristine_of: dict[str, Entry] = {}
    for path, entry in wanted.items():
        if entry is not None:
            by_layer.setdefault(entry.layer, set()).add(entry.member.path)
        lowers = [*view.shadowed.get(path, []), *([view.removed[path]] if entry is None else [])]
        for lower in reversed(lowers):
            if lower.member.digest and f"sha256={_b64(lower.member.digest)}" == expected.get(path):
                pristine_of[path] = lower
                by_layer.setdefault(lower.layer, set()).add(lower.member.path)
                break
    got: dict[tuple[int, str], bytes] = {}
    for index in sorted(by_layer):
        read = read_layer(image, image.layers[index], keep=by_layer[index])
        for m in read.members:
            if m.path in by_layer[index] and m.data is not None:
                got[index, m.path] = m.data
    out: dict[str, Pair] = {}
    for path, entry in wanted.items():
        below = pristine_of.get(path)
        before = got.get((below.layer, below.member.path)) if below is not None else None
        if before is None and pristine:
            before = pristine.get(path)
        out[path] = (before, got.get((entry.layer, entry.member.path)) if entry is not None else None)
    return out


def with_hazards(
    image: Image, view: View, report: Report, pristine: Mapping[str, bytes], rule_dirs: Sequence[Path] = ()
) -> Report:
    """The hazard rules over drifted Python files, their lower versions (when RECORD's) as pristine."""
    from patchaudit.hazards.batch import check_files
    from patchaudit.hazards.source import SourceFile

    pairs = drifted_bytes(image, view, report.distributions, python_only=True, pristine=pristine)
    if not pairs:
        return report
    dists = []
    for dist in report.distributions:
        files = []
        for d in dist.drift:
            before, after = pairs.get(os.path.normpath(f"{dist.location.lstrip('/')}/{d.path}"), (None, None))
            if after is not None:
                files.append(SourceFile(path=d.path, installed=after, pristine=before))
        found = check_files(files, rule_dirs=rule_dirs, workers=1) if files else []
        dists.append(replace(dist, findings=dist.findings + tuple(found)) if found else dist)
    return replace(report, distributions=tuple(dists))


BATCH = 32 << 20  # bytes of source handed to the rules at once: --all-files never holds a layer's files


def every_file_hazards(
    image: Image, view: View, report: Report, listed: Mapping[str, Sequence[str]], rule_dirs: Sequence[Path] = ()
) -> Report:
    """--all-files: the rules over the Python files each distribution's RECORD lists that did not drift
    (`listed`, by `location name`), read again layer by layer in batches; their findings are not changes."""
    from patchaudit.hazards.batch import check_files
    from patchaudit.hazards.source import SourceFile

    wanted: dict[int, dict[str, tuple[str, str]]] = {}  # layer -> member path -> (dist key, RECORD path)
    for dist in report.distributions:
        key = f"{dist.location} {dist.name}"
        for rel in listed.get(key, ()):
            entry = view.lookup(os.path.normpath(f"{dist.location.lstrip('/')}/{rel}"))
            if entry is not None and entry.member.kind == "f":
                wanted.setdefault(entry.layer, {})[entry.member.path] = (key, rel)
    found: dict[str, list[Finding]] = {}
    batch: dict[str, list[SourceFile]] = {}
    size = 0

    def flush() -> None:
        nonlocal size
        for key, files in batch.items():
            found.setdefault(key, []).extend(check_files(files, rule_dirs=rule_dirs))
        batch.clear()
        size = 0

    for index in sorted(wanted):
        members = wanted[index]

        def take(member: Member, members: dict[str, tuple[str, str]] = members) -> None:
            nonlocal size
            key, rel = members[member.path]
            assert member.data is not None
            batch.setdefault(key, []).append(SourceFile(path=rel, installed=member.data, pristine=None, drifted=False))
            size += len(member.data)
            if size >= BATCH:
                flush()

        read_layer(image, image.layers[index], keep=members, sink=take)
    flush()
    dists = []
    for dist in report.distributions:
        more = sorted(found.get(f"{dist.location} {dist.name}", []), key=lambda f: (f.path, f.line, f.column, f.rule))
        dists.append(replace(dist, findings=dist.findings + tuple(more)) if more else dist)
    return replace(report, distributions=tuple(dists))
