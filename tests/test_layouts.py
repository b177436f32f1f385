"""Every common environment layout opens with --python, on real interpreters, without running its .pth files.

Each layout is built the way operators build it (Debian's python3 -m venv, virtualenv, uv venv, a pyenv
interpreter, a conda-style prefix, the system interpreter with pip installs in /usr/local), a real wheel
is installed into it, and `patchaudit scan --python` must find it clean. The layout read from
pyvenv.cfg and the tree (used as root when the interpreter is not root's alone) must equal what the
interpreter answers, layout by layout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from wheels import build_wheel, patchaudit

from patchaudit.target import environment

DEBIAN_PYTHON = Path("/usr/bin/python3")
BIN = Path(sys.executable).parent


def _is_debian_python(python: Path) -> bool:
    if not python.exists():
        return False
    proc = subprocess.run(
        [str(python), "-I", "-S", "-c", "import sysconfig; print(sysconfig.get_default_scheme())"],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() in ("posix_local", "deb_system")


needs_debian_python = pytest.mark.skipif(
    not _is_debian_python(DEBIAN_PYTHON), reason="no Debian/Ubuntu system python3 on this machine"
)


def _pip(python: Path, *wheels: Path, extra: tuple[str, ...] = ()) -> None:
    """Install with the test runner's pip; uv where that pip no longer supports the target's Python
    (pip's Requires-Python moves on, old interpreters stay in the field)."""
    from importlib.metadata import metadata

    from packaging.specifiers import SpecifierSet

    supported = SpecifierSet(metadata("pip")["Requires-Python"] or "")
    if _minor(python) not in supported:
        subprocess.run(
            [str(BIN / "uv"), "pip", "install", "-q", "--python", str(python), "--no-index", "--no-deps"]
            + [*extra, *map(str, wheels)],
            check=True,
            env=_uv_env(None),
        )
        return
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index", "--no-deps"]
        + ["--no-cache-dir", "--disable-pip-version-check", *extra, *map(str, wheels)],
        check=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )


def _wheel(tmp: Path, name: str) -> Path:
    return build_wheel(
        tmp / "wheels", name, "1.0", {f"{name}/__init__.py": "VALUE = 1\n", f"{name}/core.py": "X = 2\n"}
    )


def _plant_pth(site: Path, marker: Path) -> None:
    (site / "zz_marker.pth").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")


def _scan_json(python: Path, *names: str) -> tuple[int, dict[str, object]]:
    proc = patchaudit("scan", *names, "--python", python, "--no-hazards", "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _same_layout(python: Path) -> environment.Environment:
    """The interpreter's answer, checked against the layout read from the tree alone."""
    probed = environment.from_python(python)
    assert probed.not_executed is None, probed.not_executed
    derived = environment.from_python(python, tree_only=True)
    assert derived.not_executed is not None
    assert (derived.prefix, derived.site_dirs, derived.scheme, derived.borrowed) == (
        probed.prefix,
        probed.site_dirs,
        probed.scheme,
        probed.borrowed,
    )
    return probed


def _opens_clean(tmp_path: Path, python: Path, site: Path, prefix: Path) -> None:
    """A wheel installed into the layout scans clean; the probe ran none of the layout's .pth files."""
    marker = tmp_path / "pth-ran"
    _plant_pth(site, marker)
    env = _same_layout(python)
    assert not marker.exists(), "opening the environment must not execute its .pth files"
    assert env.prefix == prefix
    assert env.site_dirs[0] == site
    assert env.scheme["purelib"] == site
    code, report = _scan_json(python, "layoutpkg")
    assert not marker.exists()
    (dist,) = report["distributions"]  # type: ignore[misc]
    assert dist["status"] == "clean", dist
    assert dist["location"] == str(site)
    # the planted .pth is an unowned startup hook: that is what a user must see, and nothing else
    assert [d["path"] for d in report["environment"]["drift"]] == ["zz_marker.pth"]  # type: ignore[index]
    assert code == 1


@needs_debian_python
def test_venv_of_debian_python(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([str(DEBIAN_PYTHON), "-m", "venv", "--without-pip", str(venv)], check=True)
    _pip(venv / "bin" / "python", _wheel(tmp_path, "layoutpkg"))
    site = venv / "lib" / _version_dir(DEBIAN_PYTHON) / "site-packages"
    _opens_clean(tmp_path, venv / "bin" / "python", site, venv)


@needs_debian_python
def test_venv_of_debian_python_with_pip_from_python3_venv(tmp_path: Path) -> None:
    """`python3 -m venv` as people type it: with pip, from Debian's python3-venv (ensurepip)."""
    venv = tmp_path / "venv"
    subprocess.run([str(DEBIAN_PYTHON), "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--no-deps", str(_wheel(tmp_path, "layoutpkg"))],
        check=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )
    code, report = _scan_json(venv / "bin" / "python")
    names = {d["name"]: d["status"] for d in report["distributions"]}  # type: ignore[attr-defined]
    assert names["layoutpkg"] == "clean"
    assert names["pip"] == "clean", report
    assert code == 0, report


@needs_debian_python
def test_virtualenv_of_debian_python(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run(
        [
            str(BIN / "virtualenv"),
            "-q",
            "--no-pip",
            "--no-setuptools",
            "--no-wheel",
            "-p",
            str(DEBIAN_PYTHON),
            str(venv),
        ],
        check=True,
    )
    _pip(venv / "bin" / "python", _wheel(tmp_path, "layoutpkg"))
    site = venv / "lib" / _version_dir(DEBIAN_PYTHON) / "site-packages"
    _opens_clean(tmp_path, venv / "bin" / "python", site, venv)


@needs_debian_python
def test_uv_venv_of_debian_python(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    uv = BIN / "uv"
    subprocess.run([str(uv), "venv", "-q", "-p", str(DEBIAN_PYTHON), str(venv)], check=True, env=_uv_env(tmp_path))
    subprocess.run(
        [str(uv), "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "--no-index"]
        + [str(_wheel(tmp_path, "layoutpkg"))],
        check=True,
        env=_uv_env(tmp_path),
    )
    site = venv / "lib" / _version_dir(DEBIAN_PYTHON) / "site-packages"
    _opens_clean(tmp_path, venv / "bin" / "python", site, venv)


@needs_debian_python
def test_venv_with_system_site_packages_reads_but_never_owns_the_system_dirs(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([str(DEBIAN_PYTHON), "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    env = _same_layout(venv / "bin" / "python")
    system = Path("/usr/lib/python3/dist-packages")
    assert env.site_dirs[0] == venv / "lib" / _version_dir(DEBIAN_PYTHON) / "site-packages"
    if system.is_dir():
        assert system in env.site_dirs
        assert system in env.borrowed
    assert all(not str(root).startswith("/usr/") for root in env.writable_roots())


def _pyenv_interpreters() -> list[Path]:
    """Real CPython builds of pyenv (python3 on PATH is pyenv's here); one per minor version."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found: dict[tuple[int, int], Path] = {}
    for version in root.glob("3.*") if root.is_dir() else []:
        minor = ".".join(version.name.split(".")[:2])
        exe = version / "bin" / f"python{minor}"
        key = (int(minor.split(".")[0]), int(minor.split(".")[1]))
        if exe.is_file() and key >= (3, 8):
            found[key] = exe
    # the oldest (no `venv` sysconfig scheme before 3.11), the one this suite runs on, the newest
    ours = sys.version_info[:2]
    keys = sorted(found)
    picked = {keys[0], keys[-1], *([ours] if ours in found else [])} if keys else set()
    return [found[k] for k in sorted(picked)]


@pytest.mark.parametrize("python", _pyenv_interpreters() or [None], ids=lambda p: p.parent.parent.name if p else "none")
def test_pyenv_interpreter_and_its_venv(tmp_path: Path, python: Path | None) -> None:
    if python is None:
        pytest.skip("no pyenv interpreter on this machine")
    prefix = python.parent.parent
    env = _same_layout(python)
    assert env.prefix == prefix
    assert env.site_dirs == (prefix / "lib" / python.name / "site-packages",)
    venv = tmp_path / "venv"
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(venv)], check=True)
    _pip(venv / "bin" / "python", _wheel(tmp_path, "layoutpkg"))
    _opens_clean(tmp_path, venv / "bin" / "python", venv / "lib" / python.name / "site-packages", venv)


def test_uv_managed_interpreter(tmp_path: Path) -> None:
    uv = BIN / "uv"
    proc = subprocess.run(
        [str(uv), "python", "find", "--managed-python"], capture_output=True, text=True, env=_uv_env(None)
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        pytest.skip("no uv-managed interpreter installed (`uv python install` downloads one; no network here)")
    python = Path(proc.stdout.strip())
    env = _same_layout(python)
    assert env.site_dirs[0].name == "site-packages"
    venv = tmp_path / "venv"
    subprocess.run([str(uv), "venv", "-q", "-p", str(python), str(venv)], check=True, env=_uv_env(tmp_path))
    _pip(venv / "bin" / "python", _wheel(tmp_path, "layoutpkg"))
    _opens_clean(tmp_path, venv / "bin" / "python", venv / "lib" / f"python{_minor(python)}" / "site-packages", venv)


def test_conda_style_prefix_with_pip_installs(tmp_path: Path) -> None:
    """A conda environment is a prefix with its own interpreter, not a venv: bin/python3.X,
    lib/python3.X/site-packages, conda-meta/. Conda's channels are out of reach here, so the prefix
    is built from a real CPython build (its binary copied, its stdlib linked), as conda lays it out."""
    base = next(iter(_pyenv_interpreters()), None) or _real_base_interpreter()
    minor = _minor(base)
    prefix = tmp_path / "conda" / "envs" / "serve"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "conda-meta").mkdir()
    (prefix / "conda-meta" / "history").write_text("==> 2026-01-01 00:00:00 <==\n# cmd: conda create -n serve\n")
    shutil.copy2(base, prefix / "bin" / f"python{minor}")
    (prefix / "bin" / "python").symlink_to(f"python{minor}")
    stdlib = base.parent.parent / "lib" / f"python{minor}"
    (prefix / "lib" / f"python{minor}" / "site-packages").mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name != "site-packages":
            (prefix / "lib" / f"python{minor}" / entry.name).symlink_to(entry)
    python = prefix / "bin" / "python"
    _pip(python, _wheel(tmp_path, "layoutpkg"))
    _opens_clean(tmp_path, python, prefix / "lib" / f"python{minor}" / "site-packages", prefix)


@needs_debian_python
def test_system_interpreter_opens_with_its_dist_packages() -> None:
    env = _same_layout(DEBIAN_PYTHON)
    local = Path("/usr/local/lib") / _version_dir(DEBIAN_PYTHON) / "dist-packages"
    assert env.scheme["purelib"] == local
    assert env.scheme["scripts"] == Path("/usr/local/bin")
    for expected in (local, Path("/usr/lib/python3/dist-packages")):
        if expected.is_dir():
            assert expected in env.site_dirs


def test_pip_install_into_the_system_interpreter_like_a_container_image(tmp_path: Path) -> None:
    """`pip install` into the image's system python lands in /usr/local/lib/python3.X/dist-packages.

    Run in a private mount namespace over an empty /usr/local dist-packages, so the machine's own
    stays untouched.
    """
    if not _is_debian_python(DEBIAN_PYTHON):
        pytest.skip("no Debian/Ubuntu system python3 on this machine")
    local = Path("/usr/local/lib") / _version_dir(DEBIAN_PYTHON) / "dist-packages"
    wheel = _wheel(tmp_path, "layoutpkg")
    out = tmp_path / "report.json"
    script = f"""
set -e
mkdir -p {local}
mount -t tmpfs -o mode=0755 tmpfs {local}
PIP_CONFIG_FILE=/dev/null {sys.executable} -m pip --python {DEBIAN_PYTHON} install -q --no-index --no-deps \
    --no-cache-dir --disable-pip-version-check --break-system-packages --no-warn-script-location {wheel}
set +e
{BIN / "patchaudit"} scan layoutpkg --python {DEBIAN_PYTHON} --no-hazards --no-cache --format json > {out}
echo "exit=$?"
echo 'X = 3' >> {local}/layoutpkg/core.py
{BIN / "patchaudit"} scan layoutpkg --python {DEBIAN_PYTHON} --no-hazards --no-cache --format json > {out}.2
echo "exit=$?"
"""
    proc = _in_mount_namespace(script)
    report = json.loads(out.read_text())
    (dist,) = report["distributions"]
    assert dist["location"] == str(local)
    assert dist["status"] == "clean", dist
    assert str(local) in report["target"]["paths"]
    patched = json.loads((tmp_path / "report.json.2").read_text())
    (dist,) = patched["distributions"]
    assert [(d["path"], d["state"]) for d in dist["drift"]] == [("layoutpkg/core.py", "modified")]
    assert proc.stdout.splitlines()[-1] == "exit=1", proc.stdout
    assert not (local / "layoutpkg").exists(), "the install stayed inside the private namespace"


def _in_mount_namespace(script: str) -> subprocess.CompletedProcess[str]:
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to install into the system interpreter privately")
    probe = subprocess.run([unshare, "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"mount namespaces are not allowed here: {probe.stderr.decode().strip()}")
    proc = subprocess.run(
        [unshare, "-m", "--propagation", "private", "bash", "-c", script], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _version_dir(python: Path) -> str:
    return f"python{_minor(python)}"


def _minor(python: Path) -> str:
    proc = subprocess.run(
        [str(python), "-I", "-S", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.strip()


def _real_base_interpreter() -> Path:
    proc = subprocess.run(
        [sys.executable, "-c", "import sys, os; print(os.path.realpath(sys._base_executable))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(proc.stdout.strip())


def _uv_env(tmp: Path | None) -> dict[str, str]:
    env = {**os.environ, "UV_NO_CONFIG": "1", "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never"}
    if tmp is not None:
        env["UV_CACHE_DIR"] = str(tmp / "uv-cache")
    return env
