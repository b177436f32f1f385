"""Hashing and the stat cache on a real filesystem."""

from __future__ import annotations

import os
import time
from pathlib import Path

from wheels import record_hash

from patchaudit.hashing import StatCache, StatKey, hash_file, hash_many


def test_hash_matches_record_encoding_for_small_and_large_files(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.write_bytes(b"x" * 10)
    big = tmp_path / "big"
    big.write_bytes(os.urandom(9 << 20))
    states = hash_many([(str(small), "sha256"), (str(big), "sha256")], workers=2)
    assert states[str(small), "sha256"].digest == record_hash(small.read_bytes())
    assert states[str(big), "sha256"].digest == record_hash(big.read_bytes())


def test_fifo_and_symlink_are_not_followed(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert hash_file(str(fifo)).not_regular
    link = tmp_path / "link"
    link.symlink_to("/etc/passwd")
    state = hash_file(str(link))
    assert state.symlink == "/etc/passwd" and state.digest is None


def test_stat_cache_is_invalidated_by_an_edit_that_restores_size_and_mtime(tmp_path: Path) -> None:
    target = tmp_path / "mod.py"
    target.write_bytes(b"value = 1\n")
    cache_file = tmp_path / "cache.json"
    cache = StatCache(cache_file)
    first = hash_file(str(target), cache=cache)
    cache.save()
    st = os.stat(target)
    target.write_bytes(b"value = 2\n")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # what `touch -r` does
    assert os.stat(target).st_size == st.st_size and os.stat(target).st_mtime_ns == st.st_mtime_ns
    again = hash_file(str(target), cache=StatCache(cache_file))
    assert again.digest == record_hash(b"value = 2\n") != first.digest


def test_stat_cache_hit_when_nothing_changed(tmp_path: Path) -> None:
    target = tmp_path / "mod.py"
    target.write_bytes(b"value = 1\n")
    time.sleep(0.1)  # older than a timestamp tick, or the entry is racy and not kept
    cache_file = tmp_path / "cache.json"
    cache = StatCache(cache_file)
    hash_file(str(target), cache=cache)
    cache.save()
    warm = StatCache(cache_file)
    key = StatKey.of(os.stat(target))
    assert warm.get(str(target), key, "sha256") == record_hash(b"value = 1\n")


def test_corrupt_cache_file_is_ignored(tmp_path: Path) -> None:
    cache_file = tmp_path / "cache.json"
    cache_file.write_bytes(b"\x00not json")
    target = tmp_path / "f"
    target.write_bytes(b"a")
    assert hash_file(str(target), cache=StatCache(cache_file)).digest == record_hash(b"a")


def test_a_file_written_just_now_is_not_cached(tmp_path: Path) -> None:
    """Written in the same timestamp tick as it is read: a later edit might not move its ctime."""
    target = tmp_path / "mod.py"
    target.write_bytes(b"value = 1\n")
    cache = StatCache(tmp_path / "cache.json")
    hash_file(str(target), cache=cache)
    key = StatKey.of(os.stat(target))
    assert cache.get(str(target), key, "sha256") is None
