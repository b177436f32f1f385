"""`scan --pid PID`: the environment a process in its own mount and PID namespaces runs from, read
through /proc/PID/root (the "container" is `unshare` with an unpacked tree as its root)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_rootfs import FILES, PY, install_into, patchaudit
from wheels import build_wheel

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="new namespaces need root")


def _with_sleep(tree: Path) -> str:
    """/bin/sleep and the libraries it loads, copied into the tree: the container's only program."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    libs = subprocess.run(["ldd", sleep], capture_output=True, text=True, check=True, timeout=30).stdout
    for path in [sleep, *(w for line in libs.splitlines() for w in line.split() if w.startswith("/"))]:
        real = os.path.realpath(path)
        for where in {path, real}:
            dest = tree / where.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.exists():
                shutil.copy2(real, dest)
    return sleep


def _child(pid: int) -> int:
    for _ in range(100):
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    raise AssertionError("the contained process did not start")


def test_scan_pid_reads_the_process_root_and_sees_an_edit(tmp_path: Path) -> None:
    tree = tmp_path / "rootfs"
    site = install_into(tree, build_wheel(tmp_path, "tinymodel", "1.0", FILES), "/usr/local")
    sleep = _with_sleep(tree)
    # a link the host would follow to its own /usr/local: inside the container it is the tree's
    (tree / "usr/lib64").mkdir(parents=True, exist_ok=True)
    (tree / "usr/lib64" / PY).symlink_to(f"/usr/local/lib/{PY}")
    unshare = subprocess.Popen(["unshare", "--mount", "--pid", "--fork", f"--root={tree}", sleep, "60"])
    try:
        pid = _child(unshare.pid)
        assert os.readlink(f"/proc/{pid}/root") != "/"
        clean = patchaudit("scan", "--pid", pid, "--format", "json")
        assert clean.returncode == 0, clean.stderr
        assert json.loads(clean.stdout)["target"]["paths"] == [f"/proc/{pid}/root/usr/local/lib/{PY}/site-packages"]
        # the edit an engineer makes with `docker exec`: in the container's files, seen through its root
        (site / "tinymodel/loader.py").write_text("def load():\n    import pdb; pdb.set_trace()\n")
        found = patchaudit("scan", "--pid", pid)
        assert found.returncode == 1
        assert "modified        tinymodel/loader.py" in found.stdout and "[debugger]" in found.stdout
    finally:
        with contextlib.suppress(NameError, ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # the contained sleep: PID 1 of its namespace, unshare's child
        unshare.kill()
        unshare.wait(timeout=30)
    for _ in range(100):
        if not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.05)
    gone = patchaudit("scan", "--pid", pid)
    assert gone.returncode == 2 and f"no process {pid}" in gone.stderr


def test_pid_and_root_together_is_a_usage_error(tmp_path: Path) -> None:
    found = patchaudit("scan", "--root", tmp_path, "--pid", os.getpid())
    assert found.returncode == 2 and "not both" in found.stderr


CONTAINED = """
set -e
for d in {binds}; do mkdir -p "{tree}$d"; mount --bind "$d" "{tree}$d"; done
exec chroot {tree} /opt/venv/bin/python -c "import tinymodel.loader; print('ready', flush=True); input()"
"""


def test_ps_names_a_contained_process_and_its_stale_file(tmp_path: Path) -> None:
    """A Python process in its own mount and PID namespaces, chrooted into an image's rootfs (umoci
    unpack) with a venv of its own: `ps` reads its files through its root and names the file changed
    under it; `revert --pid` puts the file back through that root, its quarantine kept outside."""
    build = tmp_path / "build"
    base = Path(sys.base_prefix)
    # the venv of the image: its interpreter is the host's, bind-mounted at the same path inside
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(build / "opt/venv")], check=True, timeout=120)
    wheel = build_wheel(tmp_path / "wheels", "tinymodel", "1.0", FILES)
    install_into(build, wheel, "/opt/venv")
    img = tmp_path / "img"
    for step in (
        ["init", "--layout", img],
        ["new", "--image", f"{img}:venv"],
        ["insert", "--image", f"{img}:venv", "--history.created_by", "RUN pip install tinymodel", build, "/"],
        ["unpack", "--rootless", "--image", f"{img}:venv", tmp_path / "bundle"],
    ):
        subprocess.run(["umoci", *map(str, step)], check=True, capture_output=True, timeout=120)
    tree = tmp_path / "bundle" / "rootfs"
    # the interpreter's installation and the libraries it loads, bind-mounted at their own paths
    binds = [p for p in (str(base), "/usr/lib", "/usr/lib64", "/lib", "/lib64") if os.path.isdir(p)]
    for link in [b for b in binds if os.path.islink(b)]:  # merged /usr: /lib -> usr/lib
        (tree / link.lstrip("/")).symlink_to(os.readlink(link))
    binds = " ".join(b for b in binds if not os.path.islink(b))
    script = CONTAINED.format(binds=binds, tree=tree)
    contained = subprocess.Popen(
        ["unshare", "--mount", "--pid", "--fork", "sh", "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert contained.stdout is not None and contained.stdout.readline().strip() == "ready"
        pid = _child(contained.pid)
        assert os.readlink(f"/proc/{pid}/root") != "/"
        first = patchaudit("ps", "--pid", pid)
        assert first.returncode == 0, first.stdout + first.stderr
        assert f"from /proc/{pid}/root/opt/venv: runs what is on disk" in first.stdout
        site = tree / "opt/venv/lib" / PY / "site-packages"
        (site / "tinymodel/loader.py").write_text("def load():\n    return 2\n")  # edited under it
        stale = patchaudit("ps", "--pid", pid)
        assert stale.returncode == 1, stale.stdout + stale.stderr
        assert "(loader.py changed)" in stale.stdout
        state = {**os.environ, "PATCHAUDIT_STATE_HOME": str(tmp_path / "state")}
        exe = Path(sys.executable).parent / "patchaudit"
        argv = [exe, "revert", "tinymodel", "--pid", pid, "--wheelhouse", wheel.parent, "-y"]
        back = subprocess.run(list(map(str, argv)), capture_output=True, text=True, timeout=120, env=state)
        assert back.returncode == 0, back.stdout + back.stderr
        assert f"--root /proc/{pid}/root" in back.stdout  # the undo line names the same root
        assert (site / "tinymodel/loader.py").read_text() == FILES["tinymodel/loader.py"]
        assert not list(tree.rglob(".patchaudit")), "nothing of patchaudit's own inside the container"
        assert "0 modified, 0 missing" in patchaudit("scan", "tinymodel", "--pid", pid, "--no-hazards").stdout
    finally:
        with contextlib.suppress(NameError, ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        contained.kill()
        contained.wait(timeout=30)
