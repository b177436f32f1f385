"""Every child process patchaudit starts, and how a signal ends them all.

Each child any part of patchaudit starts (a worker of a pool, a forked stat process, a short command)
is counted here while it lives, and `on_signals()` (called once by the command line) makes SIGINT and
SIGTERM kill and reap them all at once, then unwind with `Interrupted`; a second signal, or an
unwinding that takes too long, ends the process at once. `atexit` kills what is left, so an exit never
waits on a child.

Kept light (no threading, no typing): the command line imports it before anything else, and the warm
gate pays for every module on its path.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import signal
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterator, Sequence
    from multiprocessing.process import BaseProcess

UNWIND_SECONDS = 0.8  # after a signal, the process ends by then, unwound or not
REAP_SECONDS = 0.15  # at the end, how long a killed child may take to die before the process exits anyway
live: dict[int, BaseProcess | None] = {}  # pid -> every child process started here and not yet reaped
_STOPS = (signal.SIGINT, signal.SIGTERM)
_stopping: list[int] = []  # the signal being handled, once one came


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM came: the workers are gone; unwind (journals and locks close) and exit `code`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.code = 128 + signum  # as shells report a process a signal ended: 130, 143


def stopping() -> int | None:
    """The exit code a signal asked for, once one came (even when another exception unwinds first)."""
    return 128 + _stopping[0] if _stopping else None


def stop_all() -> None:
    """Kill every child still running and reap it (SIGKILL: nothing of theirs needs to finish)."""
    every = list(live.items())
    for pid, _process in every:  # all killed first: they die together, not one after the other
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid, process in every:
        with contextlib.suppress(Exception):
            if process is None:
                os.waitpid(pid, 0)
            else:
                process.join()  # a killed process ends at once; the caller's deadline bounds the rest
        live.pop(pid, None)


def _own_children() -> set[int]:
    """Every child process of this process, of any thread, counted here or not (a library's helper)."""
    found: set[int] = set()
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/children", "rb") as f:
                found.update(int(pid) for pid in f.read().split())
        except (OSError, ValueError):
            continue
    return found


def reap_all(wait: float = REAP_SECONDS) -> None:
    """Before the process ends: kill every child it still has and reap it, waiting up to `wait` seconds
    for the killed to die. None is left to the machine's init, which in a container may never reap it."""
    pending = set(live) | _own_children()
    live.clear()
    for pid in pending:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = None
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child left
            return
        except InterruptedError:
            continue
        if pid:
            pending.discard(pid)
            continue
        import time

        now = time.monotonic()
        deadline = deadline or now + wait
        if now >= deadline:
            return
        for pid in _own_children() - pending:  # one started while this ran
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            pending.add(pid)
        time.sleep(0.002)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait while a child is started and counted: none can fall in between."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def fork() -> int:
    """`os.fork()` for a child of one's own making: it is counted (a signal kills it), until
    `reaped(pid)` says it was waited for."""
    with signals_held():
        pid = os.fork()
        if pid:
            live[pid] = None
    return pid


def reaped(pid: int) -> None:
    live.pop(pid, None)


def run_child(argv: Sequence[str], *, timeout: float) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a short-lived command, counted while it runs (a signal kills
    it). Raises OSError, subprocess.TimeoutExpired (the child killed and reaped)."""
    return finish_child(start_child(argv), timeout=timeout)


def start_child(argv: Sequence[str]) -> subprocess.Popen[str]:
    """A short-lived command started and counted (a signal kills it); finish_child() waits for it.
    Raises OSError."""
    import subprocess

    with signals_held():
        child = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        live[child.pid] = None
    return child


def finish_child(child: subprocess.Popen[str], *, timeout: float) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a child start_child() started, waited for up to `timeout`
    seconds. Raises subprocess.TimeoutExpired (the child killed and reaped)."""
    try:
        out, err = child.communicate(timeout=timeout)
    except BaseException:
        child.kill()
        child.communicate()
        raise
    finally:
        live.pop(child.pid, None)
    return child.returncode, out, err


def _handle(signum: int, _frame: object) -> None:
    if _stopping:  # a second signal: no more unwinding
        reap_all()
        os._exit(128 + _stopping[0])
    _stopping.append(signum)
    code = 128 + signum
    import threading  # only once a signal came: the warm gate never starts a thread

    timer = threading.Timer(UNWIND_SECONDS, _deadline, (code,))
    timer.daemon = True
    timer.start()
    stop_all()
    raise Interrupted(signum)


def _deadline(code: int) -> None:
    """The unwinding took too long: the children are killed (again: one may have been mid-start) and
    the process ends."""
    reap_all()
    os._exit(code)


def on_signals() -> None:
    """SIGINT and SIGTERM end the run: children killed and reaped, `Interrupted` raised (main thread only)."""
    for signum in _STOPS:
        signal.signal(signum, _handle)
    sys.unraisablehook = functools.partial(_unraisable, sys.unraisablehook)


def _unraisable(report: Callable[[sys.UnraisableHookArgs], object], unraisable: sys.UnraisableHookArgs) -> None:
    """`Interrupted` raised where Python cannot raise it (the signal came while an import lock's
    weakref callback or a finaliser ran) is lost there, not an error to print: the children are
    already stopped, and the deadline ends the process within UNWIND_SECONDS with the signal's code."""
    if not isinstance(unraisable.exc_value, Interrupted):
        report(unraisable)


def _in_child() -> None:
    """A forked child owns none of its parent's children and keeps none of its handlers."""
    live.clear()
    _stopping.clear()
    for signum in _STOPS:
        if signal.getsignal(signum) is _handle:
            signal.signal(signum, signal.SIG_DFL)


os.register_at_fork(after_in_child=_in_child)
atexit.register(stop_all)
