"""Distributions + their files -> drift: modified, missing, added; and startup hooks nobody owns."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchaudit.environment import Environment, InstalledDist
from patchaudit.hashing import FileState, Hashing, StatCache, read_regular
from patchaudit.lines import pth_executable_lines, source_lines
from patchaudit.record import STRONG_ALGORITHMS, Record, encode_digest, parse_record
from patchaudit.report import (
    DistReport,
    Drift,
    DriftState,
    EnvironmentReport,
    Finding,
    Report,
    Severity,
    Source,
    Target,
    Unverified,
)

STARTUP_HOOK = "startup-hook"
# site.py imports these by module name: a .py, a .pyc, an extension module or a package all run.
CUSTOMIZE_NAMES = ("sitecustomize", "usercustomize")

# Startup hooks that environment managers write and no RECORD owns, recognised by content.
_VIRTUALENV_PTH = "import _virtualenv"
_SETUPTOOLS_DISTUTILS_PTH = re.compile(
    r"import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os\.environ\.get\(var, '(local|stdlib)'\) == 'local'; "
    r"enabled and __import__\('_distutils_hack'\)\.add_shim\(\);?"
)
# sha256 of the `_virtualenv.py` that virtualenv and uv have written beside `_virtualenv.pth`, release by
# release (read from their published wheels). Anything else under that name runs unknown code.
KNOWN_VIRTUALENV_MODULES = frozenset(
    {
        "0278334cdcfab4c746b4416fbd5c2b6e7da937c81e132397d62c361d404ebe0e",  # virtualenv 21.10.0 .. virtualenv 21.9.1
        "02943e192823d75212f206e1f2991ac572119882683a95dfbb7a1b913d7b14b5",  # virtualenv 20.38.0 .. virtualenv 21.0.0
        "0aeb86546345c1d0fada097536e35525714d5cdbcc2d8eb3f9912a955044fcff",  # virtualenv 20.24.0 .. uv 0.0.5
        "0f20351ea7e90039c46d3fabdef991f28b1e3ff33eb13ee6f0d5cd21ea0e8b14",  # virtualenv 20.25.3 .. virtualenv 20.35.2
        "119e4eb9c1a39e6ffd220840844bd326fa1bd3acf2f1c9fa0612949aedc228a5",  # virtualenv 20.23.1
        "460589e83387d4dfe5fd84d41c5f6979599f5cd080983d73c832549161c80435",  # virtualenv 21.4.0 .. virtualenv 21.6.1
        "684b8c07932ba4a84ac2e5ae9afe49ef04e92bac3d8d4191d455cf09d093e5fc",  # virtualenv 20.0.35 .. virtualenv 20.9.0
        "6cf30c56faf2a55228914dbbd17f8088ed371ebb08f5e7fa6fd931f913fcaf1d",  # uv 0.11.0 .. uv 0.4.30
        "bec6155ff7bfc88f8e79e481f27fd7ee0a3b40eeca9bfeb41f4c4b997b2f8100",  # virtualenv 20.35.4 .. virtualenv 20.36.1
        "c9199315871b11b12df226f890a38e66e63191e1adbfb11a66e6861151b33fca",  # virtualenv 20.16.7 .. virtualenv 20.21.1
        "ce57d5e0d9b5d7356cb42da7450ba8f9359bdf693e335f4c921626943c77e64d",  # virtualenv 20.13.4 .. virtualenv 20.16.0
        "cfb3db86aaa53bb62b5ff764970bec2d71c9228590a0ebec57f6ec926cc0bf1a",  # uv 0.13.9 .. uv 0.11.33
        "cfe56cafbd68fd31a0e87100f111d7d2f6b7157241096500013c07e88d80a22f",  # virtualenv 21.15.11
        "e3e10c8a19a62a49928c139b8e6824eac92dcdda7639953bcd10921011cbbdff",  # uv 0.4.0 .. uv 0.3.0
        "e8c426ce260f866254ff35cefedc8b3efbd6d1446d99d7a4cdeb0095f98a8b8f",  # virtualenv 21.1.0 .. virtualenv 21.3.3
        "ee52b2e2e720a40885a6b4b90c40e28e5c70e550af74d5efd169eaa5db2a6f6f",  # uv 0.2.37 .. uv 0.1.45
        "f4dfaeb9efc1614890cfa94ed15bbe9b2ee15fbe76d569ef5e435e93e4987dc7",  # virtualenv 20.22.0 .. virtualenv 20.23.0
    }
)
_KNOWN_VIRTUALENV_B64 = frozenset(encode_digest(bytes.fromhex(h)) for h in KNOWN_VIRTUALENV_MODULES)


def startup_hook_lines(text: str) -> list[int]:
    """Line numbers of a .pth file that site.py executes rather than adds to sys.path."""
    return pth_executable_lines(text)


@dataclass(slots=True)
class _Loaded:
    dist: InstalledDist
    record: Record | None
    entries: dict[str, str | None] = field(default_factory=dict)  # normalized rel path -> raw RECORD path
    hashes: dict[str, str] | None = None  # normalized rel path -> "algorithm=digest", built when asked


def _normalize(path: str) -> str:
    """RECORD path -> key relative to the dist's location ('..' kept when it climbs out)."""
    if "\\" in path or "/." in path or "//" in path or path.startswith("."):
        return posixpath.normpath(path.replace("\\", "/"))
    return path


def _read_record(dist: InstalledDist) -> bytes | None:
    if dist.record_path is None:
        return None
    try:
        return dist.record_path.read_bytes()
    except OSError:
        return None


_SIZE_FIELD = re.compile(rb",(\d{7,})\r?$", re.MULTILINE)  # a RECORD line's size, when 1 MB or more


def _largest_size(data: bytes | None) -> int:
    """The biggest size a RECORD lists at a glance (1 MB or more, else 0): an order to read them in."""
    return max(map(int, _SIZE_FIELD.findall(data)), default=0) if data else 0


def _load(dist: InstalledDist, data: bytes | None = None) -> _Loaded:
    if data is None:
        data = _read_record(dist)
    if data is None:
        return _Loaded(dist=dist, record=None)
    record = parse_record(data)
    loaded = _Loaded(dist=dist, record=record)
    loaded.entries = {_normalize(p): p for p, _, _ in record.entries}
    for problem in record.problems:
        if problem.path:
            loaded.entries.setdefault(_normalize(problem.path), problem.path)
    return loaded


def _absolute(location: Path | str, path: str) -> str:
    if path.startswith("/"):
        return path
    if "/." in path or path.startswith("."):
        return os.path.normpath(f"{location}/{path}")
    return f"{location}/{path}"


_Owners = dict[str, list[InstalledDist]]  # path -> the distributions whose RECORD lists it


class _Ownership:
    """Which RECORD owns which file or directory, per site directory and top-level name.

    Answering "who owns this?" needs every RECORD of the environment, so the RECORDs of distributions
    not being scanned are read only when a question is asked. The index is built per top-level name
    (`nvidia/`, `torch/`) from the distributions that list something below it, when first asked: a
    question about `vllm/x` never indexes the 60k other files of the environment.
    """

    def __init__(self, every: Sequence[InstalledDist], loaded: dict[Path, _Loaded]):
        self._every = every
        self._loaded = loaded
        # (site directory, top-level name) -> the distributions listing paths below it
        self._tops: dict[tuple[Path, str], list[_Loaded]] | None = None
        # (site directory, top-level name) -> (path -> owners, directory -> owners)
        self._indexes: dict[tuple[Path, str], tuple[_Owners, _Owners]] = {}

    def _by_top(self) -> dict[tuple[Path, str], list[_Loaded]]:
        if self._tops is None:
            for dist in self._every:
                if dist.meta_dir not in self._loaded:
                    self._loaded[dist.meta_dir] = _load(dist)
            tops: dict[tuple[Path, str], list[_Loaded]] = {}
            for item in self._loaded.values():
                location = item.dist.location
                for top in {key.partition("/")[0] for key in item.entries if "/" in key}:
                    tops.setdefault((location, top), []).append(item)
            self._tops = tops
        return self._tops

    def _index(self, location: Path, top: str) -> tuple[_Owners, _Owners]:
        index = self._indexes.get((location, top))
        if index is None:
            files: dict[str, list[InstalledDist]] = {}
            dirs: dict[str, list[InstalledDist]] = {}
            prefix = top + "/"
            for item in self._by_top().get((location, top), ()):
                dist = item.dist
                seen_dirs: set[str] = set()
                for key in item.entries:
                    if not key.startswith(prefix):
                        continue
                    files.setdefault(key, []).append(dist)
                    parent = key.rpartition("/")[0]
                    while parent and parent not in seen_dirs:
                        seen_dirs.add(parent)
                        dirs.setdefault(parent, []).append(dist)
                        parent = parent.rpartition("/")[0]
            index = self._indexes[location, top] = (files, dirs)
        return index

    def owners(self, location: Path, rel: str) -> list[InstalledDist]:
        top, sep, _ = rel.partition("/")
        if not sep:
            return self._top_level_owners(location, rel)
        return self._index(location, top)[0].get(rel, [])

    def owned(self, location: Path, rel: str) -> bool:
        top, sep, _ = rel.partition("/")
        if not sep:
            return bool(self._top_level_owners(location, rel))
        return rel in self._index(location, top)[0]

    def _top_level_owners(self, location: Path, name: str) -> list[InstalledDist]:
        """Owners of a file directly in a site directory (a .pth), without parsing every RECORD."""
        needle = name.encode()
        found = []
        for dist in self._every:
            if dist.location != location:
                continue
            item = self._loaded.get(dist.meta_dir)
            if item is None:
                path = dist.record_path
                try:
                    raw = path.read_bytes() if path is not None else b""
                except OSError:
                    raw = b""
                if needle not in raw:
                    continue
                item = self._loaded[dist.meta_dir] = _load(dist)
            if name in item.entries:
                found.append(dist)
        return found

    def recorded(self, dist: InstalledDist, key: str) -> str | None:
        """`dist`'s RECORD hash for `key` ("sha256=..."), once its RECORD is loaded; None if it has none."""
        item = self._loaded.get(dist.meta_dir)
        if item is None or item.record is None:
            return None
        if item.hashes is None:
            item.hashes = {_normalize(e.path): str(e.hash) for e in item.record.entries if e.hash is not None}
        return item.hashes.get(key)

    def dir_owners(self, location: Path, rel_dir: str) -> list[InstalledDist]:
        return self._index(location, rel_dir.partition("/")[0])[1].get(rel_dir, [])


def _top_dirs(loaded: _Loaded) -> set[str]:
    tops = set()
    meta = loaded.dist.meta_dir.name
    for key in loaded.entries:
        first, sep, _ = key.partition("/")
        if sep and first not in tops and first not in ("..", "", meta, "__pycache__") and not os.path.isabs(key):
            tops.add(first)
    return tops


def _is_bytecode_of_known_source(rel: str, owned: Callable[[str], bool], location: Path) -> bool:
    parent, _, name = rel.rpartition("/")
    if not name.endswith(".pyc") or not parent.endswith("__pycache__"):
        return False
    source_dir = parent[: -len("__pycache__")].rstrip("/")
    source = (source_dir + "/" if source_dir else "") + name.split(".", 1)[0] + ".py"
    return owned(source) or (location / source).is_file()


def _is_real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _site_tops(locations: Iterable[Path]) -> list[tuple[Path, str]]:
    """Every real directory in these site directories but the metadata ones: where packages live."""
    roots: list[tuple[Path, str]] = []
    for location in locations:
        try:
            with os.scandir(location) as it:
                names = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
        roots.extend((location, n) for n in names if not n.endswith((".dist-info", ".egg-info")) and n != "__pycache__")
    return roots


def _walk_list(location: Path, top: str) -> list[tuple[str, bool]]:
    return list(_walk(location, top))


def _walk(location: Path, top: str) -> Iterable[tuple[str, bool]]:
    """(path relative to location, is_symlink) of every non-directory below location/top.

    Symlinked directories are reported, never entered.
    """
    base = len(str(location)) + 1
    stack = [str(location / top)]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        yield entry.path[base:], entry.is_symlink()
        except OSError:
            continue


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
    raw = {d.meta_dir: _read_record(d) for d in dists}
    parsed: dict[Path, _Loaded] = {}
    if {d.meta_dir for d in every} <= raw.keys():
        roots = _site_tops(sorted({d.location for d in dists}))
    else:
        parsed = {d.meta_dir: _load(d, raw[d.meta_dir]) for d in dists}
        roots = sorted({(item.dist.location, top) for item in parsed.values() for top in _top_dirs(item)})
        roots = [(location, top) for location, top in roots if _is_real_dir(location / top)]
    for root in roots:
        hashing.first(_walk_list, *root)
    with_record: list[_Loaded] = []
    jobs_of: dict[Path, list[tuple[str, str, str]]] = {}  # per distribution, in RECORD order
    for dist in sorted(dists, key=lambda d: -_largest_size(raw[d.meta_dir])):
        item = parsed.get(dist.meta_dir) or _load(dist, raw[dist.meta_dir])
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
    ownership = _Ownership(every, dict(loaded))

    walked = dict(zip(roots, hashing.first_results(len(roots)), strict=True))
    walks = _Walks(ownership, walked)
    added_by = {item.dist.meta_dir: _added_files(item, ownership, walks) for item in with_record}
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
    hook_drift, hook_findings = _startup_hooks(env, ownership)
    env_drift.extend(hook_drift)
    if cache is not None:
        cache.save()
    return Report(
        target=Target(python=env.python, paths=tuple(str(p) for p in env.site_dirs)),
        distributions=tuple(reports),
        environment=EnvironmentReport(drift=tuple(_dedupe(env_drift)), findings=tuple(hook_findings)),
    )


def _facts(item: _Loaded, drift: list[Drift], ownership: _Ownership) -> tuple[list[Drift], list[Drift]]:
    """Packaging facts among the modified files (see facts.py); nothing is read for a clean dist."""
    if not any(d.state is DriftState.MODIFIED for d in drift):
        return drift, []
    from patchaudit import facts

    location = item.dist.location
    drifted = {d.path for d in drift}

    def others(path: str) -> list[tuple[str, str | None]]:
        key = _normalize(path)
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


def _flag_duplicates(reports: list[DistReport], loaded: dict[Path, _Loaded]) -> list[DistReport]:
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


class _Walks:
    """Each package directory walked once per verify, and the files found there judged once.

    Namespace directories (`nvidia/`) are a top-level directory of many distributions: walked per
    distribution, the same tree was read and every file in it looked up once for each of them.
    """

    def __init__(self, ownership: _Ownership, walked: dict[tuple[Path, str], list[tuple[str, bool]]]) -> None:
        self._ownership = ownership
        self._walked = walked  # (location, top) -> what a worker's walk found
        # (location, top) -> (path, is_symlink, closest owner) of the files below it that no RECORD owns
        self._unowned: dict[tuple[Path, str], list[tuple[str, bool, InstalledDist | None]]] = {}
        self._drift: dict[tuple[Path, str], Drift] = {}

    def unowned(
        self, location: Path, top: str, own: dict[str, str | None]
    ) -> list[tuple[str, bool, InstalledDist | None]]:
        """(path, is_symlink, closest owner) of every file below location/top that no RECORD owns.

        The answer is the same whichever distribution asks (what one owns, the index of all holds),
        so it is worked out once per directory. Files the first asker owns are passed over first:
        the index of the other RECORDs is built only when some file is not its own.
        """
        found = self._unowned.get((location, top))
        if found is not None:
            return found
        walked = self._walked.get((location, top))
        if walked is None:
            walked = list(_walk(location, top))
        mine = own.__contains__
        ownership = self._ownership
        owned = lambda path: ownership.owned(location, path)  # noqa: E731
        found = []
        for rel, is_link in walked:
            if rel in own or _is_bytecode_of_known_source(rel, mine, location):
                continue
            if owned(rel) or _is_bytecode_of_known_source(rel, owned, location):
                continue
            found.append((rel, is_link, _closest_owner(location, rel, ownership)))
        self._unowned[location, top] = found
        return found

    def drift(self, location: Path, rel: str, is_link: bool) -> Drift:
        made = self._drift.get((location, rel))
        if made is None:
            note = f"symlink to {os.readlink(location / rel)}" if is_link else None
            actual = None if is_link else _digest(location / rel)
            made = self._drift[location, rel] = Drift(path=rel, state=DriftState.ADDED, actual=actual, note=note)
        return made


def _added_files(item: _Loaded, ownership: _Ownership, walks: _Walks) -> tuple[list[Drift], list[Drift]]:
    """Files under the distribution's top-level directories that no RECORD owns.

    Returns (attributed to this distribution, shared directories where the owner is ambiguous).
    """
    location = item.dist.location
    own = item.entries
    mine: list[Drift] = []
    shared: list[Drift] = []
    for top in sorted(_top_dirs(item)):
        root = location / top
        if root.is_symlink():
            # Its files still hash clean through the link, and whatever else the target holds imports.
            swap_note = f"package directory replaced by a symlink to {os.readlink(root)}"
            mine.append(Drift(path=top, state=DriftState.MODIFIED, note=swap_note))
            continue
        if not root.is_dir():
            continue
        for rel, is_link, owner in walks.unowned(location, top, own):
            if rel in own:
                continue
            if owner is item.dist:
                mine.append(walks.drift(location, rel, is_link))
            elif owner is None:
                shared.append(walks.drift(location, rel, is_link))
    return mine, shared


_UNCHECKED_HASH = 0b01  # PEP 552 flags: hash-based, check_source off


def _sources(item: _Loaded) -> list[str]:
    """The distribution's .py files inside its location (the sources bytecode may stand for)."""
    return [key for key in item.entries if key.endswith(".py") and not key.startswith(("../", "/"))]


def _unchecked_bytecode(item: _Loaded) -> tuple[list[Drift], list[Unverified]]:
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
                    Drift(path=rel, state=DriftState.MODIFIED, actual=_digest(Path(cache_dir, entry)), note=note)
                )
    return drift, foreign


def _closest_owner(location: Path, rel: str, ownership: _Ownership) -> InstalledDist | None:
    """The one distribution that owns files in the deepest directory holding `rel`, if exactly one."""
    parts = rel.split("/")[:-1]
    while parts:
        owners = ownership.dir_owners(location, "/".join(parts))
        if len(owners) == 1:
            return owners[0]
        if len(owners) > 1:
            return None
        parts.pop()
    return None


def _digest(path: Path) -> str | None:
    from patchaudit.hashing import hash_file

    return hash_file(str(path)).digest


def _startup_hooks(env: Environment, ownership: _Ownership) -> tuple[list[Drift], list[Finding]]:
    """Unowned .pth files with code and *customize modules, in every site directory.

    Paths are relative to the first site directory, as RECORD paths are; hooks in the others are named
    by absolute path, so two hooks of one name in two directories stay two entries.
    """
    drift: list[Drift] = []
    findings: list[Finding] = []
    for index, site_dir in enumerate(env.site_dirs):
        try:
            names = sorted(os.listdir(site_dir))
        except OSError:
            continue
        hooks = [n for n in names if n.endswith(".pth") or n.partition(".")[0] in CUSTOMIZE_NAMES]
        for bare in hooks:
            path = site_dir / bare
            name = bare if index == 0 else str(path)
            if bare.partition(".")[0] in CUSTOMIZE_NAMES:
                if not _owned_module(ownership, site_dir, bare, path):
                    message = f"{bare} runs in every process of this environment and no distribution owns it"
                    note = "startup hook (package)" if path.is_dir() else "startup hook"
                    drift.append(Drift(path=name, state=DriftState.ADDED, actual=_digest(path), note=note))
                    findings.append(_hook_finding(name, 1, Severity.HIGH, message))
                continue
            if path.is_dir() or ownership.owners(site_dir, bare):
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            text = data.decode("utf-8", "replace")
            digest = f"sha256={encode_digest(hashlib.sha256(data).digest())}"
            lines = startup_hook_lines(text)
            if not lines:
                findings.append(_hook_finding(name, 1, Severity.INFO, "adds paths to sys.path; no code runs"))
                continue
            if text.strip() == _VIRTUALENV_PTH:
                module = _digest(site_dir / "_virtualenv.py")
                if module is not None and module.partition("=")[2] in _KNOWN_VIRTUALENV_B64:
                    message = f"virtualenv/uv startup hook (known; _virtualenv.py {module})"
                    findings.append(_hook_finding(name, 1, Severity.INFO, message))
                    continue
                message = f"_virtualenv.py ({module}) is not any virtualenv or uv release's: it runs at every start"
                drift.append(Drift(path=name, state=DriftState.ADDED, actual=digest, note="startup hook"))
                findings.append(_hook_finding(name, 1, Severity.HIGH, message))
                continue
            if _SETUPTOOLS_DISTUTILS_PTH.fullmatch(text.strip()):
                message = "setuptools' distutils shim (known), left by an install without RECORD"
                findings.append(_hook_finding(name, 1, Severity.INFO, message))
                continue
            message = f"executes code at every interpreter start and no distribution owns it: {_first(text)}"
            drift.append(Drift(path=name, state=DriftState.ADDED, actual=digest, note="startup hook"))
            findings.append(_hook_finding(name, lines[0], Severity.HIGH, message))
    return drift, findings


def _owned_module(ownership: _Ownership, site_dir: Path, bare: str, path: Path) -> bool:
    if path.is_dir() and not path.is_symlink():
        owners = ownership.dir_owners(site_dir, bare)
        owned = lambda rel: bool(ownership.owners(site_dir, rel))  # noqa: E731
        unowned = [
            rel
            for rel, _ in _walk(site_dir, bare)
            if not owned(rel) and not _is_bytecode_of_known_source(rel, owned, site_dir)
        ]
        return bool(owners) and not unowned
    return bool(ownership.owners(site_dir, bare))


def _first(text: str) -> str:
    line = next((ln for ln in source_lines(text) if ln.startswith(("import ", "import\t"))), "")
    return line if len(line) <= 80 else line[:77] + "..."


def _hook_finding(path: str, line: int, severity: Severity, message: str) -> Finding:
    return Finding(rule=STARTUP_HOOK, severity=severity, path=path, line=line, message=message, in_change=True)
