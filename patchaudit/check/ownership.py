"""Who owns what: each distribution's RECORD paths, indexed per top-level directory, and the files in its
package directories that no RECORD of the environment owns (added files)."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path

from patchaudit.fs.beneath import DirCache, read_below
from patchaudit.fs.safefs import Cap, UnreadableFile, Why
from patchaudit.report import Drift, DriftState
from patchaudit.target.environment import InstalledDist
from patchaudit.target.record import Record, RecordProblem, parse_record, simple_rows

_Owners = dict[str, list[InstalledDist]]  # path -> the distributions whose RECORD lists it


@dataclass(slots=True)
class Loaded:
    """One distribution's RECORD: the paths it lists and its entries, each worked out when first asked for.

    A RECORD of simple lines (nearly all of them) is not even cut into paths unless something asks what
    it lists: on a clean environment nothing does, and the main process does nothing per clean file.
    Its entries, hashes and sizes are parsed for a distribution that drifted, or one whose files another
    RECORD's drift names.
    """

    dist: InstalledDist
    data: bytes | None  # the RECORD's bytes; None: there is none to read
    listed: dict[str, str | None] | None = None  # normalized rel path -> raw RECORD path; None: not read yet
    hashes: dict[str, str] | None = None  # normalized rel path -> "algorithm=digest", built when asked
    sizes: dict[str, int] | None = None  # normalized rel path -> the size RECORD gives, built when asked
    hashed: int | None = None  # entries with a sha256 digest of a simple RECORD (no problems); None: parse it
    parsed: Record | None = None
    heads: set[str] | None = None  # what the paths below a directory start with, worked out when asked
    top_files: set[str] | None = None  # the paths with no directory (a .pth), when the workers said so

    @property
    def entries(self) -> dict[str, str | None]:
        """Normalized rel path -> raw RECORD path of every path the RECORD lists."""
        if self.listed is None:
            self.listed = _paths_of_lines(self.data) if self.data is not None else {}
        return self.listed

    @property
    def record(self) -> Record | None:
        if self.parsed is None and self.data is not None:
            self.parsed = parse_record(self.data)
        return self.parsed

    def firsts(self) -> set[str]:
        """The first parts of the paths below a directory (an absolute path's is ""), worked out once."""
        if self.heads is None:
            self.heads = {key.partition("/")[0] for key in self.entries if "/" in key}
        return self.heads

    @property
    def problems(self) -> tuple[RecordProblem, ...]:
        """The RECORD's bad lines (a simple RECORD has none: no parse needed to say so)."""
        if self.hashed is not None:
            return ()
        return self.record.problems if self.record is not None else ()


def normalize(path: str) -> str:
    """RECORD path -> key relative to the dist's location ('..' kept when it climbs out)."""
    if "\\" in path or "/." in path or "//" in path or path.startswith("."):
        return posixpath.normpath(path.replace("\\", "/"))
    return path


def read_record(dist: InstalledDist) -> bytes | None:
    """The RECORD's bytes, within Cap.RECORD; None when there is none, or it is not a regular file."""
    return read_record_or_why(dist)[0]


def read_record_or_why(dist: InstalledDist, dirs: DirCache | None = None) -> tuple[bytes | None, str | None]:
    """(RECORD bytes, None), or (None, why it cannot be read: a FIFO, a link, past its cap); `dirs`: the
    directory descriptors of a read of many RECORDs (one walk from `/` for all, not one each)."""
    if dist.record_path is None:
        return None, None
    try:
        return read_below(dist.record_path, Cap.RECORD, dirs), None
    except UnreadableFile as exc:
        return None, None if exc.why is Why.MISSING else f"RECORD is {exc.why.value}" + (
            f" ({exc.detail})" if exc.detail else ""
        )


def load(dist: InstalledDist, data: bytes | None = None) -> Loaded:
    if data is None:
        data = read_record(dist)
    loaded = Loaded(dist=dist, data=data)
    if data is None:
        return loaded
    loaded.listed, loaded.hashed, loaded.parsed = listed_paths(data)
    return loaded


def listed_paths(data: bytes) -> tuple[dict[str, str | None], int | None, Record | None]:
    """(normalized path -> RECORD path, sha256 entries of a simple RECORD or None, the parse where one
    was needed) of every path a RECORD lists, on a bad line too: what load() and the workers' added-file
    walk (pieces.walk_unlisted) both take as what it owns."""
    rows = simple_rows(data)
    if rows is not None:
        paths = [path or quoted.replace('""', '"') for path, quoted, _, _ in rows]
        entries: dict[str, str | None] = (
            dict(zip(paths, paths, strict=True)) if _plain(data) else {normalize(p): p for p in paths}
        )
        return entries, len(rows) - list(map(itemgetter(2), rows)).count(""), None
    record = parse_record(data)
    found: dict[str, str | None] = {normalize(p): p for p, _, _ in record.entries}
    for problem in record.problems:
        if problem.path:
            found.setdefault(normalize(problem.path), problem.path)
    return found, None, record


def load_unchecked(dist: InstalledDist, data: bytes) -> Loaded:
    """What load() finds in a RECORD of simple lines, read off its lines without checking that they are.

    The sha256 digests are counted (a quoted path may hold one: the workers' count is the one kept);
    the paths are read off the lines when first asked for (Loaded.entries). Only a RECORD whose every
    line the workers' parse found simple (pieces.Checked.simple) may keep this answer: any other is
    load()ed again.
    """
    return Loaded(dist=dist, data=data, hashed=data.count(b",sha256="))


def _paths_of_lines(data: bytes) -> dict[str, str | None]:
    """The paths of a RECORD of simple lines: what comes before a line's first comma, or between the
    quotes of a quoted one (load_unchecked)."""
    text = data.decode("utf-8", "surrogateescape")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    paths = [
        line.partition(",")[0] if line[:1] != '"' else line[1 : line.rfind('"')].replace('""', '"') for line in lines
    ]
    return dict(zip(paths, paths, strict=True)) if _plain(data) else {normalize(p): p for p in paths}


def _plain(data: bytes) -> bool:
    """Whether no path of this RECORD is spelt in a way normalize() rewrites: then each is its own key."""
    odd = (b"\\", b"/.", b"//", b"\n.", b'\n".')
    return not data.startswith((b".", b'".')) and not any(part in data for part in odd)


class Ownership:
    """Which RECORD owns which file or directory, per site directory and top-level name.

    Answering "who owns this?" needs every RECORD of the environment, so the RECORDs of distributions
    not being scanned are read only when a question is asked. The index is built per top-level name
    (`nvidia/`, `torch/`) from the distributions that list something below it, when first asked: a
    question about `vllm/x` never indexes the 60k other files of the environment.
    """

    def __init__(self, every: Sequence[InstalledDist], loaded: dict[Path, Loaded]):
        self._every = every
        self._loaded = loaded
        # (site directory, top-level name) -> the distributions listing paths below it
        self._tops: dict[tuple[Path, str], list[Loaded]] | None = None
        # (site directory, top-level name) -> (path -> owners, directory -> owners)
        self._indexes: dict[tuple[Path, str], tuple[_Owners, _Owners]] = {}

    def _by_top(self) -> dict[tuple[Path, str], list[Loaded]]:
        if self._tops is None:
            for dist in self._every:
                if dist.meta_dir not in self._loaded:
                    self._loaded[dist.meta_dir] = load(dist)
            tops: dict[tuple[Path, str], list[Loaded]] = {}
            for item in self._loaded.values():
                location = item.dist.location
                for top in item.firsts():
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

    def files_below(self, location: Path, top: str) -> Container[str]:
        """Every path below the top-level directory `top` that some RECORD lists (normalized)."""
        return self._index(location, top)[0]

    def owned(self, location: Path, rel: str) -> bool:
        top, sep, _ = rel.partition("/")
        if not sep:
            return bool(self._top_level_owners(location, rel))
        return rel in self._index(location, top)[0]

    def _top_level_owners(self, location: Path, name: str) -> list[InstalledDist]:
        """Owners of a file directly in a site directory (a .pth), without parsing every RECORD: the
        workers that checked a simple RECORD sent back its top-level files (Loaded.top_files)."""
        needle = name.encode()
        # Else a path is listed whole in its RECORD's bytes (normalizing only drops parts of it), unless
        # a quote in it is doubled: a RECORD without the name is not cut into paths to say so.
        quoted = '"' in name
        found = []
        for dist in self._every:
            if dist.location != location:
                continue
            item = self._loaded.get(dist.meta_dir)
            if item is None:
                raw = read_record(dist) or b""
                if needle not in raw:
                    continue
                item = self._loaded[dist.meta_dir] = load(dist)
            elif item.top_files is not None:
                if name in item.top_files:
                    found.append(dist)
                continue
            elif not quoted and needle not in (item.data or b""):
                continue
            if name in item.entries:
                found.append(dist)
        return found

    def recorded(self, dist: InstalledDist, key: str) -> str | None:
        """`dist`'s RECORD hash for `key` ("sha256=..."), once its RECORD is loaded; None if it has none."""
        item = self._loaded.get(dist.meta_dir)
        if item is None or item.record is None:
            return None
        if item.hashes is None:
            item.hashes = {normalize(e.path): str(e.hash) for e in item.record.entries if e.hash is not None}
        return item.hashes.get(key)

    def recorded_size(self, dist: InstalledDist, key: str) -> int | None:
        """`dist`'s RECORD size for `key`, once its RECORD is loaded; None if it gives none."""
        item = self._loaded.get(dist.meta_dir)
        if item is None or item.record is None:
            return None
        if item.sizes is None:
            item.sizes = {normalize(e.path): e.size for e in item.record.entries if e.size is not None}
        return item.sizes.get(key)

    def dir_owners(self, location: Path, rel_dir: str) -> list[InstalledDist]:
        return self._index(location, rel_dir.partition("/")[0])[1].get(rel_dir, [])


def top_dirs(loaded: Loaded) -> set[str]:
    """The top-level directories the RECORD's relative paths are below."""
    return loaded.firsts() - {"..", "", loaded.dist.meta_dir.name, "__pycache__"}


_FIRST_PART = re.compile(rb'^"?([^/\r\n",]+)/', re.MULTILINE)


def record_tops(data: bytes | None, meta_name: str) -> set[str]:
    """The top-level directories a RECORD's paths start with, read off its bytes without parsing it.

    What top_dirs() finds for plain paths; an odd spelling (`./pkg/x`, `pkg\\x`) may be missed here,
    and Walks then walks that directory when it is asked about it.
    """
    if not data:
        return set()
    found = {part.decode("utf-8", "surrogateescape") for part in set(_FIRST_PART.findall(data))}
    return found - {".", "..", meta_name, "__pycache__"}


def is_bytecode_of_known_source(rel: str, owned: Callable[[str], bool], location: Path) -> bool:
    parent, _, name = rel.rpartition("/")
    if not name.endswith(".pyc") or not parent.endswith("__pycache__"):
        return False
    source_dir = parent[: -len("__pycache__")].rstrip("/")
    source = (source_dir + "/" if source_dir else "") + name.split(".", 1)[0] + ".py"
    return owned(source) or (location / source).is_file()


def _through_bytecode_links(location: Path, walked: Iterable[tuple[str, bool]]) -> Iterator[tuple[str, bool]]:
    """The walk, with a `__pycache__` that is a symlink to a directory (a bytecode cache kept elsewhere)
    judged by what it holds, as a real one is: its entries, not the link itself, are what imports use."""
    for rel, is_link in walked:
        if not (is_link and rel.rpartition("/")[2] == "__pycache__" and (location / rel).is_dir()):
            yield rel, is_link
            continue
        try:
            names = sorted(os.listdir(location / rel))
        except OSError:
            yield rel, is_link
            continue
        for name in names:
            yield f"{rel}/{name}", os.path.islink(location / rel / name)


def is_real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def site_tops(locations: Iterable[Path]) -> list[tuple[Path, str]]:
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


def walk_list(location: Path, top: str) -> list[tuple[str, bool]]:
    """What walk() finds, less the bytecode in a `__pycache__` whose source the same walk found as a
    regular file: Walks.unowned passes such a file over whoever owns it, and leaving it out where the
    tree is walked (a worker) spares the main process a lookup per .pyc, a third of a stack's files."""
    base = len(str(location)) + 1
    found: list[tuple[str, bool]] = []
    stack: list[tuple[str, frozenset[str]]] = [(str(location / top), frozenset())]
    while stack:
        current, sources = stack.pop()
        try:
            with os.scandir(current) as it:
                entries = list(it)
        except OSError:
            continue
        here = frozenset(e.name[:-3] for e in entries if e.name.endswith(".py") and e.is_file(follow_symlinks=False))
        in_cache = current.endswith("/__pycache__")
        for entry in entries:
            name = entry.name
            if entry.is_dir(follow_symlinks=False):
                stack.append((entry.path, here if name == "__pycache__" else frozenset()))
            elif not (in_cache and name.endswith(".pyc") and name.partition(".")[0] in sources):
                found.append((entry.path[base:], entry.is_symlink()))
    return found


def walk(location: Path, top: str) -> Iterable[tuple[str, bool]]:
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


class Walks:
    """Each package directory walked once per verify, and the files found there judged once.

    Namespace directories (`nvidia/`) are a top-level directory of many distributions: walked per
    distribution, the same tree was read and every file in it looked up once for each of them.
    """

    def __init__(self, ownership: Ownership, walked: dict[tuple[Path, str], list[tuple[str, bool]]]) -> None:
        self._ownership = ownership
        self._walked = walked  # (location, top) -> what a worker's walk found
        # (location, top) -> (path, is_symlink, closest owner) of the files below it that no RECORD owns
        self._unowned: dict[tuple[Path, str], list[tuple[str, bool, InstalledDist | None]]] = {}
        self._drift: dict[tuple[Path, str], Drift] = {}

    def unowned(self, location: Path, top: str, asker: Loaded) -> list[tuple[str, bool, InstalledDist | None]]:
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
            walked = list(walk(location, top))
        if not walked:  # what the workers' walk sends back of a clean tree: the asker's paths need no reading
            self._unowned[location, top] = []
            return []
        own = asker.entries
        mine = own.__contains__
        ownership = self._ownership
        owned = lambda path: ownership.owned(location, path)  # noqa: E731
        found = []
        # The asker's own files first, in one pass (nearly every file is someone's): a link may stand for
        # a directory of bytecode, judged below by what it holds.
        rest = [(rel, is_link) for rel, is_link in walked if is_link or rel not in own]
        if any(not is_link and not is_bytecode_of_known_source(rel, mine, location) for rel, is_link in rest):
            listed = self._ownership.files_below(location, top)  # every RECORD's, the same way
            rest = [(rel, is_link) for rel, is_link in rest if is_link or rel not in listed]
        for rel, is_link in _through_bytecode_links(location, rest):
            if rel in own or is_bytecode_of_known_source(rel, mine, location):
                continue
            if owned(rel) or is_bytecode_of_known_source(rel, owned, location):
                continue
            found.append((rel, is_link, closest_owner(location, rel, ownership)))
        self._unowned[location, top] = found
        return found

    def drift(self, location: Path, rel: str, is_link: bool) -> Drift:
        made = self._drift.get((location, rel))
        if made is None:
            note = f"symlink to {os.readlink(location / rel)}" if is_link else None
            actual = None if is_link else file_digest(location / rel)
            made = self._drift[location, rel] = Drift(path=rel, state=DriftState.ADDED, actual=actual, note=note)
        return made


def added_files(item: Loaded, ownership: Ownership, walks: Walks) -> tuple[list[Drift], list[Drift]]:
    """Files under the distribution's top-level directories that no RECORD owns.

    Returns (attributed to this distribution, shared directories where the owner is ambiguous).
    """
    location = item.dist.location
    mine: list[Drift] = []
    shared: list[Drift] = []
    for top in sorted(top_dirs(item)):
        root = location / top
        if root.is_symlink():
            # Its files still hash clean through the link, and whatever else the target holds imports.
            swap_note = f"package directory replaced by a symlink to {os.readlink(root)}"
            mine.append(Drift(path=top, state=DriftState.MODIFIED, note=swap_note))
            continue
        if not root.is_dir():
            continue
        for rel, is_link, owner in walks.unowned(location, top, item):
            if rel in item.entries:
                continue
            if owner is item.dist:
                mine.append(walks.drift(location, rel, is_link))
            elif owner is None:
                shared.append(walks.drift(location, rel, is_link))
    return mine, shared


def closest_owner(location: Path, rel: str, ownership: Ownership) -> InstalledDist | None:
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


def file_digest(path: Path) -> str | None:
    from patchaudit.parallel.hashing import hash_file

    return hash_file(str(path)).digest
