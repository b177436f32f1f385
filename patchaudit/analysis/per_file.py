"""Caches of what is asked of the file being checked, let go when its check ends.

A rule asks the same question of a module for every statement (its short helpers, its numeric
names): an `lru_cache` of one entry answers it. Held until the next file, that entry kept the
module's whole tree alive past the end of its check, and the collector, let run between files,
walked all of it again for every file (sixteen times the objects it had to walk otherwise).
`release` empties every such cache when a file's check ends, so the tree goes at once by its
reference counts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["per_file", "release"]

F = TypeVar("F", bound=Callable[..., Any])

_CACHES: list[Any] = []


def per_file(maxsize: int = 1) -> Callable[[F], F]:
    """`functools.lru_cache(maxsize)` for a question asked of the file being checked (its tree,
    its bytes), emptied by `release`."""

    def decorate(function: F) -> F:
        cached = functools.lru_cache(maxsize=maxsize)(function)
        _CACHES.append(cached)
        return cached  # type: ignore[return-value]

    return decorate


def release() -> None:
    """Empty every per-file cache (a file's check has ended)."""
    for cached in _CACHES:
        cached.cache_clear()
