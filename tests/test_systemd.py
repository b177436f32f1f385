"""The systemd drop-in, checked by systemd's own `systemd-analyze verify`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from wheels import patchaudit

from patchaudit.systemd import drop_in, quote, unit_name

SYSTEMD_ANALYZE = shutil.which("systemd-analyze") or (
    "/usr/bin/systemd-analyze" if Path("/usr/bin/systemd-analyze").exists() else None
)
UNIT = """[Unit]
Description=vLLM inference server

[Service]
ExecStart=/bin/sleep infinity

[Install]
WantedBy=multi-user.target
"""


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    units = tmp_path / "root" / "etc" / "systemd" / "system"
    units.mkdir(parents=True)
    (units / "vllm.service").write_text(UNIT)
    return tmp_path / "root"


@pytest.fixture()
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "etc" / "patchaudit" / "vllm.toml"
    path.parent.mkdir(parents=True)
    path.write_text('python = "/srv/vllm/bin/python"\ndistributions = ["vllm"]\n')
    return path


def exec_start_pre(root: Path, unit: str = "vllm.service") -> str:
    text = (root / "etc/systemd/system" / f"{unit}.d" / "patchaudit.conf").read_text()
    assert "[Service]\n" in text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("ExecStartPre=")]
    return line


def test_install_writes_a_fail_closed_drop_in(root: Path, policy: Path) -> None:
    proc = patchaudit("systemd", "install", "vllm.service", "--policy", policy, "--root", root)
    assert proc.returncode == 0, proc.stderr
    line = exec_start_pre(root)
    command = line.removeprefix("ExecStartPre=").split()[0]
    assert Path(command).is_absolute() and Path(command).name == "patchaudit"
    assert Path(command).exists()
    assert line.endswith(f" gate --policy {policy}")


def test_warn_only_lets_the_service_start(root: Path, policy: Path) -> None:
    proc = patchaudit("systemd", "install", "vllm", "--policy", policy, "--root", root, "--warn-only")
    assert proc.returncode == 0, proc.stderr
    assert exec_start_pre(root).startswith("ExecStartPre=-/")


def test_bad_unit_or_policy_is_an_input_error(root: Path, policy: Path, tmp_path: Path) -> None:
    proc = patchaudit("systemd", "install", "vllm.timer", "--policy", policy, "--root", root)
    assert proc.returncode == 2 and "not a service unit" in proc.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("distributions = ['vllm']\nfail_on = 'critical'\n")
    proc = patchaudit("systemd", "install", "vllm.service", "--policy", broken, "--root", root)
    assert proc.returncode == 2 and "fail_on" in proc.stderr
    assert not (root / "etc/systemd/system/vllm.service.d").exists()


def test_unit_names_and_quoting() -> None:
    assert unit_name("vllm") == "vllm.service"
    assert unit_name("vllm@gpu0.service") == "vllm@gpu0.service"
    assert quote("/etc/patchaudit/vllm.toml") == "/etc/patchaudit/vllm.toml"
    assert quote("/srv/my models/p%1.toml") == '"/srv/my models/p%%1.toml"'
    text = drop_in(policy=Path("/etc/p.toml"), command=Path("/opt/pa/bin/patchaudit"), warn_only=False)
    assert "ExecStartPre=/opt/pa/bin/patchaudit gate --policy /etc/p.toml\n" in text


@pytest.fixture()
def systemd_analyze() -> str:
    """systemd's own verifier; in CI (CI set) its absence fails the run instead of skipping the test."""
    if SYSTEMD_ANALYZE is None:
        missing = "systemd-analyze is not installed (Debian package: systemd)"
        if os.environ.get("CI"):
            pytest.fail(f"{missing}, and CI must run this test")
        pytest.skip(missing)
    return SYSTEMD_ANALYZE


@pytest.mark.parametrize("warn_only", [False, True])
def test_systemd_analyze_verifies_the_unit_with_the_drop_in(
    root: Path, policy: Path, warn_only: bool, systemd_analyze: str
) -> None:
    args = ["--warn-only"] if warn_only else []
    assert patchaudit("systemd", "install", "vllm.service", "--policy", policy, "--root", root, *args).returncode == 0
    unit = root / "etc/systemd/system/vllm.service"
    ok = subprocess.run([systemd_analyze, "verify", str(unit)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr

    # The drop-in is really read: point its command somewhere that does not exist and verify fails.
    conf = root / "etc/systemd/system/vllm.service.d/patchaudit.conf"
    conf.write_text(conf.read_text().replace("ExecStartPre=-/", "ExecStartPre=/").replace("=/", "=/nonexistent/", 1))
    bad = subprocess.run([systemd_analyze, "verify", str(unit)], capture_output=True, text=True)
    assert bad.returncode != 0 and "/nonexistent/" in bad.stderr


def test_drop_in_gives_the_gate_a_state_directory_systemd_accepts(
    root: Path, policy: Path, systemd_analyze: str
) -> None:
    """StateDirectory=patchaudit/<unit>: systemd makes it, owned by the service's user, and passes it to
    the gate as $STATE_DIRECTORY, so a gate running as that user keeps its caches warm."""
    assert patchaudit("systemd", "install", "vllm@a.service", "--policy", policy, "--root", root).returncode == 0
    (root / "etc/systemd/system/vllm@a.service").write_text(UNIT)
    conf = root / "etc/systemd/system/vllm@a.service.d/patchaudit.conf"
    (line,) = [ln for ln in conf.read_text().splitlines() if ln.startswith("StateDirectory=")]
    assert line == "StateDirectory=patchaudit/vllm_a"
    unit = root / "etc/systemd/system/vllm@a.service"
    ok = subprocess.run([systemd_analyze, "verify", str(unit)], capture_output=True, text=True)
    assert ok.returncode == 0 and "StateDirectory" not in ok.stderr, ok.stderr

    # systemd really reads the line: a path it may not use is named, with the drop-in's line number
    conf.write_text(conf.read_text().replace(line, "StateDirectory=/var/lib/x"))
    bad = subprocess.run([systemd_analyze, "verify", str(unit)], capture_output=True, text=True)
    assert f"{conf}:" in bad.stderr and "StateDirectory= path is absolute" in bad.stderr, bad.stderr
