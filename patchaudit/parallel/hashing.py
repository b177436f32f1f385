"""Hash many files on every CPU without following symlinks (warm runs answer from patchaudit.parallel.statcache)."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import time
from base64 import urlsafe_b64encode
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from patchaudit.errors import UnsafePath
from patchaudit.fs.beneath import FILE_FLAGS, DirCache
from patchaudit.parallel.cpus import available_cpus
from patchaudit.parallel.statcache import StatCache, StatKey, racy_window_ns

CHUNK = 1 << 20  # read buffer: a file below this size is read with one system call
POOL_MIN_FILES = 512  # fewer files than this are hashed in this process
BATCH_FILES = 256  # files per worker task: few enough tasks to cost nothing, enough to balance
BATCH_BYTES = 64 << 20
SIZE_FIRST = 16 << 20  # a file over this size whose size is not its RECORD's is not hashed (hash_raw)
BIG_FILE = 4 << 20  # files at least this big (by their RECORD size) are started first
# Git's blob id: sha1 over "blob <size>\0" and the content (the Hub names small files' blobs by it).
GIT_SHA1 = "git-sha1"


def encode_digest(digest: bytes) -> str:
    """A digest as RECORD writes it: urlsafe base64 without padding."""
    return urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


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
    size_differs: bool = False  # a regular file whose size is not the one expected: not read, not hashed


def new_hash(algorithm: str, size: int) -> hashlib._Hash:
    """A hash object for `algorithm`; GIT_SHA1 is primed with git's blob header for `size` bytes."""
    if algorithm == GIT_SHA1:
        return hashlib.sha1(b"blob %d\0" % size)
    return hashlib.new(algorithm)


_CONSTRUCTORS: dict[str, Callable[[], Any]] = {
    "sha256": hashlib.sha256,
    "sha384": hashlib.sha384,
    "sha512": hashlib.sha512,
}


def _hasher(algorithm: str, size: int) -> Any:
    make = _CONSTRUCTORS.get(algorithm)
    return make() if make is not None else new_hash(algorithm, size)


def _read_digest(fd: int, size: int, algorithm: str, buf: bytearray) -> bytes:
    """Digest of what `fd` holds, read into `buf`: one read for a file smaller than the buffer."""
    h = _hasher(algorithm, size)
    view = memoryview(buf)
    if size < len(buf):
        n = os.readv(fd, [view[: size + 1]])
        h.update(view[:n])
        if n == size:  # as long as fstat said, and not one byte more: the whole file
            return h.digest()
    while n := os.readv(fd, [buf]):
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
        if limit is not None:  # one read(2), as an unbuffered file object's read(limit) makes, without one
            return os.read(fd, limit)
        with open(fd, "rb", buffering=0, closefd=False) as fh:
            return fh.read()
    except OSError:
        return None
    finally:
        os.close(fd)


# What hashing one path found, in the compact form worker processes send back: (digest, size, nlink,
# stat key when the digest may be cached, else None), or a FileState for anything but a regular file.
Raw = tuple[str, int, int, "tuple[int, int, int, int, int] | None"] | FileState


def _open_below(path: str, dirs: DirCache) -> int | FileState:
    """The file at `path` opened by its directory's descriptor (beneath.DirCache), or what is there."""
    try:
        dir_fd, name = dirs.open_file(path)
        return os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except UnsafePath as exc:
        return FileState(error=str(exc))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return FileState(missing=True)
        if exc.errno == errno.ELOOP:
            try:
                return FileState(symlink=os.readlink(name, dir_fd=dir_fd))
            except OSError:
                return FileState(symlink="?")
        return FileState(error=exc.strerror or str(exc))


def hash_raw(
    path: str, algorithm: str, buf: bytearray, started: int, size: int | None = None, dirs: DirCache | None = None
) -> Raw:
    """Hash one path as it is on disk (open, fstat, read, close); `started`: a time before the read.

    The file is opened by its directory's descriptor from `dirs` (one made for this file when None): a
    directory on the way swapped for a link out of a directory others can write is an error, not read.

    With `size` (a RECORD's), a regular file of another size and over SIZE_FIRST bytes is not read: it
    cannot have the digest expected, and a file grown to 64 GiB would take minutes to hash for a verdict
    its size already gives. Smaller files are hashed still: a baseline approves a patch by its digest, and
    the packaging facts (overwritten, record-mismatch) are told by it, for the price of a few milliseconds.
    """
    if dirs is None:
        with DirCache(limit=4) as own:
            opened = _open_below(path, own)
    else:  # a worker's: no context to enter and leave per file
        opened = _open_below(path, dirs)
    if isinstance(opened, FileState):
        return opened
    fd = opened
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return FileState(not_regular=True, nlink=st.st_nlink)
        if size is not None and st.st_size != size and st.st_size > SIZE_FIRST:
            return FileState(size=st.st_size, nlink=st.st_nlink, size_differs=True)
        digest = f"{algorithm}={encode_digest(_read_digest(fd, st.st_size, algorithm, buf))}"
    except OSError as exc:
        return FileState(error=exc.strerror or str(exc))
    finally:
        os.close(fd)
    # A file changed within a timestamp tick of being read could change again without its ctime
    # moving; such a digest is not kept (git calls these entries racy).
    key = None
    if max(st.st_mtime_ns, st.st_ctime_ns) < started - racy_window_ns(st.st_ctime_ns):
        key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    return digest, st.st_size, st.st_nlink, key


def to_state(path: str, raw: Raw, cache: StatCache | None) -> FileState:
    if isinstance(raw, FileState):
        return raw
    digest, size, nlink, key = raw
    if cache is not None and key is not None:
        cache.put(path, StatKey(*key), digest)
    return FileState(digest=digest, size=size, nlink=nlink)


def cached_state(path: str, algorithm: str, cache: StatCache) -> FileState | None:
    """The cached digest when lstat says the file is unchanged; one syscall, no open."""
    if not cache.has(path):
        return None
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
    if cache is not None:
        hit = cached_state(path, algorithm, cache)
        if hit is not None:
            return hit
    return to_state(path, hash_raw(path, algorithm, bytearray(CHUNK), time.time_ns()), cache)


Job = tuple[str, str]  # (path, algorithm)
KeyTuple = tuple[int, int, int, int, int]


def buffer() -> bytearray:
    """This process's read buffer (one per worker process, made on first use)."""
    global _buffer
    if _buffer is None:
        _buffer = bytearray(CHUNK)
    return _buffer


_buffer: bytearray | None = None


def hash_batch(_: object, batch: Sequence[Job]) -> list[tuple[int, Raw]]:
    """(index, what was found) for each job of a batch, hashed in this process (a worker's task)."""
    buf = buffer()
    started = time.time_ns()  # before every read of the batch: a stricter racy check, never a looser one
    with DirCache() as dirs:
        return [(i, hash_raw(path, algorithm, buf, started, dirs=dirs)) for i, (path, algorithm) in enumerate(batch)]


def pool_size(workers: int | None, files: int) -> int:
    """Worker processes for hashing `files` files: `workers`, else the CPUs this process may use; one
    (this process) for fewer than POOL_MIN_FILES."""
    return 1 if files < POOL_MIN_FILES else max(1, workers or available_cpus())


def batches(jobs: Sequence[Job], sizes: Mapping[str, int] | None = None) -> list[list[Job]]:
    """Jobs cut into worker tasks: big files first, largest first, so that none is left for the end;
    then the rest in their order (neighbours in one directory), BATCH_FILES or BATCH_BYTES at a time."""
    sizes = sizes or {}
    big = sorted((j for j in jobs if sizes.get(j[0], 0) >= BIG_FILE), key=lambda j: -sizes[j[0]])
    out: list[list[Job]] = []
    current: list[Job] = []
    weight = 0
    for job in big:
        current.append(job)
        weight += sizes[job[0]]
        if weight >= BATCH_BYTES:
            out.append(current)
            current, weight = [], 0
    if current:
        out.append(current)
        current, weight = [], 0
    for job in jobs:
        size = sizes.get(job[0], 0)
        if size >= BIG_FILE:
            continue
        current.append(job)
        weight += size
        if len(current) >= BATCH_FILES or weight >= BATCH_BYTES:
            out.append(current)
            current, weight = [], 0
    if current:
        out.append(current)
    return out


def hash_many(
    jobs: Iterable[tuple[str, str]],
    *,
    cache: StatCache | None = None,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
    sizes: Mapping[str, int] | None = None,
) -> dict[tuple[str, str], FileState]:
    """Hash (path, algorithm) jobs on `workers` CPUs (default: those this process may use).

    Many files go to worker processes in batches (patchaudit.parallel.workers); a few, or one worker, stay in
    this process. `sizes` (path -> expected size) lets the
    biggest files start first. Results are keyed by the job itself: one file listed under two
    algorithms is checked under both.
    """
    from patchaudit.parallel.workers import Pool

    results: dict[tuple[str, str], FileState] = {}
    todo: list[Job] = []
    for job in jobs:
        hit = cached_state(job[0], job[1], cache) if cache is not None else None
        if hit is None:
            todo.append(job)
        else:
            results[job] = hit
    if progress is not None and results:
        progress(len(results))
    limit = pool_size(workers, len(todo))
    cut = batches(todo, sizes) if limit > 1 else [todo]
    tick = (lambda index, _value: progress(len(cut[index]))) if progress is not None else None
    with Pool(hash_batch, cut, None, workers=limit, progress=tick) as pool:
        for index, batch in enumerate(cut):
            for i, raw in pool.result(index):
                path, algorithm = batch[i]
                results[path, algorithm] = to_state(path, raw, cache)
    return results
