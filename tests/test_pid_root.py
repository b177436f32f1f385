"""`scan --pid PID`: the environment a process in its own mount and PID namespaces runs from, read
through /proc/PID/root (the "container" is `unshare` with an unpacked tree as its root)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
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
