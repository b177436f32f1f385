"""RECORD parsing: every bad line is collected, good lines still parse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, patchaudit, pip_install, site_packages

from patchaudit.pristine.zipwheel import open_local
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


def test_hash_strength() -> None:
    assert parse_hash(f"sha256={EMPTY}").trusted
    assert not parse_hash("md5=1B2M2Y8AsgTpgAmY7PhCfg").trusted
    with pytest.raises(ValueError, match="has 16 bytes, sha256 has 32"):
        parse_hash("sha256=1B2M2Y8AsgTpgAmY7PhCfg")


def test_a_quoted_newline_is_part_of_the_path_and_lines_count_from_the_row_start() -> None:
    record = parse_record(
        f'pkg/a.py,sha256={EMPTY},0\r\n"pkg/odd\nname.txt",sha256={EMPTY},0\r\n\r\npkg/b.py,sha256=x\n'.encode()
    )
    assert [e.path for e in record.entries] == ["pkg/a.py", "pkg/odd\nname.txt"]
    assert [(p.line, p.path) for p in record.problems] == [(5, "pkg/b.py")]


def test_a_wheel_whose_record_quotes_a_newline_has_no_phantom_entry(tmp_path: Path) -> None:
    odd = "demo/odd\nname.txt"
    wheel = build_wheel(tmp_path / "wheels", "demo", "1.0", {"demo/__init__.py": b"", odd: b"one\n"})
    opened = open_local(wheel, "test")
    try:
        record = opened.record()
        assert record.problems == ()
        assert [e.path for e in record.entries if e.path.startswith("demo/")] == ["demo/__init__.py", odd]
        assert opened.read(odd, limit=100) == b"one\n"
    finally:
        opened.close()


def test_revert_keeps_a_record_row_with_a_quoted_newline(tmp_path: Path) -> None:
    odd = "demo/odd\nname.txt"
    files = {"demo/__init__.py": b"", odd: b"one\n", "demo/mod.py": b"VALUE = 1\n"}
    wheel = build_wheel(tmp_path / "wheels", "demo", "1.0", files)
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    site = site_packages(python)
    record_file = site / "demo-1.0.dist-info" / "RECORD"
    assert '"demo/odd\nname.txt"' in record_file.read_text()  # pip writes the row quoted, over two lines
    rows_before = {e.path for e in parse_record(record_file.read_bytes()).entries}
    assert odd in rows_before

    def scan() -> dict:
        proc = patchaudit("scan", "demo", "--python", python, "--format", "json")
        assert proc.returncode in (0, 1), proc.stderr
        return json.loads(proc.stdout)["distributions"][0]

    fresh = scan()
    assert fresh["status"] != "unverifiable"
    (site / "demo/mod.py").write_bytes(b"VALUE = 2\n")
    assert [d["path"] for d in scan()["drift"]] == sorted([*(d["path"] for d in fresh["drift"]), "demo/mod.py"])

    proc = patchaudit("revert", "demo", "demo/mod.py", "--python", python, "--wheelhouse", wheel.parent, "--yes")
    assert proc.returncode == 0, proc.stderr
    assert (site / "demo/mod.py").read_bytes() == b"VALUE = 1\n"
    after = parse_record(record_file.read_bytes())
    assert after.problems == () and {e.path for e in after.entries} == rows_before
    assert scan() == fresh
