"""How many CPUs patchaudit uses by default: affinity and the cgroup v2 quota, not the host's count."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchaudit.parallel.cpus import available_cpus, cgroup_quota, quota_cpus


def test_quota_lines() -> None:
    assert quota_cpus("max 100000\n") is None
    assert quota_cpus("200000 100000\n") == 2
    assert quota_cpus("150000 100000") == 2  # 1.5 CPUs: two workers, each busy part of the time
    assert quota_cpus("50000 100000") == 1
    assert quota_cpus("garbage") is None


def test_tightest_quota_on_the_way_up_the_hierarchy(tmp_path: Path) -> None:
    """A service's own CPUQuota= and its slice's: the smaller one holds."""
    root = tmp_path / "cgroup"
    service = root / "system.slice" / "vllm.service"
    service.mkdir(parents=True)
    (root / "cpu.max").write_text("max 100000\n")
    (root / "system.slice" / "cpu.max").write_text("300000 100000\n")
    (service / "cpu.max").write_text("800000 100000\n")
    proc = tmp_path / "cgroup-of-self"
    proc.write_text("0::/system.slice/vllm.service\n")
    assert cgroup_quota(proc, root) == 3
    (service / "cpu.max").write_text("100000 100000\n")
    assert cgroup_quota(proc, root) == 1


def test_no_cgroup_v2_means_no_quota(tmp_path: Path) -> None:
    proc = tmp_path / "cgroup-of-self"
    proc.write_text("4:memory:/x\n1:cpu:/\n")
    assert cgroup_quota(proc, tmp_path) is None


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset (util-linux)")
def test_a_process_pinned_to_one_cpu_gets_one_worker() -> None:
    code = "from patchaudit.parallel.cpus import available_cpus; print(available_cpus())"
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"


def test_never_more_than_the_affinity_mask() -> None:
    import os

    assert 1 <= available_cpus() <= len(os.sched_getaffinity(0))
