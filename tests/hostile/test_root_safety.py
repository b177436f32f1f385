"""Root against a tree another user controls: each attack played for real, both sides.

An unprivileged user (`nobody`, else one made with useradd) prepares the tree from a forked child that
has dropped to that user; for the race, a child watches the journal directory with inotify and swaps a
directory the moment the journal appears. Root runs the real console script. Needs root; skipped
otherwise (and fails in CI, which runs as root).
"""

from __future__ import annotations

import ctypes
import json
import os
import pwd
import select
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pristine_helpers import IndexServer, build_wheel, make_venv, pip_install, record_hash, site_packages

PATCHAUDIT = Path(sys.executable).parent / "patchaudit"
TEST_USER = "patchaudit-test"
FILES = {"demo/__init__.py": b"", "demo/mod.py": b"VALUE = 1\n" * 20, "demo/tool.py": b"print('tool')\n"}

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to play both sides"),
    pytest.mark.timeout(180),  # a race helper that never sees its event gives up after 60 s
]


def _user() -> pwd.struct_passwd:
    for name in ("nobody", TEST_USER):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            pass
    subprocess.run(["useradd", "--system", "--no-create-home", TEST_USER], check=False, capture_output=True)
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        if os.environ.get("CI"):
            pytest.fail("no unprivileged user, and CI must run this test")
        pytest.skip("no unprivileged user")


def _drop(user: pwd.struct_passwd) -> None:
    os.setgroups([])
    os.setresgid(user.pw_gid, user.pw_gid, user.pw_gid)
    os.setresuid(user.pw_uid, user.pw_uid, user.pw_uid)


def as_user(user: pwd.struct_passwd, action: Callable[[], None]) -> None:
    """Run `action` in a forked child that is `user` and nothing else."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            _drop(user)
            action()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged user's preparation failed"


def chown_tree(path: Path, user: pwd.struct_passwd) -> None:
    for dirpath, dirs, files in os.walk(path):
        os.lchown(dirpath, user.pw_uid, user.pw_gid)
        for name in dirs + files:
            os.lchown(os.path.join(dirpath, name), user.pw_uid, user.pw_gid)


def run_root(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PATCHAUDIT), *map(str, args)], capture_output=True, text=True, env=env, timeout=120, check=False
    )


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory every user may reach (pytest's own tmp is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="pa-root-safety-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def root_env(base: Path) -> dict[str, str]:
    """Root's environment for the command: its own state home, no pip configuration of this machine."""
    home = base / "root-home"
    home.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PATCHAUDIT_WHEELHOUSE"}
    env.update(
        HOME=str(home),
        XDG_CONFIG_DIRS=str(home / "xdg"),
        XDG_CACHE_HOME=str(home / "cache"),
        PATCHAUDIT_STATE_HOME=str(home / "state"),
        PIP_CONFIG_FILE=str(home / "none.conf"),
    )
    return env


def _install(base: Path, name: str = "venv") -> tuple[Path, Path, Path]:
    """A root-installed venv with `demo`; the wheel moved into a wheelhouse. (python, site, wheel)"""
    built = build_wheel(base / f"build-{name}", "demo", "1.0", FILES, executable=("demo/tool.py",))
    python = make_venv(base / name)
    pip_install(python, built)
    house = base / f"wheelhouse-{name}"
    house.mkdir()
    wheel = built.rename(house / built.name)
    return python, site_packages(python), wheel


def _root_only_dir(path: Path, files: dict[str, bytes] | None = None) -> dict[str, bytes]:
    path.mkdir(mode=0o700)
    for name, data in (files or {}).items():
        (path / name).write_bytes(data)
    return _listing(path)


def _listing(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() if p.is_file() else b"<dir>" for p in path.iterdir()}


# --- 1: a read-only command writes through the user's symlink in "its" cache ---


def test_diff_never_writes_through_a_cache_link_the_user_planted(base: Path, root_env: dict[str, str]) -> None:
    user = _user()
    python, site, wheel = _install(base)
    venv = python.parent.parent
    target = base / "cron.d"
    before = _root_only_dir(target, {"existing": b"root's own\n"})
    target.chmod(0o755)
    chown_tree(venv, user)

    def prepare() -> None:
        (site / "demo/mod.py").write_bytes(b"VALUE = 2\n")
        partial = venv / ".patchaudit/cache/partial"
        partial.mkdir(parents=True)
        (partial / wheel.name).symlink_to(target)
        (venv / "pip.conf").write_text(f"[global]\nindex-url = {server.url}\n")

    with IndexServer([wheel]) as server:
        as_user(user, prepare)
        proc = run_root("diff", "demo", "--python", python, env=root_env)
        assert any("bytes=" in r for r in server.requests), proc.stdout + proc.stderr
    assert "-VALUE = 1" in proc.stdout, proc.stdout + proc.stderr  # the pristine bytes were fetched
    assert _listing(target) == before
    assert os.lstat(venv / ".patchaudit/cache/partial" / wheel.name).st_uid == user.pw_uid
    # root kept what it fetched in its own 0700 state directory
    trees = Path(root_env["PATCHAUDIT_STATE_HOME"]) / "trees"
    (kept,) = trees.iterdir()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700
    assert any((kept / "cache/partial").rglob("RECORD"))


IN_CLOSE_NOWRITE, IN_MOVED_TO, IN_CREATE = 0x10, 0x80, 0x100


def _when(
    user: pwd.struct_passwd, watched: Path, mask: int, wanted: Callable[[bytes], bool], action: Callable[[], None]
) -> tuple[int, int]:
    """A child that watches `watched` with inotify (the watch set up as root, as a 0755 directory would
    let anyone) and, as `user`, runs `action` at the first event whose name is `wanted`.
    Returns (pid, a descriptor that reads b"1" once the watch is in place)."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(ready_r)
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_CLOEXEC)
            if fd < 0 or libc.inotify_add_watch(fd, str(watched).encode(), mask) < 0:
                raise OSError(ctypes.get_errno(), "inotify")
            _drop(user)
            os.write(ready_w, b"1")
            while code and select.select([fd], [], [], 60)[0]:
                data = os.read(fd, 65536)
                while data:
                    _wd, _mask, _cookie, length = struct.unpack_from("iIII", data)
                    name = data[16 : 16 + length].rstrip(b"\0")
                    data = data[16 + length :]
                    if wanted(name):
                        action()
                        code = 0
                        break
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(ready_w)
    return pid, ready_r


# --- 2: baseline create --model as root writes its manifest through the user's link ---


def test_model_baseline_never_writes_through_the_users_state_link(base: Path, root_env: dict[str, str]) -> None:
    user = _user()
    model = base / "model"
    model.mkdir()
    elsewhere = base / "elsewhere"
    _root_only_dir(elsewhere)
    elsewhere.chmod(0o755)
    os.chown(model, user.pw_uid, user.pw_gid)

    def prepare() -> None:
        (model / "config.json").write_text('{"hidden_size": 7168}\n')
        (model / "weights.bin").write_bytes(b"\0" * 64)
        (model / ".patchaudit").symlink_to(elsewhere)

    as_user(user, prepare)
    proc = run_root("baseline", "create", "--model", model, env=root_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(elsewhere.iterdir()) == []
    (kept,) = (Path(root_env["PATCHAUDIT_STATE_HOME"]) / "trees").iterdir()
    assert (kept / "model-manifest.json").is_file()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700
    # and the model is then checked against root's manifest, not anything in the user's tree
    scan = run_root("model", "scan", model, env=root_env)
    assert scan.returncode == 0, scan.stdout + scan.stderr


def test_model_baseline_never_reads_a_config_swapped_for_a_link_after_hashing(
    base: Path, root_env: dict[str, str]
) -> None:
    user = _user()
    model = base / "model"
    model.mkdir()
    os.chown(model, user.pw_uid, user.pw_gid)
    secret = base / "shadow"
    secret.write_text("root:SECRET-HASH:19000:0:99999:7:::\n")
    secret.chmod(0o600)

    def prepare() -> None:
        (model / "config.json").write_text('{"hidden_size": 7168}\n')
        for n in range(300):  # hashed after config.json, before its text is read
            (model / f"model-{n:05d}.safetensors").write_bytes(os.urandom(4096))

    def swap() -> None:
        link = base / "stash/link"
        link.symlink_to(secret)
        os.rename(link, model / "config.json")

    as_user(user, prepare)
    (base / "stash").mkdir()
    os.chown(base / "stash", user.pw_uid, user.pw_gid)
    # the moment root has hashed config.json and closed it, the user puts a link in its place
    pid, ready = _when(user, model, IN_CLOSE_NOWRITE, lambda name: name == b"config.json", swap)
    assert os.read(ready, 1) == b"1"
    proc = run_root("baseline", "create", "--model", model, env=root_env)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the swap never happened"
    assert os.path.islink(model / "config.json")
    assert "Traceback" not in proc.stderr, proc.stderr
    state = Path(root_env["PATCHAUDIT_STATE_HOME"])
    for manifest in [*model.rglob("model-manifest.json"), *state.rglob("model-manifest.json")]:
        assert "SECRET-HASH" not in manifest.read_text(), manifest
    assert proc.returncode == 2 and "changed while it was read" in proc.stderr, proc.stdout + proc.stderr


# --- 3: revert as root through a directory swapped for a link mid-run ---


def test_revert_never_follows_a_directory_swapped_mid_run(base: Path, root_env: dict[str, str]) -> None:
    user = _user()
    files = {**FILES, "demo/sub/__init__.py": b"", "demo/sub/x.py": b"X = 1\n"}
    built = build_wheel(base / "build", "demo", "1.0", files)
    python = make_venv(base / "venv")
    pip_install(python, built)
    site = site_packages(python)
    secret = base / "secret"
    before = _root_only_dir(secret, {"victim": b"root's file\n"})
    chown_tree(site / "demo", user)  # one package directory is the user's; the venv is root's
    journal = base / "venv/.patchaudit/journal"
    journal.mkdir(parents=True)  # as an earlier run left it

    def prepare() -> None:
        (site / "demo/sub/x.py").write_bytes(b"X = 2\n")
        (site / "demo/sub/victim").write_bytes(b"root's file\n")  # an added file: revert removes it

    as_user(user, prepare)

    def swap() -> None:
        os.rename(site / "demo/sub", site / "demo/sub.real")
        os.symlink(secret, site / "demo/sub")

    journal_written = IN_CREATE | IN_MOVED_TO
    pid, ready = _when(user, journal, journal_written, lambda n: n.endswith(b".json") and not n.startswith(b"."), swap)
    assert os.read(ready, 1) == b"1"
    proc = run_root("revert", "demo", "--python", python, "--wheelhouse", built.parent, "--yes", env=root_env)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the swap never happened"
    assert os.path.islink(site / "demo/sub")
    assert _listing(secret) == before, proc.stdout + proc.stderr
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


# --- 4: undo as root hands back a setuid file ---


def test_restore_never_grants_setuid_and_quarantine_holds_no_exec_bit(base: Path, root_env: dict[str, str]) -> None:
    user = _user()
    python, site, wheel = _install(base)
    chown_tree(site / "demo", user)

    def prepare() -> None:
        tool = site / "demo/tool.py"
        tool.write_bytes(b"#!/bin/sh\nid\n")
        tool.chmod(0o4755)

    as_user(user, prepare)
    assert os.stat(site / "demo/tool.py").st_mode & stat.S_ISUID
    proc = run_root("revert", "demo", "--python", python, "--wheelhouse", wheel.parent, "--yes", env=root_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run,) = (python.parent.parent / ".patchaudit/quarantine").iterdir()
    for kept in (run / "files").rglob("*"):
        if kept.is_file():
            assert not kept.stat().st_mode & 0o7111, kept
    proc = run_root("quarantine", "restore", run.name, "--python", python, "--yes", env=root_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    st = os.stat(site / "demo/tool.py")
    assert (site / "demo/tool.py").read_bytes() == b"#!/bin/sh\nid\n"
    assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX), oct(st.st_mode)


# --- 5: a distribution whose METADATA Name is a path ---


def test_a_name_that_is_a_path_never_places_the_quarantine_outside(base: Path, root_env: dict[str, str]) -> None:
    """An editable install the user owns (its checkout and its dist-info) in root's venv: revert puts it
    back from its commit, no wheel needed, and its METADATA Name names the quarantine's subdirectory."""
    user = _user()
    project = base / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg/__init__.py").write_text("")
    (project / "pkg/a.py").write_text("A = 1\n")
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "pkg"], ["commit", "-q", "-m", "initial"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    editable = build_wheel(base / "build", "pkg", "0.1", {"__editable__.pkg-0.1.pth": f"{project}\n".encode()})
    python = make_venv(base / "venv")
    pip_install(python, editable)
    site = site_packages(python)
    (info,) = site.glob("pkg-0.1.dist-info")
    direct_url = json.dumps({"url": project.as_uri(), "dir_info": {"editable": True}}).encode()
    (info / "direct_url.json").write_bytes(direct_url)
    lines = [ln for ln in (info / "RECORD").read_text().splitlines() if "direct_url" not in ln]
    lines.append(f"{info.name}/direct_url.json,{record_hash(direct_url)},{len(direct_url)}")
    (info / "RECORD").write_text("\n".join(lines) + "\n")
    chown_tree(project, user)
    chown_tree(info, user)
    subprocess.run(["git", "config", "--global", "--add", "safe.directory", str(project)], env=root_env, check=True)
    escape = base / "escaped"
    depth = len((python.parent.parent / ".patchaudit/quarantine/RUN/files").relative_to(base).parts)

    def prepare() -> None:
        meta = info / "METADATA"
        name = "/".join([".."] * depth) + "/escaped/x"
        meta.write_text(meta.read_text().replace("Name: pkg", f"Name: {name}"))
        (project / "pkg/a.py").write_text("A = 'patched'\n")

    as_user(user, prepare)
    proc = run_root("revert", "--python", python, "--yes", "--skip-unavailable", env=root_env)
    assert not escape.exists(), proc.stdout + proc.stderr
    assert "not a distribution name" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


# --- a diff never reveals a file outside the tree through a directory the user turned into a link ---


def test_diff_never_prints_a_root_only_file_through_a_linked_directory(base: Path, root_env: dict[str, str]) -> None:
    user = _user()
    python, site, wheel = _install(base, "leaky")
    venv = python.parent.parent
    secret = base / "secret"
    _root_only_dir(secret, {"mod.py": b"ROOT_ONLY_TOKEN = 'do-not-print'\n"})
    chown_tree(venv, user)

    def prepare() -> None:  # demo/ becomes a link to root's directory: demo/mod.py now names root's file
        moved = site / "demo-moved"
        (site / "demo").rename(moved)
        (site / "demo").symlink_to(secret)

    as_user(user, prepare)
    proc = run_root("diff", "demo", "--python", python, "--wheelhouse", wheel.parent, env=root_env)
    assert "do-not-print" not in proc.stdout + proc.stderr
    # no file is read through the link, not even to hash it: the swap itself is the difference shown
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"demo: replaced by a symlink to {secret}" in proc.stdout
