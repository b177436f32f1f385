"""The stat cache: digests keyed by path and (size, mtime_ns, ctime_ns, inode, device), kept between runs,
and how long after a file's newest timestamp a digest of it may not be kept (the racy window)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from patchaudit.fs.atomic import atomic_write
from patchaudit.fs.safefs import UnreadableFile, read_json

STAT_CACHE_VERSION = 1
RACY_NS = 50_000_000  # above the kernel's coarse timestamp tick
RACY_COARSE_NS = 2_000_000_000  # filesystems with whole-second timestamps


def racy_window_ns(timestamp_ns: int) -> int:
    """How long after `timestamp_ns` a file may change again without its ctime moving (git's racy entries).

    A digest or verdict taken within this window of a file's newest timestamp is not kept.
    """
    return RACY_COARSE_NS if timestamp_ns % 1_000_000_000 == 0 else RACY_NS


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
        if path is not None:
            self._load(path)

    def _load(self, path: Path) -> None:
        try:
            raw = read_json(path)
        except (UnreadableFile, ValueError):
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

    def has(self, path: str) -> bool:
        return path in self._entries

    def get(self, path: str, key: StatKey, algorithm: str) -> str | None:
        hit = self._entries.get(path)
        if hit is not None and hit[0] == key and hit[1].startswith(algorithm + "="):
            return hit[1]
        return None

    def put(self, path: str, key: StatKey, digest: str) -> None:
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
