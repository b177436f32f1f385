"""The target environment is found by asking its interpreter, without running anything of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from wheels import build_wheel, make_venv, patchaudit, pip_install, site_packages

from patchaudit.target import environment


def test_probe_runs_no_pth_file_of_the_target(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    marker = tmp_path / "pth-ran"
    (site_packages(python) / "evil.pth").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")
    env = environment.from_python(python)
    assert not marker.exists(), "asking the target for its paths must not execute its .pth files"
    assert env.site_dirs == (site_packages(python),)
    assert env.prefix == tmp_path / "venv"
    assert env.scheme["scripts"] == tmp_path / "venv" / "bin"


def test_path_option_infers_prefix(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    env = environment.from_path(site_packages(python))
    assert env.prefix == tmp_path / "venv"
    assert env.state_dir == tmp_path / "venv" / ".patchaudit"


def test_python_m_patchaudit_scans_its_own_environment() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "patchaudit", "scan", "patchaudit", "--format", "json", "--no-hazards"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    (ours,) = [d for d in report["distributions"] if d["name"] == "patchaudit"]
    assert str(Path(sys.prefix)) in report["target"]["python"] or report["target"]["python"].startswith(sys.prefix)
    assert ours["files_checked"] > 0


def test_whole_environment_scan_of_a_fresh_venv_is_clean(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(tmp_path / "w", "solo", "1.0", {"solo.py": "S = 1\n"}))
    proc = patchaudit("scan", "--python", python, "--no-hazards")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 distribution," in proc.stdout


def test_canonical_name_is_packagings() -> None:
    from packaging.utils import canonicalize_name

    names = [
        "Django",
        "zope.interface",
        "Foo__Bar",
        "a.-_b",
        "--x--",
        "torch_c_dlpack_ext",
        "ÄBc.D",
        "nvidia-cuda-runtime-cu12",
    ]
    assert [environment.canonical_name(n) for n in names] == [canonicalize_name(n) for n in names]
