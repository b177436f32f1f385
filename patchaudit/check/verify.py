"""Distributions + their files -> drift: modified, missing, added; and startup hooks nobody owns.

Who owns which file, and the walk for added ones, is ownership.py; startup hooks are hooks.py.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchaudit.check.hooks import startup_hooks
from patchaudit.check.ownership import (
    Loaded,
    Ownership,
    Walks,
    added_files,
    is_real_dir,
    load,
    load_unchecked,
    normalize,
    read_record_or_why,
    record_tops,
    site_tops,
)
from patchaudit.check.pieces import WALK_TASKS, Checked, Piece, Shared, absolute_path, pieces, run_task
from patchaudit.errors import UnsafePath
from patchaudit.fs.beneath import DirCache, stat_below
from patchaudit.parallel.hashing import BIG_FILE, POOL_MIN_FILES, FileState, hash_file, pool_size, to_state
from patchaudit.parallel.statcache import StatCache, StatKey
from patchaudit.parallel.workers import Pool
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
from patchaudit.target.environment import Environment, InstalledDist
from patchaudit.target.record import RecordEntry


def _state_to_drift(path: str, expected: str, state: FileState, size: int | None = None) -> Drift | Unverified | None:
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
    if state.size_differs:  # not hashed: its digest is worked out only where a verdict needs it (_facts)
        linked = _link_note(state.nlink)
        sized = f"size {state.size}, RECORD says {size}" + (f"; {linked}" if linked else "")
        return Drift(path=path, state=DriftState.MODIFIED, expected=expected, nlink=state.nlink, note=sized)
    if state.digest != expected:
        note = _link_note(state.nlink)
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
    progress: Callable[[int, int | None], None] | None = None,
    records_out: dict[Path, Loaded] | None = None,
    meanwhile: Callable[[], object] | None = None,
    on_drift: Callable[[], object] | None = None,
) -> Report:
    """Check each distribution's files against its RECORD; `every` is the whole env, for ownership;
    `records_out` gets each checked distribution's RECORD (by metadata directory, parsed when first asked)
    for the stages after it; `meanwhile()` runs here while worker processes hash (not without them), for
    work of the later stages that needs no verdict: importing their modules, say; `on_drift()` runs once,
    while they still hash, when the first file that is not as its RECORD says comes back.

    `progress(done, total)` counts files checked against a trusted hash, the report's `files_checked`
    (total: None until every RECORD is parsed)."""
    every = list(every) if every is not None else list(dists)

    # Every RECORD is read first, and cut into pieces (pieces.py); the worker processes start at
    # once and parse, hash and compare the pieces themselves; this process reads nothing off a
    # RECORD's lines (load_unchecked): the workers say whether every line was a simple one, and send
    # back the first parts of its paths for the added-file pass; a RECORD with any other line is parsed
    # here, and a simple one is cut into paths only if something asks. The package directories are walked first
    # of all: every top-level directory when the whole environment is scanned (no RECORD needs reading
    # to know them), else those the scanned RECORDs list.
    with DirCache() as dirs:
        read = {d.meta_dir: read_record_or_why(d, dirs) for d in dists}
    raw = {key: data for key, (data, _) in read.items()}
    unreadable = {key: why for key, (_, why) in read.items() if why is not None}
    if {d.meta_dir for d in every} <= raw.keys():
        roots = site_tops(sorted({d.location for d in dists}))
    else:
        roots = sorted({(d.location, top) for d in dists for top in record_tops(raw[d.meta_dir], d.meta_dir.name)})
        roots = [(location, top) for location, top in roots if is_real_dir(location / top)]
    with_data = [d for d in dists if raw[d.meta_dir] is not None]
    records = [(str(d.location), raw[d.meta_dir] or b"") for d in with_data]
    walks = [roots[i::WALK_TASKS] for i in range(min(WALK_TASKS, len(roots)))]
    # The largest file is the one task no number of workers shortens: it goes to the first worker
    # started, ahead of the walks, so that it is hashed from the first instant.
    cut = pieces(records)
    lead = cut[:1] if cut and cut[0].largest >= BIG_FILE else []
    tasks: list[Piece | list[tuple[Path, str]]] = [*lead, *walks, *cut[len(lead) :]]
    work = Shared(records=records, cache=cache)
    lines = _lines(records, POOL_MIN_FILES)
    done = 0
    total: int | None = None

    def tick(_index: int, value: object) -> None:
        nonlocal done, on_drift
        if on_drift is not None and isinstance(value, Checked) and value.found:
            drifted, on_drift = on_drift, None
            drifted()
        if progress is not None and isinstance(value, Checked):
            done += value.checked
            progress(done, total)

    limit = pool_size(workers, lines)
    with Pool(run_task, tasks, work, workers=limit, progress=tick) as pool:
        loaded: dict[Path, Loaded] = {}
        sources: dict[Path, Source] = {}
        for dist in dists:
            data = raw[dist.meta_dir]
            loaded[dist.meta_dir] = load(dist, data) if data is None else load_unchecked(dist, data)
            sources[dist.meta_dir] = dist.source  # its direct_url.json read while the workers hash, not after
            pool.ready()
        if progress is not None:
            total = sum(_trusted(item) for item in loaded.values())
            progress(done, total)
        if meanwhile is not None and pool.workers > 1:
            meanwhile()
        by_root = {
            root: f for i, walk in enumerate(walks, len(lead)) for root, f in zip(walk, pool.result(i), strict=True)
        }
        walked = {root: by_root[root] for root in roots}
        found_by = _collect(pool, tasks, with_data, cache)
    for meta_dir, of_pieces in found_by.items():
        if of_pieces.simple:  # the workers' count and first parts stand: its lines are not read here
            loaded[meta_dir].hashed = of_pieces.checked
            loaded[meta_dir].heads = of_pieces.firsts
            loaded[meta_dir].top_files = of_pieces.tops
        else:  # what it lists cannot be read off its lines: parsed
            loaded[meta_dir] = load(loaded[meta_dir].dist, raw[meta_dir])
    ownership, added_by = _added(every, loaded, walked)

    reports: list[DistReport] = []
    env_drift: list[Drift] = []
    os_db = _OsPackages(cache=cache, workers=workers)
    for item in loaded.values():
        dist = item.dist
        if item.data is None:
            os_report = os_db.report(dist)
            if os_report is not None:
                reports.append(os_report)
                continue
            reason = "no RECORD (installed without one)" if dist.record_path else "legacy install without RECORD"
            reason = unreadable.get(dist.meta_dir, reason)
            reports.append(
                DistReport(
                    name=dist.name,
                    version=dist.version,
                    location=str(dist.location),
                    source=sources[dist.meta_dir],
                    unverified=(Unverified(path=dist.meta_dir.name, reason=reason),),
                    verifiable=False,
                )
            )
            continue
        drift: list[Drift] = []
        unverified: list[Unverified] = [
            Unverified(path=p.path or f"{dist.meta_dir.name}/RECORD", reason=f"RECORD {p}") for p in item.problems
        ]
        pieces_found = found_by[dist.meta_dir]  # every distribution with a RECORD was cut into pieces
        found = pieces_found.found
        seen: set[tuple[str, str]] = set()
        # A simple RECORD whose every file has the digest it lists is counted, not parsed.
        clean = item.hashed is not None and not found
        checked = (item.hashed or 0) if clean else 0
        for entry in () if clean else _entries(item):
            if entry.hash is None:
                continue
            if not entry.hash.trusted:
                unverified.append(Unverified(path=entry.path, reason=f"{entry.hash.algorithm} hash is not trusted"))
                continue
            checked += 1
            if not found:  # every file has the digest its RECORD line names
                continue
            key = (entry.path, str(entry.hash))
            state = found.get(key)
            if state is None:
                continue
            seen.add(key)
            verdict = _state_to_drift(entry.path, key[1], state, entry.size)
            if isinstance(verdict, Drift):
                drift.append(verdict)
            elif isinstance(verdict, Unverified):
                unverified.append(verdict)
        if pieces_found.checked != checked or len(seen) != len(found):
            raise RuntimeError(f"internal error: the workers did not check what {dist.meta_dir}/RECORD lists")
        drift, facts = _facts(item, drift, ownership)
        added, shared = added_by[dist.meta_dir]
        drift.extend(added)
        drift.extend(pieces_found.stale)
        unverified.extend(pieces_found.foreign)
        env_drift.extend(shared)
        report = DistReport(
            name=dist.name,
            version=dist.version,
            location=str(dist.location),
            source=sources[dist.meta_dir],
            drift=tuple(drift),
            unverified=tuple(unverified),
            files_checked=checked,
            verifiable=checked > 0,
            facts=tuple(facts),
        )
        if report.source in (Source.EDITABLE, Source.VCS):
            report = _with_working_tree(report, dist)
        elif report.drift or item.problems:
            # Debian builds write RECORD before stripping binaries and leave out what they do not
            # install: for a distribution dpkg installed, its md5sums are the record to check.
            report = os_db.report(dist) or report
        reports.append(report)

    if records_out is not None:
        records_out.update(loaded)
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


def _lines(records: Sequence[tuple[str, bytes]], enough: int) -> int:
    """The lines of these RECORDs, counted until there are `enough` (all that pool_size() asks)."""
    total = 0
    for _, data in records:
        total += data.count(b"\n") + (not data.endswith(b"\n"))
        if total >= enough:
            break
    return total


def _added(
    every: Sequence[InstalledDist], loaded: dict[Path, Loaded], walked: dict[tuple[Path, str], list[tuple[str, bool]]]
) -> tuple[Ownership, dict[Path, tuple[list[Drift], list[Drift]]]]:
    """Who owns what, and each distribution's added files (its own, and those in shared directories)."""
    ownership = Ownership(every, dict(loaded))
    walks = Walks(ownership, walked)
    with_record = [item for item in loaded.values() if item.data is not None]
    return ownership, {item.dist.meta_dir: added_files(item, ownership, walks) for item in with_record}


def _entries(item: Loaded) -> tuple[RecordEntry, ...]:
    return item.record.entries if item.record is not None else ()


def _trusted(item: Loaded) -> int:
    """Entries of a parsed RECORD that are checked against a trusted hash (the report's files_checked)."""
    if item.hashed is not None:
        return item.hashed
    return sum(1 for e in _entries(item) if e.hash is not None and e.hash.trusted)


@dataclass(slots=True)
class _Found:
    """What the workers found in one distribution's RECORD, all its pieces together."""

    checked: int = 0
    found: dict[tuple[str, str], FileState] = dataclasses.field(default_factory=dict)  # (path, expected) -> state
    stale: list[Drift] = dataclasses.field(default_factory=list)
    foreign: list[Unverified] = dataclasses.field(default_factory=list)
    simple: bool = True  # every line of the RECORD is a simple one: the paths load_unchecked read stand
    firsts: set[str] = dataclasses.field(default_factory=set)  # the first parts of its paths, when simple
    tops: set[str] = dataclasses.field(default_factory=set)  # the files it lists beside the packages, when simple


def _collect(
    pool: Pool[Shared, Piece | list[tuple[Path, str]], Any],
    tasks: Sequence[Piece | list[tuple[Path, str]]],
    dists: Sequence[InstalledDist],
    cache: StatCache | None,
) -> dict[Path, _Found]:
    """Every piece's result, per distribution (`dists`: one per RECORD the pieces number); clean digests
    go to the stat cache."""
    out = {dist.meta_dir: _Found() for dist in dists}
    seen_stale: set[tuple[Path, str]] = set()
    for index, task in enumerate(tasks):
        if not isinstance(task, Piece):
            continue
        checked: Checked = pool.result(index)
        dist = dists[task.record]
        meta_dir, location = dist.meta_dir, dist.location
        into = out[meta_dir]
        into.checked += checked.checked
        into.simple = into.simple and checked.simple
        into.firsts |= checked.firsts
        into.tops |= checked.tops
        for path, expected, raw in checked.found:
            into.found[path, expected] = to_state(absolute_path(location, path), raw, cache)
        if cache is not None:
            for absolute, digest, key in checked.clean:
                cache.put(absolute, StatKey(*key), digest)
        for drift in checked.stale:  # pieces listing sources of one directory each look at its bytecode
            if (meta_dir, drift.path) not in seen_stale:
                seen_stale.add((meta_dir, drift.path))
                into.stale.append(drift)
        into.foreign.extend(u for u in checked.foreign if u not in into.foreign)
    return out


def _facts(item: Loaded, drift: list[Drift], ownership: Ownership) -> tuple[list[Drift], list[Drift]]:
    """Packaging facts among the modified files (see facts.py); nothing is read for a clean dist."""
    if not any(d.state is DriftState.MODIFIED for d in drift):
        return drift, []
    from patchaudit.check import facts

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

    drift = [_with_digest_if_owned(location, d, ownership, item) for d in drift]
    record = item.record
    hashed = {e.path for e in record.entries if e.hash is not None and e.hash.trusted} if record else set()

    def verified(path: str) -> bool:
        """Listed with a trusted hash that the file matches (it is not among this dist's drift)."""
        raw = item.entries.get(path)
        return raw is not None and raw in hashed and raw not in drifted and path not in drifted

    return facts.classify(str(location), drift, others=others, verified_sources=verified)


def _with_digest_if_owned(location: Path, item: Drift, ownership: Ownership, loaded: Loaded) -> Drift:
    """A file not hashed because its size differs gets its digest where another RECORD lists the path
    at the size it has now: it may be that distribution's file (overwritten), which only its digest tells."""
    if item.state is not DriftState.MODIFIED or item.actual is not None or item.path.startswith(("/", "../")):
        return item
    key = normalize(item.path)
    path = location / item.path
    try:
        found = stat_below(str(path))
    except (OSError, UnsafePath):
        return item
    if found is None:
        return item
    size = found.st_size
    for owner in ownership.owners(location, key):
        if owner.key != loaded.dist.key and ownership.recorded_size(owner, key) == size:
            state = hash_file(str(path), (item.expected or "sha256=").partition("=")[0])
            if state.digest is None:
                return item
            return dataclasses.replace(item, actual=state.digest, note=_link_note(item.nlink))
    return item


def _link_note(nlink: int) -> str | None:
    """What a modified file's note says of its hard links (uv installs by hard link from its cache)."""
    return f"hard link shared by {nlink} paths" if nlink > 1 else None


class _OsPackages:
    """Distributions the OS package manager installed, checked against its own records (dpkg)."""

    def __init__(self, *, cache: StatCache | None, workers: int | None) -> None:
        self._cache = cache
        self._workers = workers
        self._db: object | None = None

    def report(self, dist: InstalledDist) -> DistReport | None:
        from patchaudit.target import dpkg

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
    from patchaudit.check import vcs

    co = vcs.checkout(dist)
    tree = vcs.working_tree_drift(dist) if co is not None else None
    if co is None or tree is None:
        return report
    record_drift = tuple(
        dataclasses.replace(d, path=absolute_path(dist.location, d.path)) if not os.path.isabs(d.path) else d
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
