"""Worker processes for a list of tasks known before they start.

The tasks, and `shared` (what every task reads: RECORD bytes, the stat cache), are in memory when the
workers fork, so nothing is sent to them but task numbers, and no thread of this process hands work
over: such a thread needs the GIL, which this process holds while it parses RECORDs, and the workers
wait with it. Each worker takes the next task number from a pipe filled before it started (a read of
one 4-byte number from a pipe is atomic, so the workers share no lock, and one that dies holds none)
and sends each result back on a pipe of its own as soon as the task is done.

The workers are forked with os.fork, and send results on pipes of their own framing (a length, then a
pickle): multiprocessing, its connections (tempfile, socket, lzma) and its process objects cost the
main process 10-20 ms before the first worker started. Without fork (threads are running), the
workers are spawned by multiprocessing and `shared` is pickled to each.

Every worker any pool starts is counted in patchaudit.parallel.children, so a signal kills them all.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import signal
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from patchaudit.errors import PatchAuditError
from patchaudit.parallel.children import live, signals_held

if TYPE_CHECKING:  # multiprocessing is imported only when workers start: revert and diff hash a few files
    import multiprocessing.context
    import select
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

_NUMBER = 4  # bytes per task number in the pipe


def can_fork() -> bool:
    """Whether workers may be forked: fork exists and this process runs one thread (a thread's locks
    would be copied held)."""
    import sys

    threading = sys.modules.get("threading")  # not imported: no thread was ever started
    return hasattr(os, "fork") and (threading is None or threading.active_count() == 1)


def pool_context() -> multiprocessing.context.BaseContext:
    """Where workers cannot be forked (can_fork): forkserver, else spawn."""
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


class WorkerDied(PatchAuditError):
    """A worker process ended before sending back every task it took (killed, out of memory)."""


def _fill(tasks: int) -> int | None:
    """A pipe holding the numbers 0..tasks-1, write end closed: its read end, to hand to the workers.

    None when the pipe cannot hold them all (more than pipe-max-size, or a user over the kernel's
    pipe-user-pages-soft): the tasks then run in this process.
    """
    read_fd, write_fd = os.pipe()
    try:
        data = b"".join(i.to_bytes(_NUMBER, "little") for i in range(tasks))
        grow = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux; elsewhere a pipe holds what it holds
        if len(data) > 65536 and grow is not None:
            with contextlib.suppress(OSError):
                fcntl.fcntl(write_fd, grow, len(data))
        os.set_blocking(write_fd, False)
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view) :]
    except OSError:  # full (EAGAIN): no room for every task number
        os.close(read_fd)
        return None
    finally:
        os.close(write_fd)
    return read_fd


def _serve(
    fn: Callable[[Any, Any], Any],
    tasks: Sequence[Any],
    shared: Any,
    numbers: Connection | int,
    out: Connection | _Writer,
    inherited: Sequence[int],
) -> None:
    """A worker: run tasks until the pipe of task numbers is empty; one message per task."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a stop (systemd's, the parent's) ends it at once
    # forked while the parent held both back (children.signals_held): without this a stop would wait
    # in the mask until every task is done
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))
    for fd in inherited:  # read ends of the result pipes, forked with it: held here, a write to a
        os.close(fd)  # pipe whose parent is gone would block for ever instead of failing
    fd = numbers if isinstance(numbers, int) else numbers.fileno()
    while raw := os.read(fd, _NUMBER):
        index = int.from_bytes(raw, "little")
        try:
            message = (index, True, fn(shared, tasks[index]))
        except Exception as exc:  # sent back to be raised in the parent
            message = (index, False, _portable(exc))
        out.send(message)
    out.close()


_LENGTH = 8  # bytes of a message's length, before its pickle


class _Writer:
    """A forked worker's end of its result pipe: each message its length, then its pickle."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def send(self, message: object) -> None:
        import pickle

        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(len(data).to_bytes(_LENGTH, "little") + data)
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        os.close(self._fd)


class _Reader:
    """This process's end of a forked worker's result pipe (what _Writer sends, one message a call)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def fileno(self) -> int:
        if self._fd is None:
            raise OSError("closed")
        return self._fd

    def _exactly(self, size: int) -> bytes:
        parts: list[bytes] = []
        while size:
            part = os.read(self.fileno(), size)
            if not part:  # the worker is gone (half-way through a message, or between two)
                raise EOFError
            parts.append(part)
            size -= len(part)
        return b"".join(parts)

    def recv(self) -> Any:
        import pickle

        size = int.from_bytes(self._exactly(_LENGTH), "little")
        return pickle.loads(self._exactly(size))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _Forked:
    """A worker forked here (os.fork), with the part of multiprocessing's Process that Pool uses."""

    def __init__(self, pid: int) -> None:
        self.pid: int | None = pid
        self.exitcode: int | None = None

    def _reap(self, flags: int) -> None:
        if self.exitcode is not None or self.pid is None:
            return
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped already (children.stop_all, after a signal)
            self.exitcode = -signal.SIGKILL
            return
        if pid:
            self.exitcode = os.waitstatus_to_exitcode(status)

    def is_alive(self) -> bool:
        self._reap(os.WNOHANG)
        return self.exitcode is None

    def terminate(self) -> None:
        if self.pid is not None and self.exitcode is None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGTERM)

    def join(self) -> None:
        self._reap(0)


def _fork_worker(
    fn: Callable[[Any, Any], Any], tasks: Sequence[Any], shared: Any, numbers: int, inherited: Sequence[int]
) -> tuple[_Reader, _Forked]:
    """One worker forked (and counted in children.live before a signal can come); its result pipe."""
    read_fd, write_fd = os.pipe()
    try:
        with signals_held():
            pid = os.fork()
            if pid == 0:  # the worker: it never returns into the caller's frames
                code = 0
                try:
                    os.close(read_fd)
                    _serve(fn, tasks, shared, numbers, _Writer(write_fd), inherited)
                except BaseException:
                    code = 1
                finally:
                    os._exit(code)
            live[pid] = None
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # the worker's copy is the only one left: its exit is this pipe's end
    return _Reader(read_fd), _Forked(pid)


def _portable(exc: Exception) -> Exception:
    """`exc` if it survives the trip back to the parent, else a RuntimeError that says what it was."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


class Pool(Generic[S, T, R]):
    """`fn(shared, task)` for every task, on up to `workers` processes; `result(i)` waits for task i.

    With one worker, or one task, nothing forks: each task runs here when its result is asked for.
    Use as a context manager: leaving it stops the workers, finished or not.
    """

    def __init__(
        self,
        fn: Callable[[S, T], R],
        tasks: Sequence[T],
        shared: S,
        *,
        workers: int,
        progress: Callable[[int, Any], None] | None = None,
    ) -> None:
        """`progress(i, value)` is called here as task i's result (or exception) comes in."""
        self._fn = fn
        self._progress = progress
        self._tasks = tasks
        self._shared = shared
        self._results: dict[int, tuple[bool, Any]] = {}
        self._pipes: dict[Connection | _Reader, BaseProcess | _Forked] = {}
        self._poll: select.poll | None = None
        self._died: int | None = None
        self.workers = min(workers, len(tasks))
        if self.workers <= 1 or not self._start():
            self.workers = 1

    def _start(self) -> bool:
        read_fd = _fill(len(self._tasks))
        if read_fd is None:
            return False
        try:
            if can_fork():
                self._fork(read_fd)
            else:
                self._spawn(read_fd)
        except BaseException:
            self.close()
            raise
        finally:
            os.close(read_fd)
        return True

    def _fork(self, numbers: int) -> None:
        import sys

        for stream in (sys.stdout, sys.stderr):  # nothing buffered here is written twice by a worker
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        gc.freeze()  # what this process holds now is out of every worker's garbage collection
        try:
            for _ in range(self.workers):
                inherited = [r.fileno() for r in self._pipes]
                reader, process = _fork_worker(self._fn, self._tasks, self._shared, numbers, inherited)
                self._pipes[reader] = process
        finally:
            gc.unfreeze()

    def _spawn(self, numbers_fd: int) -> None:
        from multiprocessing import Pipe
        from multiprocessing.connection import Connection

        context = pool_context()
        numbers = Connection(os.dup(numbers_fd), writable=False)
        try:
            for _ in range(self.workers):
                reader, writer = Pipe(duplex=False)
                process = context.Process(  # type: ignore[attr-defined]
                    target=_serve, args=(self._fn, self._tasks, self._shared, numbers, writer, []), daemon=True
                )
                self._pipes[reader] = process
                try:
                    with signals_held():
                        process.start()
                        live[process.pid] = process
                finally:
                    writer.close()  # the worker's copy is the only one left: its exit is this pipe's end
        finally:
            numbers.close()

    def _waiting(self, timeout: float | None) -> list[Connection | _Reader]:
        """The result pipes with something to read (or closed), after up to `timeout` seconds.

        One poll object for the pool's life: asked between every two RECORDs, a selector made and
        filled for each call cost the main process more than the results it took in."""
        import select

        if self._poll is None:
            self._poll = select.poll()
            for reader in self._pipes:
                self._poll.register(reader.fileno(), select.POLLIN)
        by_fd = {reader.fileno(): reader for reader in self._pipes}
        events = self._poll.poll(None if timeout is None else timeout * 1000)
        return [by_fd[fd] for fd, _ in events if fd in by_fd]

    def _receive(self, timeout: float | None) -> bool:
        """Take in one message from each worker that has sent one; wait up to `timeout` for the first
        (None: until something comes). Whether anything came (a worker's end counts)."""
        waiting = self._waiting(timeout)
        for reader in waiting:
            try:
                index, ok, value = reader.recv()
                self._results[index] = (ok, value)
                if self._progress is not None:
                    self._progress(index, value)
            except (EOFError, OSError):  # the worker is gone (OSError: gone half-way through a message)
                process = self._pipes.pop(reader)
                if self._poll is not None:
                    self._poll.unregister(reader.fileno())
                reader.close()
                process.join()
                if process.pid is not None:
                    live.pop(process.pid, None)
                if process.exitcode:
                    self._died = process.exitcode
        return bool(waiting)

    def ready(self) -> None:
        """Take in what has come back so far, without waiting (call it between pieces of other work)."""
        while self._pipes and self._receive(0):
            pass

    def result(self, index: int) -> R:
        """Task `index`'s result (its exception is raised here); waits for it."""
        while index not in self._results:
            if not self._pipes:
                if self.workers == 1:
                    try:
                        self._results[index] = (True, self._fn(self._shared, self._tasks[index]))
                    except Exception as exc:
                        self._results[index] = (False, exc)
                    if self._progress is not None:
                        self._progress(index, self._results[index][1])
                    break
                note = self._exit_note()
                raise WorkerDied(f"a worker process ended before finishing its work{note}; nothing is reported")
            self._receive(None)
        ok, value = self._results.pop(index)
        if not ok:
            raise value
        return value

    def _exit_note(self) -> str:
        code = self._died
        if code is None:
            return ""
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = "a signal"
            return f" (killed by signal {-code}, {name})"
        return f" (exit status {code})"

    def close(self) -> None:
        """Stop the workers (those still running are terminated) and close the pipes."""
        for reader, process in list(self._pipes.items()):
            if process.pid is not None:  # started
                if process.is_alive():
                    process.terminate()
                process.join()
                live.pop(process.pid, None)
            reader.close()
        self._pipes.clear()

    def __enter__(self) -> Pool[S, T, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
