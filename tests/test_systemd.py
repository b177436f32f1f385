"""The systemd drop-in, checked by systemd's own `systemd-analyze verify`."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from wheels import patchaudit

from patchaudit.errors import PatchAuditError
from patchaudit.gate.systemd import drop_in, install, quote, unit_name

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
    assert line.endswith(f" gate --policy {policy} --timeout 120")


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
    assert "ExecStartPre=/opt/pa/bin/patchaudit gate --policy /etc/p.toml --timeout 120\n" in text


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
    (root / "etc/systemd/system/vllm@a.service").write_text(UNIT)
    assert patchaudit("systemd", "install", "vllm@a.service", "--policy", policy, "--root", root).returncode == 0
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


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() if p.is_file() else "<dir>" for p in sorted(root.rglob("*"))}


def test_install_refuses_a_unit_that_does_not_exist_and_says_what_to_run_next(root: Path, policy: Path) -> None:
    before = _tree(root)
    proc = patchaudit("systemd", "install", "doesnotexist.service", "--policy", policy, "--root", root)
    assert proc.returncode == 2 and "no unit doesnotexist.service" in proc.stderr, proc.stderr
    assert _tree(root) == before
    proc = patchaudit("systemd", "install", "vllm", "--policy", policy, "--root", root)
    assert proc.returncode == 0 and "systemctl daemon-reload" in proc.stdout, proc.stdout


def test_uninstall_removes_exactly_what_install_wrote(root: Path, policy: Path) -> None:
    (root / "etc/systemd/system/vllm.service.d").mkdir()
    (root / "etc/systemd/system/vllm.service.d/limits.conf").write_text("[Service]\nLimitNOFILE=65536\n")
    before = _tree(root)
    args = ("--policy", policy, "--root", root, "--timer", "--textfile", root / "textfile")
    assert patchaudit("systemd", "install", "vllm", *args).returncode == 0
    assert len(_tree(root)) == len(before) + 3  # the drop-in, the metrics service and its timer
    proc = patchaudit("systemd", "uninstall", "vllm", "--root", root)
    assert proc.returncode == 0 and proc.stdout.count("removed ") == 3, proc.stdout
    assert "systemctl daemon-reload" in proc.stdout
    assert _tree(root) == before
    # without the foreign drop-in, the directory install made goes too
    (root / "etc/systemd/system/vllm.service.d/limits.conf").unlink()
    (root / "etc/systemd/system/vllm.service.d").rmdir()
    before = _tree(root)
    assert patchaudit("systemd", "install", "vllm", "--policy", policy, "--root", root).returncode == 0
    assert patchaudit("systemd", "uninstall", "vllm", "--root", root).returncode == 0
    assert _tree(root) == before
    # a file of that name that patchaudit did not write is left alone
    conf = root / "etc/systemd/system/vllm.service.d/patchaudit.conf"
    conf.parent.mkdir()
    conf.write_text("[Service]\nExecStartPre=/usr/local/bin/mine\n")
    proc = patchaudit("systemd", "uninstall", "vllm", "--root", root)
    assert proc.returncode == 2 and "not written by patchaudit" in proc.stderr and conf.exists()


@pytest.fixture()
def shared() -> Iterator[Path]:
    """A directory every user may read (pytest's own tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="patchaudit-systemd-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def _unit_as(root: Path, user: str) -> None:
    (root / "etc/systemd/system/vllm.service").write_text(UNIT.replace("[Service]\n", f"[Service]\nUser={user}\n"))


def _executable(directory: Path) -> Path:
    directory.mkdir(mode=0o755, exist_ok=True)
    tool = directory / "patchaudit"
    tool.write_text("#!/bin/sh\necho 'patchaudit, version 0'\n")
    tool.chmod(0o755)
    return tool


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can try the service's user")
def test_install_checks_as_the_service_user_that_it_can_run_the_gate_and_read_the_policy(
    root: Path, policy: Path, shared: Path
) -> None:
    _unit_as(root, "nobody")
    conf = root / "etc/systemd/system/vllm.service.d/patchaudit.conf"
    # this test's own patchaudit: nobody cannot reach it when its interpreter lives in root's home
    proc = patchaudit("systemd", "install", "vllm", "--policy", policy, "--root", root)
    if proc.returncode == 2:
        assert "User=nobody, who cannot run" in proc.stderr and not conf.exists(), proc.stderr
    # a gate in a directory only root may enter
    private = shared / "private"
    private.mkdir(mode=0o700)
    readable = shared / "vllm.toml"
    readable.write_text(policy.read_text())
    readable.chmod(0o644)
    with pytest.raises(PatchAuditError, match="User=nobody, who cannot run"):
        install("vllm", policy=readable, root=root, command=_executable(private / "bin"))
    assert not conf.exists()
    # a policy nobody may read (pytest's tmp_path is root's alone)
    tool = _executable(shared / "bin")
    with pytest.raises(PatchAuditError, match="cannot read the policy"):
        install("vllm", policy=policy, root=root, command=tool)
    assert not conf.exists()
    # both within reach: written
    assert install("vllm", policy=readable, root=root, command=tool) == conf


@pytest.mark.skipif(os.geteuid() != 0, reason="runs systemd as an unprivileged user")
def test_systemd_itself_loads_the_start_timeout_and_the_gate_deadline(
    shared: Path, policy: Path, systemd_analyze: str
) -> None:
    """`systemd --test --user`, run as nobody, prints the unit as systemd loaded it, drop-in and all."""
    systemd = next((p for p in ("/lib/systemd/systemd", "/usr/lib/systemd/systemd") if Path(p).exists()), None)
    if systemd is None:
        pytest.skip("systemd is not installed")
    units = shared / "etc/systemd/system"
    units.mkdir(parents=True)
    (units / "vllm.service").write_text(UNIT)
    assert patchaudit("systemd", "install", "vllm", "--policy", policy, "--root", shared).returncode == 0
    for path in [shared, *shared.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    runtime = shared / "runtime"
    runtime.mkdir()
    shutil.chown(runtime, "nobody")
    runtime.chmod(0o700)
    env = {"SYSTEMD_UNIT_PATH": f"{units}:", "XDG_RUNTIME_DIR": str(runtime), "HOME": "/nonexistent"}
    proc = subprocess.run(
        [systemd, "--test", "--user", "--no-pager", "--unit=vllm.service"],
        user="nobody",
        group="nogroup" if _group_exists("nogroup") else "nobody",
        extra_groups=[],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    text = proc.stdout + proc.stderr
    unit = text[text.index("-> Unit vllm.service:") :]
    unit = unit[: unit.find("-> Unit ", 10)] if "-> Unit " in unit[10:] else unit
    assert f"DropIn Path: {units}/vllm.service.d/patchaudit.conf" in unit, unit
    assert "TimeoutStartSec: 3min" in unit, unit
    (pre,) = [line.strip() for line in unit.splitlines() if "gate --policy" in line]
    assert pre.endswith(f"gate --policy {policy} --timeout 120"), pre
    ok = subprocess.run([systemd_analyze, "verify", str(units / "vllm.service")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


def _group_exists(name: str) -> bool:
    import grp

    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True
