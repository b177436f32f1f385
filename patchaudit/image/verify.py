"""An image's distributions held to their RECORDs, each drifted file named with the layer that made it so.

Two passes over the layers at most: the first hashes every member and keeps the small files the audit
reads whole; the second, only when hazards are asked for and files drifted, reads again just the layers
holding those files (and the lower versions of them that still match RECORD, as pristine bytes).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import NamedTuple

from patchaudit.image import ImageError
from patchaudit.image.source import Image, LayerBlob, open_image
from patchaudit.image.stream import LayerRead, read_layer
from patchaudit.image.view import View
from patchaudit.report import (
    DistReport,
    Drift,
    DriftState,
    EnvironmentReport,
    Finding,
    Layer,
    Report,
    Severity,
    Source,
    Target,
    Unverified,
)
from patchaudit.target.record import Record, parse_record

_SITE = re.compile(r"(?:^|/)lib(?:64)?/python3(?:\.\d+)?/(?:site|dist)-packages$")
_HEADER = re.compile(rb"^(Name|Version):[ \t]*(\S[^\r\n]*)", re.MULTILINE)


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageOptions:
    names: tuple[str, ...] = ()
    hazards: bool = True
    base: str | None = None  # only what the layers above this image's layers changed
    workers: int | None = None
    all_files: bool = False  # the hazard rules over every Python file of the distributions, not only drifted ones
    rule_dirs: tuple[Path, ...] = ()
    wheelhouse: tuple[Path, ...] = ()  # pristine bytes where no lower layer holds them; a stale RECORD told apart
    errata: tuple[Path, ...] = ()  # the operator's errata files, beside the shipped ones (patchaudit.check.errata)


def scan_image(ref: str, options: ImageOptions) -> Report:
    image, view, report, pristine, every = _read(ref, options)
    if options.hazards:
        from patchaudit.image.hazards import every_file_hazards, with_hazards

        report = with_hazards(image, view, report, pristine, options.rule_dirs)
        if options.all_files:
            report = every_file_hazards(image, view, report, _python_files(every, report), options.rule_dirs)
    return replace(report, target=replace(report.target, image=ref))


def diff_image(ref: str, options: ImageOptions, paths: Collection[str] = ()) -> str:
    """The patches of the distributions named: each drifted file's RECORD version (from a lower layer,
    when one holds it) -> the image's, as a unified diff `patch -p0` takes inside the site directory."""
    from patchaudit.image.hazards import drifted_bytes
    from patchaudit.pristine.diff import unified

    image, view, report, pristine, _every = _read(ref, options)
    wanted = {os.path.normpath(p) for p in paths}
    dists = [
        replace(d, drift=tuple(x for x in d.drift if not wanted or x.path in wanted)) for d in report.distributions
    ]
    pairs = drifted_bytes(image, view, dists, python_only=False, pristine=pristine)
    out = []
    for dist in dists:
        for d in dist.drift:
            before, after = pairs.get(os.path.normpath(f"{dist.location.lstrip('/')}/{d.path}"), (None, None))
            if before is None and d.state is not DriftState.ADDED:
                out.append(f"# {d.path}: {d.state.value}, no lower layer holds its RECORD bytes\n")
                continue
            text, _ = unified(d.path, before, after)
            out.append(text)
    return "".join(out)


class _Read(NamedTuple):
    image: Image
    view: View
    report: Report
    pristine: dict[str, bytes]  # from the wheelhouse, by path inside the image
    every: list[_Dist]


def _read(ref: str, options: ImageOptions) -> _Read:
    """The image, its stacked files and its report."""
    image = open_image(ref)
    floor = 0
    if options.base is not None:
        floor = _base_layers(image, open_image(options.base))
    view = View()
    for layer in _read_all(image, options.workers):
        view.apply(layer)
    layers = {b.index: b for b in image.layers}
    every = _dists(view)
    report = _verify(view, layers, options.names, every)
    report, pristine = _known_records(report, every, view, options)
    if floor:
        report = _above(report, floor)
    return _Read(image, view, report, pristine, every)


def _known_records(
    report: Report, every: Sequence[_Dist], view: View, options: ImageOptions
) -> tuple[Report, dict[str, bytes]]:
    """Modified files that the errata or a wheel of the wheelhouse show to be a stale RECORD line are
    record-mismatch facts, as on a host; the wheelhouse's pristine bytes of the rest, by image path."""
    from patchaudit.check.errata import load, with_errata
    from patchaudit.image.pristine import from_wheelhouse

    records = {("/" + d.site, d.name): d.record for d in every}
    errata = None
    pristine: dict[str, bytes] = {}
    dists = []
    for dist in report.distributions:
        if any(d.state is DriftState.MODIFIED for d in dist.drift):
            errata = errata if errata is not None else load(options.errata)
            dist = with_errata(dist, errata)
        record = records.get((dist.location, dist.name))
        changed = any(d.state in (DriftState.MODIFIED, DriftState.MISSING) for d in dist.drift)
        if options.wheelhouse and record is not None and changed:
            sizes = {d.path: _size(view, dist, d.path) for d in dist.drift if d.state is DriftState.MODIFIED}
            dist, found = from_wheelhouse(options.wheelhouse, dist, record, sizes)
            pristine.update({os.path.normpath(f"{dist.location.lstrip('/')}/{p}"): b for p, b in found.items()})
        dists.append(dist)
    return replace(report, distributions=tuple(dists)), pristine


def _size(view: View, dist: DistReport, path: str) -> int:
    entry = view.lookup(os.path.normpath(f"{dist.location.lstrip('/')}/{path}"))
    return entry.member.size if entry is not None else 0


def _python_files(every: Sequence[_Dist], report: Report) -> dict[str, list[str]]:
    """--all-files: each distribution's Python files that its RECORD lists and that did not drift, by
    `location name`; another distribution's file at an overwritten path aside."""
    records = {("/" + d.site, d.name): d.record for d in every}
    out: dict[str, list[str]] = {}
    for dist in report.distributions:
        record = records.get((dist.location, dist.name))
        skip = {d.path for d in dist.drift} | {f.path for f in dist.facts if f.state is DriftState.OVERWRITTEN}
        out[f"{dist.location} {dist.name}"] = sorted(
            e.path for e in (record.entries if record else ()) if e.path.endswith(".py") and e.path not in skip
        )
    return out


def _base_layers(image: Image, base: Image) -> int:
    """How many layers the image shares with its base; the base must be the bottom of the image."""
    mine = [(b.digest, b.diff_id) for b in image.layers]
    theirs = [(b.digest, b.diff_id) for b in base.layers]
    if len(theirs) > len(mine) or any(
        a[1] != b[1] or (a[0] and b[0] and a[0] != b[0]) for a, b in zip(mine, theirs, strict=False)
    ):
        raise ImageError(f"{base.ref} is not a base of {image.ref}: their bottom layers differ")
    return len(theirs)


def _read_all(image: Image, workers: int | None) -> Iterator[LayerRead]:
    from patchaudit.parallel.cpus import available_cpus

    n = min(workers or available_cpus(), len(image.layers))
    if n <= 1 or len(image.layers) < 2:
        for layer in image.layers:
            yield read_layer(image, layer)
        return
    with ProcessPoolExecutor(max_workers=n, mp_context=get_context("fork")) as pool:
        yield from pool.map(read_layer, [image] * len(image.layers), image.layers)  # in order, as they come


def _provenance(layers: dict[int, LayerBlob], index: int) -> Layer:
    blob = layers[index]
    return Layer(index=index, digest=blob.digest or blob.diff_id or "", created_by=blob.created_by)


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@dataclass(slots=True)
class _Dist:
    name: str
    version: str
    site: str  # inside the image, no leading slash
    meta: str
    record: Record | None  # None: the RECORD is not a regular file within its cap (a link, a device)


def _dists(view: View) -> list[_Dist]:
    found = []
    for path, entry in sorted(view.entries.items()):
        if not path.endswith(".dist-info/RECORD"):
            continue
        meta = path.rpartition("/")[0]
        site = meta.rpartition("/")[0]
        if not _SITE.search(site):
            continue
        stem = meta.rpartition("/")[2].removesuffix(".dist-info")
        name, _, version = stem.partition("-")
        meta_entry = view.entries.get(f"{meta}/METADATA")
        if meta_entry is not None and meta_entry.member.data is not None:
            headers = dict(
                (k.decode(), v.decode("utf-8", "replace")) for k, v in _HEADER.findall(meta_entry.member.data[:65536])
            )
            name, version = headers.get("Name", name), headers.get("Version", version)
        data = entry.member.data
        record = parse_record(data) if data is not None else None
        found.append(_Dist(name=name, version=version, site=site, meta=meta, record=record))
    return found


def _verify(view: View, layers: dict[int, LayerBlob], names: Sequence[str], every: list[_Dist]) -> Report:
    """Each chosen distribution held to its RECORD in the stacked layers; drift names its layer."""
    from packaging.utils import canonicalize_name

    chosen = (
        every if not names else [d for d in every if canonicalize_name(d.name) in {canonicalize_name(n) for n in names}]
    )
    missing = set(map(canonicalize_name, names)) - {canonicalize_name(d.name) for d in chosen}
    if missing:
        from patchaudit.errors import DistributionNotFound

        raise DistributionNotFound(f"{', '.join(sorted(missing))} is not installed in this image")
    listed: dict[str, dict[str, list[tuple[_Dist, str]]]] = {}  # site -> path -> [(dist, hash)]
    for dist in every:
        for e in dist.record.entries if dist.record is not None else ():
            where = os.path.normpath(f"{dist.site}/{e.path}")
            listed.setdefault(dist.site, {}).setdefault(where, []).append((dist, str(e.hash) if e.hash else ""))
    reports = []
    for dist in chosen:
        if dist.record is None:
            reason = "RECORD is not a regular file within its cap (a link, a device, or too large)"
            unreadable = (Unverified(path=f"{dist.meta.rpartition('/')[2]}/RECORD", reason=reason),)
            reports.append(
                DistReport(
                    name=dist.name,
                    version=dist.version,
                    location="/" + dist.site,
                    source=Source.WHEEL,
                    unverified=unreadable,
                    verifiable=False,
                )
            )
            continue
        drift: list[Drift] = []
        facts: list[Drift] = []
        unverified = [
            Unverified(path=p.path or f"{dist.meta}/RECORD", reason=f"RECORD {p}") for p in dist.record.problems
        ]
        checked = 0
        for e in dist.record.entries:
            if e.hash is None:
                continue
            expected = str(e.hash)
            if e.hash.algorithm != "sha256":
                unverified.append(Unverified(path=e.path, reason=f"{e.hash.algorithm} hashes are not read in images"))
                continue
            checked += 1
            found = _judge(view, layers, dist, e.path, expected, listed[dist.site])
            if isinstance(found, Unverified):
                unverified.append(found)
            elif found is not None:
                (facts if found.state is DriftState.OVERWRITTEN else drift).append(found)
        drift += _added(view, layers, dist, listed[dist.site])
        reports.append(
            DistReport(
                name=dist.name,
                version=dist.version,
                location="/" + dist.site,
                source=Source.WHEEL,
                drift=tuple(drift),
                unverified=tuple(unverified),
                files_checked=checked,
                verifiable=checked > 0,
                facts=tuple(facts),
            )
        )
    env_drift, env_findings = _hooks(view, layers, sorted({d.site for d in every}), listed)
    sites = tuple("/" + s for s in sorted({d.site for d in every}))
    return Report(
        target=Target(python=None, paths=sites),
        distributions=tuple(reports),
        environment=EnvironmentReport(drift=tuple(env_drift), findings=tuple(env_findings)),
    )


def _judge(
    view: View,
    layers: dict[int, LayerBlob],
    dist: _Dist,
    path: str,
    expected: str,
    listed: Mapping[str, list[tuple[_Dist, str]]],
) -> Drift | Unverified | None:
    """One RECORD line against the image: None when the file is as recorded; an OVERWRITTEN fact when
    another distribution of the site records these bytes; else the drift, or why it cannot be told."""
    where = os.path.normpath(f"{dist.site}/{path}")
    entry = view.lookup(where)
    if entry is None:
        gone = view.deleted.get(where)
        layer = _provenance(layers, gone) if gone is not None else None
        note = "deleted by a whiteout" if layer else None
        return Drift(path=path, state=DriftState.MISSING, expected=expected, layer=layer, note=note)
    member, layer = entry.member, _provenance(layers, entry.layer)
    if member.kind == "h":
        reason = f"a hard link to /{member.link}, a file no layer up to its own holds"
        return Unverified(path=path, reason=reason)
    if member.kind == "l":
        note = f"replaced by a symlink to {member.link}"
    elif member.kind != "f" or member.digest is None:
        note = "not a regular file"
    else:
        actual = f"sha256={_b64(member.digest)}"
        if actual == expected:
            return None
        winners = [d for d, h in listed.get(where, []) if h == actual and d is not dist]
        if winners:
            winner = f"{winners[0].name} {winners[0].version}"
            state = DriftState.OVERWRITTEN
            return Drift(path=path, state=state, expected=expected, actual=actual, winner=winner, layer=layer)
        return Drift(path=path, state=DriftState.MODIFIED, expected=expected, actual=actual, layer=layer)
    return Drift(path=path, state=DriftState.MODIFIED, expected=expected, layer=layer, note=note)


def _added(view: View, layers: dict[int, LayerBlob], dist: _Dist, listed: Mapping[str, object]) -> list[Drift]:
    """Files inside the distribution's package directories that no RECORD of its site lists."""
    tops = {
        e.path.split("/", 1)[0]
        for e in (dist.record.entries if dist.record else ())
        if "/" in e.path and not e.path.startswith(("..", "/"))
    }
    tops.discard(dist.meta.rpartition("/")[2])
    out = []
    for top in sorted(tops):
        below = f"{dist.site}/{top}/"
        for path, entry in view.entries.items():
            if not path.startswith(below) or entry.member.kind == "d" or path in listed:
                continue
            if "/__pycache__/" in path and path.endswith(".pyc"):
                continue  # compiled by the installer (or at first import): bytecode, not a change
            rel = path[len(dist.site) + 1 :]
            digest = f"sha256={_b64(entry.member.digest)}" if entry.member.digest else None
            out.append(Drift(path=rel, state=DriftState.ADDED, actual=digest, layer=_provenance(layers, entry.layer)))
    return out


def _hooks(
    view: View, layers: dict[int, LayerBlob], sites: list[str], listed: dict[str, dict[str, list[tuple[_Dist, str]]]]
) -> tuple[list[Drift], list[Finding]]:
    """`.pth` files with code and *customize modules that no distribution owns."""
    from patchaudit.check.hooks import STARTUP_HOOK, startup_hook_lines

    drift: list[Drift] = []
    findings: list[Finding] = []
    for site in sites:
        for path, entry in sorted(view.entries.items()):
            head, _, name = path.rpartition("/")
            if head != site or path in listed.get(site, {}) or entry.member.data is None:
                continue
            text = entry.member.data.decode("utf-8", "replace")
            lines = [1] if not name.endswith(".pth") else startup_hook_lines(text)
            if not lines:
                continue
            shown = f"/{path}"
            drift.append(
                Drift(path=shown, state=DriftState.ADDED, note="startup hook", layer=_provenance(layers, entry.layer))
            )
            message = f"{name} runs in every process of this image and no distribution owns it"
            findings.append(
                Finding(rule=STARTUP_HOOK, severity=Severity.HIGH, path=shown, line=lines[0], message=message)
            )
    return drift, findings


def _above(report: Report, floor: int) -> Report:
    """Only drift the layers above the base made, and the findings in those files."""

    def keep(d: Drift) -> bool:
        return d.layer is not None and d.layer.index >= floor

    dists = []
    for dist in report.distributions:
        drift = tuple(d for d in dist.drift if keep(d))
        paths = {d.path for d in drift}
        dists.append(
            replace(
                dist,
                drift=drift,
                facts=tuple(f for f in dist.facts if keep(f)),
                findings=tuple(f for f in dist.findings if f.path in paths),
            )
        )
    env_drift = tuple(d for d in report.environment.drift if keep(d))
    env_paths = {d.path for d in env_drift}
    environment = replace(
        report.environment,
        drift=env_drift,
        findings=tuple(f for f in report.environment.findings if f.path in env_paths),
    )
    return replace(report, distributions=tuple(dists), environment=environment)


__all__ = ["ImageOptions", "scan_image"]
