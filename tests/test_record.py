"""RECORD parsing: every bad line is collected, good lines still parse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, patchaudit, pip_install, site_packages

from patchaudit.pristine.zipwheel import open_local
from patchaudit.target.record import parse_hash, parse_record

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


SIMPLE_CASES = {
    "plain": f"pkg/a.py,sha256={EMPTY},0\npkg-1.0.dist-info/RECORD,,\n",
    "quoted comma and doubled quote": f'"pkg/E=1,N=2.json",sha256={EMPTY},12\n"pkg/say ""hi"".py",,\n',
    "crlf": f"pkg/a.py,sha256={EMPTY},0\r\npkg/b.py,,\r\n",
    "no final newline": f"pkg/a.py,sha256={EMPTY},0\npkg/b.py,sha256={EMPTY},7",
    "size without hash": "pkg/a.py,,5\n",
    "climbing path": f"../../../bin/tool,sha256={EMPTY},3\n",
}
# Files the one-regex reading must hand to csv: it would read them otherwise, or they hold a problem.
OTHER_CASES = {
    "blank line": f"pkg/a.py,sha256={EMPTY},0\n\npkg/b.py,,\n",
    "four fields": f"pkg/a.py,extra,sha256={EMPTY},0\n",
    "a line of four fields whose tail looks like a whole line": f"x,pkg/a.py,sha256={EMPTY},0\n",
    "quoted newline": f'"pkg/a\nb.py",sha256={EMPTY},0\n',
    "lone carriage return": f"pkg/a\r.py,sha256={EMPTY},0\n",
    "sha512": "pkg/a.py,sha512=" + "A" * 86 + ",0\n",
    "short digest": "pkg/a.py,sha256=short,1\n",
    "negative size": f"pkg/a.py,sha256={EMPTY},-1\n",
    "unicode digit size": f"pkg/a.py,sha256={EMPTY},\u0661\n",
    "NUL in path": f"pkg/a\x00.py,sha256={EMPTY},0\n",
    "quote inside an unquoted path": f'pkg/a"b.py,sha256={EMPTY},0\n',
    "text after a closing quote": f'"pkg/a.py"x,sha256={EMPTY},0\n',
}


@pytest.mark.parametrize("name", sorted(SIMPLE_CASES) + sorted(OTHER_CASES))
def test_the_one_regex_reading_equals_csv_or_hands_over(name: str) -> None:
    """Nearly every RECORD is read with one regular expression; it must give csv's entries exactly,
    or leave the file to csv (which then also reports its problems)."""
    from patchaudit.target import record

    text = SIMPLE_CASES.get(name) or OTHER_CASES[name]
    by_csv = record._parse_csv(text, False)
    fast = record._parse_simple(text)
    if name in SIMPLE_CASES:
        assert fast is not None and by_csv.problems == ()
        assert fast == by_csv
    else:
        assert fast is None
    assert parse_record(text.encode()) == by_csv


def test_real_records_read_the_same_both_ways(tmp_path: Path) -> None:
    """Every RECORD pip wrote for this test run's own venv (click, rich, libcst, ...) and for a wheel
    with awkward names in a new one."""
    import sysconfig

    from patchaudit.target import record

    wheel = build_wheel(
        tmp_path / "w",
        "awkward",
        "1.0",
        {"awkward/__init__.py": "", "awkward/E=1,N=2.json": "{}", 'awkward/q"uote.txt': "x", "awkward/é.py": ""},
    )
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    records = sorted(site_packages(python).glob("*.dist-info/RECORD"))
    records += sorted(Path(sysconfig.get_paths()["purelib"]).glob("*.dist-info/RECORD"))
    assert len(records) > 20
    for path in records:
        text = path.read_text("utf-8")
        fast = record._parse_simple(text)
        assert fast is not None, path
        assert fast == record._parse_csv(text, False), path
