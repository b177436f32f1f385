"""One audit of an environment: verify, then run the hazard rules over what changed."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from patchaudit.check.ownership import Loaded
from patchaudit.fs.beneath import read_below
from patchaudit.parallel.deadline import phase
from patchaudit.parallel.hashing import hash_file
from patchaudit.parallel.statcache import StatCache
from patchaudit.report import DistReport, Drift, DriftState, Report, Severity, Source, Unverified
from patchaudit.target import environment
from patchaudit.target.environment import Environment, InstalledDist
from patchaudit.target.record import Record

if TYPE_CHECKING:
    from patchaudit.check.errata import Errata
    from patchaudit.pristine.check import BuildCheck
from patchaudit.check.verify import verify
from patchaudit.fs.safefs import Cap, UnreadableFile

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
    cache_dir: Path | None = None  # --cache-dir: caches go below it, one directory per environment
    errata: tuple[Path, ...] = ()  # the operator's errata files, beside the shipped ones (patchaudit.check.errata)


def cache_dir(env: Environment, options: ScanOptions) -> Path | None:
    """Where this run keeps its caches (see patchaudit.target.cachedir); None: uncached."""
    if not options.use_cache:
        return None
    from patchaudit.target import cachedir

    explicit = options.cache_dir
    if explicit is None and env.tree is not None:
        explicit = cachedir.user_cache(os.environ)
    where = cachedir.locate(env.prefix, explicit).path
    return where if where is not None and cachedir.ensure(where) else None


def stat_cache(env: Environment, options: ScanOptions) -> StatCache | None:
    where = cache_dir(env, options)
    return StatCache(where / STAT_CACHE_NAME) if where is not None else None


def scan(
    env: Environment,
    options: ScanOptions,
    *,
    progress: Callable[[str, int, int | None], None] | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> Report:
    """Verify the selected distributions and, unless told not to, run the hazard rules.

    `progress(phase, done, total)`: "hashing" counts the files checked (the report's files_checked),
    "rules" the files the hazard rules read. `meanwhile()` runs while worker processes hash (the caller's
    own imports, say), after the modules of this scan's later stages are imported there."""
    from patchaudit.report import now_utc

    started = now_utc()
    every = environment.distributions(env)
    environment.require_any(env, every)
    chosen = environment.select(every, options.names)
    where = cache_dir(env, options)
    cache = StatCache(where / STAT_CACHE_NAME) if where is not None else None
    phase("verifying files")
    hashing = (lambda done, total: progress("hashing", done, total)) if progress is not None else None
    records: dict[Path, Loaded] = {}  # each RECORD read and parsed once, for every stage below

    def warm() -> None:
        """The modules the stages after the hashing import, loaded while the workers hash instead of after."""
        import patchaudit.check.facts  # noqa: F401  (every report's packaging facts)

        if options.pristine:
            import patchaudit.check.errata  # noqa: F401  (for a modified file of a wheel)
        if meanwhile is not None:
            meanwhile()

    def warm_drift() -> None:
        """What a modified file costs after the hashing (its wheel looked up), loaded once the first one is found."""
        if options.pristine:
            import tomllib  # noqa: F401  (the errata's parser)

            import patchaudit.pristine  # noqa: F401

    report = verify(
        env,
        chosen,
        every=every,
        cache=cache,
        workers=options.workers,
        progress=hashing,
        records_out=records,
        meanwhile=warm,
        on_drift=warm_drift,
    )
    pristine: dict[Path, dict[str, bytes]] = {}
    if options.pristine:
        phase("looking up pristine bytes")
        report, pristine = _with_pristine(env, report, chosen, options, cache, records)
        if cache is not None:
            cache.save()  # the digests of archives that direct_url.json names
    if options.hazards:
        phase("running the hazard rules")
        rules = (lambda done, total: progress("rules", done, total)) if progress is not None else None
        report = _with_hazards(report, chosen, options, pristine, where, rules, records)
    report = dataclasses.replace(report, started=started)
    return _with_fact_findings(report, options.severity_overrides)


def _with_fact_findings(report: Report, overrides: Mapping[str, Severity]) -> Report:
    """Each packaging fact as a finding of its state's name: `info` unless the policy raises it."""
    from patchaudit.check import facts

    dists = [
        dataclasses.replace(d, findings=d.findings + facts.findings(d.facts, dict(overrides))) if d.facts else d
        for d in report.distributions
    ]
    return dataclasses.replace(report, distributions=tuple(dists))


def _with_pristine(
    env: Environment,
    report: Report,
    chosen: Sequence[InstalledDist],
    options: ScanOptions,
    cache: StatCache | None = None,
    records: Mapping[Path, Loaded] | None = None,
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
    errata: Errata | None = None
    for dist, installed in zip(report.distributions, chosen, strict=True):
        modified = [d for d in dist.drift if d.state is DriftState.MODIFIED and not os.path.isabs(d.path)]
        if modified and dist.source is Source.WHEEL:
            if errata is None:
                from patchaudit.check.errata import load

                errata = load(options.errata)
            dist = _with_errata(dist, errata)
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
        record = _record(records, installed)
        check = _find_wheel(env, installed, modified, options, cache, record)
        if isinstance(check, Refusal):
            if explicit:
                note = Unverified(path=installed.meta_dir.name, reason=check.reason)
                dist = dataclasses.replace(dist, unverified=(*dist.unverified, note))
            dists.append(_without_wheel(dist, check))
            continue
        found[installed.meta_dir] = {path: f.data for path, f in check.files.items()}
        dists.append(_apply_build_check(dist, check))
    return dataclasses.replace(report, distributions=tuple(dists)), found


def _with_errata(dist: DistReport, errata: Errata) -> DistReport:
    """errata.with_errata, hashing a modified file that was judged by its size alone when an erratum
    covers it."""
    from patchaudit.check.errata import with_errata

    def actual_of(d: Drift) -> str | None:
        if d.actual is None and errata.covers(dist.name, d.path):
            return hash_file(str(Path(dist.location) / d.path)).digest
        return d.actual

    return with_errata(dist, errata, actual_of)


@dataclass(frozen=True, kw_only=True, slots=True)
class Refusal:
    """No wheel was accepted for a distribution: why, in one line."""

    reason: str
    tried: tuple[str, ...] = ()


def _find_wheel(
    env: Environment,
    dist: InstalledDist,
    drift: Sequence[Drift],
    options: ScanOptions,
    cache: StatCache | None = None,
    record: Record | None = None,
) -> BuildCheck | Refusal:
    """The accepted wheel, or why there is none (another build; nothing found, naming what was tried)."""
    from patchaudit import pristine
    from patchaudit.errors import PatchAuditError, PristineNotFound

    try:
        return pristine.find_pristine(
            env, dist, drift=drift, wheelhouse=options.wheelhouse, offline=not options.fetch, cache=cache, record=record
        )
    except PristineNotFound as exc:
        return Refusal(reason=str(exc), tried=exc.tried)
    except PatchAuditError as exc:
        return Refusal(reason=str(exc))


def _without_wheel(dist: DistReport, refusal: Refusal) -> DistReport:
    """Modified files stay modified without a wheel; say that a wrong RECORD cannot be told from a patch."""
    if "another build" in refusal.reason:
        note = "the only wheel found is another build: a patch cannot be told from a wheel whose RECORD is wrong"
    else:
        note = "no wheel at hand to tell a patch from a wheel whose RECORD is wrong"
        if refusal.tried:
            note += f" (tried {', '.join(refusal.tried)})"
    drift = tuple(
        dataclasses.replace(d, note=_join(d.note, note))
        if d.state is DriftState.MODIFIED and d.actual is not None and not os.path.isabs(d.path)
        else d
        for d in dist.drift
    )
    return dataclasses.replace(dist, drift=drift)


def _from_checkout(dist: InstalledDist, drift: Sequence[Drift]) -> dict[str, bytes]:
    from patchaudit.check import vcs

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
    wheel = check.wheel.filename
    facts = [
        dataclasses.replace(
            d,
            state=DriftState.RECORD_MISMATCH,
            wheel=wheel,
            note=f"installed bytes equal the member of {check.wheel.origin}; its RECORD is wrong about them",
        )
        for d in dist.drift
        if d.path in stale
    ]
    # the wheel could not give these bytes: a patch cannot be told from a wrong RECORD, so say why
    missing = dict(check.unavailable)
    drift = [
        dataclasses.replace(d, note=_join(d.note, f"no pristine bytes: {missing[d.path]}"))
        if d.path in missing and d.state is DriftState.MODIFIED and d.actual is not None
        else d
        for d in drift
    ]
    known = {d.path for d in drift}
    drift += [d for d in check.record_edited if d.path not in known]
    return dataclasses.replace(dist, drift=tuple(drift), facts=dist.facts + tuple(facts))


def _join(note: str | None, more: str) -> str:
    return more if not note else f"{note}; {more}"


def _with_hazards(
    report: Report,
    chosen: Sequence[InstalledDist],
    options: ScanOptions,
    pristine: Mapping[Path, Mapping[str, bytes]],
    where: Path | None,
    progress: Callable[[int, int], None] | None = None,
    records: Mapping[Path, Loaded] | None = None,
) -> Report:
    from patchaudit.hazards.pool import HazardJob, check_jobs

    jobs: list[HazardJob] = []
    for dist, installed in zip(report.distributions, chosen, strict=True):
        drifted = {d.path for d in dist.drift if d.state is not DriftState.MISSING and d.path.endswith(".py")}
        files = [(rel, True) for rel in sorted(drifted)]
        if options.all_files:
            recorded = installed.record_path is not None and installed.record_path.exists()
            # Without RECORD no line verifies: every finding there counts as a change.
            record = _record(records, installed)
            listed = _python_files(installed, record) if recorded else _unrecorded_python_files(installed)
            # another distribution's file sits at an overwritten path: never judge it as this one's
            theirs = {f.path for f in dist.facts if f.state is DriftState.OVERWRITTEN}
            files += [(rel, not recorded) for rel in sorted(listed - drifted - theirs)]
        # a path several distributions ship may hold any of their files: never diff it against this one's
        shared = {d.path for d in dist.drift if d.co_owners}
        before = {p: b for p, b in pristine.get(installed.meta_dir, {}).items() if p not in shared}
        jobs.append(HazardJob(location=Path(dist.location), files=tuple(files), pristine=before))
    found = check_jobs(
        jobs,
        rule_dirs=options.rule_dirs,
        severity_overrides=options.severity_overrides,
        cache_dir=where / "hazards" if where is not None else None,
        workers=options.workers,
        progress=progress,
    )
    dists = [
        dataclasses.replace(dist, findings=dist.findings + tuple(findings)) if findings else dist
        for dist, findings in zip(report.distributions, found, strict=True)
    ]
    from patchaudit.hazards import load_rules, pack_version

    rules = pack_version(load_rules(options.rule_dirs))[:16]
    return dataclasses.replace(report, distributions=tuple(dists), rules=rules)


def hazards_over(
    report: Report,
    files: Mapping[str, Sequence[str]],
    *,
    rule_dirs: Sequence[Path] = (),
    severity_overrides: Mapping[str, Severity] | None = None,
    workers: int | None = None,
) -> Report:
    """The hazard rules over more files of the report's distributions (distribution name -> paths), as
    changed files with no pristine bytes to compare with: every finding in them counts as a change."""
    from patchaudit.hazards.pool import HazardJob, check_jobs

    jobs = [
        HazardJob(location=Path(d.location), files=tuple((f, True) for f in sorted(set(files.get(d.name, ())))))
        for d in report.distributions
    ]
    if not any(job.files for job in jobs):
        return report
    found = check_jobs(jobs, rule_dirs=rule_dirs, severity_overrides=severity_overrides, workers=workers)
    dists = tuple(
        dataclasses.replace(dist, findings=dist.findings + tuple(more)) if more else dist
        for dist, more in zip(report.distributions, found, strict=True)
    )
    return dataclasses.replace(report, distributions=dists)


def _unrecorded_python_files(dist: InstalledDist) -> set[str]:
    """The .py files of a distribution without RECORD: its top_level.txt packages and modules."""
    try:
        tops = read_below(dist.meta_dir / "top_level.txt", Cap.SMALL).decode("utf-8").split()
    except (UnreadableFile, UnicodeDecodeError):
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


def _record(records: Mapping[Path, Loaded] | None, dist: InstalledDist) -> Record | None:
    """The distribution's RECORD as verify read it (None: read it again, for the error it gives)."""
    item = records.get(dist.meta_dir) if records is not None else None
    return item.record if item is not None else None


def _python_files(dist: InstalledDist, record: Record | None = None) -> set[str]:
    """Every .py file the distribution's RECORD lists inside its location (`record`: as verify parsed it)."""
    from patchaudit.target.record import parse_record

    if record is None:
        if dist.record_path is None:
            return set()
        try:
            record = parse_record(read_below(dist.record_path, Cap.RECORD))
        except UnreadableFile:
            return set()
    return {
        e.path
        for e in record.entries
        if e.path.endswith(".py") and not e.path.startswith("..") and not os.path.isabs(e.path)
    }
