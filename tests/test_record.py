"""RECORD parsing: every bad line is collected, good lines still parse."""

from __future__ import annotations

import pytest

from patchaudit.errors import InvalidRecord, PatchAuditError
from patchaudit.record import parse_hash, parse_record

EMPTY = "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"


def test_entries_and_problems_are_both_kept() -> None:
    record = parse_record(
        (
            f"pkg/a.py,sha256={EMPTY},0\n"
            "pkg-1.0.dist-info/RECORD,,\n"
            f'"pkg/with,comma.py",sha256={EMPTY},0\n'
            "pkg/b.py,sha256=short,1\n"
            "pkg/c.py\n"
        ).encode()
        + b"\xff\xfe\n"
        + b"pkg/d.py,sha256="
        + EMPTY.encode()
        + b",-1\n"
    )
    assert [e.path for e in record.entries] == ["pkg/a.py", "pkg-1.0.dist-info/RECORD", "pkg/with,comma.py"]
    assert record.entries[1].hash is None
    assert [p.line for p in record.problems] == [4, 5, 6, 7]
    with pytest.raises(InvalidRecord) as info:
        record.raise_for_problems("pkg-1.0.dist-info/RECORD")
    assert isinstance(info.value, PatchAuditError)
    assert "4 malformed line(s)" in str(info.value)


def test_hash_strength() -> None:
    assert parse_hash(f"sha256={EMPTY}").trusted
    assert not parse_hash("md5=1B2M2Y8AsgTpgAmY7PhCfg").trusted
    with pytest.raises(ValueError, match="has 16 bytes, sha256 has 32"):
        parse_hash("sha256=1B2M2Y8AsgTpgAmY7PhCfg")
