"""A local user's FIFOs never hold a root run: the user (`nobody`) prepares their own venv, and runs a Python
process from it; root then runs the documented commands, each of which must answer in time."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from wheels import build_wheel, pip_install, site_packages

LIMIT = 30


def _user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI runs as root and must run this test")
        pytest.skip("needs root to play an unprivileged user")
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.fail("no user 'nobody' to play the local user")


def patchaudit(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "patchaudit"
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=LIMIT, check=False)


def as_user(user: pwd.struct_passwd, *args: str | os.PathLike[str]) -> None:
    subprocess.run(list(map(str, args)), check=True, user=user.pw_uid, group=user.pw_gid, timeout=LIMIT)


@pytest.fixture
def users_venv(tmp_path: Path) -> Iterator[tuple[Path, pwd.struct_passwd]]:
    """A venv holding a real wheel, owned by the unprivileged user, in a directory that user can reach."""
    user = _user()
    top = Path(tempfile.mkdtemp(prefix="patchaudit-user-", dir="/tmp"))
    try:
        top.chmod(0o755)
        # the system's interpreter: the user may run it (the test runner's may sit below root's home)
        base = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        subprocess.run([base, "-m", "venv", "--without-pip", str(top / "venv")], check=True)
        python = top / "venv" / "bin" / "python"
        wheel = build_wheel(tmp_path / "w", "demo", "1.0", {"demo/__init__.py": "", "demo/model.py": "x = 1\n"})
        pip_install(python, wheel)
        for path in [top / "venv", *(top / "venv").rglob("*")]:
            os.lchown(path, user.pw_uid, user.pw_gid)
        yield python, user
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.timeout(120)
def test_users_fifo_record_and_quarantine_manifest_hold_no_root_command(
    users_venv: tuple[Path, pwd.struct_passwd],
) -> None:
    python, user = users_venv
    venv = python.parent.parent
    record = site_packages(python) / "demo-1.0.dist-info" / "RECORD"
    as_user(user, "rm", record)
    as_user(user, "mkfifo", record)
    run_dir = venv / ".patchaudit" / "quarantine" / "20260101T000000Z-abcdef"
    as_user(user, "mkdir", "-p", run_dir)
    as_user(user, "mkfifo", run_dir / "manifest.json")

    gate = patchaudit("gate", "--python", python, "--no-cache")
    assert gate.returncode == 1 and "unverifiable" in gate.stdout, (gate.stdout, gate.stderr)
    scan = patchaudit("scan", "--python", python, "--no-hazards")
    assert scan.returncode == 1, scan.stderr
    listed = patchaudit("quarantine", "list", "--python", python)
    # as root, the quarantine of a tree another user owns is root's own, outside the tree: the planted
    # run is never read (test_hostile_tree lists a FIFO manifest in a root-owned tree as unreadable)
    assert listed.returncode == 0 and "20260101T000000Z-abcdef" not in listed.stdout, listed.stderr


@pytest.mark.timeout(120)
def test_a_users_process_with_fifos_in_its_environment_does_not_hold_ps(
    users_venv: tuple[Path, pwd.struct_passwd],
) -> None:
    python, user = users_venv
    venv = python.parent.parent
    site = site_packages(python)
    as_user(user, "mkfifo", site / "held.pth")
    run_dir = venv / ".patchaudit" / "quarantine" / "20260101T000000Z-abcdef"
    as_user(user, "mkdir", "-p", run_dir)
    as_user(user, "mkfifo", run_dir / "manifest.json")
    # the FIFO .pth is there before the process starts, so its interpreter would block on it: started with -S
    process = subprocess.Popen(
        [str(python), "-S", "-c", "import time; time.sleep(90)"], user=user.pw_uid, group=user.pw_gid
    )
    try:
        as_user(user, "rm", record := site / "demo-1.0.dist-info" / "RECORD")
        as_user(user, "mkfifo", record)
        proc = patchaudit("ps")
        assert proc.returncode in (0, 1), proc.stderr
        assert "Traceback" not in proc.stderr
    finally:
        process.kill()
        process.wait()
