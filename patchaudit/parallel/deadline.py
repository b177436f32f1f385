"""A run's deadline: `gate --timeout` and `scan --timeout` end the run, naming what it was doing.

The deadline is a real-time interval timer in the main process. When it fires, DeadlineExceeded is
raised wherever the main process is; the worker pools close on the way out (their context managers
terminate and reap the workers), and every cache write is atomic, so a cache is as it was or as it
was about to be, never torn. A run names its phases as it passes them, for the message.
"""

from __future__ import annotations

import contextlib
import math
import signal
from collections.abc import Iterator

from patchaudit.errors import PatchAuditError

DEFAULT_GATE_TIMEOUT = 120.0  # below the drop-in's TimeoutStartSec=180, with room for a cold gate

MAX_TIMEOUT = 1e7  # about four months: anything longer is no deadline
_phase = "starting"


class DeadlineExceeded(PatchAuditError):
    """The run passed its --timeout; it stopped where it was and judged nothing."""


def phase(name: str) -> None:
    """Say what the run is doing now (for the message if the deadline passes during it)."""
    global _phase
    _phase = name


def check_timeout(seconds: float) -> float:
    """A --timeout value, or ValueError: a positive, finite number of seconds."""
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT):
        raise ValueError(f"{seconds!r} is not a number of seconds between 0 and {MAX_TIMEOUT:g}")
    return seconds


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raise DeadlineExceeded in the main thread once `seconds` have passed (None or 0: no deadline)."""
    if not seconds:
        yield
        return

    def expired(signum: int, frame: object) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        raise DeadlineExceeded(f"gave up after {seconds:g} s while {_phase}: nothing was judged")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        phase("starting")
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


__all__ = ["DEFAULT_GATE_TIMEOUT", "DeadlineExceeded", "check_timeout", "deadline", "phase"]
