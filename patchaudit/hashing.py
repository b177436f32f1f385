"""Hash many files on every core without following symlinks; a stat cache for warm runs."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from patchaudit.atomic import atomic_write
from patchaudit.record import encode_digest

CHUNK = 1 << 20
WHOLE_READ_LIMIT = 8 << 20
STAT_CACHE_VERSION = 1
RACY_NS = 50_000_000  # above the kernel's coarse timestamp tick
RACY_COARSE_NS = 2_000_000_000  # filesystems with whole-second timestamps
# Git's blob id: sha1 over "blob <size>\0" and the content (the Hub names small files' blobs by it).
GIT_SHA1 = "git-sha1"


def racy_window_ns(timestamp_ns: int) -> int:
    """How long after `timestamp_ns` a file may change again without its ctime moving (git's racy entries).

    A digest or verdict taken within this window of a file's newest timestamp is not kept.
    """
    return RACY_COARSE_NS if timestamp_ns % 1_000_000_000 == 0 else RACY_NS


@dataclass(frozen=True, kw_only=True, slots=True)
class FileState:
    """What hashing one path found: a regular file's digest, or why there is none."""

    digest: str | None = None  # "algo=urlsafe-b64"
    missing: bool = False
    symlink: str | None = None  # link target when the path is a symlink
    not_regular: bool = False
    error: str | None = None
    size: int = 0
    nlink: int = 1


@dataclass(frozen=True, slots=True)
class StatKey:
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int

    @classmethod
    def of(cls, st: os.stat_result) -> StatKey:
        return cls(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


class StatCache:
    """Digests keyed by path and (size, mtime_ns, ctime_ns, inode, device).

    ctime cannot be set from user space, so `touch -r` after an edit still invalidates the entry.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._entries: dict[str, tuple[StatKey, str]] = {}
        self._dirty = False
        self._lock = threading.Lock()
        if path is not None:
            self._load(path)

    def _load(self, path: Path) -> None:
        try:
            raw = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return
        if not isinstance(raw, dict) or raw.get("version") != STAT_CACHE_VERSION:
            return
        entries = raw.get("entries")
        if not isinstance(entries, dict):
            return
        for name, value in entries.items():
            if isinstance(value, list) and len(value) == 6 and isinstance(value[5], str):
                try:
                    self._entries[name] = (StatKey(*map(int, value[:5])), value[5])
                except (TypeError, ValueError):
                    continue

    def get(self, path: str, key: StatKey, algorithm: str) -> str | None:
        hit = self._entries.get(path)
        if hit is not None and hit[0] == key and hit[1].startswith(algorithm + "="):
            return hit[1]
        return None

    def put(self, path: str, key: StatKey, digest: str) -> None:
        with self._lock:
            if self._entries.get(path) != (key, digest):
                self._entries[path] = (key, digest)
                self._dirty = True

    def save(self) -> None:
        """Write atomically; a cache that cannot be written is simply not kept."""
        if self.path is None or not self._dirty:
            return
        data = {
            "version": STAT_CACHE_VERSION,
            "entries": {
                name: [k.size, k.mtime_ns, k.ctime_ns, k.ino, k.dev, digest]
                for name, (k, digest) in self._entries.items()
            },
        }
        try:
            atomic_write(self.path, json.dumps(data, separators=(",", ":")), durable=False)
            self._dirty = False
        except OSError:
            pass


def new_hash(algorithm: str, size: int) -> hashlib._Hash:
    """A hash object for `algorithm`; GIT_SHA1 is primed with git's blob header for `size` bytes."""
    if algorithm == GIT_SHA1:
        return hashlib.sha1(b"blob %d\0" % size)
    return hashlib.new(algorithm)


def _read_digest(fd: int, size: int, algorithm: str) -> bytes:
    h = new_hash(algorithm, size)
    if size <= WHOLE_READ_LIMIT:
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, max(size + 1, 65536) if not chunks else CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
        h.update(b"".join(chunks) if len(chunks) != 1 else chunks[0])
        return h.digest()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while True:
        n = os.readv(fd, [buf])
        if not n:
            break
        h.update(view[:n])
    return h.digest()


def read_regular(path: str | os.PathLike[str], limit: int | None = None) -> bytes | None:
    """A regular file's bytes (at most `limit`), never through a symlink; None for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with open(fd, "rb", buffering=0, closefd=False) as fh:  # unbuffered: a header read reads the header
            return fh.read() if limit is None else fh.read(limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def cached_state(path: str, algorithm: str, cache: StatCache) -> FileState | None:
    """The cached digest when lstat says the file is unchanged; one syscall, no open."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    digest = cache.get(path, StatKey.of(st), algorithm)
    if digest is None:
        return None
    return FileState(digest=digest, size=st.st_size, nlink=st.st_nlink)


def hash_file(path: str, algorithm: str = "sha256", cache: StatCache | None = None) -> FileState:
    """Hash one path as it is on disk; a symlink or a non-regular file is reported, never followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return FileState(missing=True)
        if exc.errno == errno.ELOOP:
            try:
                return FileState(symlink=os.readlink(path))
            except OSError:
                return FileState(symlink="?")
        return FileState(error=exc.strerror or str(exc))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return FileState(not_regular=True, nlink=st.st_nlink)
        key = StatKey.of(st)
        if cache is not None:
            cached = cache.get(path, key, algorithm)
            if cached is not None:
                return FileState(digest=cached, size=st.st_size, nlink=st.st_nlink)
        started = time.time_ns()
        digest = f"{algorithm}={encode_digest(_read_digest(fd, st.st_size, algorithm))}"
        # A file changed within a timestamp tick of being read could change again without its ctime
        # moving; such a digest is not kept (git calls these entries racy).
        if cache is not None and max(st.st_mtime_ns, st.st_ctime_ns) < started - racy_window_ns(st.st_ctime_ns):
            cache.put(path, key, digest)
        return FileState(digest=digest, size=st.st_size, nlink=st.st_nlink)
    except OSError as exc:
        return FileState(error=exc.strerror or str(exc))
    finally:
        os.close(fd)


def hash_many(
    jobs: Iterable[tuple[str, str]],
    *,
    cache: StatCache | None = None,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[tuple[str, str], FileState]:
    """Hash (path, algorithm) jobs on `workers` threads (hashlib releases the GIL while hashing).

    Results are keyed by the job itself: one file listed under two algorithms is checked under both.
    """
    results: dict[tuple[str, str], FileState] = {}
    todo: list[tuple[str, str]] = []
    if cache is None:
        todo = list(jobs)
    else:
        # Cache hits cost one lstat each: cheaper on this thread than handed to workers that share the GIL.
        for job in jobs:
            hit = cached_state(job[0], job[1], cache)
            if hit is None:
                todo.append(job)
            else:
                results[job] = hit
        if progress is not None and results:
            progress(len(results))
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    shared: Iterator[tuple[str, str]] = iter(todo)
    lock = threading.Lock()

    def work() -> None:
        done = 0
        while True:
            with lock:
                job = next(shared, None)
            if job is None:
                break
            results[job] = hash_file(job[0], job[1], cache)
            done += 1
            if progress is not None and done == 64:
                progress(done)
                done = 0
        if progress is not None and done:
            progress(done)

    if workers == 1:
        work()
        return results
    threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
