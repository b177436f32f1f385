"""Errata: a wheel whose RECORD is wrong, installed by uv's hard links, with no copy of the wheel left.

Real wheels, real uv and pip, the real CLI. The erratum is written by `patchaudit errata` from the wheel,
then the wheel is deleted: the scan must still tell the wheel's own mistake from a patch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from pristine_helpers import patchaudit
from wheels import build_wheel, make_venv, pip_install, record_hash, site_packages

from patchaudit.check import errata

CODEC = bytes(range(256)) * 32  # 8 KiB "extension module"; its RECORD line claims the first KiB


def run(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return patchaudit(*map(str, args), env={"UV_CACHE_DIR": os.devnull, **(env or {})})


def scan(python: Path, *args: str | os.PathLike[str], env: dict[str, str] | None = None) -> tuple[int, dict]:
    proc = run("scan", "--python", python, "--format", "json", "vcodec", *args, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def codec_entry(report: dict) -> dict:
    (dist,) = report["distributions"]
    found = {d["path"]: d for d in dist["drift"]}
    return found["vcodec/_codec.so"]


def wrong_wheel(where: Path) -> Path:
    return build_wheel(
        where,
        "vcodec",
        "2.0.4",
        {"vcodec/__init__.py": "", "vcodec/_codec.so": CODEC},
        record_hashes={"vcodec/_codec.so": record_hash(CODEC[:1024])},
        record_sizes={"vcodec/_codec.so": 1024},
    )


def uv_hardlinked(root: Path, wheel: Path) -> tuple[Path, dict[str, str]]:
    from uv import find_uv_bin

    uv = find_uv_bin()
    venv = root / "uv-venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True)
    cache = root / "uv-cache"
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "--cache-dir", str(cache)]
        + ["--no-index", "--link-mode", "hardlink", str(wheel)],
        check=True,
        env={**os.environ, "UV_NO_CONFIG": "1"},
    )
    return venv / "bin" / "python", {"UV_CACHE_DIR": str(cache)}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Path, str]:
    """(python, env naming uv's cache, errata file, wheel filename); the wheel itself is gone."""
    root = tmp_path_factory.mktemp("errata")
    wheel = wrong_wheel(root / "build")
    python, env = uv_hardlinked(root, wheel)
    proc = run("errata", wheel)
    assert proc.returncode == 0, proc.stderr
    table = root / "errata.toml"
    table.write_text(proc.stdout)
    name = wheel.name
    wheel.unlink()
    return python, env, table, name


def test_errata_reads_what_a_wheel_record_is_wrong_about(installed: tuple[Path, dict[str, str], Path, str]) -> None:
    _python, _env, table, name = installed
    data = tomllib.loads(table.read_text())
    (entry,) = data["wheel"]
    assert entry["filename"] == name
    (member,) = entry["members"]
    assert member["path"] == "vcodec/_codec.so"
    assert member["record"] == record_hash(CODEC[:1024])
    assert member["actual"] == record_hash(CODEC)


def test_a_wheel_with_a_right_record_has_no_errata(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, "tidy", "1.0", {"tidy/__init__.py": "x = 1\n"})
    proc = run("errata", wheel)
    assert proc.returncode == 0
    assert proc.stdout == ""
    assert "agrees with every member" in proc.stderr


def test_an_erratum_tells_a_wrong_record_from_a_patch_without_the_wheel(
    installed: tuple[Path, dict[str, str], Path, str],
) -> None:
    python, env, table, name = installed
    assert (site_packages(python) / "vcodec" / "_codec.so").stat().st_nlink == 2, "uv hard-linked it"
    code, report = scan(python, env=env)
    assert code == 1, "uv's cache is the installed inode: no evidence, so it stays modified"
    assert codec_entry(report)["state"] == "modified"

    code, report = scan(python, "--errata", table, env=env)
    assert code == 0, report
    entry = codec_entry(report)
    assert (entry["state"], entry["wheel"]) == ("record-mismatch", name)
    assert "erratum" in entry["note"]
    assert report["summary"]["modified"] == 0 and report["summary"]["record-mismatch"] == 1


def test_the_gate_reads_the_policy_errata(installed: tuple[Path, dict[str, str], Path, str], tmp_path: Path) -> None:
    python, env, table, _name = installed
    proc = run("gate", "--python", python, "--no-cache", env=env)
    assert proc.returncode == 1, proc.stdout
    mine = tmp_path / "errata.toml"
    mine.write_text("# nothing known yet\n")
    policy = tmp_path / "policy.toml"
    policy.write_text(f'python = "{python}"\nerrata = ["{mine}"]\n')
    cached = ("--policy", policy, "--cache-dir", tmp_path / "cache")
    assert run("gate", *cached, env=env).returncode == 1
    # the errata file is part of what the cached verdict depends on: editing it re-runs the audit
    mine.write_text(table.read_text())
    proc = run("gate", *cached, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cached" not in proc.stdout
    proc = run("gate", *cached, env=env)
    assert proc.returncode == 0 and "cached" in proc.stdout, proc.stdout


def test_an_erratum_never_covers_other_bytes_or_another_record_line(tmp_path: Path) -> None:
    wheel = wrong_wheel(tmp_path / "build")
    proc = run("errata", wheel)
    table = tmp_path / "errata.toml"
    table.write_text(proc.stdout)
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)  # pip copies: this venv's files are its own
    wheel.unlink()
    target = site_packages(python) / "vcodec" / "_codec.so"

    target.write_bytes(CODEC[:-1] + b"\x00")  # a patch
    code, report = scan(python, "--errata", table)
    assert code == 1
    assert codec_entry(report)["state"] == "modified"

    target.write_bytes(CODEC)
    code, report = scan(python, "--errata", table)
    assert code == 0, report

    # RECORD rewritten to claim other bytes: the erratum is about the wheel's line, not this one
    record = next(site_packages(python).glob("vcodec-2.0.4.dist-info")) / "RECORD"
    record.write_text(record.read_text().replace(record_hash(CODEC[:1024]), record_hash(CODEC[:2048])))
    code, report = scan(python, "--errata", table)
    assert code == 1
    assert codec_entry(report)["state"] == "modified"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[[wheel]\n", "not TOML"),
        ('[[wheel]]\nfilename = "nope.whl"\nsha256 = "' + "0" * 64 + '"\nmembers = []\n', "Invalid wheel filename"),
        (
            '[[wheel]]\nfilename = "a-1.0-py3-none-any.whl"\nsha256 = "' + "0" * 64 + '"\n'
            'members = [{path = "../../../etc/passwd", record = "sha256='
            + "A" * 43
            + '", actual = "sha256='
            + "B" * 43
            + '"}]\n',
            "not a relative path inside site-packages",
        ),
        (
            '[[wheel]]\nfilename = "a-1.0-py3-none-any.whl"\nsha256 = "' + "0" * 64 + '"\n'
            'members = [{path = "a.py", record = "md5=' + "A" * 22 + '", actual = "md5=' + "B" * 22 + '"}]\n',
            "one strong algorithm",
        ),
    ],
)
def test_a_bad_errata_file_is_one_line_and_exit_2(
    installed: tuple[Path, dict[str, str], Path, str], tmp_path: Path, text: str, says: str
) -> None:
    python, env, _table, _name = installed
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    proc = run("scan", "--python", python, "vcodec", "--errata", bad, env=env)
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr


def test_the_shipped_errata_parse_and_name_their_wheels() -> None:
    from packaging.utils import parse_wheel_filename

    known = errata.load()
    assert len(known) > 0
    data = tomllib.loads(errata.SHIPPED.read_text())
    for table in data["wheel"]:
        name, version, _build, _tags = parse_wheel_filename(table["filename"])
        for member in table["members"]:
            hit = known.explain(name, str(version), member["path"], member["record"], member["actual"])
            assert hit is not None and hit.wheel == table["filename"]
            assert known.explain(name, str(version), member["path"], member["record"], member["record"]) is None


def test_the_shipped_errata_can_be_listed() -> None:
    from wheels import patchaudit

    from patchaudit.check import errata

    proc = patchaudit("errata", "--list")
    assert proc.returncode == 0, proc.stderr
    wheels = {e.wheel for e in errata.shipped()}
    assert wheels and all(name in proc.stdout for name in wheels)
    assert proc.stdout.splitlines()[-1].startswith(f"{len(wheels)} wheels in ")
    bare = patchaudit("errata")
    assert bare.returncode == 2 and "--list" in bare.stderr
