"""The gate as a service's own user, against a venv root installed; root never trusts another user's caches.

Runs patchaudit as a real unprivileged user (`nobody`, else one made with useradd) through subprocess
`user=`; real venvs, real pip. Needs root (CI runs as root); skipped otherwise.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from tests.wheels import build_wheel, pip_install, site_packages

PATCHAUDIT = Path(sys.executable).parent / "patchaudit"
ROOT = Path(__file__).resolve().parent.parent
TEST_USER = "patchaudit-test"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a command as another user")


def _skip(why: str) -> NoReturn:
    """In CI (CI set) a missing prerequisite fails the run instead of skipping the test."""
    if os.environ.get("CI"):
        pytest.fail(f"{why}, and CI must run this test")
    pytest.skip(why)


def _service_user() -> pwd.struct_passwd:
    for name in ("nobody", TEST_USER):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            pass
    if shutil.which("useradd"):
        subprocess.run(["useradd", "--system", "--no-create-home", TEST_USER], check=False, capture_output=True)
        try:
            return pwd.getpwnam(TEST_USER)
        except KeyError:
            pass
    _skip("no unprivileged user (neither 'nobody' nor one useradd could make)")


def _others_may_run(exe: str) -> bool:
    """Whether any user may execute `exe` (each directory above it searchable by others)."""
    real = os.path.realpath(exe)
    if not os.stat(real).st_mode & stat.S_IXOTH:
        return False
    parent = os.path.dirname(real)
    while parent != "/":
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(parent)
    return True


def _base_python() -> str:
    """An interpreter of the test runner's version that every user may run: the runner's, or the system's."""
    if _others_may_run(sys.executable):
        return sys.executable
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        if os.path.exists(candidate) and _others_may_run(candidate):
            return candidate
    _skip(f"no {version} that an unprivileged user may run")


def _user_command() -> tuple[list[str], dict[str, str]]:
    """How the service user runs this checkout's patchaudit: the console script, or the same code and
    dependencies under a system interpreter of the same version when the runner's own is private."""
    if _others_may_run(sys.executable):
        return [str(PATCHAUDIT)], {}
    pythonpath = f"{ROOT}:{sysconfig.get_paths()['purelib']}"
    return [_base_python(), "-m", "patchaudit"], {"PYTHONPATH": pythonpath}


@pytest.fixture
def user() -> pwd.struct_passwd:
    return _service_user()


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory every user may traverse (pytest's own tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="pa-service-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _own(path: Path, user: pwd.struct_passwd) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(path):
        os.chown(dirpath, user.pw_uid, user.pw_gid)
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), user.pw_uid, user.pw_gid, follow_symlinks=False)
    return path


def _venv(where: Path, wheels: Path) -> Path:
    """A root-owned venv with one small distribution, installed by real pip."""
    subprocess.run([_base_python(), "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    wheel = build_wheel(
        wheels, "demo", "1.0", {"demo/__init__.py": b"VALUE = 1\n", "demo/core.py": b"def f():\n    return 1\n"}
    )
    pip_install(python, wheel)
    return python


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path below `root` with its size and mtime: what a write would change."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (st.st_size, st.st_mtime_ns)
    return out


def _as(user: pwd.struct_passwd, *args: str | os.PathLike[str], **env: str) -> subprocess.CompletedProcess[str]:
    command, extra = _user_command()
    environ = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **extra, **env}
    return subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        env=environ,
        cwd="/",
    )


def _summary(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stdout.splitlines() if " gate: " in line]
    assert lines, result.stdout + result.stderr
    return lines[-1]


def test_gate_as_service_user_is_warm_in_its_own_cache_and_writes_nothing_into_roots_venv(
    shared: Path, user: pwd.struct_passwd
) -> None:
    python = _venv(shared / "venv", shared / "wheels")
    home = _own(shared / "home", user)
    before = _tree(shared / "venv")

    first = _as(user, "gate", "--python", python, HOME=str(home))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "cached" not in _summary(first)
    assert "uncached" not in first.stderr
    second = _as(user, "gate", "--python", python, HOME=str(home))
    assert second.returncode == 0, second.stdout + second.stderr
    assert " cached;" in _summary(second), second.stdout + second.stderr

    assert _tree(shared / "venv") == before, "the gate wrote into root's environment"
    (keyed,) = (home / ".cache" / "patchaudit").iterdir()
    assert keyed.name.startswith("venv-")
    names = {p.name for p in keyed.iterdir()}
    assert "stat-v1.json" in names and any(n.startswith("gate-") for n in names)

    # the warm verdict is still the truth: a patch by root fails the next start
    (site_packages(python) / "demo" / "core.py").write_text("def f():\n    return 2\n")
    third = _as(user, "gate", "--python", python, HOME=str(home))
    assert third.returncode == 1, third.stdout + third.stderr
    assert "modified" in third.stdout and "cached" not in _summary(third)


def test_state_directory_of_the_unit_holds_the_cache(shared: Path, user: pwd.struct_passwd) -> None:
    python = _venv(shared / "venv", shared / "wheels")
    state = _own(shared / "lib" / "patchaudit" / "vllm", user)
    other = _own(shared / "lib" / "vllm", user)
    environ = {"HOME": "/nonexistent", "STATE_DIRECTORY": f"{other}:{state}"}

    assert _as(user, "gate", "--python", python, **environ).returncode == 0
    second = _as(user, "gate", "--python", python, **environ)
    assert second.returncode == 0 and " cached;" in _summary(second), second.stdout + second.stderr
    (keyed,) = state.iterdir()
    assert [p.is_file() for p in keyed.glob("gate-*.json")] == [True]
    assert list(other.iterdir()) == []
    assert not (shared / "venv" / ".patchaudit").exists()


def test_no_writable_cache_location_is_said_once_and_is_no_failure(shared: Path, user: pwd.struct_passwd) -> None:
    python = _venv(shared / "venv", shared / "wheels")
    before = _tree(shared / "venv")
    for _ in range(2):
        result = _as(user, "gate", "--python", python, HOME="/nonexistent")
        assert result.returncode == 0, result.stdout + result.stderr
        notes = [line for line in result.stderr.splitlines() if "running uncached" in line]
        assert len(notes) == 1, result.stderr
        assert f"uid {user.pw_uid}" in notes[0]
        assert "cached" not in _summary(result)
    assert _tree(shared / "venv") == before


def test_cache_dir_keeps_each_environment_apart(shared: Path, user: pwd.struct_passwd) -> None:
    one = _venv(shared / "one", shared / "wheels")
    two = _venv(shared / "two", shared / "wheels2")
    cache = _own(shared / "cache", user)
    for python in (one, two, one, two):
        result = _as(user, "gate", "--python", python, "--cache-dir", cache, HOME="/nonexistent")
        assert result.returncode == 0, result.stdout + result.stderr
    assert " cached;" in _summary(result)
    keyed = sorted(p.name for p in cache.iterdir())
    assert len(keyed) == 2 and keyed[0].startswith("one-") and keyed[1].startswith("two-")
    # the policy key does the same
    policy = shared / "policy.toml"
    policy.write_text(f'python = "{two}"\ncache_dir = "{cache}"\n')
    result = _as(user, "gate", "--policy", policy, HOME="/nonexistent")
    assert result.returncode == 0 and "running uncached" not in result.stderr, result.stderr
    assert sorted(p.name for p in cache.iterdir()) == keyed


def test_root_never_reads_a_cache_another_user_can_write(shared: Path, user: pwd.struct_passwd, tmp_path: Path) -> None:
    """A verdict cache planted in a user-owned venv would make root's gate pass whatever it says."""
    python = _venv(shared / "venv", shared / "wheels")
    _own(shared / "venv", user)
    # a valid verdict cache, as the venv's owner could make (or forge) one
    elsewhere = tmp_path / "elsewhere"
    args = ("gate", "--python", str(python))
    made = subprocess.run([PATCHAUDIT, *args, "--cache-dir", elsewhere], capture_output=True, text=True)
    assert made.returncode == 0, made.stdout + made.stderr
    (keyed,) = elsewhere.iterdir()
    planted = shared / "venv" / ".patchaudit" / "cache"
    planted.mkdir(parents=True)
    (verdicts,) = keyed.glob("gate-*.json")
    shutil.copy(verdicts, planted / verdicts.name)
    _own(shared / "venv", user)

    environ = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "root-cache")}
    first = subprocess.run([PATCHAUDIT, *args], capture_output=True, text=True, env=environ)
    assert first.returncode == 0, first.stdout + first.stderr
    assert " cached;" not in _summary(first), "root's gate took a verdict from a cache another user can write"
    second = subprocess.run([PATCHAUDIT, *args], capture_output=True, text=True, env=environ)
    assert " cached;" in _summary(second)
    assert (tmp_path / "root-cache" / "patchaudit").is_dir()
    assert sorted(p.name for p in planted.iterdir()) == [verdicts.name], "root wrote into the user's venv"


@pytest.mark.parametrize("owner", ["user", "root"])
def test_root_refuses_to_revert_through_a_symlinked_site_packages(
    shared: Path, user: pwd.struct_passwd, owner: str
) -> None:
    wheels = shared / "wheels"
    python = _venv(shared / "venv", wheels)
    site = site_packages(python)
    outside = shared / "outside"
    shutil.move(site, outside)
    site.symlink_to(outside)
    (outside / "demo" / "core.py").write_text("def f():\n    return 2\n")
    if owner == "user":
        _own(shared / "venv", user)
        _own(outside, user)
    before = _tree(outside), _tree(shared / "venv")

    refused = subprocess.run(
        [PATCHAUDIT, "revert", "demo", "--python", python, "--wheelhouse", wheels, "-y"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    errors = [line for line in refused.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"{site} is a symlink" in errors[0] and "as root" in errors[0], refused.stderr
    assert (_tree(outside), _tree(shared / "venv")) == before, "a refused revert wrote something"
    if owner == "root":
        return

    # the venv's owner may still revert their own environment, as before
    done = _as(user, "revert", "demo", "--python", python, "--wheelhouse", wheels, "-y", HOME="/nonexistent")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (outside / "demo" / "core.py").read_text() == "def f():\n    return 1\n"
