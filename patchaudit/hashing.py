"""Hash many files on every CPU without following symlinks (warm runs answer from patchaudit.statcache)."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from patchaudit.cpus import available_cpus
from patchaudit.record import encode_digest
from patchaudit.statcache import StatCache, StatKey, racy_window_ns

if TYPE_CHECKING:  # multiprocessing is imported only when a pool starts: revert and diff hash a few files
    import multiprocessing.context
    from concurrent.futures import Future, ProcessPoolExecutor

CHUNK = 1 << 20  # read buffer: a file below this size is read with one system call
POOL_MIN_FILES = 512  # fewer files than this are hashed in this process
BATCH_FILES = 256  # files per worker task: few enough tasks to cost nothing, enough to balance
BATCH_BYTES = 64 << 20
BIG_FILE = 4 << 20  # files at least this big (by their RECORD size) are started first
# Git's blob id: sha1 over "blob <size>\0" and the content (the Hub names small files' blobs by it).
GIT_SHA1 = "git-sha1"


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
        with open(fd, "rb", buffering=0, closefd=False) as fh:  # unbuffered: a header read reads the header
            return fh.read() if limit is None else fh.read(limit)
    except OSError:
        return None
    finally:
        os.close(fd)


# What hashing one path found, in the compact form worker processes send back: (digest, size, nlink,
# stat key when the digest may be cached, else None), or a FileState for anything but a regular file.
Raw = tuple[str, int, int, "tuple[int, int, int, int, int] | None"] | FileState


def _hash_path(path: str, algorithm: str, buf: bytearray, started: int) -> Raw:
    """Hash one path as it is on disk (open, fstat, read, close); `started`: a time before the read."""
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


def _to_state(path: str, raw: Raw, cache: StatCache | None) -> FileState:
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
    return _to_state(path, _hash_path(path, algorithm, bytearray(CHUNK), time.time_ns()), cache)


# A job: (path, algorithm), or (path, algorithm, the digest it should have). A job with an expected
# digest that it matches is answered by its absence: 60k clean files cost the main process nothing.
Job = tuple[str, str] | tuple[str, str, str]
KeyTuple = tuple[int, int, int, int, int]


def hash_batch(batch: Sequence[Job], keys: bool = False) -> tuple[list[tuple[int, Raw]], list[tuple[int, KeyTuple]]]:
    """Hash a batch in this process, with one buffer for all (a worker's task).

    Returns (index, what was found) for every job that has no expected digest or does not match it,
    and, when `keys`, (index, stat key) of the matching ones whose digest may be cached.
    """
    global _buffer
    if _buffer is None:
        _buffer = bytearray(CHUNK)
    started = time.time_ns()  # before every read of the batch: a stricter racy check, never a looser one
    found: list[tuple[int, Raw]] = []
    clean: list[tuple[int, KeyTuple]] = []
    for index, job in enumerate(batch):
        raw = _hash_path(job[0], job[1], _buffer, started)
        if len(job) == 3 and not isinstance(raw, FileState) and raw[0] == job[2]:
            if keys and raw[3] is not None:
                clean.append((index, raw[3]))
            continue
        found.append((index, raw))
    return found, clean


_buffer: bytearray | None = None


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


def pool_context() -> multiprocessing.context.BaseContext:
    """fork while this process has one thread (cheapest: nothing to import again); else forkserver."""
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


class Hashing:
    """Hashing under way: `result()` waits for every digest, keyed by job.

    A job that names the digest it should have and has it is left out of the result. With
    `more=True` jobs keep coming through `add()` until `close()`: hashing starts while the caller is
    still reading RECORDs.
    """

    def __init__(
        self,
        jobs: Iterable[Job] = (),
        *,
        cache: StatCache | None = None,
        workers: int | None = None,
        progress: Callable[[int], None] | None = None,
        sizes: Mapping[str, int] | None = None,
        first: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]] = (),
        more: bool = False,
    ) -> None:
        """`first`: (function, args) to run on the workers before any hashing (module-level functions,
        picklable arguments); `first_results()` gives what they returned, in order."""
        self._cache = cache
        self._progress = progress
        self._limit = max(1, workers or available_cpus())
        self.results: dict[Job, FileState] = {}
        self._todo: list[Job] = []  # not yet handed to a worker
        self._sizes: dict[str, int] = {}
        self._missed = 0  # jobs the cache could not answer
        self._first: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self._first_futures: list[Future[Any]] = []
        self._first_done: list[Any] = []  # what the first calls returned, run here when no pool started
        self._pool: ProcessPoolExecutor | None = None
        self._futures: list[tuple[list[Job], Future[tuple[list[tuple[int, Raw]], list[tuple[int, KeyTuple]]]]]] = []
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.workers = 1
        self.processes = False
        for fn, args in first:
            self.first(fn, *args)
        self.add(jobs, sizes)
        if not more:
            self.close()

    def first(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) on a worker ahead of the hashing handed in after it."""
        self._first.append((fn, args))
        if self._pool is not None:
            self._first_futures.append(self._pool.submit(fn, *args))

    def add(self, jobs: Iterable[Job], sizes: Mapping[str, int] | None = None) -> None:
        """More jobs; once there are enough for worker processes, they start on them at once."""
        cache = self._cache
        if cache is None:
            todo = list(jobs)
        else:
            # Cache hits cost one lstat each: cheaper here than handed to a worker and sent back.
            todo, hits = [], 0
            for job in jobs:
                hit = cached_state(job[0], job[1], cache)
                if hit is None:
                    todo.append(job)
                    continue
                hits += 1
                if len(job) != 3 or hit.digest != job[2]:
                    self.results[job] = hit
            if self._progress is not None and hits:
                self._progress(hits)
        self._todo.extend(todo)
        self._missed += len(todo)
        if sizes:
            self._sizes.update(sizes)
        if self._pool is None and self._limit > 1 and len(self._todo) >= POOL_MIN_FILES:
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(max_workers=self._limit, mp_context=pool_context())
            self._first_futures = [self._pool.submit(fn, *args) for fn, args in self._first]
        if self._pool is not None:
            self._submit(final=False)

    def _submit(self, *, final: bool) -> None:
        """Hand the waiting jobs to the pool in batches, biggest files first; a batch that is not
        full waits for the next jobs unless this is the last call."""
        assert self._pool is not None
        cut = batches(self._todo, self._sizes)
        self._todo = []
        if cut and not final:
            last = cut[-1]
            if len(last) < BATCH_FILES and sum(self._sizes.get(job[0], 0) for job in last) < BATCH_BYTES:
                self._todo = cut.pop()
        keys = self._cache is not None
        try:
            self._futures.extend((b, self._pool.submit(hash_batch, b, keys)) for b in cut)
        except BaseException:
            self._pool.shutdown(cancel_futures=True)
            raise

    def close(self) -> None:
        """No more jobs: hand over the rest."""
        if self._closed:
            return
        self._closed = True
        self.workers = min(self._limit, self._missed or 1)
        self.processes = self._pool is not None
        if self._pool is not None:
            self._submit(final=True)
        elif self.workers > 1:
            shared = iter(self._todo)
            lock = threading.Lock()
            self._threads = [
                threading.Thread(target=self._work, args=(shared, lock), daemon=True) for _ in range(self.workers)
            ]
            for t in self._threads:
                t.start()
            self._todo = []

    def _work(self, shared: Iterator[Job], lock: threading.Lock) -> None:
        buf = bytearray(CHUNK)
        done = 0
        while True:
            with lock:
                job = next(shared, None)
            if job is None:
                break
            state = _to_state(job[0], _hash_path(job[0], job[1], buf, time.time_ns()), self._cache)
            if len(job) != 3 or state.digest != job[2]:
                self.results[job] = state
            done += 1
            if self._progress is not None and done == 64:
                self._progress(done)
                done = 0
        if self._progress is not None and done:
            self._progress(done)

    def first_results(self, count: int | None = None) -> list[Any]:
        """What the `first` calls returned, in order; only the first `count` of them when given."""
        wanted = len(self._first) if count is None else count
        if self._first_futures:
            return [f.result() for f in self._first_futures[:wanted]]
        while len(self._first_done) < wanted:
            fn, args = self._first[len(self._first_done)]
            self._first_done.append(fn(*args))
        return self._first_done[:wanted]

    def result(self) -> dict[Job, FileState]:
        self.close()
        if self._pool is not None:
            try:
                cache = self._cache
                for batch, future in self._futures:
                    found, clean = future.result()
                    for index, raw in found:
                        job = batch[index]
                        self.results[job] = _to_state(job[0], raw, cache)
                    if cache is not None:
                        for index, key in clean:
                            job = batch[index]
                            cache.put(job[0], StatKey(*key), job[2])  # type: ignore[misc]
                    if self._progress is not None:
                        self._progress(len(batch))
            finally:
                self._pool.shutdown(cancel_futures=True)
                self._pool = None
        elif self._threads:
            for t in self._threads:
                t.join()
            self._threads = []
        elif self._todo:
            self._work(iter(self._todo), threading.Lock())
        self._todo = []
        return self.results


def hash_many(
    jobs: Iterable[tuple[str, str]],
    *,
    cache: StatCache | None = None,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
    sizes: Mapping[str, int] | None = None,
) -> dict[tuple[str, str], FileState]:
    """Hash (path, algorithm) jobs on `workers` CPUs (default: those this process may use).

    Many files go to worker processes in batches (per-file work holds the GIL: threads plateau at a
    few cores); a few, or one worker, stay in this process. `sizes` (path -> expected size) lets the
    biggest files start first. Results are keyed by the job itself: one file listed under two
    algorithms is checked under both.
    """
    states = Hashing(jobs, cache=cache, workers=workers, progress=progress, sizes=sizes).result()
    return {(job[0], job[1]): state for job, state in states.items()}
