"""`patchaudit gate [...] -- CMD...`: after a pass the gate becomes the server (same PID); else it fails closed."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_rootfs import FILES, install_into
from wheels import build_wheel

EXE = str(Path(sys.executable).parent / "patchaudit")
SERVER = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(43))
print("server", os.getpid(), flush=True)
if sys.argv[1] == "wait":
    time.sleep(60)
sys.exit(7)
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("gate-exec")
    install_into(work / "rootfs", build_wheel(work, "tinymodel", "1.0", FILES), "/usr/local")
    return work / "rootfs"


@pytest.fixture
def tree(installed: Path, tmp_path: Path) -> Path:
    shutil.copytree(installed, tmp_path / "rootfs", symlinks=True)
    return tmp_path / "rootfs"


def gate(tree: Path, *command: str) -> subprocess.Popen[str]:
    argv = [EXE, "gate", "--root", str(tree), "--no-cache", "--", *command]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_pass_execs_the_server_in_place_of_the_gate(tree: Path) -> None:
    proc = gate(tree, sys.executable, "-c", SERVER, "exit")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 7, err  # the server's own exit status
    assert f"server {proc.pid}" in out  # the same process: exec, not a child
    assert "patchaudit gate: ok" in out

    proc = gate(tree, sys.executable, "-c", SERVER, "wait")
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("server"):
            break
    proc.send_signal(signal.SIGTERM)  # delivered to the server itself
    proc.communicate(timeout=60)
    assert proc.returncode == 43

    proc = gate(tree)  # a pass, and nothing after `--` to become
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "nothing to run" in err


def test_drift_or_bad_input_never_starts_the_server(tree: Path, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    start = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    loader = tree / "usr/local/lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages/tinymodel"
    (loader / "loader.py").write_text("def load():\n    breakpoint()\n")
    proc = gate(tree, *start)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "not starting" in err
    assert not marker.exists()
    proc = gate(tmp_path / "no-such-tree", *start)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "Traceback" not in err
    assert not marker.exists()
