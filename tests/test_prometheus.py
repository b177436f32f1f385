"""The node_exporter textfile: parsed by prometheus_client's own parser, written atomically."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from wheels import build_wheel, make_venv, patchaudit, pip_install, site_packages

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


@pytest.fixture()
def venv(tmp_path: Path) -> Path:
    wheel = build_wheel(tmp_path / "wheels", "demo", "1.0", {"demo/__init__.py": "", "demo/mod.py": "X = 1\n"})
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    return python


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family.name
        assert re.fullmatch(r"patchaudit_[a-z_]+", family.name) and not family.name.endswith("_total")
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_clean_scan_is_ok_and_every_family_is_present(venv: Path) -> None:
    proc = patchaudit("scan", "--python", venv, "--format", "prometheus")
    assert proc.returncode == 0, proc.stderr
    got = samples(proc.stdout)
    assert got[("patchaudit_gate_ok", ())] == 1
    assert got[("patchaudit_drifted_distributions", ())] == 0
    assert got[("patchaudit_unverifiable_distributions", ())] == 0
    assert got[("patchaudit_distributions", ())] >= 1
    assert got[("patchaudit_info", (("target", str(venv)), ("version", "0.1.0")))] == 1


def test_a_debug_patch_shows_as_drift_and_a_high_finding(venv: Path) -> None:
    mod = site_packages(venv) / "demo" / "mod.py"
    mod.write_text("X = 1\nimport pdb\npdb.set_trace()\n")
    proc = patchaudit("scan", "--python", venv, "--format", "prometheus")
    assert proc.returncode == 1, proc.stderr
    got = samples(proc.stdout)
    assert got[("patchaudit_drifted_files", (("distribution", "demo"), ("state", "modified")))] == 1
    assert got[("patchaudit_drifted_distributions", ())] == 1
    assert got[("patchaudit_findings", (("rule", "debugger"), ("severity", "high")))] >= 1
    assert got[("patchaudit_gate_ok", ())] == 0
    assert "mod.py" not in proc.stdout  # paths stay in JSON: bounded label sets

    gate = patchaudit("gate", "--python", venv, "--format", "prometheus")
    assert gate.returncode == 1
    got = samples(gate.stdout)
    assert got[("patchaudit_gate_ok", ())] == 0
    assert got[("patchaudit_drifted_files", (("distribution", "demo"), ("state", "modified")))] == 1
    assert got[("patchaudit_findings", (("rule", "debugger"), ("severity", "high")))] >= 1


def test_metrics_replaces_the_textfile_atomically(venv: Path, tmp_path: Path) -> None:
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    proc = patchaudit("metrics", "--python", venv, "--textfile", textfile)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in textfile.iterdir()) == ["patchaudit.prom"]
    first = samples((textfile / "patchaudit.prom").read_text())
    assert first[("patchaudit_gate_ok", ())] == 1

    (site_packages(venv) / "demo" / "mod.py").write_text("X = 2\n")
    proc = patchaudit("metrics", "--python", venv, "--textfile", textfile)
    assert proc.returncode == 1 and "FAIL" in proc.stdout
    assert sorted(p.name for p in textfile.iterdir()) == ["patchaudit.prom"]  # no temp file left behind
    second = samples((textfile / "patchaudit.prom").read_text())
    assert second[("patchaudit_gate_ok", ())] == 0
    assert second[("patchaudit_last_run_timestamp_seconds", ())] >= first[("patchaudit_last_run_timestamp_seconds", ())]

    missing = patchaudit("metrics", "--python", venv, "--textfile", tmp_path / "nowhere")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "cannot write" in missing.stderr


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (Debian package: systemd)")
def test_systemd_timer_refreshes_the_textfile_and_verifies(tmp_path: Path) -> None:
    root = tmp_path / "root"
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    (units / "vllm.service").write_text("[Service]\nExecStart=/bin/sleep infinity\n")
    policy = tmp_path / "vllm.toml"
    policy.write_text('distributions = ["vllm"]\n')
    proc = patchaudit(
        "systemd", "install", "vllm", "--policy", policy, "--root", root, "--timer", "--textfile", tmp_path / "tf"
    )
    assert proc.returncode == 0, proc.stderr
    timer = units / "patchaudit-metrics-vllm.timer"
    service = units / "patchaudit-metrics-vllm.service"
    assert "OnUnitActiveSec=5min" in timer.read_text()
    assert f" metrics --policy {policy} --textfile {tmp_path / 'tf'}" in service.read_text()
    for unit in (service, timer):
        ok = subprocess.run([SYSTEMD_ANALYZE, "verify", str(unit)], capture_output=True, text=True)
        assert ok.returncode == 0, ok.stderr
    bad = patchaudit("systemd", "install", "vllm", "--policy", policy, "--root", root, "--timer", "--interval", "often")
    assert bad.returncode == 2 and "interval" in bad.stderr


def test_packaging_facts_are_their_own_series_and_do_not_fail(tmp_path: Path) -> None:
    first = build_wheel(tmp_path / "w", "first", "1.0", {"first/__init__.py": "", "shared_backend.py": "A = 1\n"})
    second = build_wheel(tmp_path / "w", "second", "1.0", {"second/__init__.py": "", "shared_backend.py": "B = 2\n"})
    python = make_venv(tmp_path / "venv")
    pip_install(python, first)
    pip_install(python, second)  # the later install wins the shared path
    proc = patchaudit("scan", "--python", python, "--format", "prometheus")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = samples(proc.stdout)
    assert got[("patchaudit_packaging_facts", (("distribution", "first"), ("state", "overwritten")))] == 1
    assert ("patchaudit_drifted_files", (("distribution", "first"), ("state", "overwritten"))) not in got
    assert got[("patchaudit_gate_ok", ())] == 1
