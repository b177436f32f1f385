"""safefs: reads of target files never block, never follow a final link, never pass their cap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchaudit.fs.safefs import UnreadableFile, Why, read_capped, read_capped_or_none


def test_regular_file_within_cap(tmp_path: Path) -> None:
    (tmp_path / "RECORD").write_bytes(b"a,b,c\n")
    assert read_capped(tmp_path / "RECORD", 100) == b"a,b,c\n"
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert read_capped("RECORD", 100, dir_fd=fd) == b"a,b,c\n"
    finally:
        os.close(fd)


def test_fifo_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "RECORD")
    with pytest.raises(UnreadableFile) as info:
        read_capped(tmp_path / "RECORD", 100)
    assert info.value.why is Why.NOT_REGULAR and "FIFO" in str(info.value)


def test_symlink_to_dev_zero_is_refused(tmp_path: Path) -> None:
    (tmp_path / "RECORD").symlink_to("/dev/zero")
    with pytest.raises(UnreadableFile) as info:
        read_capped(tmp_path / "RECORD", 100)
    assert info.value.why is Why.SYMLINK
    with pytest.raises(UnreadableFile) as info:
        read_capped(tmp_path / "RECORD", 100, follow=True)
    assert info.value.why is Why.NOT_REGULAR and "character device" in str(info.value)


def test_file_past_its_cap_is_refused_not_cut(tmp_path: Path) -> None:
    big = tmp_path / "big"
    with open(big, "wb") as fh:
        fh.truncate(64 << 30)  # sparse: 64 GiB by its size, nothing on disk
    with pytest.raises(UnreadableFile) as info:
        read_capped(big, 1 << 20)
    assert info.value.why is Why.TOO_LARGE


def test_missing_is_none_only_where_asked(tmp_path: Path) -> None:
    assert read_capped_or_none(tmp_path / "absent", 10) is None
    (tmp_path / "dir").mkdir()
    with pytest.raises(UnreadableFile):
        read_capped_or_none(tmp_path / "dir", 10)
