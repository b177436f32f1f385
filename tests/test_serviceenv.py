"""The service's environment: unit files and drop-ins checked by the real `systemd-analyze verify`,
recorded by `baseline create --unit`, held against it by `baseline check` and `gate`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, patchaudit, pip_install, site_packages

from patchaudit.procs.serviceenv import effective, looks_secret
from patchaudit.procs.unitfile import Origin, find, settings

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
TOKEN = "hf_Q7xLmP2vR9sT4wY8zK3nB6cD1fG5hJ0a"
UNIT = f"""[Unit]
Description=vLLM inference server

[Service]
# tuning carried over from the last model
Environment=NCCL_P2P_LEVEL=SYS "VLLM_LOGGING_LEVEL=INFO" HF_TOKEN={TOKEN}
Environment=CUDA_VISIBLE_DEVICES=0,1,2,3 \\
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True HOME=/srv
EnvironmentFile=-{{env_file}}
ExecStart=/bin/sleep infinity

[Install]
WantedBy=multi-user.target
"""
DROP_IN = "[Service]\nEnvironment=NCCL_IB_DISABLE=1\n"


@pytest.fixture()
def service(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(unit directory, the venv's python, the env file) for a `vllm.service` running from a real venv."""
    units = tmp_path / "etc" / "systemd" / "system"
    (units / "vllm.service.d").mkdir(parents=True)
    env_file = tmp_path / "vllm.env"
    env_file.write_text("# site settings\nTRANSFORMERS_OFFLINE=1\n")
    (units / "vllm.service").write_text(UNIT.format(env_file=env_file))
    (units / "vllm.service.d" / "10-ib.conf").write_text(DROP_IN)
    wheel = build_wheel(tmp_path / "wheels", "engine", "1.0", {"engine/__init__.py": "X = 1\n"})
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    return units, python, env_file


def _venv_with_a_distribution(tmp_path: Path) -> Path:
    """A real venv holding one real wheel: a baseline of an environment with nothing in it is refused."""
    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(tmp_path / "wheels", "engine", "1.0", {"engine/__init__.py": "X = 1\n"}))
    return python


def verify(unit: Path) -> None:
    """systemd's own verifier accepts the unit with its drop-ins; in CI (CI set) it must be there."""
    if SYSTEMD_ANALYZE is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze is not installed (Debian package: systemd), and CI must run this test")
        return
    ok = subprocess.run([SYSTEMD_ANALYZE, "verify", str(unit)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


def test_systemd_reads_the_drop_in_we_parse(service: tuple[Path, Path, Path]) -> None:
    units, _, _ = service
    if SYSTEMD_ANALYZE is None and not os.environ.get("CI"):
        pytest.skip("systemd-analyze is not installed (Debian package: systemd)")
    verify(units / "vllm.service")
    # the drop-in is really part of the unit: a bad line in it makes systemd-analyze fail
    (units / "vllm.service.d" / "10-ib.conf").write_text("[Service]\nExecStartPre=/nonexistent/gate\n")
    assert SYSTEMD_ANALYZE is not None
    bad = subprocess.run([SYSTEMD_ANALYZE, "verify", str(units / "vllm.service")], capture_output=True, text=True)
    assert bad.returncode != 0 and "/nonexistent/gate" in bad.stderr


def test_changes_are_reported_with_their_source_lines(service: tuple[Path, Path, Path], tmp_path: Path) -> None:
    units, python, env_file = service
    baseline = tmp_path / "baselines" / "vllm.json"
    made = patchaudit(
        "baseline", "create", "--python", python, "--out", baseline, "--unit", "vllm", "--unit-dir", units
    )
    assert made.returncode == 0, made.stderr
    assert f"vllm.service: NCCL_P2P_LEVEL=SYS (unit {units}/vllm.service:6)" in made.stdout
    assert f"vllm.service: NCCL_IB_DISABLE=1 (drop-in {units}/vllm.service.d/10-ib.conf:2)" in made.stdout
    alloc = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    assert f"vllm.service: {alloc} (unit {units}/vllm.service:7)" in made.stdout
    assert f"vllm.service: TRANSFORMERS_OFFLINE=1 (environment-file {env_file}:2)" in made.stdout
    assert "HOME" not in made.stdout  # not a variable that steers the stack
    assert "HF_TOKEN=<secret sha256=" in made.stdout
    assert TOKEN not in made.stdout and TOKEN not in baseline.read_text()
    held = json.loads(baseline.read_text())["environment"]["service"]
    assert held["unit"] == "vllm.service" and held["variables"]["HF_TOKEN"]["hash"].startswith("sha256=")

    check = patchaudit("baseline", "check", baseline)
    assert check.returncode == 0, check.stdout + check.stderr
    gate = patchaudit("gate", "--python", python, "--baseline", baseline)
    assert gate.returncode == 0, gate.stdout

    # The next model's bring-up: NCCL tuning changed in a new drop-in, a new vLLM switch, a .pth that
    # sets the attention backend, a rotated token.
    (units / "vllm.service.d" / "20-glm5.conf").write_text(
        "# GLM-5 bring-up\n[Service]\nEnvironment=NCCL_P2P_LEVEL=NVL\nEnvironment=VLLM_USE_DEEP_GEMM=1\n"
    )
    unit = units / "vllm.service"
    unit.write_text(unit.read_text().replace(TOKEN, TOKEN[::-1]))
    verify(unit)
    hook = site_packages(python) / "glm5_hotfix.pth"
    hook.write_text("import os; os.environ['VLLM_ATTENTION_BACKEND'] = 'FLASHMLA'\n")

    check = patchaudit("baseline", "check", baseline)
    assert check.returncode == 1
    lines = check.stdout.splitlines()
    drop_in = units / "vllm.service.d" / "20-glm5.conf"
    assert f"patchaudit: vllm.service: env-changed NCCL_P2P_LEVEL (SYS -> NVL (drop-in {drop_in}:3))" in lines
    assert f"patchaudit: vllm.service: env-added VLLM_USE_DEEP_GEMM (1 (drop-in {drop_in}:4))" in lines
    assert f"patchaudit: vllm.service: env-added VLLM_ATTENTION_BACKEND (FLASHMLA (hook {hook}:1))" in lines
    (token_line,) = [ln for ln in lines if "HF_TOKEN" in ln]
    assert token_line.startswith("patchaudit: vllm.service: env-changed HF_TOKEN (<secret sha256=")
    assert f"(unit {unit}:6)" in token_line
    assert TOKEN not in check.stdout and TOKEN[::-1] not in check.stdout

    gate = patchaudit("gate", "--python", python, "--baseline", baseline)
    assert gate.returncode == 1
    for needle in ("env-changed NCCL_P2P_LEVEL", "env-added VLLM_USE_DEEP_GEMM", "env-added VLLM_ATTENTION_BACKEND"):
        assert needle in gate.stdout

    report = json.loads(patchaudit("baseline", "check", baseline, "--format", "json").stdout)
    changes = {v["name"]: v for v in report["environment"]["variables"]}
    assert changes["NCCL_P2P_LEVEL"] == {
        "name": "NCCL_P2P_LEVEL",
        "state": "modified",
        "unit": "vllm.service",
        "expected": "SYS",
        "actual": "NVL",
        "origin": "drop-in",
        "where": f"{drop_in}:3",
    }
    assert changes["VLLM_USE_DEEP_GEMM"]["state"] == "added"


def test_the_gate_verdict_follows_the_unit_files(service: tuple[Path, Path, Path], tmp_path: Path) -> None:
    units, python, _ = service
    baseline = tmp_path / "vllm.json"
    args = ("--python", python, "--out", baseline, "--unit", "vllm.service", "--unit-dir", units)
    assert patchaudit("baseline", "create", *args).returncode == 0
    for _ in range(2):  # the second run may reuse the first verdict
        assert patchaudit("gate", "--python", python, "--baseline", baseline).returncode == 0
    (units / "vllm.service.d" / "10-ib.conf").write_text("[Service]\nEnvironment=NCCL_IB_DISABLE=0\n")
    gate = patchaudit("gate", "--python", python, "--baseline", baseline)
    assert gate.returncode == 1 and "env-changed NCCL_IB_DISABLE (1 -> 0" in gate.stdout


def test_baseline_check_exit_code_does_not_depend_on_the_format(
    service: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    units, python, _ = service
    baseline = tmp_path / "vllm.json"
    args = ("--python", python, "--out", baseline, "--unit", "vllm.service", "--unit-dir", units)
    assert patchaudit("baseline", "create", *args).returncode == 0
    (units / "vllm.service.d" / "10-ib.conf").write_text("[Service]\nEnvironment=NCCL_IB_DISABLE=0\n")
    text = patchaudit("baseline", "check", baseline)
    as_json = patchaudit("baseline", "check", baseline, "--format", "json")
    assert (text.returncode, as_json.returncode) == (1, 1), as_json.stdout + as_json.stderr
    assert json.loads(as_json.stdout)["environment"]["variables"][0]["name"] == "NCCL_IB_DISABLE"


def test_unit_file_syntax(tmp_path: Path) -> None:
    units = tmp_path / "units"
    (units / "worker@.service.d").mkdir(parents=True)
    env_file = tmp_path / "w.env"
    env_file.write_text("VLLM_PORT='8001'\nexport_not_a_name\nNCCL_DEBUG=\"INFO\"\n")
    (units / "worker@.service").write_text(
        "[Service]\nEnvironment=VLLM_PORT=8000 NCCL_DEBUG=WARN\n"
        f"EnvironmentFile={env_file}\n"
        "[Install]\nEnvironment=VLLM_NOT_A_SERVICE_KEY=1\n"
    )
    (units / "worker@.service.d" / "reset.conf").write_text(
        '[Service]\nEnvironment=\nEnvironment="CUDA_HOME=/opt/cuda 12" TORCH_P=100%%\n'
    )
    files = find("worker@gpu0.service", [units])
    assert files.fragment == units / "worker@.service"
    got = effective(settings(files))
    # an empty Environment= drops earlier assignments; EnvironmentFile= wins over Environment=
    assert {n: v.value for n, v in got.items()} == {
        "VLLM_PORT": "8001",
        "NCCL_DEBUG": "INFO",
        "CUDA_HOME": "/opt/cuda 12",
        "TORCH_P": "100%",
    }
    assert got["VLLM_PORT"].origin is Origin.ENVIRONMENT_FILE and got["VLLM_PORT"].where == f"{env_file}:1"
    assert got["CUDA_HOME"].origin is Origin.DROP_IN

    (units / "worker@.service").write_text("[Service]\nEnvironmentFile=/nonexistent/w.env\n")
    with pytest.raises(Exception, match="cannot be read"):
        settings(find("worker@gpu0.service", [units]))


def test_secrets_are_recognised_by_name_or_by_entropy() -> None:
    assert looks_secret("HF_TOKEN", "x")
    assert looks_secret("VLLM_API_KEY", "short")
    assert looks_secret("VLLM_S3_CREDENTIAL", "AKIAIOSFODNN7EXAMPLEwJalrXUtnFEMI")
    assert not looks_secret("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    assert not looks_secret("LD_LIBRARY_PATH", "/usr/local/cuda-12.4/lib64:/usr/lib/x86_64-linux-gnu")
    assert not looks_secret("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    assert not looks_secret("VLLM_ATTENTION_BACKEND", "FLASHINFER_MLA_BACKEND")


def test_unknown_unit_is_a_usage_error(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    proc = patchaudit(
        "baseline", "create", "--python", python, "--out", tmp_path / "b.json", "--unit", "nope", "--unit-dir", tmp_path
    )
    assert proc.returncode == 2 and "no unit file nope.service" in proc.stderr
    assert not (tmp_path / "b.json").exists()


CGROUP_ROOT = Path("/sys/fs/cgroup/unified")


@pytest.mark.skipif(
    not (os.geteuid() == 0 and os.access(CGROUP_ROOT, os.W_OK) and (CGROUP_ROOT / "cgroup.procs").exists()),
    reason="needs root and a writable cgroup2 hierarchy",
)
def test_the_live_service_adds_what_no_unit_file_sets(tmp_path: Path) -> None:
    """A variable the running service got from elsewhere (the manager's environment, a wrapper) is
    recorded from its /proc/PID/environ, found through the unit's cgroup."""
    import uuid

    units = tmp_path / "units"
    units.mkdir()
    unit = f"pa-env-{uuid.uuid4().hex[:8]}.service"
    (units / unit).write_text("[Service]\nEnvironment=NCCL_DEBUG=WARN\nExecStart=/bin/sleep infinity\n")
    python = _venv_with_a_distribution(tmp_path)
    group = CGROUP_ROOT / unit
    group.mkdir()
    env = {**os.environ, "VLLM_WORKER_MULTIPROC_METHOD": "spawn", "NCCL_DEBUG": "WARN"}
    argv = [str(python), "-c", f"open('{group}/cgroup.procs', 'w').write('0'); print('in', flush=True); input()"]
    service = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert service.stdout is not None and service.stdout.readline().strip() == "in"
        baseline = tmp_path / "b.json"
        made = patchaudit(
            "baseline", "create", "--python", python, "--out", baseline, "--unit", unit, "--unit-dir", units
        )
        assert made.returncode == 0, made.stderr
        assert f"{unit}: VLLM_WORKER_MULTIPROC_METHOD=spawn (process pid {service.pid})" in made.stdout
        assert f"{unit}: NCCL_DEBUG=WARN (unit {units / unit}:2)" in made.stdout
        # Only declared sources are held against the baseline: the next start is judged by its unit files.
        assert patchaudit("baseline", "check", baseline).returncode == 0
    finally:
        service.kill()
        service.wait()
        for _ in range(100):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.05)


def test_a_template_unit_with_specifiers_and_a_glob_in_environment_file(tmp_path: Path) -> None:
    units = tmp_path / "units"
    units.mkdir()
    conf = tmp_path / "conf.d"
    conf.mkdir()
    (tmp_path / "gpu0.env").write_text("CUDA_VISIBLE_DEVICES=0\n")
    (conf / "10-nccl.env").write_text("NCCL_P2P_LEVEL=SYS\n")
    (conf / "20-nccl.env").write_text("NCCL_P2P_LEVEL=NVL\n")  # a later file wins, as systemd sorts the glob
    (units / "vllm@.service").write_text(
        f"[Service]\nEnvironmentFile={tmp_path}/%i.env\nEnvironmentFile=-{conf}/*.env\n"
        f"Environment=VLLM_HOST_ID=%i VLLM_UNIT=%n\nExecStart=/bin/true\n"
    )
    verify(units / "vllm@gpu0.service")
    python = _venv_with_a_distribution(tmp_path)
    made = patchaudit(
        "baseline",
        "create",
        "--python",
        python,
        "--out",
        tmp_path / "b.json",
        "--unit",
        "vllm@gpu0",
        "--unit-dir",
        units,
    )
    assert made.returncode == 0, made.stderr
    got = {n: v.value for n, v in effective(settings(find("vllm@gpu0.service", [units]))).items()}
    assert got["CUDA_VISIBLE_DEVICES"] == "0" and got["NCCL_P2P_LEVEL"] == "NVL"
    assert f"vllm@gpu0.service: NCCL_P2P_LEVEL=NVL (environment-file {conf}/20-nccl.env:1)" in made.stdout
