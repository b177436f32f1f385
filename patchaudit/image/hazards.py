"""The hazard rules over an image's drifted Python files: their bytes read again from their layers, and
the lower version of each that still matches RECORD taken as its pristine bytes."""

from __future__ import annotations

import base64
import os
from dataclasses import replace

from patchaudit.image.source import Image
from patchaudit.image.stream import read_layer
from patchaudit.image.view import Entry, View
from patchaudit.report import Report


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def with_hazards(image: Image, view: View, report: Report, sources: dict[str, str]) -> Report:
    """The hazard rules over drifted Python files, their lower versions (when RECORD's) as pristine."""
    from patchaudit.hazards.batch import check_files
    from patchaudit.hazards.source import SourceFile

    wanted = {path for path in sources if path.endswith(".py")}
    if not wanted:
        return report
    by_layer: dict[int, set[str]] = {}
    pristine_of: dict[str, Entry] = {}
    expected = {}
    for dist in report.distributions:
        for d in dist.drift:
            if d.expected:
                expected[os.path.normpath(f"{dist.location.lstrip('/')}/{d.path}")] = d.expected
    for path in wanted:
        entry = view.entries[path]
        by_layer.setdefault(entry.layer, set()).add(path)
        for lower in reversed(view.shadowed.get(path, [])):
            if lower.member.digest and f"sha256={_b64(lower.member.digest)}" == expected.get(path):
                pristine_of[path] = lower
                by_layer.setdefault(lower.layer, set()).add(path)
                break
    got: dict[tuple[int, str], bytes] = {}
    for index in sorted(by_layer):
        read = read_layer(image, image.layers[index], keep=by_layer[index])
        for m in read.members:
            if m.path in by_layer[index] and m.data is not None:
                got[index, m.path] = m.data
    dists = []
    for dist in report.distributions:
        site = dist.location.lstrip("/")
        files = []
        for d in dist.drift:
            path = os.path.normpath(f"{site}/{d.path}")
            if path not in wanted or (view.entries[path].layer, path) not in got:
                continue
            below = pristine_of.get(path)
            before = got.get((below.layer, path)) if below is not None else None
            files.append(SourceFile(path=d.path, installed=got[view.entries[path].layer, path], pristine=before))
        found = check_files(files, workers=1) if files else []
        dists.append(replace(dist, findings=dist.findings + tuple(found)) if found else dist)
    return replace(report, distributions=tuple(dists))
