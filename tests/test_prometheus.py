"""The node_exporter textfile: parsed by prometheus_client's own parser, written atomically."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
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


def prom_name(target: Path) -> str:
    return "patchaudit_" + re.sub(r"[^A-Za-z0-9]+", "_", str(target)).strip("_") + ".prom"


def test_metrics_replaces_the_textfile_atomically(venv: Path, tmp_path: Path) -> None:
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    name = prom_name(venv)
    proc = patchaudit("metrics", "--python", venv, "--textfile", textfile)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in textfile.iterdir()) == [name]
    first = samples((textfile / name).read_text())
    assert first[("patchaudit_gate_ok", ())] == 1

    (site_packages(venv) / "demo" / "mod.py").write_text("X = 2\n")
    proc = patchaudit("metrics", "--python", venv, "--textfile", textfile)
    assert proc.returncode == 1 and "FAIL" in proc.stdout
    assert sorted(p.name for p in textfile.iterdir()) == [name]  # no temp file left behind
    second = samples((textfile / name).read_text())
    assert second[("patchaudit_gate_ok", ())] == 0
    assert second[("patchaudit_last_run_timestamp_seconds", ())] >= first[("patchaudit_last_run_timestamp_seconds", ())]

    missing = patchaudit("metrics", "--python", venv, "--textfile", tmp_path / "nowhere")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "cannot write" in missing.stderr


ALWAYS = [
    ("patchaudit_last_run_timestamp_seconds", ()),
    ("patchaudit_last_success_timestamp_seconds", ()),
    ("patchaudit_run_duration_seconds", ()),
    *[("patchaudit_drifted_files_by_state", (("state", s),)) for s in ("added", "missing", "modified")],
    *[("patchaudit_drifted_files", (("distribution", ""), ("state", s))) for s in ("added", "missing", "modified")],
    *[("patchaudit_findings_by_severity", (("severity", s),)) for s in ("high", "medium", "low", "info")],
    *[("patchaudit_problems", (("kind", k),)) for k in ("env-added", "env-changed", "env-removed", "error")],
    ("patchaudit_drifted_distributions", ()),
    ("patchaudit_unverifiable_distributions", ()),
]


def test_one_file_per_target_every_series_at_zero_and_the_last_success_kept(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "wheels", "demo", "1.0", {"demo/__init__.py": "", "demo/mod.py": "X = 1\n"})
    first, second = make_venv(tmp_path / "a"), make_venv(tmp_path / "b")
    pip_install(first, wheel)
    pip_install(second, wheel)
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    (site_packages(first) / "demo" / "mod.py").write_text("X = 2\n")
    assert patchaudit("metrics", "--python", first, "--textfile", textfile).returncode == 1
    assert patchaudit("metrics", "--python", second, "--textfile", textfile).returncode == 0
    assert patchaudit("metrics", "--python", second, "--textfile", textfile, "--name", "vllm").returncode == 0
    names = sorted(p.name for p in textfile.iterdir())
    assert names == sorted([prom_name(first), prom_name(second), "patchaudit_vllm.prom"])
    drifted = samples((textfile / prom_name(first)).read_text())
    assert drifted[("patchaudit_drifted_files", (("distribution", "demo"), ("state", "modified")))] == 1
    assert drifted[("patchaudit_drifted_files_by_state", (("state", "modified"),))] == 1
    assert drifted[("patchaudit_last_success_timestamp_seconds", ())] == 0  # never passed

    clean = samples((textfile / prom_name(second)).read_text())
    assert clean[("patchaudit_gate_ok", ())] == 1
    for key in ALWAYS:
        assert key in clean, key
        assert key in drifted, key
    assert all(clean[k] == 0 for k in ALWAYS if "timestamp" not in k[0] and "duration" not in k[0])
    assert (
        clean[("patchaudit_last_success_timestamp_seconds", ())] == clean[("patchaudit_last_run_timestamp_seconds", ())]
    )
    assert 0 < clean[("patchaudit_run_duration_seconds", ())] < 120
    passed_at = clean[("patchaudit_last_success_timestamp_seconds", ())]

    # A failing run keeps the time of the last success, as node_exporter's own scripts do.
    (site_packages(second) / "demo" / "mod.py").write_text("X = 3\n")
    assert patchaudit("metrics", "--python", second, "--textfile", textfile).returncode == 1
    failed = samples((textfile / prom_name(second)).read_text())
    assert failed[("patchaudit_gate_ok", ())] == 0
    assert failed[("patchaudit_last_success_timestamp_seconds", ())] == passed_at
    assert failed[("patchaudit_last_run_timestamp_seconds", ())] > passed_at

    bad = patchaudit("metrics", "--python", second, "--textfile", textfile, "--name", "../x")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--name" in bad.stderr


def test_metrics_holds_to_a_baseline(venv: Path, tmp_path: Path) -> None:
    held = tmp_path / "baseline.json"
    assert patchaudit("baseline", "create", "--python", venv, "--out", held).returncode == 0
    extra = site_packages(venv) / "demo" / "extra.py"
    extra.write_text("Y = 1\n")  # an unowned file in a package: added against the baseline
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    proc = patchaudit("metrics", "--python", venv, "--textfile", textfile, "--baseline", held, "--name", "b")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    got = samples((textfile / "patchaudit_b.prom").read_text())
    assert got[("patchaudit_gate_ok", ())] == 0
    assert got[("patchaudit_drifted_files_by_state", (("state", "added"),))] >= 1


NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(url: str, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return str(answer.read().decode("utf-8"))
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.skipif(NODE_EXPORTER is None and not os.environ.get("CI"), reason="prometheus-node-exporter missing")
def test_node_exporter_serves_every_series_of_the_textfile(venv: Path, tmp_path: Path) -> None:
    assert NODE_EXPORTER is not None, "CI installs prometheus-node-exporter (.ci/run)"
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    (site_packages(venv) / "demo" / "mod.py").write_text("X = 1\nimport pdb\npdb.set_trace()\n")
    assert patchaudit("metrics", "--python", venv, "--textfile", textfile, "--name", "vllm").returncode == 1
    written = samples((textfile / "patchaudit_vllm.prom").read_text())
    port = _free_port()
    args = [
        NODE_EXPORTER,
        f"--web.listen-address=127.0.0.1:{port}",
        "--collector.disable-defaults",
        "--collector.textfile",
        f"--collector.textfile.directory={textfile}",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        served = _scrape(f"http://127.0.0.1:{port}/metrics", proc)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    families = list(text_string_to_metric_families(served))
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}
    assert got[("node_textfile_scrape_error", ())] == 0
    for key, value in written.items():
        assert got[key] == value, key
    assert got[("patchaudit_findings", (("rule", "debugger"), ("severity", "high")))] >= 1


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
    assert f" metrics --policy {policy} --textfile {tmp_path / 'tf'} --name vllm\n" in service.read_text()
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


def test_a_target_whose_name_is_not_utf8_is_written_and_parses(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "wheels", "demo", "1.0", {"demo/__init__.py": ""})
    pip_install(make_venv(tmp_path / "venv"), wheel)
    root = Path(os.fsdecode(bytes(tmp_path) + b"/v\xffenv"))  # a venv directory named in Latin-1
    (tmp_path / "venv").rename(root)  # (the venv module itself cannot make one there)
    python = root / "bin" / "python"
    out = Path(os.fsdecode(bytes(tmp_path) + b"/report-\xe9.prom"))
    proc = patchaudit("scan", "--python", python, "--format", "prometheus", "--out", out)
    assert proc.returncode == 0, proc.stderr
    got = samples(out.read_text("utf-8"))
    (info,) = [labels for name, labels in got if name == "patchaudit_info"]
    assert dict(info)["target"] == str(tmp_path) + "/v\\xffenv/bin/python"

    textfile = tmp_path / "textfile"
    textfile.mkdir()
    proc = patchaudit("metrics", "--python", python, "--textfile", textfile)
    assert proc.returncode == 0, proc.stderr
    (written,) = textfile.glob("patchaudit_*.prom")  # one file per target, named from its path
    assert samples(written.read_text("utf-8"))[("patchaudit_gate_ok", ())] == 1
