"""Hostile trees: whatever a local user leaves in a target, a run answers in time, in one line, failing closed.

Each test builds a real venv holding a real wheel (real pip), plants one hostile file, and runs the installed
console script with a hard time limit: a hang fails the test, it never stalls the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, pip_install, site_packages

LIMIT = 30  # seconds any one command may take here; each answer below comes in well under 5 s

SOURCE = "def forward(x):\n    if x is None:\n        raise ValueError('x')\n    return x\n"


def run(*args: str | os.PathLike[str], timeout: float = LIMIT) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "patchaudit"
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=timeout, check=False)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The stderr of an exit-2 run: one line of patchaudit's own, never a traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def gate_error(proc: subprocess.CompletedProcess[str]) -> str:
    """A gate that fails closed on bad input: exit 2, its error and verdict in the journal (stdout)."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr and "internal error" not in proc.stdout, proc.stdout
    first, verdict = proc.stdout.splitlines()
    assert first.startswith("patchaudit: error: ") and verdict.startswith("patchaudit gate: ERROR"), proc.stdout
    return first


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = {"demo/__init__.py": "", "demo/model.py": SOURCE, "demo/weights.bin": b"\0" * 4096}
    return build_wheel(tmp_path_factory.mktemp("wheels"), "demo", "1.0", files)


@pytest.fixture
def venv(tmp_path: Path, wheel: Path) -> Path:
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    return python


def record(python: Path) -> Path:
    return site_packages(python) / "demo-1.0.dist-info" / "RECORD"


def scan_json(python: Path, *args: str) -> tuple[int, dict]:
    proc = run("scan", "--python", python, "--format", "json", "--no-cache", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def demo(report: dict) -> dict:
    (found,) = [d for d in report["distributions"] if d["name"] == "demo"]
    return found


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "too-large"])
def test_a_record_that_never_ends_makes_its_distribution_unverifiable_at_once(venv: Path, kind: str) -> None:
    path = record(venv)
    path.unlink()
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "wb") as fh:
            fh.truncate(1 << 40)  # 1 TiB by its size, nothing on disk
    started = time.monotonic()
    code, report = scan_json(venv)
    assert code == 1
    entry = demo(report)
    assert entry["status"] == "unverifiable"
    reason = json.dumps(report)
    assert {"dev-zero": "symlink", "fifo": "FIFO", "too-large": "cap"}[kind] in reason
    gate = run("gate", "--python", venv, "--no-cache")
    assert gate.returncode == 1, gate.stderr
    assert "unverifiable" in gate.stdout
    assert time.monotonic() - started < 20


@pytest.mark.timeout(120)
def test_a_listed_file_grown_to_64_gib_is_modified_by_its_size_without_reading_it(venv: Path) -> None:
    weights = site_packages(venv) / "demo" / "weights.bin"
    with open(weights, "r+b") as fh:
        fh.truncate(64 << 30)
    started = time.monotonic()
    code, report = scan_json(venv)
    elapsed = time.monotonic() - started
    assert code == 1
    (drift,) = demo(report)["drift"]
    assert drift["path"] == "demo/weights.bin" and drift["state"] == "modified"
    assert drift["actual"] is None and f"size {64 << 30}, RECORD says 4096" in drift["note"]
    assert elapsed < 15  # hashing 64 GiB of zeros takes minutes
    gate = run("gate", "--python", venv, "--no-cache")
    assert gate.returncode == 1 and "demo/weights.bin" in gate.stdout


@pytest.mark.timeout(120)
def test_startup_files_that_are_fifos_or_devices_are_high_findings_not_hangs(venv: Path) -> None:
    site = site_packages(venv)
    os.mkfifo(site / "held.pth")
    (site / "endless.pth").symlink_to("/dev/zero")
    code, report = scan_json(venv, "--no-hazards")
    assert code == 1
    findings = {(f["path"], f["rule"], f["severity"]) for f in report["environment"]["findings"]}
    assert ("held.pth", "startup-hook", "high") in findings
    assert ("endless.pth", "startup-hook", "high") in findings


@pytest.mark.timeout(60)
def test_a_fifo_as_pyvenv_cfg_is_refused_before_the_interpreter_runs(venv: Path) -> None:
    cfg = venv.parent.parent / "pyvenv.cfg"
    cfg.unlink()
    os.mkfifo(cfg)
    for check, command in ((one_line_error, "scan"), (gate_error, "gate")):
        started = time.monotonic()
        line = check(run(command, "--python", venv))
        assert "pyvenv.cfg is not a regular file" in line
        assert time.monotonic() - started < 10


@pytest.mark.timeout(60)
def test_a_fifo_as_a_quarantine_manifest_is_listed_as_unreadable(venv: Path) -> None:
    run_dir = venv.parent.parent / ".patchaudit" / "quarantine" / "20260101T000000Z-abcdef"
    run_dir.mkdir(parents=True)
    os.mkfifo(run_dir / "manifest.json")
    proc = run("quarantine", "list", "--python", venv)
    assert proc.returncode in (0, 1), proc.stderr
    assert "20260101T000000Z-abcdef" in proc.stdout and "FIFO" in proc.stdout


@pytest.mark.timeout(60)
def test_a_policy_nested_100000_deep_is_one_line_exit_2(venv: Path, tmp_path: Path) -> None:
    policy = tmp_path / "deep.toml"
    policy.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert "nested too deeply" in gate_error(run("gate", "--python", venv, "--policy", policy))


@pytest.mark.timeout(60)
def test_a_baseline_nested_200000_deep_is_one_line_exit_2(venv: Path, tmp_path: Path) -> None:
    baseline = tmp_path / "deep.json"
    baseline.write_text("[" * 200_000 + "]" * 200_000)
    line = one_line_error(run("baseline", "check", baseline, "--python", venv))
    assert "nested too deeply" in line
    assert "nested too deeply" in gate_error(run("gate", "--python", venv, "--baseline", baseline, "--no-cache"))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", ["nan", "0", "-1", "inf", "soon"])
def test_gate_timeout_takes_only_a_positive_number_of_seconds(venv: Path, value: str) -> None:
    proc = run("gate", "--python", venv, "--timeout", value)
    assert proc.returncode == 2 and "--timeout" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.timeout(60)
def test_the_gate_deadline_fails_closed_naming_the_phase_and_leaves_no_process(venv: Path) -> None:
    before = _children_of_nobody_but_us()
    assert "gave up after 0.01 s while" in gate_error(run("gate", "--python", venv, "--no-cache", "--timeout", "0.01"))
    assert _children_of_nobody_but_us() <= before
    # the same gate with room to finish passes: the deadline left nothing behind that fails it
    assert run("gate", "--python", venv).returncode == 0
    scan = run("scan", "--python", venv, "--timeout", "0.01")
    assert "gave up after 0.01 s" in one_line_error(scan)


def _children_of_nobody_but_us() -> set[int]:
    """Processes whose command line names the venv's interpreter or patchaudit (none may be left)."""
    found = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"patchaudit" in cmd and b"pytest" not in cmd:
            found.add(int(pid))
    return found
