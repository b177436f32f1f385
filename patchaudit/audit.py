"""One audit of an environment: verify, then run the hazard rules over what changed."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from patchaudit import environment
from patchaudit.environment import Environment, InstalledDist
from patchaudit.hashing import StatCache, read_regular
from patchaudit.report import DistReport, Drift, DriftState, Report, Severity, Source, Unverified

if TYPE_CHECKING:
    from patchaudit.pristine.check import BuildCheck
from patchaudit.verify import verify

STAT_CACHE_NAME = "stat-v1.json"


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanOptions:
    names: tuple[str, ...] = ()
    hazards: bool = True
    all_files: bool = False
    rule_dirs: tuple[Path, ...] = ()
    severity_overrides: Mapping[str, Severity] = field(default_factory=dict)
    use_cache: bool = True
    workers: int | None = None
    pristine: bool = True  # look up pristine bytes for drifted files (local sources unless `fetch`)
    fetch: bool = False  # also ask the package index
    wheelhouse: tuple[Path, ...] = ()


def cache_dir(env: Environment) -> Path:
    return env.state_dir / "cache"


def stat_cache(env: Environment, options: ScanOptions) -> StatCache | None:
    if not options.use_cache:
        return None
    return StatCache(cache_dir(env) / STAT_CACHE_NAME)


def scan(
    env: Environment,
    options: ScanOptions,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Verify the selected distributions and, unless told not to, run the hazard rules."""
    every = environment.distributions(env)
    chosen = environment.select(every, options.names)
    report = verify(
        env,
        chosen,
        every=every,
        cache=stat_cache(env, options),
        workers=options.workers,
        progress=progress,
    )
    pristine: dict[Path, dict[str, bytes]] = {}
    if options.pristine:
        report, pristine = _with_pristine(env, report, chosen, options)
    if options.hazards:
        report = _with_hazards(env, report, chosen, options, pristine)
    return report


def _with_pristine(
    env: Environment, report: Report, chosen: Sequence[InstalledDist], options: ScanOptions
) -> tuple[Report, dict[Path, dict[str, bytes]]]:
    """Pristine bytes of modified files, so hazards see the patch itself; a stale RECORD is not a patch.

    By default only distributions with modified files are looked up, from local sources, and a wheel of
    another build is passed over in silence. Asked for a wheelhouse or the index, every distribution is
    held to its wheel: a file whose RECORD line was rewritten to match a patch shows up there, as a
    wheel that disagrees (named in `unverified`) or, for an authentic wheel, as drift.
    """
    explicit = options.fetch or bool(options.wheelhouse)
    found: dict[Path, dict[str, bytes]] = {}
    dists: list[DistReport] = []
    for dist, installed in zip(report.distributions, chosen, strict=True):
        modified = [d for d in dist.drift if d.state is DriftState.MODIFIED and not os.path.isabs(d.path)]
        from_git = dist.source in (Source.EDITABLE, Source.VCS) and dist.location != str(installed.location)
        if from_git:
            if modified:
                found[installed.meta_dir] = _from_checkout(installed, modified)
            dists.append(dist)
            continue
        if not modified and not (explicit and installed.record_path is not None):
            dists.append(dist)
            continue
        check = _find_wheel(env, installed, modified, options)
        if isinstance(check, str):
            if explicit:
                note = Unverified(path=installed.meta_dir.name, reason=check)
                dist = dataclasses.replace(dist, unverified=(*dist.unverified, note))
            dists.append(dist)
            continue
        if check is None:
            dists.append(dist)
            continue
        found[installed.meta_dir] = {path: f.data for path, f in check.files.items()}
        dists.append(_apply_build_check(dist, check))
    return dataclasses.replace(report, distributions=tuple(dists)), found


def _find_wheel(
    env: Environment, dist: InstalledDist, drift: Sequence[Drift], options: ScanOptions
) -> BuildCheck | str | None:
    """The accepted wheel; the refusal's message when the only candidates are another build; else None."""
    from patchaudit import pristine
    from patchaudit.errors import PatchAuditError, WheelMismatch

    try:
        return pristine.find_pristine(env, dist, drift=drift, wheelhouse=options.wheelhouse, offline=not options.fetch)
    except WheelMismatch as exc:
        return str(exc)
    except PatchAuditError:
        return None


def _from_checkout(dist: InstalledDist, drift: Sequence[Drift]) -> dict[str, bytes]:
    from patchaudit import vcs

    co = vcs.checkout(dist)
    if co is None:
        return {}
    out: dict[str, bytes] = {}
    for d in drift:
        in_repo = os.path.relpath(co.project / d.path, co.root)
        blob = vcs.committed_bytes(co, in_repo)
        if blob is not None:
            out[d.path] = blob
    return out


def _apply_build_check(dist: DistReport, check: BuildCheck) -> DistReport:
    """Files whose bytes equal the wheel's while RECORD disagrees are record-mismatch, not patches;
    an authentic wheel that shows the installed RECORD was edited adds that drift."""
    stale = set(check.record_mismatch)
    drift = [d for d in dist.drift if d.path not in stale]
    unverified = list(dist.unverified) + [
        Unverified(path=p, reason="record-mismatch: installed bytes equal the pristine wheel's; RECORD is stale")
        for p in sorted(stale)
    ]
    known = {d.path for d in drift}
    drift += [d for d in check.record_edited if d.path not in known]
    return dataclasses.replace(dist, drift=tuple(drift), unverified=tuple(unverified))


def _with_hazards(
    env: Environment,
    report: Report,
    chosen: Sequence[InstalledDist],
    options: ScanOptions,
    pristine: Mapping[Path, Mapping[str, bytes]],
) -> Report:
    dists: list[DistReport] = []
    for dist, installed in zip(report.distributions, chosen, strict=True):
        location = Path(dist.location)
        files: list[tuple[str, bytes, bool]] = []
        drifted = {d.path for d in dist.drift if d.state is not DriftState.MISSING and d.path.endswith(".py")}
        for rel in sorted(drifted):
            data = read_regular(location / rel)
            if data is not None:
                files.append((rel, data, True))
        if options.all_files:
            recorded = installed.record_path is not None and installed.record_path.exists()
            # Without RECORD no line verifies: every finding there counts as a change.
            listed = _python_files(installed) if recorded else _unrecorded_python_files(installed)
            for rel in sorted(listed - drifted):
                data = read_regular(location / rel)
                if data is not None:
                    files.append((rel, data, not recorded))
        if not files:
            dists.append(dist)
            continue
        from patchaudit import hazards

        before = pristine.get(installed.meta_dir, {})
        findings = hazards.check_files(
            [hazards.SourceFile(path=p, installed=b, pristine=before.get(p), drifted=d) for p, b, d in files],
            rule_dirs=options.rule_dirs,
            severity_overrides=options.severity_overrides,
            cache_dir=cache_dir(env) / "hazards" if options.use_cache else None,
            workers=options.workers,
        )
        dists.append(dataclasses.replace(dist, findings=dist.findings + tuple(findings)))
    return dataclasses.replace(report, distributions=tuple(dists))


def _unrecorded_python_files(dist: InstalledDist) -> set[str]:
    """The .py files of a distribution without RECORD: its top_level.txt packages and modules."""
    try:
        tops = (dist.meta_dir / "top_level.txt").read_text("utf-8").split()
    except (OSError, UnicodeDecodeError):
        return set()
    found: set[str] = set()
    for top in tops:
        if not top.isidentifier():
            continue
        root = dist.location / top
        if root.is_dir() and not root.is_symlink():
            for base, _dirs, names in os.walk(root):  # os.walk never follows symlinked directories
                rel = Path(base).relative_to(dist.location).as_posix()
                found.update(f"{rel}/{n}" for n in names if n.endswith(".py"))
        elif (dist.location / f"{top}.py").is_file():
            found.add(f"{top}.py")
    return found


def _python_files(dist: InstalledDist) -> set[str]:
    """Every .py file the distribution's RECORD lists inside its location."""
    from patchaudit.record import parse_record

    if dist.record_path is None or not dist.record_path.exists():
        return set()
    record = parse_record(dist.record_path.read_bytes())
    return {
        e.path
        for e in record.entries
        if e.path.endswith(".py") and not e.path.startswith("..") and not os.path.isabs(e.path)
    }
