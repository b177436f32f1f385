"""`ps` names the container a process runs in, from its cgroup path as the runtimes lay it out."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from patchaudit.procs.cgroup import container_of

EXE = str(Path(sys.executable).parent / "patchaudit")


def _cgroup2() -> Path | None:
    for base in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        if (base / "cgroup.procs").exists() and os.access(base, os.W_OK):
            return base
    return None


def test_container_names_from_the_runtimes_layouts() -> None:
    cid = "0123456789ab" + "c" * 52
    pod = "6f1c2d3e-aaaa-bbbb-cccc-0123456789ab"
    systemd_pod = pod.replace("-", "_")  # systemd's slice names write the dashes of a pod UID as underscores
    cases = {
        f"/system.slice/docker-{cid}.scope": "docker 0123456789ab",
        f"/docker/{cid}": "docker 0123456789ab",
        f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{systemd_pod}.slice/"
        f"cri-containerd-{cid}.scope": f"containerd 0123456789ab (pod {pod})",
        f"/kubepods.slice/kubepods-pod{systemd_pod}.slice/crio-{cid}.scope": f"cri-o 0123456789ab (pod {pod})",
        f"/kubepods/burstable/pod{pod}/{cid}": f"kubernetes 0123456789ab (pod {pod})",
        f"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{cid}.scope": "podman 0123456789ab",
        "/machine.slice/systemd-nspawn@build.service/payload": "nspawn build",
        "/system.slice/vllm.service": None,
        "/": None,
    }
    for path, name in cases.items():
        assert container_of(path) == name, path


@pytest.mark.skipif(_cgroup2() is None or os.geteuid() != 0, reason="needs root and a writable cgroup2 hierarchy")
def test_ps_names_the_container_of_a_process_in_its_cgroup() -> None:
    base = _cgroup2()
    assert base is not None
    cid = secrets.token_hex(32)
    pod = str(uuid.uuid4())
    slices = base / "kubepods.slice" / f"kubepods-pod{pod.replace('-', '_')}.slice"
    group = slices / f"cri-containerd-{cid}.scope"
    group.mkdir(parents=True)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"open({str(group / 'cgroup.procs')!r}, 'w').write('0'); print('in', flush=True); input()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "in"
        found = subprocess.run([EXE, "ps", "--pid", str(proc.pid)], capture_output=True, text=True, timeout=120)
        assert f"pid {proc.pid} (containerd {cid[:12]} (pod {pod}))" in found.stdout, found.stdout + found.stderr
        shown = subprocess.run(
            [EXE, "ps", "--pid", str(proc.pid), "--format", "json"], capture_output=True, text=True, timeout=120
        )
        (entry,) = [p for p in json.loads(shown.stdout)["processes"] if p["pid"] == proc.pid]
        assert entry["container"] == f"containerd {cid[:12]} (pod {pod})"
    finally:
        proc.kill()
        proc.wait(timeout=30)
        for directory in (group, slices, slices.parent):
            for _ in range(100):  # a killed process leaves its cgroup once reaped
                try:
                    directory.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)
