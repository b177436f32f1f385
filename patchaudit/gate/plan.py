"""What the gate's cached verdict depends on: every path the audit read, and a fingerprint of their stats.

The fingerprint is one stat per entry (mode, size, mtime_ns, ctime_ns, inode): ~100,000 of them for a
full vLLM stack, which is nearly all of a warm gate's time. The walked roots' directories are cut, in
walk order, into blocks of about BLOCK_ROWS entries (a large root such as torch's into many), each
block digested on its own; the blocks are shared out, in runs of about the same size, over one process
per core, and their digests combined in block order, so the result is the same whatever their number.
"""

from __future__ import annotations

import os
import posixpath
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from stat import S_ISDIR

from patchaudit.fs.safefs import Cap, UnreadableFile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from patchaudit.target.environment import Environment

# Entries per digested block: fixed, so that the blocks (and the fingerprint) do not depend on the cores.
BLOCK_ROWS = 512
# Fewer entries than this per process and one process stats them all: below ~8,000 entries in all, a fork
# costs 2 cores more than it saves (fork, exit and wait take ~1 ms; a stat 5-17 us, the more the busier).
CHUNK_MIN_ROWS = 4_000
# What forking one process and collecting its digests costs the parent, in stat rows (~0.8 ms against
# ~2.9 us a stat): the parent, which also stats the site dirs and single files, takes fewer blocks, or
# on 16 cores it alone would still be statting when the others are done.
FORK_ROWS = 300
_PART = struct.Struct("<Iq")  # block index, digest
_LISTED_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class FilePlan:
    """Which paths the audit reads: site dirs (top level), walked trees, and single files.

    A plain class, not a dataclass: the warm gate reads one from its cache and imports no dataclass."""

    __slots__ = ("site_dirs", "roots", "files", "listings", "blocks")

    def __init__(
        self,
        *,
        site_dirs: tuple[str, ...],
        roots: tuple[str, ...],
        files: tuple[str, ...],
        listings: tuple[str, ...] = (),
        blocks: tuple[tuple[int, int, int, int], ...] = (),
    ) -> None:
        self.site_dirs = site_dirs
        self.roots = roots
        self.files = files
        # each root's directories and their other entries, as _tree_walk gives them: what a warm check stats
        self.listings = listings
        # where each block starts (root index; unit: 0 the root itself, n its n-th listed directory; item: 0
        # the unit's own row, n its n-th name), and its entries: a directory of thousands of names is cut too
        self.blocks = blocks

    @classmethod
    def build(
        cls, env: Environment, names: Sequence[str], *, extra_files: Sequence[Path], extra_roots: Sequence[Path]
    ) -> tuple[FilePlan, int, int]:
        """The plan for these distributions, with its fingerprint and newest timestamp, in one walk."""
        from patchaudit.fs.beneath import read_below
        from patchaudit.report import Source
        from patchaudit.target import environment
        from patchaudit.target.record import parse_record

        chosen = environment.select(environment.distributions(env), names)
        roots: set[str] = set()
        record_paths: set[str] = set()
        os_db = None
        for dist in chosen:
            location = str(dist.location)
            roots.add(str(dist.meta_dir))
            if dist.source in (Source.EDITABLE, Source.VCS):
                # verify reads the git checkout such an install runs from (working tree and .git).
                from patchaudit.check import vcs

                co = vcs.checkout(dist)
                if co is not None:
                    roots.add(str(co.root))
            try:
                if dist.record_path is None:
                    raise FileNotFoundError
                record = parse_record(read_below(dist.record_path, Cap.RECORD))
            except (OSError, UnreadableFile):
                # verify checks a distribution without RECORD against its OS package's files.
                from patchaudit.target import dpkg

                if not dpkg.may_own(dist.location):
                    continue
                os_db = os_db or dpkg.Dpkg()
                owner = os_db.owner(dist.meta_dir, dist.location, dpkg.top_level(dist.meta_dir))
                record_paths.update(owner.files if owner is not None else ())
                continue
            for entry in record.entries:
                record_paths.add(os.path.normpath(os.path.join(location, entry.path)))
                first, sep, _ = posixpath.normpath(entry.path.replace("\\", "/")).partition("/")
                if sep and first not in ("", "..", "__pycache__") and not os.path.isabs(entry.path):
                    roots.add(os.path.join(location, first))
        package = Path(__file__).resolve().parent.parent
        # patchaudit's own code and built-in rules (`_rules` in a wheel, `<checkout>/rules` otherwise).
        tools = [str(package)]
        if not (package / "_rules").is_dir() and (package.parent / "rules").is_dir():
            tools.append(str(package.parent / "rules"))
        tools += [str(p.absolute()) for p in extra_roots]
        site_dirs = tuple(str(s) for s in env.site_dirs)
        all_roots = tuple(sorted(roots)) + tuple(tools)
        # RECORD entries that the walk does not reach (scripts in bin/, files below a symlinked
        # directory) are stat'ed one by one.
        seen: set[str] = set()
        site = _digest(_site_rows(site_dirs))
        units: list[list[list[tuple[int, ...]]]] = []  # each root's units, each unit's rows
        listings = []
        for root in all_roots:
            groups, listing = _tree_walk(root, seen)
            units.append(groups)
            listings.append(listing)
        files = tuple(sorted(record_paths - seen)) + tuple(str(p.absolute()) for p in extra_files)
        blocks = _cut(listings)
        ends = [b[:3] for b in blocks[1:]] + [(len(all_roots), 0, 0)]
        digests = [
            _digest([row for r, u, j, k in _spans(b[:3], end, lambda r: len(units[r])) for row in units[r][u][j:k]])
            for b, end in zip(blocks, ends, strict=True)
        ]
        plan = cls(site_dirs=site_dirs, roots=all_roots, files=files, listings=tuple(listings), blocks=tuple(blocks))
        fingerprint, newest = _combine([site, *digests, _digest([stat_row(p) for p in files])])
        return plan, fingerprint, newest

    def to_dict(self) -> dict[str, Any]:
        return {
            "site_dirs": list(self.site_dirs),
            "roots": list(self.roots),
            "files": list(self.files),
            "listings": list(self.listings),
            "blocks": [list(b) for b in self.blocks],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FilePlan:
        roots = tuple(data["roots"])
        listings = tuple(data["listings"])
        if len(listings) != len(roots) or not all(isinstance(listing, str) for listing in listings):
            raise ValueError("a plan without the listing of each root")
        blocks = tuple((int(r), int(u), int(j), int(w)) for r, u, j, w in data["blocks"])
        if any(not 0 <= r < len(roots) or min(u, j) < 0 for r, u, j, _ in blocks) or blocks != tuple(sorted(blocks)):
            raise ValueError("a plan whose blocks are out of order")
        return cls(
            site_dirs=tuple(data["site_dirs"]),
            roots=roots,
            files=tuple(data["files"]),
            listings=listings,
            blocks=blocks,
        )

    def fingerprint(self, processes: int = 1, *, min_rows: int = CHUNK_MIN_ROWS) -> int:
        """The fingerprint of every stat the audit depends on, as build() gives it, its blocks shared out
        over up to `processes` processes of at least `min_rows` entries each (forked: the caller must run
        no other threads). Only a build needs the newest timestamp: a warm check takes none."""
        weights = [b[3] for b in self.blocks]
        count = min(processes, sum(weights) // max(1, min_rows), len(weights))
        lead = FORK_ROWS * (count - 1) + len(self.files)
        runs = _chunks(weights, count, lead) if count > 1 else [range(len(weights))]
        children = [(_fork_blocks(self, run), run) for run in runs[1:]]
        site = hash(tuple(_site_rows(self.site_dirs)))
        found = dict(zip(runs[0], _block_digests(self, runs[0]), strict=True))
        files = hash(tuple(stat_row(p) for p in self.files))
        for (pid, fd), run in children:
            found.update(_collect(pid, fd))
            if any(i not in found for i in run):  # the child failed: do its work here
                found.update(zip(run, _block_digests(self, run), strict=True))
        return hash((site, *(found[i] for i in range(len(weights))), files))


def _cut(listings: Sequence[str]) -> list[tuple[int, int, int, int]]:
    """The blocks of these roots' listings: (root index, unit, item, entries), BLOCK_ROWS entries each."""
    blocks: list[list[int]] = []
    rows = BLOCK_ROWS
    for r, listing in enumerate(listings):
        parts = listing.split("\0")
        counts = [1] + [1 + (names.count("/") + 1 if names else 0) for names in parts[1::2]]
        for u, count in enumerate(counts):
            j = 0
            while j < count:
                if rows >= BLOCK_ROWS:
                    blocks.append([r, u, j, 0])
                    rows = 0
                take = min(count - j, BLOCK_ROWS - rows)
                blocks[-1][3] += take
                rows += take
                j += take
    return [(r, u, j, w) for r, u, j, w in blocks]


def _spans(
    start: tuple[int, ...], end: tuple[int, ...], units: Callable[[int], int]
) -> Iterator[tuple[int, int, int, int | None]]:
    """(root, unit, first item, item to stop at or None for all) of each unit from `start` to `end`
    (each a root, unit, item), `units(root)` being how many units a root has."""
    r, u, j = start
    while (r, u, j) < end:
        if (r, u) == end[:2]:
            yield r, u, j, end[2]
            return
        if u >= units(r):
            r, u, j = r + 1, 0, 0
            continue
        yield r, u, j, None
        u, j = u + 1, 0


def _block_digests(plan: FilePlan, run: range) -> list[int]:
    """The digest of each block in `run`, from the plan's listings: nothing is listed."""
    split: dict[int, list[str]] = {}

    def parts(r: int) -> list[str]:
        return split.get(r) or split.setdefault(r, plan.listings[r].split("\0"))

    digests = []
    for i in run:
        end = plan.blocks[i + 1][:3] if i + 1 < len(plan.blocks) else (len(plan.roots), 0, 0)
        rows: list[tuple[int, ...]] = []
        for r, u, j, k in _spans(plan.blocks[i][:3], end, lambda r: len(parts(r)) // 2 + 1):
            rows += _cached_rows(plan.roots[r], parts(r), u, j, k)
        digests.append(hash(tuple(rows)))  # as _digest's, without the newest timestamp
    return digests


def _chunks(weights: Sequence[int], count: int, lead: int = 0) -> list[range]:
    """`count` runs of consecutive blocks, each of about the same number of rows, the first `lead`
    rows fewer (the parent's, who has that much other work)."""
    total = sum(weights) + lead
    runs: list[range] = []
    first = 0
    done = lead
    for i, weight in enumerate(weights):
        done += weight
        if done * count >= total * (len(runs) + 1) and len(runs) < count - 1:
            runs.append(range(first, i + 1))
            first = i + 1
    runs.append(range(first, len(weights)))
    return [run for run in runs if run]


def _fork_blocks(plan: FilePlan, run: range) -> tuple[int, int]:
    """Fork a child that digests these blocks and writes them to a pipe: (pid, read end)."""
    from patchaudit.parallel import children

    read_fd, write_fd = os.pipe()
    pid = children.fork()  # counted: a signal to this process kills it too
    if pid == 0:  # the child: never return into the caller's code, never flush its buffers
        code = 1
        try:
            os.close(read_fd)
            # hash() is a signed 64-bit Py_hash_t: it packs as "q"
            data = b"".join(_PART.pack(i, found) for i, found in zip(run, _block_digests(plan, run), strict=True))
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view) :]
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def _collect(pid: int, fd: int) -> dict[int, int]:
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        from patchaudit.parallel import children

        os.close(fd)
        _, status = os.waitpid(pid, 0)
        children.reaped(pid)
    data = b"".join(chunks)
    if status != 0 or len(data) % _PART.size:
        return {}
    return dict(_PART.iter_unpack(data))


def _combine(parts: list[tuple[int, int]]) -> tuple[int, int]:
    return hash(tuple(d for d, _ in parts)), max((n for _, n in parts), default=0)


def _digest(rows: list[tuple[int, ...]]) -> tuple[int, int]:
    """Rows hold only integers, whose hash() is the same in every process (no hash seed), so the
    fingerprint needs neither hashlib nor names: a directory's own mtime/ctime row changes whenever
    an entry in it is added, removed or renamed. Rows follow directory order, which is stable while
    a directory is unchanged; a new order costs one audit, never a stale verdict."""
    return hash(tuple(rows)), max((max(r[2], r[3]) for r in rows if len(r) > 3), default=0)


def _site_rows(site_dirs: Sequence[str]) -> list[tuple[int, ...]]:
    rows: list[tuple[int, ...]] = []
    for site in site_dirs:
        rows.append(stat_row(site))
        try:
            with os.scandir(site) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            rows.append(_entry_row(entry))
            if entry.name.endswith((".dist-info", ".egg-info")):
                for member in ("RECORD", "METADATA", "PKG-INFO", "direct_url.json"):
                    rows.append(stat_row(os.path.join(entry.path, member)))
    return rows


def stat_row(path: str) -> tuple[int, ...]:
    try:
        st = os.lstat(path)
    except OSError as exc:
        return (exc.errno or 0,)
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _entry_row(entry: os.DirEntry[str]) -> tuple[int, ...]:
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError as exc:
        return (exc.errno or 0,)
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _dir_row(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _open_dir(root: str, rel: str) -> int:
    """A directory below `root` (never through a link at its last step; the root itself may be one)."""
    return os.open(f"{root}/{rel}" if rel else root, _LISTED_DIR | os.O_NOFOLLOW if rel else _LISTED_DIR)


def _tree_walk(root: str, seen: set[str]) -> tuple[list[list[tuple[int, ...]]], str]:
    """The rows of the root and of every entry below it, one group for the root's own row and one per
    directory, and its listing; symlinked directories are not entered.

    Each directory gives its own row from the descriptor it is opened by, then a row for each of its
    other entries, stat'ed by name against that descriptor. The listing holds, in walk order, each
    directory (relative to the root) and the names of its entries that are not directories, so that a
    warm check (_cached_rows) gives the same rows without listing anything: one string, each directory
    and its names joined by "/" (which no name holds) in turn, separated by NULs (which no path holds).
    """
    groups = [[stat_row(root)]]
    listing: list[str] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        listing.append(rel)
        rows: list[tuple[int, ...]] = []
        groups.append(rows)
        try:
            fd = _open_dir(root, rel)
        except OSError as exc:
            rows.append((exc.errno or 0,))
            listing.append("")
            continue
        try:
            rows.append(_dir_row(os.fstat(fd)))
            listing.append(_list_rows(fd, root, rel, rows, stack, seen))
        finally:
            os.close(fd)
    return groups, "\0".join(listing)


def _list_rows(fd: int, root: str, rel: str, rows: list[tuple[int, ...]], stack: list[str], seen: set[str]) -> str:
    """Rows of the entries of the open directory `fd` (`rel` below `root`) but its subdirectories,
    which go on `stack`; the names of the entries rowed, joined by "/" (no name holds one)."""
    try:
        names = os.listdir(fd)
    except OSError as exc:
        rows.append((exc.errno or 0,))  # never given by a warm check: this tree is verified every time
        return ""
    rowed = []
    prefix = f"{rel}/" if rel else ""
    for name in names:
        seen.add(f"{root}/{prefix}{name}")
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError as exc:
            rows.append((exc.errno or 0,))
            rowed.append(name)
            continue
        if S_ISDIR(st.st_mode):
            stack.append(prefix + name)  # its row comes from its own descriptor
            continue
        rows.append(_dir_row(st))
        rowed.append(name)
    return "/".join(rowed)


def _cached_rows(root: str, parts: list[str], unit: int, first: int, stop: int | None) -> list[tuple[int, ...]]:
    """The rows _tree_walk gave for items `first` to `stop` of one unit of a root (0: the root's own row;
    n: the n-th directory, its own row then one per name), from the root's listing split at NULs:
    nothing is listed, each entry stat'ed once.

    Safe because a directory's own row (from the descriptor its entries are stat'ed against) holds its
    mtime and ctime, which every entry added, removed or renamed in it changes: while that row is the
    same, so are its names. A directory swapped for a link is not opened (its parent's row changed too).
    """
    if unit == 0:
        return [stat_row(root)]
    rel, joined = parts[2 * unit - 2], parts[2 * unit - 1]
    try:
        fd = _open_dir(root, rel)
    except OSError as exc:
        return [(exc.errno or 0,)]
    rows = []
    try:
        if first == 0:
            rows.append(_dir_row(os.fstat(fd)))
        names = joined.split("/")[max(first - 1, 0) : None if stop is None else stop - 1] if joined else ()
        for name in names:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError as exc:
                rows.append((exc.errno or 0,))
                continue
            rows.append((st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    finally:
        os.close(fd)
    return rows
