"""Editable installs from real git repositories: drift against the commit, git's diff, revert from it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import git
import pytest
from pristine_helpers import build_wheel, make_venv, patchaudit, pip_install, record_hash, site_packages

from patchaudit import environment, vcs
from patchaudit.report import DriftState

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
