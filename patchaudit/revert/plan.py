"""Planning: what reverting a distribution (or a working tree) would change; nothing is written here."""

from __future__ import annotations

import csv
import io
import os
import stat
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

from patchaudit.errors import NotVerifiable, PatchAuditError
from patchaudit.fs.beneath import read_below, stat_below
from patchaudit.fs.safefs import Cap
from patchaudit.parallel.hashing import hash_file
from patchaudit.pristine import BuildCheck, Transfer, find_pristine
from patchaudit.pristine.check import PristineFile, wheel_index
from patchaudit.pristine.check import digest as digest_of
from patchaudit.pristine.diff import select_drift
from patchaudit.pristine.interface import PristineSource
from patchaudit.report import DistReport, DistStatus, Drift, DriftState
from patchaudit.revert.model import Action, ActionKind, Op, Plan, Refusal
from patchaudit.revert.paths import check_destination, destination
from patchaudit.target.environment import Environment, InstalledDist


def plan_revert(
    env: Environment,
    dist: InstalledDist,
    report: DistReport,
    *,
    paths: Collection[str] = (),
    wheelhouse: Sequence[Path] = (),
    sources: Sequence[PristineSource] | None = None,
    environ: Mapping[str, str] | None = None,
    transfer: Transfer | None = None,
) -> Plan:
    """Decide what reverting `dist` (or `paths` of it) does, from `report`; pristine bytes checked here."""
    if not report.drift and report.status is DistStatus.UNVERIFIABLE:
        why = report.unverified[0].reason if report.unverified else "its installed files cannot be checked"
        hint = "see `patchaudit scan` for what it read"
        raise NotVerifiable(f"cannot plan a revert of {dist.name}: {why}", hint=hint)
    drift = select_drift(report, paths)
    refused: list[Refusal] = []
    if paths:
        known = {os.path.normpath(d.path) for d in drift}
        refused += [Refusal(path=p, reason="not drifted") for p in paths if os.path.normpath(p) not in known]
    safe = []
    for item in drift:
        reason = check_destination(env, destination(dist.location, item.path))
        if reason is not None:
            refused.append(Refusal(path=item.path, reason=reason))
        else:
            safe.append(item)
    needed = [d for d in safe if d.state is not DriftState.ADDED]
    added = [d for d in safe if d.state is DriftState.ADDED]
    actions: list[Action] = []
    mismatch: tuple[str, ...] = ()
    origin = None
    shipped: set[str] = set()
    check: BuildCheck | None = None
    if needed or added:
        try:
            check = find_pristine(
                env, dist, drift=needed, wheelhouse=wheelhouse, sources=sources, environ=environ, transfer=transfer
            )
        except PatchAuditError:
            if needed:
                raise
            check = None  # no wheel to ask: files no RECORD owns are removed, as always (and quarantined)
    if check is not None:
        try:
            # a file the wheel ships is not "added" even when its installed RECORD line is gone
            shipped = set(wheel_index(check.wheel))
            origin = check.wheel.origin
            mismatch = check.record_mismatch
            refused += [Refusal(path=p, reason=r) for p, r in check.unavailable]
            for item in needed:
                pristine = check.files.get(item.path)
                if pristine is None:
                    continue
                actions.append(
                    Action(
                        path=item.path,
                        dest=destination(dist.location, item.path),
                        kind=ActionKind.WRITE,
                        data=pristine.data,
                        mode=pristine.mode,
                        digest=pristine.digest,
                    )
                )
            actions += _record_edited_actions(env, dist, check.record_edited, check.files, refused)
        finally:
            check.wheel.close()
    for item in added:
        if os.path.normpath(item.path).replace(os.sep, "/") in shipped:
            refused.append(
                Refusal(
                    path=item.path,
                    reason="the pristine wheel ships this file but the installed RECORD does not list it "
                    "(its RECORD line was removed); not removed",
                )
            )
            continue
        actions.append(Action(path=item.path, dest=destination(dist.location, item.path), kind=ActionKind.REMOVE))
    return Plan(
        op=Op.REVERT,
        dist=dist.name,
        version=dist.version,
        actions=tuple(actions),
        refused=tuple(refused),
        record_mismatch=mismatch,
        origin=origin,
    )


def _record_edited_actions(
    env: Environment,
    dist: InstalledDist,
    edited: Sequence[Drift],
    files: Mapping[str, PristineFile],
    refused: list[Refusal],
) -> list[Action]:
    """Files whose installed RECORD line was edited to match a patch: restore them and their RECORD lines.

    Only an authentic wheel (its own sha256 published by the index or direct_url.json) reports these.
    """
    actions: list[Action] = []
    fixed: dict[str, PristineFile] = {}
    for item in edited:
        dest = destination(dist.location, item.path)
        pristine = files.get(item.path)
        reason = check_destination(env, dest)
        if pristine is None or reason is not None:
            refused.append(Refusal(path=item.path, reason=reason or f"{item.note}; the wheel cannot restore it"))
            continue
        fixed[os.path.normpath(item.path)] = pristine
        if hash_file(str(dest), pristine.digest.partition("=")[0]).digest != pristine.digest:
            actions.append(
                Action(
                    path=item.path,
                    dest=dest,
                    kind=ActionKind.WRITE,
                    data=pristine.data,
                    mode=pristine.mode,
                    digest=pristine.digest,
                )
            )
    record_path = dist.record_path
    if fixed and record_path is not None:
        rows = []
        for row in csv.reader(read_below(record_path, Cap.RECORD).decode("utf-8").splitlines()):
            if row and os.path.normpath(row[0]) in fixed:
                pristine = fixed[os.path.normpath(row[0])]
                row = [row[0], pristine.digest, str(len(pristine.data))]
            rows.append(row)
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        data = buf.getvalue().encode()
        rel = os.path.relpath(record_path, dist.location).replace(os.sep, "/")
        found = stat_below(str(record_path))  # None: removed since it was read; written back 0644
        mode = stat.S_IMODE(found.st_mode) if found is not None else 0o644
        actions.append(
            Action(
                path=rel,
                dest=record_path,
                kind=ActionKind.WRITE,
                data=data,
                mode=mode,
                digest=digest_of(data, "sha256"),
            )
        )
    return actions


def plan_tree(
    dist: InstalledDist,
    files: Iterable[tuple[str, Path, bytes | None, int]],
    *,
    origin: str,
    root: Path,
) -> Plan:
    """A revert of a working tree: `(path, dest, committed bytes or None to remove, mode)` per file."""
    actions: list[Action] = []
    for path, dest, data, mode in files:
        if data is None:
            actions.append(Action(path=path, dest=dest, kind=ActionKind.REMOVE))
        else:
            actions.append(
                Action(
                    path=path, dest=dest, kind=ActionKind.WRITE, data=data, mode=mode, digest=digest_of(data, "sha256")
                )
            )
    return Plan(
        op=Op.REVERT,
        dist=dist.name,
        version=dist.version,
        actions=tuple(actions),
        origin=origin,
        roots=(str(root),),
    )
