"""What the gate's cached verdict depends on: every path the audit read, and a fingerprint of their stats.

The fingerprint is one stat per entry (mode, size, mtime_ns, ctime_ns, inode): ~100,000 of them for a
full vLLM stack, which is nearly all of a warm gate's time. It is cut into parts (the site directories'
tops, each walked root, the single files), each part digested on its own, so the parts can be stat'ed
by several processes and the result is the same whatever their number.
"""

from __future__ import annotations

import os
import posixpath
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISDIR

from patchaudit.fs.beneath import read_below
from patchaudit.fs.safefs import Cap, UnreadableFile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from patchaudit.target.environment import Environment

# Below this many entries one process stats them all: a fork costs more than it saves.
PARALLEL_MIN_ENTRIES = 20_000
# Stat-bound work stops scaling well before the cores of a large host run out.
MAX_STAT_PROCESSES = 8
_PART = struct.Struct("<Iqq")  # part index, digest, newest timestamp
_LISTED_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


@dataclass(frozen=True, kw_only=True, slots=True)
class FilePlan:
    """Which paths the audit reads: site dirs (top level), walked trees, and single files."""

    site_dirs: tuple[str, ...]
    roots: tuple[str, ...]
    files: tuple[str, ...]
    weights: tuple[int, ...] = ()  # entries below each root at the last audit: how to share out the stats
    # each root's directories and their other entries, as _tree_walk gives them: what a warm check stats
    listings: tuple[str, ...] = ()

    @classmethod
    def build(
        cls, env: Environment, names: Sequence[str], *, extra_files: Sequence[Path], extra_roots: Sequence[Path]
    ) -> tuple[FilePlan, int, int]:
        """The plan for these distributions, with its fingerprint and newest timestamp, in one walk."""
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
        parts = [_site_rows(site_dirs)]
        listings = []
        for root in all_roots:
            rows, listing = _tree_walk(root, seen)
            parts.append(rows)
            listings.append(listing)
        files = tuple(sorted(record_paths - seen)) + tuple(str(p.absolute()) for p in extra_files)
        parts.append([stat_row(p) for p in files])
        weights = tuple(len(p) for p in parts[1:-1])
        plan = cls(site_dirs=site_dirs, roots=all_roots, files=files, weights=weights, listings=tuple(listings))
        fingerprint, newest = _combine([_digest(rows) for rows in parts])
        return plan, fingerprint, newest

    def to_dict(self) -> dict[str, Any]:
        return {
            "site_dirs": list(self.site_dirs),
            "roots": list(self.roots),
            "files": list(self.files),
            "weights": list(self.weights),
            "listings": list(self.listings),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FilePlan:
        weights = tuple(int(w) for w in data.get("weights", ()))
        roots = tuple(data["roots"])
        listings = tuple(data["listings"])
        if len(listings) != len(roots) or not all(isinstance(listing, str) for listing in listings):
            raise ValueError("a plan without the listing of each root")
        return cls(
            site_dirs=tuple(data["site_dirs"]),
            roots=roots,
            files=tuple(data["files"]),
            weights=weights if len(weights) == len(roots) else (),
            listings=listings,
        )

    def fingerprint(self, processes: int = 1) -> tuple[int, int]:
        """(fingerprint of every stat the audit depends on, newest mtime/ctime seen in ns), its parts
        spread over up to `processes` processes (forked: the caller must run no other threads)."""
        return _combine(_part_digests(self, processes))

    def part(self, index: int) -> tuple[int, int]:
        """The digest of one part: 0 the site directories, 1..len(roots) a root, then the single files."""
        if index == 0:
            return _digest(_site_rows(self.site_dirs))
        if index <= len(self.roots):
            return _digest(_cached_rows(self.roots[index - 1], self.listings[index - 1]))
        return _digest([stat_row(p) for p in self.files])


def _part_digests(plan: FilePlan, processes: int) -> list[tuple[int, int]]:
    count = len(plan.roots) + 2
    weights = [len(plan.site_dirs), *plan.weights, len(plan.files)]  # no weights (an older plan): one process
    processes = min(processes, MAX_STAT_PROCESSES, count)
    if processes <= 1 or not plan.weights or sum(weights) < PARALLEL_MIN_ENTRIES:
        return [plan.part(i) for i in range(count)]
    # biggest parts first, each to the least loaded process (longest-processing-time first)
    loads = [0] * processes
    shares: list[list[int]] = [[] for _ in range(processes)]
    for i in sorted(range(count), key=lambda i: -weights[i]):
        least = loads.index(min(loads))
        loads[least] += weights[i]
        shares[least].append(i)
    children = [(_fork_parts(plan, share), share) for share in shares[1:]]
    found = {i: plan.part(i) for i in shares[0]}
    for (pid, fd), share in children:
        found.update(_collect(pid, fd))
        for i in share:
            if i not in found:  # the child failed: do its work here
                found[i] = plan.part(i)
    return [found[i] for i in range(count)]


def _fork_parts(plan: FilePlan, share: list[int]) -> tuple[int, int]:
    """Fork a child that digests these parts and writes them to a pipe: (pid, read end)."""
    from patchaudit.parallel import workers

    read_fd, write_fd = os.pipe()
    pid = workers.fork()  # counted: a signal to this process kills it too
    if pid == 0:  # the child: never return into the caller's code, never flush its buffers
        code = 1
        try:
            os.close(read_fd)
            # hash() is a signed 64-bit Py_hash_t and timestamps fit: both pack as "q"
            data = b"".join(_PART.pack(i, *plan.part(i)) for i in share)
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view) :]
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def _collect(pid: int, fd: int) -> dict[int, tuple[int, int]]:
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        from patchaudit.parallel import workers

        os.close(fd)
        _, status = os.waitpid(pid, 0)
        workers.reaped(pid)
    data = b"".join(chunks)
    if status != 0 or len(data) % _PART.size:
        return {}
    return {i: (digest, newest) for i, digest, newest in _PART.iter_unpack(data)}


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


def _tree_walk(root: str, seen: set[str]) -> tuple[list[tuple[int, ...]], str]:
    """A row for the root and every entry below it, and its listing; symlinked directories are not entered.

    Each directory gives its own row from the descriptor it is opened by, then a row for each of its
    other entries, stat'ed by name against that descriptor. The listing holds, in walk order, each
    directory (relative to the root) and the names of its entries that are not directories, so that a
    warm check (_cached_rows) gives the same rows without listing anything: one string, each directory
    and its names joined by "/" (which no name holds) in turn, separated by NULs (which no path holds).
    """
    rows = [stat_row(root)]
    listing: list[str] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        listing.append(rel)
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
    return rows, "\0".join(listing)


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


def _cached_rows(root: str, listing: str) -> list[tuple[int, ...]]:
    """The rows _tree_walk gave, from its listing: nothing is listed, each entry stat'ed once.

    Safe because a directory's own row (from the descriptor its entries are stat'ed against) holds its
    mtime and ctime, which every entry added, removed or renamed in it changes: while that row is the
    same, so are its names. A directory swapped for a link is not opened (its parent's row changed too).
    """
    rows = [stat_row(root)]
    parts = listing.split("\0")
    for i in range(0, len(parts) - 1, 2):
        rel, joined = parts[i], parts[i + 1]
        try:
            fd = _open_dir(root, rel)
        except OSError as exc:
            rows.append((exc.errno or 0,))
            continue
        try:
            rows.append(_dir_row(os.fstat(fd)))
            for name in joined.split("/") if joined else ():
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError as exc:
                    rows.append((exc.errno or 0,))
                    continue
                rows.append((st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
        finally:
            os.close(fd)
    return rows
