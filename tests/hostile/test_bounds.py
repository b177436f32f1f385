"""Time and memory bounds, measured: each hostile class ends with patchaudit's exit code, within its wall
time and under 100 MiB of peak RSS (the gate runs beside a server that the OOM killer might pick instead),
and each malformed file a user hands over is one line and exit 2."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, pip_install, site_packages

PATCHAUDIT = str(Path(sys.executable).parent / "patchaudit")
RSS_LIMIT_MIB = 100
# Runs the command after it, then prints the peak RSS of what it waited for (KiB) as stderr's last line.
_MEASURE = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.run(sys.argv[1:]).returncode\n"
    "sys.stderr.write('\\nmaxrss=%d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(rc)\n"
)


@dataclass
class Run:
    rc: int
    wall: float
    rss_mib: float
    stdout: str
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout + self.stderr


def measured(what: str, *args: str | Path, timeout: float = 30) -> Run:
    """patchaudit run as a user runs it: exit code, wall time, peak RSS (one table row, seen with -s)."""
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >= 0
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, PATCHAUDIT, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )
    wall = time.monotonic() - started
    stderr, _, rss = proc.stderr.rpartition("\nmaxrss=")
    run = Run(proc.returncode, wall, int(rss) / 1024, proc.stdout, stderr.strip())
    print(f"\nHOSTILE | {what} | exit {run.rc} | {run.wall:.2f} s | {run.rss_mib:.0f} MiB")
    assert "Traceback" not in run.text and "internal error" not in run.text, run.text
    assert run.rss_mib < RSS_LIMIT_MIB, run
    return run


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("bounds")
    files = {"demo/__init__.py": "VALUE = 1\n", "demo/big.py": "# a module\n" * 100}
    python = make_venv(base / "venv")
    pip_install(python, build_wheel(base / "dist", "demo", "1.0", files))
    return base / "venv"


@pytest.fixture
def venv(template: Path, tmp_path: Path) -> Path:
    """A fresh copy of a venv holding one real wheel, to be made hostile."""
    shutil.copytree(template, tmp_path / "venv", symlinks=True)
    return tmp_path / "venv"


def _dist_info(venv: Path) -> Path:
    return site_packages(venv / "bin" / "python") / "demo-1.0.dist-info"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["/dev/zero", "FIFO"])
def test_a_gate_over_a_record_that_never_ends_stays_small_and_fails_closed(venv: Path, kind: str) -> None:
    record = _dist_info(venv) / "RECORD"
    record.unlink()
    if kind == "FIFO":
        os.mkfifo(record)
    else:
        record.symlink_to("/dev/zero")
    run = measured(f"RECORD as {kind} (gate)", "gate", "--python", venv / "bin" / "python", "--no-cache")
    assert run.rc == 1 and "unverifiable" in run.stdout, run
    assert run.wall < 15


@pytest.mark.timeout(60)
def test_a_64_gib_sparse_listed_file_costs_neither_time_nor_memory(venv: Path) -> None:
    python = venv / "bin" / "python"
    clean = measured("clean venv (gate)", "gate", "--python", python, "--no-cache")
    assert clean.rc == 0, clean
    big = site_packages(python) / "demo" / "big.py"
    with big.open("r+b") as fh:
        fh.truncate(64 << 30)
    run = measured("64 GiB sparse listed file (gate)", "gate", "--python", python, "--no-cache")
    assert run.rc == 1 and "demo/big.py" in run.stdout, run
    assert run.wall < 15
    # Nothing of it is read, not even the first megabytes up to a cap: no more memory than a clean gate.
    assert run.rss_mib < clean.rss_mib + 16, (run.rss_mib, clean.rss_mib)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("what", "data"),
    [
        ("policy TOML nested 100,000 deep", b"x = " + b"[" * 100_000),
        ("policy TOML holding a 10,000-digit integer", b"fail_on = " + b"9" * 10_000),
        ("policy TOML that is not UTF-8", b"fail_on = '\xff'"),
        ("policy that is a FIFO", None),
    ],
)
def test_a_malformed_policy_is_one_line_and_exit_2(venv: Path, tmp_path: Path, what: str, data: bytes | None) -> None:
    policy = tmp_path / "policy.toml"
    if data is None:
        os.mkfifo(policy)
    else:
        policy.write_bytes(data)
    run = measured(what, "gate", "--python", venv / "bin" / "python", "--policy", policy, "--no-cache")
    assert run.rc == 2, run
    assert "policy.toml" in run.text
    assert len(run.text.strip().splitlines()) <= 2  # the error, and the gate's closing summary


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("what", "data"),
    [
        ("baseline JSON nested 200,000 deep", b"[" * 200_000),
        ("baseline JSON with a duplicate key", b'{"version": 1, "version": 1, "distributions": {}}'),
        ("baseline JSON holding a 10,000-digit integer", b'{"version": ' + b"9" * 10_000 + b"}"),
        ("baseline JSON that is not UTF-8", b'{"version": "\xff"}'),
        ("baseline that is a FIFO", None),
    ],
)
def test_a_malformed_baseline_is_one_line_and_exit_2(venv: Path, tmp_path: Path, what: str, data: bytes | None) -> None:
    baseline = tmp_path / "baseline.json"
    if data is None:
        os.mkfifo(baseline)
    else:
        baseline.write_bytes(data)
    run = measured(what, "gate", "--python", venv / "bin" / "python", "--baseline", baseline, "--no-cache")
    assert run.rc == 2, run
    assert "baseline.json" in run.text
    assert len(run.text.strip().splitlines()) <= 2


@pytest.mark.timeout(60)
def test_a_64_gib_source_behind_unchecked_hash_bytecode_is_not_read(venv: Path) -> None:
    """Python runs an unchecked-hash .pyc without looking at its source; verify compares the two, and must
    not read a source grown to 64 GiB to do it."""
    import py_compile

    python = venv / "bin" / "python"
    big = site_packages(python) / "demo" / "big.py"
    subprocess.run(
        [
            str(python),
            "-c",
            f"import py_compile; py_compile.compile({str(big)!r}, "
            "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)",
        ],
        check=True,
        timeout=30,
    )
    assert py_compile  # the mode named above is the standard library's
    clean = measured("unchecked-hash bytecode, clean (gate)", "gate", "--python", python, "--no-cache")
    with big.open("r+b") as fh:
        fh.truncate(64 << 30)
    run = measured("64 GiB source of unchecked-hash bytecode (gate)", "gate", "--python", python, "--no-cache")
    assert run.rc == 1 and "demo/big.py" in run.stdout, run
    assert run.wall < 15
    assert run.rss_mib < clean.rss_mib + 16, (run.rss_mib, clean.rss_mib)


@pytest.mark.timeout(20)
def test_an_images_dpkg_database_of_fifos_never_blocks(tmp_path: Path) -> None:
    """An image's /var/lib/dpkg/info is the image's to write: a FIFO among its lists or as a package's
    md5sums is passed over, never waited on."""
    from patchaudit.target.dpkg import Dpkg

    site = tmp_path / "usr/lib/python3/dist-packages"
    (site / "six-1.16.0.egg-info").mkdir(parents=True)
    (site / "six.py").write_text("")
    info = tmp_path / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    os.mkfifo(info / "a-blocker.list")
    (info / "python3-six.list").write_text(f"{site}\n{site}/six-1.16.0.egg-info\n{site}/six.py\n")
    os.mkfifo(info / "python3-six.md5sums")
    found = Dpkg(info).owner(site / "six-1.16.0.egg-info", site, {"six"})
    assert found is not None and found.name == "python3-six"
    assert found.files == (f"{site}/six.py",) and found.md5 == {}
