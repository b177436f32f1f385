"""As root, patchaudit never executes an interpreter that another user could have replaced or edited.

The interpreter of each venv here is a planted script that leaves a marker file when run, then runs the
real interpreter. Owned by root, it is asked (the marker shows it ran); handed to another user, or
left where another user can swap it, it is never run, and its layout is read from the tree instead.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, patchaudit, pip_install, site_packages

from patchaudit.target import environment, trust

pytestmark = pytest.mark.skipif(not trust.running_as_root(), reason="the root probe rules apply to root only")


def _nobody() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user on this machine")
    return entry.pw_uid, entry.pw_gid


def _planted_venv(where: Path, marker: Path) -> Path:
    """A venv with a real wheel in it whose bin/python runs `touch marker` before the real interpreter."""
    python = make_venv(where / "venv")
    pip_install(python, build_wheel(where / "w", "planted", "1.0", {"planted.py": "P = 1\n"}))
    real = os.path.realpath(python)
    python.unlink()
    python.write_text(f'#!/bin/bash\ntouch {marker}\nexec -a "$0" {real} "$@"\n')
    python.chmod(0o755)
    return python


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)


def test_root_owned_venv_is_asked(tmp_path: Path) -> None:
    marker = tmp_path / "interpreter-ran"
    python = _planted_venv(tmp_path, marker)
    env = environment.from_python(python)
    assert marker.exists(), "a venv that only root can change is probed by running its interpreter"
    assert env.not_executed is None
    assert env.site_dirs == (site_packages(python),)


def test_venv_owned_by_another_user_is_never_run_and_still_opens(tmp_path: Path) -> None:
    marker = tmp_path / "interpreter-ran"
    python = _planted_venv(tmp_path, marker)
    uid, gid = _nobody()
    _chown_tree(tmp_path / "venv", uid, gid)

    env = environment.from_python(python)
    assert not marker.exists(), "root ran an interpreter that another user owns"
    assert env.not_executed is not None and f"uid {uid}" in env.not_executed
    assert env.prefix == tmp_path / "venv"
    assert env.site_dirs == (site_packages(python),)
    assert env.scheme["scripts"] == tmp_path / "venv" / "bin"

    proc = patchaudit("scan", "--python", python, "--no-hazards", "--format", "json")
    assert not marker.exists()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "was not run as root" in proc.stderr
    (dist,) = json.loads(proc.stdout)["distributions"]
    assert (dist["name"], dist["status"]) == ("planted", "clean")

    gate = patchaudit("gate", "--python", python, "--no-cache")
    assert not marker.exists()
    assert gate.returncode == 0, gate.stdout + gate.stderr


def test_world_writable_pyvenv_cfg_is_never_run(tmp_path: Path) -> None:
    """pyvenv.cfg's `home` decides where the interpreter loads its stdlib from: whoever writes it runs code."""
    marker = tmp_path / "interpreter-ran"
    python = _planted_venv(tmp_path, marker)
    cfg = tmp_path / "venv" / "pyvenv.cfg"
    cfg.chmod(0o666)
    env = environment.from_python(python)
    assert not marker.exists()
    assert env.not_executed == f"{cfg} is writable by every user"
    assert env.site_dirs == (site_packages(python),)


def test_scan_runs_a_root_owned_interpreter_once_and_reports_as_before(tmp_path: Path) -> None:
    """`scan` starts the interpreter's probe before it loads its own modules (after the same owner checks
    as from_python): the interpreter runs once, and the report is the one a probe run later gives."""
    runs = tmp_path / "runs"
    python = _planted_venv(tmp_path, tmp_path / "interpreter-ran")
    python.write_text(python.read_text().replace("touch ", "echo ran >> "))
    proc = patchaudit("scan", "--python", python, "--no-hazards", "--format", "json")
    (tmp_path / "interpreter-ran").rename(runs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert runs.read_text() == "ran\n", "the interpreter was asked more than once"
    report = json.loads(proc.stdout)
    assert report["target"]["paths"] == [str(site_packages(python))]
    assert [(d["name"], d["status"]) for d in report["distributions"]] == [("planted", "clean")]


def test_venv_in_a_directory_anyone_may_rename_into_is_never_run(tmp_path: Path) -> None:
    open_dir = tmp_path / "shared"
    open_dir.mkdir()
    marker = tmp_path / "interpreter-ran"
    python = _planted_venv(open_dir, marker)
    open_dir.chmod(0o777)
    env = environment.from_python(python)
    assert not marker.exists()
    assert env.not_executed == f"{open_dir} is writable by every user"


def test_root_owned_venv_in_a_sticky_directory_is_asked(tmp_path: Path) -> None:
    """In a sticky directory (like /tmp) nobody else may replace root's entries."""
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    marker = tmp_path / "interpreter-ran"
    python = _planted_venv(sticky, marker)
    sticky.chmod(0o777 | stat.S_ISVTX)
    environment.from_python(python)
    assert marker.exists()


def test_interpreter_linked_to_a_file_another_user_owns_is_never_run(tmp_path: Path) -> None:
    """The link's own directory is root's, but its target is not."""
    marker = tmp_path / "interpreter-ran"
    python = _planted_venv(tmp_path, marker)
    elsewhere = tmp_path / "users" / "python"
    elsewhere.parent.mkdir()
    shutil.move(python, elsewhere)
    python.symlink_to(elsewhere)
    uid, gid = _nobody()
    os.chown(elsewhere, uid, gid)
    env = environment.from_python(python)
    assert not marker.exists()
    assert env.not_executed == f"{elsewhere} is owned by uid {uid}"
    assert env.site_dirs == (site_packages(python),)


def test_foreign_writer_names_the_first_weak_link(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file"
    target.parent.mkdir(parents=True)
    target.write_text("x")
    assert trust.foreign_writer([target]) is None
    (tmp_path / "a").chmod(0o775)
    assert trust.foreign_writer([target]) == f"{tmp_path / 'a'} is writable by group 0"
    (tmp_path / "a").chmod(0o755)
    target.chmod(0o646)
    assert trust.foreign_writer([target]) == f"{target} is writable by every user"


def test_tree_layout_of_a_prefix_without_stdlib_is_a_clear_error(tmp_path: Path) -> None:
    from patchaudit.errors import EnvironmentNotFound

    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    with pytest.raises(EnvironmentNotFound, match="without running it"):
        environment.from_python(fake, tree_only=True)
