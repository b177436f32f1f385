"""`patchaudit revert` without DIST: every drifted distribution and the unowned startup hooks, one run, one undo."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest
from pristine_helpers import ROOT, build_wheel, make_venv, patchaudit, pip_install, record_hash, site_packages

ALPHA = {"alpha/__init__.py": b"", "alpha/core.py": b"def f():\n    return 1\n", "shared_tool.py": b"OWNER = 'alpha'\n"}
BETA = {"beta/__init__.py": b"", "beta/core.py": b"def g():\n    return 2\n", "shared_tool.py": b"OWNER = 'beta'\n"}
EVIL = b"import os; os.environ.setdefault('EVIL', '1')\n"
PATCH = b"import torch\ndef f():\n    torch.save({}, '/tmp/x')\n    return 1\n"
SITECUSTOMIZE = b"import os\nos.environ['SITE'] = '1'\n"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """alpha and beta installed (both ship shared_tool.py: beta's, installed later, wins); wheels moved aside."""
    root = tmp_path_factory.mktemp("revert-env")
    alpha = build_wheel(root / "build", "alpha", "1.0", ALPHA)
    beta = build_wheel(root / "build", "beta", "1.0", BETA)
    python = make_venv(root / "venv")
    pip_install(python, alpha)
    pip_install(python, beta)
    (root / "wheelhouse").mkdir()
    for wheel in (alpha, beta):
        wheel.rename(root / "wheelhouse" / wheel.name)
    return root / "venv", root / "wheelhouse"


def _patched(base: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path, Path]:
    """A copy of the venv with two drifted distributions, an added file and two planted startup hooks."""
    src, wheelhouse = base
    shutil.copytree(src, tmp_path / "venv", symlinks=True)
    python = tmp_path / "venv" / "bin" / "python"
    site = site_packages(python)
    (site / "alpha/core.py").write_bytes(PATCH)
    (site / "alpha/extra.py").write_bytes(b"EXTRA = 1\n")
    (site / "beta/core.py").write_bytes(b"def g():\n    return 3\n")
    (site / "evil.pth").write_bytes(EVIL)
    (site / "sitecustomize.py").write_bytes(SITECUSTOMIZE)
    return python, site, wheelhouse


def _tree(root: Path) -> dict[str, bytes]:
    """Every file below `root` but patchaudit's own state, with its bytes."""
    out = {}
    for path in sorted(root.rglob("*")):
        if (
            path.is_file()
            and not path.is_symlink()
            and ".patchaudit" not in path.parts
            and "__pycache__" not in path.parts
        ):
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


def _scan(python: Path) -> tuple[int, dict]:
    proc = patchaudit("scan", "--python", str(python), "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _drift(report: dict) -> list[tuple[str, str, str]]:
    found = [(d["name"], x["path"], x["state"]) for d in report["distributions"] for x in d["drift"]]
    found += [("", x["path"], x["state"]) for x in report["environment"]["drift"]]
    return sorted(found)


def test_dry_run_lists_every_distribution_the_hooks_and_what_it_leaves(base: tuple[Path, Path], tmp_path: Path) -> None:
    python, site, wheelhouse = _patched(base, tmp_path)
    before = _tree(tmp_path / "venv")
    proc = patchaudit("revert", "--python", str(python), "--wheelhouse", str(wheelhouse), "--dry-run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    # grouped by distribution, then the hooks
    assert out.index("alpha 1.0") < out.index("alpha/core.py") < out.index("beta 1.0") < out.index("beta/core.py")
    assert "would restore" in out and "would remove" in out and "alpha/extra.py" in out
    assert out.index("startup hooks") < out.index("evil.pth") and "sitecustomize.py" in out
    assert "would quarantine" in out
    # the overwritten path is left alone, with the reason
    assert "left alone alpha: shared_tool.py (overwritten)" in out and "beta 1.0" in out
    assert _tree(tmp_path / "venv") == before
    assert not (tmp_path / "venv/.patchaudit/quarantine").exists() or not os.listdir(
        tmp_path / "venv/.patchaudit/quarantine"
    )


def test_one_run_reverts_all_and_one_restore_puts_all_back(base: tuple[Path, Path], tmp_path: Path) -> None:
    python, site, wheelhouse = _patched(base, tmp_path)
    code, original = _scan(python)
    assert code == 1
    drift = _drift(original)
    assert ("alpha", "alpha/core.py", "modified") in drift and ("beta", "beta/core.py", "modified") in drift
    assert ("", "evil.pth", "added") in drift and ("", "sitecustomize.py", "added") in drift
    patched_tree = _tree(tmp_path / "venv")
    shared = (site / "shared_tool.py").stat()

    proc = patchaudit("revert", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    code, after = _scan(python)
    assert code == 0, _drift(after)
    assert (site / "alpha/core.py").read_bytes() == ALPHA["alpha/core.py"]
    assert (site / "beta/core.py").read_bytes() == BETA["beta/core.py"]
    assert not (site / "alpha/extra.py").exists()
    assert not (site / "evil.pth").exists() and not (site / "sitecustomize.py").exists()
    # the overwritten file is untouched (same inode, same bytes: beta's)
    assert (site / "shared_tool.py").read_bytes() == BETA["shared_tool.py"]
    assert (site / "shared_tool.py").stat().st_ino == shared.st_ino
    # one run holds it all, each file under its distribution, the hooks under _hooks/
    (run_id,) = os.listdir(tmp_path / "venv/.patchaudit/quarantine")
    files = tmp_path / "venv/.patchaudit/quarantine" / run_id / "files"
    assert (files / "_hooks/evil.pth").read_bytes() == EVIL
    assert (files / "_hooks/sitecustomize.py").read_bytes() == SITECUSTOMIZE
    assert (files / "alpha/alpha/core.py").read_bytes() == PATCH
    assert (files / "beta/beta/core.py").is_file()
    listed = patchaudit("quarantine", "list", "--python", str(python), "--format", "json")
    (row,) = json.loads(listed.stdout)
    assert row["dist"] == "environment" and row["dists"] == {"alpha": 2, "beta": 1, "startup hooks": 2}
    human = patchaudit("quarantine", "list", "--python", str(python)).stdout
    assert "alpha: 2, beta: 1, startup hooks: 2" in human

    undo = patchaudit("quarantine", "restore", run_id, "--python", str(python), "--yes")
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert "put back alpha: alpha/core.py" in undo.stdout and "put back startup hook evil.pth" in undo.stdout
    # the undo is a run of its own that names the distributions too
    rows = json.loads(patchaudit("quarantine", "list", "--python", str(python), "--format", "json").stdout)
    (undo_row,) = [r for r in rows if r["undo_of"] == run_id]
    assert undo_row["op"] == "undo" and undo_row["dists"] == {"alpha": 2, "beta": 1, "startup hooks": 2}
    code, again = _scan(python)
    assert code == 1 and _drift(again) == drift
    assert (site / "evil.pth").read_bytes() == EVIL and (site / "sitecustomize.py").read_bytes() == SITECUSTOMIZE
    assert _tree(tmp_path / "venv") == patched_tree


def test_a_distribution_without_pristine_source_refuses_the_run_unless_skipped(
    base: tuple[Path, Path], tmp_path: Path
) -> None:
    python, site, wheelhouse = _patched(base, tmp_path)
    only_alpha = tmp_path / "only-alpha"
    only_alpha.mkdir()
    for wheel in wheelhouse.glob("alpha-*.whl"):
        shutil.copy(wheel, only_alpha)
    before = _tree(tmp_path / "venv")
    proc = patchaudit("revert", "--python", str(python), "--wheelhouse", str(only_alpha), "--yes")
    assert proc.returncode == 2 and "cannot be reverted (beta)" in proc.stderr and "--skip-unavailable" in proc.stderr
    assert "cannot revert beta 1.0" in proc.stdout
    assert _tree(tmp_path / "venv") == before

    dry = patchaudit("revert", "--python", str(python), "--wheelhouse", str(only_alpha), "--dry-run")
    assert dry.returncode == 1 and "cannot revert beta 1.0" in dry.stdout and "alpha/core.py" in dry.stdout

    proc = patchaudit("revert", "--python", str(python), "--wheelhouse", str(only_alpha), "--yes", "--skip-unavailable")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cannot revert beta 1.0" in proc.stdout
    code, after = _scan(python)
    assert _drift(after) == [("alpha", "shared_tool.py", "overwritten"), ("beta", "beta/core.py", "modified")]
    assert not (site / "evil.pth").exists()


def test_a_shared_path_equal_to_neither_owner_is_refused_not_guessed(base: tuple[Path, Path], tmp_path: Path) -> None:
    python, site, wheelhouse = _patched(base, tmp_path)
    (site / "shared_tool.py").write_bytes(b"OWNER = 'someone else'\n")
    proc = patchaudit("revert", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "refused alpha: shared_tool.py: several distributions" in proc.stdout
    assert "refused beta: shared_tool.py: several distributions" in proc.stdout
    assert (site / "shared_tool.py").read_bytes() == b"OWNER = 'someone else'\n"
    assert (site / "alpha/core.py").read_bytes() == ALPHA["alpha/core.py"] and not (site / "evil.pth").exists()


def test_an_editable_checkout_and_a_wheel_install_in_one_run(tmp_path: Path) -> None:
    """The editable install is put back from its commit, the wheel install from its wheel: one run, one undo."""
    project = tmp_path / "project"
    repo = git.Repo.init(project)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Test")
        cw.set_value("user", "email", "test@example.invalid")
    (project / "pkg").mkdir()
    (project / "pkg/__init__.py").write_text("")
    (project / "pkg/a.py").write_text("A = 1\n")
    (project / ".gitignore").write_text("__pycache__/\n")
    repo.index.add(["pkg/__init__.py", "pkg/a.py", ".gitignore"])
    repo.index.commit("initial")
    editable = build_wheel(tmp_path / "build", "pkg", "0.1", {"__editable__.pkg-0.1.pth": f"{project}\n".encode()})
    alpha = build_wheel(tmp_path / "wheelhouse", "alpha", "1.0", ALPHA)
    python = make_venv(tmp_path / "venv")
    pip_install(python, editable, alpha)
    site = site_packages(python)
    (meta,) = site.glob("pkg-0.1.dist-info")
    direct_url = json.dumps({"url": project.as_uri(), "dir_info": {"editable": True}}).encode()
    (meta / "direct_url.json").write_bytes(direct_url)
    lines = [ln for ln in (meta / "RECORD").read_text().splitlines() if "direct_url" not in ln]
    lines.append(f"{meta.name}/direct_url.json,{record_hash(direct_url)},{len(direct_url)}")
    (meta / "RECORD").write_text("\n".join(lines) + "\n")
    assert _scan(python)[0] == 0

    (project / "pkg/a.py").write_text("A = 'patched'\n")
    (site / "alpha/core.py").write_bytes(PATCH)
    code, original = _scan(python)
    assert code == 1 and ("pkg", "pkg/a.py", "modified") in _drift(original)
    proc = patchaudit("revert", "--python", str(python), "--wheelhouse", str(tmp_path / "wheelhouse"), "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (project / "pkg/a.py").read_text() == "A = 1\n" and (site / "alpha/core.py").read_bytes() == ALPHA[
        "alpha/core.py"
    ]
    assert _scan(python)[0] == 0
    (run_id,) = os.listdir(tmp_path / "venv/.patchaudit/quarantine")
    undo = patchaudit("quarantine", "restore", run_id, "--python", str(python), "--yes")
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert (project / "pkg/a.py").read_text() == "A = 'patched'\n" and (site / "alpha/core.py").read_bytes() == PATCH
    assert _drift(_scan(python)[1]) == _drift(original)


# ------------------------------------------------------------------ kill -9 in a run over two distributions

BIG = {
    f"{name}/m{i:03d}.py": hashlib.sha256(f"{name}{i}".encode()).hexdigest().encode() * 1500
    for name in ("big_a", "big_b")
    for i in range(150)
}


@pytest.fixture(scope="module")
def big_base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("revert-env-big")
    wheels = [
        build_wheel(root / "wheelhouse", name, "1.0", {k: v for k, v in BIG.items() if k.startswith(name + "/")})
        for name in ("big_a", "big_b")
    ]
    python = make_venv(root / "venv")
    pip_install(python, *wheels)
    return root / "venv", root / "wheelhouse"


def _phase(state: Path) -> str | None:
    for path in (state / "journal").glob("*.json"):
        try:
            return json.loads(path.read_bytes())["phase"]
        except (OSError, ValueError, KeyError):
            return "prepare"
    return None


def _staged(site: Path) -> int:
    return sum(1 for name in ("big_a", "big_b") for _ in (site / name).glob(".pa-*.tmp"))


@pytest.mark.parametrize("point", ["mid-staging", "mid-commit"])
def test_kill_9_in_a_run_over_two_distributions_then_resume(
    big_base: tuple[Path, Path], tmp_path: Path, point: str
) -> None:
    src, wheelhouse = big_base
    shutil.copytree(src, tmp_path / "venv", symlinks=True)
    python = tmp_path / "venv/bin/python"
    site = site_packages(python)
    state = tmp_path / "venv/.patchaudit"
    patched = {rel: b"# patched\n" + data for rel, data in BIG.items()}
    for rel, data in patched.items():
        (site / rel).write_bytes(data)
    (site / "evil.pth").write_bytes(EVIL)

    cmd = [sys.executable, "-m", "patchaudit", "revert", "--python", str(python), "--wheelhouse", str(wheelhouse)]
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}
    proc = subprocess.Popen([*cmd, "--yes"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            met = _staged(site) >= 150 if point == "mid-staging" else _phase(state) == "commit" and _staged(site) < 200
            if met:
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        code = proc.wait()
    assert code == -signal.SIGKILL, f"the run ended on its own (exit {code})"
    phase = _phase(state)
    assert phase is not None
    restored = sum(1 for rel, data in BIG.items() if (site / rel).read_bytes() == data)
    if point == "mid-commit":
        assert phase == "commit" and 0 < restored < len(BIG), restored
    else:
        assert restored == 0

    resumed = patchaudit("revert", "--resume", "--python", str(python))
    assert resumed.returncode == 0, resumed.stderr
    verb = "finished" if phase == "commit" else "rolled back"
    assert f"{verb} interrupted revert" in resumed.stderr, resumed.stderr
    assert _staged(site) == 0 and not list((state / "journal").glob("*.json"))
    if phase == "commit":
        # finished: both distributions and the hook, as one run
        assert all((site / rel).read_bytes() == data for rel, data in BIG.items())
        assert not (site / "evil.pth").exists()
        assert _scan(python)[0] == 0
        (run_id,) = os.listdir(state / "quarantine")
    else:
        assert all((site / rel).read_bytes() == data for rel, data in patched.items())
        again = patchaudit(*cmd[3:], "--yes")
        assert again.returncode == 0, again.stdout + again.stderr
        assert _scan(python)[0] == 0
        (run_id,) = [r for r in os.listdir(state / "quarantine") if "rolled-back" not in _status(state, r)]
    undo = patchaudit("quarantine", "restore", run_id, "--python", str(python), "--yes")
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert all((site / rel).read_bytes() == data for rel, data in patched.items())
    assert (site / "evil.pth").read_bytes() == EVIL


def _status(state: Path, run_id: str) -> str:
    return json.loads((state / "quarantine" / run_id / "manifest.json").read_bytes()).get("status", "")
