"""Distributions + their files -> drift: modified, missing, added; and startup hooks nobody owns.

Who owns which file, and the walk for added ones, is ownership.py; startup hooks are hooks.py.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from patchaudit.environment import Environment, InstalledDist
from patchaudit.hashing import FileState, Hashing, read_regular
from patchaudit.hooks import startup_hooks
from patchaudit.ownership import (
    Loaded,
    Ownership,
    Walks,
    added_files,
    file_digest,
    is_real_dir,
    load,
    normalize,
    read_record,
    site_tops,
    top_dirs,
    walk_list,
)
from patchaudit.record import STRONG_ALGORITHMS
from patchaudit.report import (
    DistReport,
    Drift,
    DriftState,
    EnvironmentReport,
    Report,
    Source,
    Target,
    Unverified,
)
from patchaudit.statcache import StatCache

_SIZE_FIELD = re.compile(rb",(\d{7,})\r?$", re.MULTILINE)  # a RECORD line's size, when 1 MB or more


def _largest_size(data: bytes | None) -> int:
    """The biggest size a RECORD lists at a glance (1 MB or more, else 0): an order to read them in."""
    return max(map(int, _SIZE_FIELD.findall(data)), default=0) if data else 0


def _absolute(location: Path | str, path: str) -> str:
    if path.startswith("/"):
        return path
    if "/." in path or path.startswith("."):
        return os.path.normpath(f"{location}/{path}")
    return f"{location}/{path}"


def _state_to_drift(path: str, expected: str, state: FileState) -> Drift | Unverified | None:
    if state.missing:
        return Drift(path=path, state=DriftState.MISSING, expected=expected)
    if state.symlink is not None:
        return Drift(
            path=path, state=DriftState.MODIFIED, expected=expected, note=f"replaced by a symlink to {state.symlink}"
        )
    if state.not_regular:
        return Drift(path=path, state=DriftState.MODIFIED, expected=expected, note="not a regular file")
    if state.error is not None:
        return Unverified(path=path, reason=f"unreadable: {state.error}")
    if state.digest != expected:
        note = f"hard link shared by {state.nlink} paths" if state.nlink > 1 else None
        return Drift(
            path=path, state=DriftState.MODIFIED, expected=expected, actual=state.digest, nlink=state.nlink, note=note
        )
    return None


def verify(
    env: Environment,
    dists: Sequence[InstalledDist],
    *,
    every: Sequence[InstalledDist] | None = None,
    cache: StatCache | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Check each distribution's files against its RECORD; `every` is the whole env, for ownership."""
    every = list(every) if every is not None else list(dists)
    total = 0
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    # RECORDs are read one by one, and what each lists goes to the workers at once: they hash while
    # this process reads the next. Each job names the digest the file should have, and the workers
    # send back only the files that do not have it. Distributions with the biggest files come first,
    # so that no big file is left for the end. The package directories are walked first of all:
    # every top-level directory when the whole environment is scanned (no RECORD needs reading to
    # know them), else those the scanned RECORDs list.
    hashing = Hashing(cache=cache, workers=workers, progress=tick if progress else None, more=True)
    raw = {d.meta_dir: read_record(d) for d in dists}
    parsed: dict[Path, Loaded] = {}
    if {d.meta_dir for d in every} <= raw.keys():
        roots = site_tops(sorted({d.location for d in dists}))
    else:
        parsed = {d.meta_dir: load(d, raw[d.meta_dir]) for d in dists}
        roots = sorted({(item.dist.location, top) for item in parsed.values() for top in top_dirs(item)})
        roots = [(location, top) for location, top in roots if is_real_dir(location / top)]
    for root in roots:
        hashing.first(walk_list, *root)
    with_record: list[Loaded] = []
    jobs_of: dict[Path, list[tuple[str, str, str]]] = {}  # per distribution, in RECORD order
    for dist in sorted(dists, key=lambda d: -_largest_size(raw[d.meta_dir])):
        item = parsed.get(dist.meta_dir) or load(dist, raw[dist.meta_dir])
        parsed[dist.meta_dir] = item
        if item.record is None:
            continue
        with_record.append(item)
        location = str(dist.location)
        jobs: list[tuple[str, str, str]] = []
        sizes: dict[str, int] = {}
        for path, record_hash, size in item.record.entries:
            if record_hash is None:
                continue
            algorithm, value = record_hash
            if algorithm in STRONG_ALGORITHMS:
                absolute = _absolute(location, path)
                jobs.append((absolute, algorithm, f"{algorithm}={value}"))
                if size:
                    sizes[absolute] = size
        total += len(jobs)
        jobs_of[dist.meta_dir] = jobs
        hashing.first(_unchecked_bytecode_at, dist.location, _sources(item))
        hashing.add(jobs, sizes)
    hashing.close()
    loaded = {d.meta_dir: parsed[d.meta_dir] for d in dists}
    ownership = Ownership(every, dict(loaded))

    walked = dict(zip(roots, hashing.first_results(len(roots)), strict=True))
    walks = Walks(ownership, walked)
    added_by = {item.dist.meta_dir: added_files(item, ownership, walks) for item in with_record}
    found = hashing.first_results()[len(roots) :]
    bytecode = dict(zip((item.dist.meta_dir for item in with_record), found, strict=True))
    found_here = {meta_dir: (added_by[meta_dir], bytecode[meta_dir]) for meta_dir in added_by}
    states = hashing.result()

    reports: list[DistReport] = []
    env_drift: list[Drift] = []
    os_db = _OsPackages(cache=cache, workers=workers)
    for item in loaded.values():
        dist = item.dist
        if item.record is None:
            os_report = os_db.report(dist)
            if os_report is not None:
                reports.append(os_report)
                continue
            reason = "no RECORD (installed without one)" if dist.record_path else "legacy install without RECORD"
            reports.append(
                DistReport(
                    name=dist.name,
                    version=dist.version,
                    location=str(dist.location),
                    source=dist.source,
                    unverified=(Unverified(path=dist.meta_dir.name, reason=reason),),
                    verifiable=False,
                )
            )
            continue
        drift: list[Drift] = []
        unverified: list[Unverified] = [
            Unverified(path=p.path or f"{dist.meta_dir.name}/RECORD", reason=f"RECORD {p}")
            for p in item.record.problems
        ]
        checked = 0
        pending = iter(jobs_of[dist.meta_dir])  # one job per trusted entry, in this order
        for entry in item.record.entries:
            if entry.hash is None:
                continue
            if not entry.hash.trusted:
                unverified.append(Unverified(path=entry.path, reason=f"{entry.hash.algorithm} hash is not trusted"))
                continue
            checked += 1
            job = next(pending)
            state = states.get(job) if states else None
            if state is None:  # it has the digest its RECORD line names
                continue
            verdict = _state_to_drift(entry.path, job[2], state)
            if isinstance(verdict, Drift):
                drift.append(verdict)
            elif isinstance(verdict, Unverified):
                unverified.append(verdict)
        drift, facts = _facts(item, drift, ownership)
        (added, shared), (stale, foreign) = found_here[dist.meta_dir]
        drift.extend(added)
        drift.extend(stale)
        unverified.extend(foreign)
        env_drift.extend(shared)
        report = DistReport(
            name=dist.name,
            version=dist.version,
            location=str(dist.location),
            source=dist.source,
            drift=tuple(drift),
            unverified=tuple(unverified),
            files_checked=checked,
            verifiable=checked > 0,
            facts=tuple(facts),
        )
        if dist.source in (Source.EDITABLE, Source.VCS):
            report = _with_working_tree(report, dist)
        elif report.drift or item.record.problems:
            # Debian builds write RECORD before stripping binaries and leave out what they do not
            # install: for a distribution dpkg installed, its md5sums are the record to check.
            report = os_db.report(dist) or report
        reports.append(report)

    reports = _flag_duplicates(reports, loaded)
    hook_drift, hook_findings = startup_hooks(env, ownership)
    env_drift.extend(hook_drift)
    if cache is not None:
        cache.save()
    return Report(
        target=Target(python=env.python, paths=tuple(str(p) for p in env.site_dirs)),
        distributions=tuple(reports),
        environment=EnvironmentReport(drift=tuple(_dedupe(env_drift)), findings=tuple(hook_findings)),
    )


def _facts(item: Loaded, drift: list[Drift], ownership: Ownership) -> tuple[list[Drift], list[Drift]]:
    """Packaging facts among the modified files (see facts.py); nothing is read for a clean dist."""
    if not any(d.state is DriftState.MODIFIED for d in drift):
        return drift, []
    from patchaudit import facts

    location = item.dist.location
    drifted = {d.path for d in drift}

    def others(path: str) -> list[tuple[str, str | None]]:
        key = normalize(path)
        return [
            (f"{owner.name} {owner.version}", ownership.recorded(owner, key))
            for owner in ownership.owners(location, key)
            # a twin dist-info of the same project is a crashed upgrade: flagged as such, not as a fact
            if owner.key != item.dist.key
        ]

    record = item.record
    hashed = {e.path for e in record.entries if e.hash is not None and e.hash.trusted} if record else set()

    def verified(path: str) -> bool:
        """Listed with a trusted hash that the file matches (it is not among this dist's drift)."""
        raw = item.entries.get(path)
        return raw is not None and raw in hashed and raw not in drifted and path not in drifted

    return facts.classify(str(location), drift, others=others, verified_sources=verified)


class _OsPackages:
    """Distributions the OS package manager installed, checked against its own records (dpkg)."""

    def __init__(self, *, cache: StatCache | None, workers: int | None) -> None:
        self._cache = cache
        self._workers = workers
        self._db: object | None = None

    def report(self, dist: InstalledDist) -> DistReport | None:
        from patchaudit import dpkg

        if not dpkg.may_own(dist.location):
            return None
        if not isinstance(self._db, dpkg.Dpkg):
            self._db = dpkg.Dpkg()
        checked = dpkg.verify(self._db, dist.meta_dir, dist.location, cache=self._cache, workers=self._workers)
        if checked is None:
            return None
        package, drift, note, count = checked
        return DistReport(
            name=dist.name,
            version=dist.version,
            location=str(dist.location),
            source=dist.source,
            drift=tuple(drift),
            unverified=(note,),
            files_checked=count,
            verifiable=False,
            os_package=package,
        )


def _with_working_tree(report: DistReport, dist: InstalledDist) -> DistReport:
    """An editable/VCS install runs from a git checkout: its drift is the working tree against the commit.

    The report's location becomes the project directory; what the RECORD lists in site-packages (the
    editable .pth and finder) keeps its drift, under absolute paths.
    """
    from patchaudit import vcs

    co = vcs.checkout(dist)
    tree = vcs.working_tree_drift(dist) if co is not None else None
    if co is None or tree is None:
        return report
    record_drift = tuple(
        dataclasses.replace(d, path=_absolute(dist.location, d.path)) if not os.path.isabs(d.path) else d
        for d in report.drift
    )
    return dataclasses.replace(report, location=str(co.project), drift=record_drift + tree, verifiable=True)


def _flag_duplicates(reports: list[DistReport], loaded: dict[Path, Loaded]) -> list[DistReport]:
    """Two dist-infos of one name in one directory (a crashed upgrade): neither can be trusted alone."""
    groups: dict[tuple[Path, str], list[InstalledDist]] = {}
    for item in loaded.values():
        groups.setdefault((item.dist.location, item.dist.key), []).append(item.dist)
    out = []
    for report, item in zip(reports, loaded.values(), strict=True):
        twins = groups[item.dist.location, item.dist.key]
        if len(twins) > 1:
            others = ", ".join(t.meta_dir.name for t in twins if t is not item.dist)
            note = Unverified(path=item.dist.meta_dir.name, reason=f"also installed here as {others}")
            report = dataclasses.replace(report, unverified=(*report.unverified, note))
        out.append(report)
    return out


def _dedupe(drift: Iterable[Drift]) -> list[Drift]:
    seen: dict[str, Drift] = {}
    for d in drift:
        seen.setdefault(d.path, d)
    return list(seen.values())


_UNCHECKED_HASH = 0b01  # PEP 552 flags: hash-based, check_source off


def _sources(item: Loaded) -> list[str]:
    """The distribution's .py files inside its location (the sources bytecode may stand for)."""
    return [key for key in item.entries if key.endswith(".py") and not key.startswith(("../", "/"))]


def _unchecked_bytecode(item: Loaded) -> tuple[list[Drift], list[Unverified]]:
    return _unchecked_bytecode_at(item.dist.location, _sources(item))


def _unchecked_bytecode_at(location: Path, sources: list[str]) -> tuple[list[Drift], list[Unverified]]:
    """Bytecode that Python runs without ever looking at its source, and that disagrees with it.

    Timestamp and checked-hash .pyc files are revalidated by the interpreter, so an edit of the source
    wins; an unchecked-hash .pyc (PEP 552) is used as it is, whatever the source now says.
    """
    stems: dict[str, set[str]] = {}
    for key in sources:
        parent, _, name = key.rpartition("/")
        stems.setdefault(parent, set()).add(name[:-3])
    drift: list[Drift] = []
    foreign: list[Unverified] = []
    for parent, names in stems.items():
        cache_dir = f"{location}/{parent}/__pycache__" if parent else f"{location}/__pycache__"
        try:
            entries = os.listdir(cache_dir)
        except OSError:
            continue
        for entry in entries:
            stem = entry.partition(".")[0]
            if not entry.endswith(".pyc") or stem not in names:
                continue
            header = read_regular(f"{cache_dir}/{entry}", 16) or b""
            if len(header) < 16 or int.from_bytes(header[4:8], "little") & 0b11 != _UNCHECKED_HASH:
                continue
            from patchaudit import bytecode

            rel = f"{parent}/__pycache__/{entry}" if parent else f"__pycache__/{entry}"
            pyc_name = bytecode.parse_pyc_path(rel)
            magic = bytecode.magic_for(pyc_name.cache_tag) if pyc_name is not None else None
            source = read_regular(f"{location}/{parent}/{stem}.py" if parent else f"{location}/{stem}.py") or b""
            if magic is None or header[:4] != magic:
                reason = "unchecked-hash bytecode of a Python version it is not named for, or one unknown here"
                foreign.append(Unverified(path=rel, reason=reason))
            elif header[8:16] != bytecode.source_hash(magic, source):
                note = "unchecked-hash bytecode that disagrees with its source: Python runs it, not the source"
                drift.append(
                    Drift(path=rel, state=DriftState.MODIFIED, actual=file_digest(Path(cache_dir, entry)), note=note)
                )
    return drift, foreign
