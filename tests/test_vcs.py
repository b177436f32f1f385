"""Editable installs from real git repositories: drift against the commit, git's diff, revert from it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import git
import pytest
from pristine_helpers import build_wheel, make_venv, patchaudit, pip_install, record_hash, site_packages

from patchaudit.check import vcs
from patchaudit.report import DriftState
from patchaudit.target import environment

SOURCES = {"pkg/__init__.py": "", "pkg/a.py": "A = 1\n", "pkg/b.py": "B = 2\n", "README": "demo\n"}


def make_repo(root: Path) -> git.Repo:
    repo = git.Repo.init(root)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Test")
        cw.set_value("user", "email", "test@example.invalid")
    for rel, text in SOURCES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / ".gitignore").write_text("__pycache__/\n")
    repo.index.add([*SOURCES, ".gitignore"])
    repo.index.commit("initial")
    return repo


@pytest.fixture
def editable(tmp_path: Path) -> tuple[Path, Path, git.Repo]:
    """An editable install (a .pth wheel, as PEP 660 backends build) whose direct_url.json names the repo."""
    project = tmp_path / "project"
    repo = make_repo(project)
    wheel = build_wheel(tmp_path / "build", "pkg", "0.1", {"__editable__.pkg-0.1.pth": f"{project}\n".encode()})
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    (meta,) = site_packages(python).glob("pkg-0.1.dist-info")
    (meta / "direct_url.json").write_text(json.dumps({"url": project.as_uri(), "dir_info": {"editable": True}}))
    return python, project, repo


def dist_of(python: Path) -> environment.InstalledDist:
    env = environment.from_python(python)
    (dist,) = environment.select(environment.distributions(env), ["pkg"])
    return dist


def test_clean_checkout_has_no_drift(editable: tuple[Path, Path, git.Repo]) -> None:
    python, _, _ = editable
    assert vcs.working_tree_drift(dist_of(python)) == ()


def test_working_tree_drift_against_the_commit(editable: tuple[Path, Path, git.Repo]) -> None:
    python, project, _ = editable
    (project / "pkg/a.py").write_text("A = 'patched'\n")
    (project / "pkg/b.py").unlink()
    (project / "pkg/c.py").write_text("import pdb\n")
    drift = {d.path: d for d in vcs.working_tree_drift(dist_of(python)) or ()}
    assert {p: d.state for p, d in drift.items()} == {
        "pkg/a.py": DriftState.MODIFIED,
        "pkg/b.py": DriftState.MISSING,
        "pkg/c.py": DriftState.ADDED,
    }
    assert drift["pkg/a.py"].expected != drift["pkg/a.py"].actual


def test_recorded_commit_id_wins_over_head(editable: tuple[Path, Path, git.Repo]) -> None:
    python, project, repo = editable
    first = repo.head.commit.hexsha
    (project / "pkg/a.py").write_text("A = 'second commit'\n")
    repo.index.add(["pkg/a.py"])
    repo.index.commit("second")
    dist = dist_of(python)
    (dist.meta_dir / "direct_url.json").write_text(
        json.dumps(
            {"url": project.as_uri(), "dir_info": {"editable": True}, "vcs_info": {"vcs": "git", "commit_id": first}}
        )
    )
    assert [(d.path, d.state) for d in vcs.working_tree_drift(dist) or ()] == [("pkg/a.py", DriftState.MODIFIED)]


def test_not_a_checkout_is_none(editable: tuple[Path, Path, git.Repo]) -> None:
    python, project, _ = editable
    shutil.rmtree(project / ".git")
    assert vcs.working_tree_drift(dist_of(python)) is None


def test_diff_is_gits_and_revert_restores_from_the_commit(editable: tuple[Path, Path, git.Repo]) -> None:
    python, project, _ = editable
    (project / "pkg/a.py").write_text("A = 'patched'\n")
    (project / "pkg/b.py").unlink()
    (project / "pkg/c.py").write_text("import pdb\n")
    shown = patchaudit("diff", "pkg", "--python", str(python))
    assert shown.returncode == 1
    assert "--- pkg/a.py\n+++ pkg/a.py\n" in shown.stdout
    assert "+A = 'patched'" in shown.stdout and "-B = 2" in shown.stdout and "+import pdb" in shown.stdout

    proc = patchaudit("revert", "pkg", "--python", str(python), "--yes", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert sorted(out["restored"]) == ["pkg/a.py", "pkg/b.py"] and out["removed"] == ["pkg/c.py"]
    assert (project / "pkg/a.py").read_text() == "A = 1\n"
    assert (project / "pkg/b.py").read_text() == "B = 2\n"
    assert not (project / "pkg/c.py").exists()
    run = Path(out["quarantine"])
    assert (run / "files/pkg/a.py").read_text() == "A = 'patched'\n"
    assert (run / "files/pkg/c.py").read_text() == "import pdb\n"
    assert vcs.working_tree_drift(dist_of(python)) == ()

    undo = patchaudit("quarantine", "restore", run.name, "--python", str(python), "--yes")
    assert undo.returncode == 0, undo.stderr
    assert (project / "pkg/a.py").read_text() == "A = 'patched'\n"
    assert (project / "pkg/c.py").read_text() == "import pdb\n"


def record_direct_url(python: Path) -> None:
    """Make RECORD list the edited direct_url.json with its hash, as pip writes it for `pip install -e`."""
    (meta,) = site_packages(python).glob("pkg-0.1.dist-info")
    direct_url = (meta / "direct_url.json").read_bytes()
    lines = [ln for ln in (meta / "RECORD").read_text().splitlines() if not ln.startswith(f"{meta.name}/direct_url")]
    lines.append(f"{meta.name}/direct_url.json,{record_hash(direct_url)},{len(direct_url)}")
    (meta / "RECORD").write_text("\n".join(lines) + "\n")


def test_scan_reports_working_tree_drift_of_an_editable_install(editable: tuple[Path, Path, git.Repo]) -> None:
    python, project, _ = editable
    record_direct_url(python)
    proc = patchaudit("scan", "pkg", "--python", python, "--format", "json", "--no-hazards")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (pkg,) = json.loads(proc.stdout)["distributions"]
    assert pkg["source"] == "editable" and pkg["status"] == "clean"
    assert pkg["location"] == str(project.resolve())

    (project / "pkg/a.py").write_text("A = 'patched'\n")
    proc = patchaudit("scan", "pkg", "--python", python, "--format", "json", "--no-hazards")
    assert proc.returncode == 1
    (pkg,) = json.loads(proc.stdout)["distributions"]
    assert [(d["path"], d["state"]) for d in pkg["drift"]] == [("pkg/a.py", "modified")]


def test_warm_gate_sees_an_edit_in_the_editable_checkout(editable: tuple[Path, Path, git.Repo]) -> None:
    python, project, _ = editable
    record_direct_url(python)
    assert patchaudit("gate", "pkg", "--python", python).returncode == 0
    assert patchaudit("gate", "pkg", "--python", python).returncode == 0  # warm
    (project / "pkg/a.py").write_text("A = 'patched'\n")
    proc = patchaudit("gate", "pkg", "--python", python)
    assert proc.returncode == 1, proc.stdout
    assert "pkg/a.py" in proc.stdout


# Real installs by real pip: a hatchling project in a real git repository.
PYPROJECT = """[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "pkg"
version = "0.1"

[tool.hatch.build.targets.wheel]
packages = ["pkg"]
dev-mode-dirs = ["."]
"""


def hatchling_repo(root: Path) -> git.Repo:
    repo = make_repo(root)
    (root / "pyproject.toml").write_text(PYPROJECT)
    repo.index.add(["pyproject.toml"])
    repo.index.commit("build with hatchling")
    return repo


def real_pip(python: Path | None, *args: str, cache: Path | None = None) -> None:
    """pip, offline, into the env of `python` (None: the test run's own pip, for `pip wheel`).

    The build backend (hatchling, from this test run's environment) is put on PYTHONPATH for
    `--no-build-isolation`, so building needs no index. `cache`: pip's cache dir (default: none).
    """
    target = ["--python", str(python)] if python is not None else []
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    if cache is None:
        env["PIP_NO_CACHE_DIR"] = "1"
    else:
        env["PIP_CACHE_DIR"] = str(cache)
    subprocess.run(
        [sys.executable, "-m", "pip", *target, "-q", "--disable-pip-version-check", *args]
        + ["--no-build-isolation", "--no-deps", "--no-index"],
        check=True,
        env=env,
    )


def scan_json(python: Path) -> tuple[int, dict]:
    proc = patchaudit("scan", "pkg", "--python", str(python), "--format", "json", "--no-hazards")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    (pkg,) = json.loads(proc.stdout)["distributions"]
    return proc.returncode, pkg


@pytest.mark.parametrize("how", ["directory", "git-url"])
def test_real_editable_install_scans_diffs_and_reverts_against_its_commit(tmp_path: Path, how: str) -> None:
    repo = hatchling_repo(tmp_path / "project")
    python = make_venv(tmp_path / "venv")
    if how == "directory":
        real_pip(python, "install", "-e", str(tmp_path / "project"))
        project = tmp_path / "project"
    else:  # pip clones into <venv>/src/pkg and installs that checkout editable
        real_pip(python, "install", "-e", f"git+{(tmp_path / 'project').as_uri()}#egg=pkg")
        project = tmp_path / "venv" / "src" / "pkg"
    assert (project / ".git").is_dir()
    assert not (site_packages(python) / "pkg").exists()  # the code runs from the checkout

    code, pkg = scan_json(python)
    assert (code, pkg["source"], pkg["status"], pkg["location"]) == (0, "editable", "clean", str(project.resolve()))

    (project / "pkg/a.py").write_text("A = 'patched'\n")
    (project / "pkg/c.py").write_text("import pdb\n")
    code, pkg = scan_json(python)
    assert code == 1
    assert [(d["path"], d["state"]) for d in pkg["drift"]] == [("pkg/a.py", "modified"), ("pkg/c.py", "added")]
    shown = patchaudit("diff", "pkg", "--python", str(python))
    assert shown.returncode == 1 and "-A = 1\n+A = 'patched'" in shown.stdout and "+import pdb" in shown.stdout

    proc = patchaudit("revert", "pkg", "--python", str(python), "--yes", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert (project / "pkg/a.py").read_text() == "A = 1\n" and not (project / "pkg/c.py").exists()
    assert git.Repo(project).git.status("--porcelain") == ""
    assert scan_json(python)[0] == 0
    if how == "directory":
        assert repo.head.commit.hexsha == git.Repo(project).head.commit.hexsha


def test_real_vcs_install_is_held_to_its_record_and_reverted_from_its_wheel(tmp_path: Path) -> None:
    project = tmp_path / "project"
    commit = hatchling_repo(project).head.commit.hexsha
    python = make_venv(tmp_path / "venv")
    # pinned to a commit, pip keeps the wheel it built in its cache
    real_pip(python, "install", f"git+{project.as_uri()}@{commit}", cache=tmp_path / "pip-cache")
    site = site_packages(python)
    direct_url = json.loads(next(site.glob("pkg-0.1.dist-info")).joinpath("direct_url.json").read_text())
    assert direct_url["vcs_info"]["commit_id"] == commit

    code, pkg = scan_json(python)
    assert (code, pkg["source"], pkg["status"], pkg["location"]) == (0, "vcs", "clean", str(site))

    (site / "pkg/a.py").write_text("A = 'patched'\n")
    code, pkg = scan_json(python)
    assert code == 1 and [(d["path"], d["state"]) for d in pkg["drift"]] == [("pkg/a.py", "modified")]

    # what runs is the built wheel, not the checkout: diff needs that wheel
    no_cache = {"PIP_CACHE_DIR": str(tmp_path / "empty-cache")}
    refused = patchaudit("diff", "pkg", "--python", str(python), env=no_cache)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "--wheelhouse" in refused.stderr
    pip_cache = {"PIP_CACHE_DIR": str(tmp_path / "pip-cache")}
    from_pip_cache = patchaudit("diff", "pkg", "--python", str(python), env=pip_cache)
    assert from_pip_cache.returncode == 1 and "-A = 1\n+A = 'patched'" in from_pip_cache.stdout

    real_pip(None, "wheel", "-w", str(tmp_path / "wheels"), f"git+{project.as_uri()}@{commit}")
    wheelhouse = str(tmp_path / "wheels")
    proc = patchaudit("revert", "pkg", "--python", str(python), "--wheelhouse", wheelhouse, "--yes", env=no_cache)
    assert proc.returncode == 0, proc.stderr
    assert (site / "pkg/a.py").read_text() == "A = 1\n"
    assert scan_json(python)[0] == 0
