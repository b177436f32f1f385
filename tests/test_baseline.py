"""Baselines against a real venv: snapshot, drift behind a rewritten RECORD, approvals as git commits."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

import git
import pytest
from wheels import build_wheel, make_venv, patchaudit, pip_install, record_hash, site_packages

from patchaudit.errors import BaselineError, BaselineNotFound, UnsafePath
from patchaudit.gate import baseline
from patchaudit.target.environment import from_python

FILES = {
    "svc/__init__.py": "",
    "svc/model.py": "FP8 = True\n",
    "svc/loader.py": "def load():\n    return 1\n",
    "svc/kernels.py": "K = 1\n",
}


@pytest.fixture()
def env(tmp_path: Path, wheelhouse: Path) -> Path:
    python = make_venv(tmp_path / "venv")
    pip_install(python, *sorted(wheelhouse.glob("*.whl")))
    return python


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    house = tmp_path_factory.mktemp("house")
    build_wheel(house, "svc", "1.0", FILES)
    build_wheel(house, "other", "2.0", {"other/__init__.py": "O = 1\n"})
    return house


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "etc-patchaudit"
    r = git.Repo.init(path)
    with r.config_writer() as cfg:
        cfg.set_value("user", "name", "Ops Robot")
        cfg.set_value("user", "email", "ops@example.org")
    return path


def rewrite_record(site: Path, dist_info: str, rel: str, data: bytes) -> None:
    """What a careful hand-patcher does: make RECORD agree with the patched file."""
    record = site / dist_info / "RECORD"
    rows = list(csv.reader(io.StringIO(record.read_text())))
    for row in rows:
        if row[0] == rel:
            row[1], row[2] = record_hash(data), str(len(data))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    record.write_text(out.getvalue())


def test_create_snapshots_every_file_with_its_hash(env: Path, repo: Path) -> None:
    out = repo / "svc.json"
    made, left_out, commit = baseline.create(from_python(env), out, who="alice")
    data = json.loads(out.read_text())
    assert data["schema"] == "patchaudit/baseline/v1"
    svc = next(d for d in data["distributions"] if d["name"] == "svc")
    assert svc["version"] == "1.0"
    assert svc["files"]["svc/model.py"] == record_hash(FILES["svc/model.py"].encode())
    assert {d["name"] for d in data["distributions"]} == {"svc", "other"}
    assert left_out == []
    assert commit is not None
    head = git.Repo(repo).head.commit
    assert head.hexsha == commit and head.message.startswith("Create baseline of ")
    assert baseline.check_env(from_python(env), out).distributions[0].drift == ()


def test_check_sees_a_patch_even_when_record_was_rewritten(env: Path, tmp_path: Path) -> None:
    out = tmp_path / "svc.json"
    baseline.create(from_python(env), out, names=["svc"], who="alice")
    site = site_packages(env)
    patched = b"FP8 = False  # no FP8 MLA on SM120\n"
    (site / "svc" / "model.py").write_bytes(patched)
    rewrite_record(site, "svc-1.0.dist-info", "svc/model.py", patched)

    scan = patchaudit("scan", "svc", "--python", env, "--no-hazards", "--format", "json")
    assert scan.returncode == 0, scan.stdout  # RECORD agrees with the patch: scan is fooled

    proc = patchaudit("baseline", "check", out, "--python", env)
    assert proc.returncode == 1
    assert f"patchaudit: svc: modified svc/model.py (expected {record_hash(FILES['svc/model.py'].encode())}" in (
        proc.stdout
    )
    gate = patchaudit("gate", "svc", "--python", env, "--baseline", out)
    assert gate.returncode == 1 and "modified svc/model.py" in gate.stdout


def test_accept_is_a_commit_and_a_later_edit_is_drift_again(env: Path, repo: Path, monkeypatch) -> None:
    out = repo / "svc.json"
    baseline.create(from_python(env), out, names=["svc"], who="alice")
    target = site_packages(env) / "svc" / "loader.py"
    target.write_text("def load():\n    return 2\n")
    monkeypatch.setenv("USER", "bob")
    monkeypatch.delenv("SUDO_USER", raising=False)

    proc = patchaudit("baseline", "accept", out, "svc/loader.py", "--reason", "loader returns 2 on GLM-5")
    assert proc.returncode == 0, proc.stderr
    assert "accepted svc: svc/loader.py" in proc.stdout

    head = git.Repo(repo).head.commit
    assert head.message.startswith("Accept patch to svc/loader.py (svc)")
    assert "Reason: loader returns 2 on GLM-5" in head.message
    assert head.author.name == "bob"
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%an|%s"], capture_output=True, text=True)
    assert log.stdout.splitlines()[0] == "bob|Accept patch to svc/loader.py (svc)"

    data = json.loads(out.read_text())
    (approval,) = data["approved"]
    assert approval["path"] == "svc/loader.py" and approval["by"] == "bob"
    assert approval["hash"] == record_hash(b"def load():\n    return 2\n")
    assert approval["previous"] == record_hash(FILES["svc/loader.py"].encode())

    assert patchaudit("baseline", "check", out, "--python", env).returncode == 0
    assert patchaudit("gate", "svc", "--python", env, "--baseline", out).returncode == 0

    target.write_text("def load():\n    return 3\n")
    proc = patchaudit("baseline", "check", out, "--python", env)
    assert proc.returncode == 1
    assert "modified svc/loader.py" in proc.stdout
    assert "changed since its approval (reason: loader returns 2 on GLM-5; by bob at " in proc.stdout
    assert patchaudit("gate", "svc", "--python", env, "--baseline", out).returncode == 1


def test_accept_is_item_by_item(env: Path, tmp_path: Path) -> None:
    out = tmp_path / "svc.json"
    baseline.create(from_python(env), out, names=["svc"], who="alice")
    with pytest.raises(BaselineError, match="nothing to accept"):
        baseline.accept(out, ["svc/model.py"], reason="no change", who="carol")
    with pytest.raises(BaselineError, match="directory"):
        (site_packages(env) / "svc" / "sub").mkdir()
        baseline.accept(out, ["svc/sub"], reason="whole dir", who="carol", distribution="svc")
    with pytest.raises(BaselineError, match="reason"):
        baseline.accept(out, ["svc/model.py"], reason="  ", who="carol")
    with pytest.raises(UnsafePath):
        baseline.accept(out, ["../../../etc/passwd"], reason="no", who="carol")
    assert baseline.commit(out, "not in a repository", "carol") is None


def test_removed_file_and_added_file_and_startup_hook(env: Path, tmp_path: Path) -> None:
    out = tmp_path / "svc.json"
    baseline.create(from_python(env), out, names=["svc"], who="alice")
    site = site_packages(env)
    (site / "svc" / "kernels.py").unlink()
    (site / "svc" / "debug_dump.py").write_text("import torch\n")
    (site / "zz_hotfix.pth").write_text("import os; os.environ['X'] = '1'\n")
    report = baseline.check_env(from_python(env), out)
    states = {d.path: d.state.value for d in report.distributions[0].drift}
    assert states == {"svc/kernels.py": "missing", "svc/debug_dump.py": "added"}
    assert [d.path for d in report.environment.drift] == ["zz_hotfix.pth"]

    approvals, commit = baseline.accept(
        out, ["svc/kernels.py", "svc/debug_dump.py", "zz_hotfix.pth"], reason="hotfix for model pivot", who="dave"
    )
    assert commit is None  # not in a git repository: the file still records who and why
    assert [(a.path, a.hash == "absent") for a in approvals] == [
        ("svc/kernels.py", True),
        ("svc/debug_dump.py", False),
        ("zz_hotfix.pth", False),
    ]
    report = baseline.check_env(from_python(env), out)
    assert report.distributions[0].drift == () and report.environment.drift == ()


def test_drift_present_at_creation_is_left_out_unless_included(env: Path, tmp_path: Path) -> None:
    (site_packages(env) / "svc" / "model.py").write_text("FP8 = False\n")
    out = tmp_path / "svc.json"
    made, left_out, _ = baseline.create(from_python(env), out, names=["svc"], who="alice")
    assert [(d, drift.path) for d, drift in left_out] == [("svc", "svc/model.py")]
    assert made.distributions[0].files["svc/model.py"] == record_hash(FILES["svc/model.py"].encode())
    assert patchaudit("baseline", "check", out, "--python", env).returncode == 1

    made, left_out, _ = baseline.create(from_python(env), out, names=["svc"], include_drift=True, who="alice")
    assert left_out == [] and [a.path for a in made.approved] == ["svc/model.py"]
    assert patchaudit("baseline", "check", out, "--python", env).returncode == 0


def test_missing_and_corrupt_baselines(env: Path, tmp_path: Path) -> None:
    with pytest.raises(BaselineNotFound):
        baseline.load(tmp_path / "absent.json")
    proc = patchaudit("baseline", "check", tmp_path / "absent.json", "--python", env)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "patchaudit/baseline/v1", "distributions": [{"name": "x"}], "extra": 1}))
    with pytest.raises(BaselineError, match="unknown key 'extra'"):
        baseline.load(bad)


def test_added_symlink_module_is_drift_against_the_baseline(env: Path, tmp_path: Path) -> None:
    out = tmp_path / "svc.json"
    baseline.create(from_python(env), out, who="alice")
    evil = tmp_path / "evil.py"
    evil.write_text("import os; os.system('true')\n")
    (site_packages(env) / "svc" / "evil.py").symlink_to(evil)

    report = baseline.check_env(from_python(env), out)
    (svc,) = [d for d in report.distributions if d.name == "svc"]
    assert [(d.path, d.state.value) for d in svc.drift] == [("svc/evil.py", "added")]
    assert svc.drift[0].actual is None and "symlink" in (svc.drift[0].note or "")

    proc = patchaudit("baseline", "check", out, "--python", env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "patchaudit: svc: added svc/evil.py (symlink to " in proc.stdout
    gate = patchaudit("gate", "--python", env, "--baseline", out)
    assert gate.returncode == 1, gate.stdout
    assert "added svc/evil.py" in gate.stdout

    # A symlink is never approved by taking a snapshot with the drift in it.
    made, left_out, _ = baseline.create(from_python(env), out, include_drift=True, who="alice")
    assert [d.path for _, d in left_out] == ["svc/evil.py"]
    snap = made.find("svc")
    assert snap is not None and "svc/evil.py" not in snap.files
    assert patchaudit("baseline", "check", out, "--python", env).returncode == 1


def test_uninstalled_distribution_is_drift_not_an_input_error(env: Path, tmp_path: Path) -> None:
    out = tmp_path / "all.json"
    baseline.create(from_python(env), out, who="alice")
    site = site_packages(env)
    away = tmp_path / "away"
    away.mkdir()
    (site / "other").rename(away / "other")
    (site / "other-2.0.dist-info").rename(away / "other-2.0.dist-info")

    report = baseline.check_env(from_python(env), out)
    (gone,) = [d for d in report.distributions if d.name == "other"]
    states = {d.path: d.state.value for d in gone.drift}
    assert states["other 2.0"] == "missing"
    assert states["other/__init__.py"] == "missing"

    proc = patchaudit("baseline", "check", out, "--python", env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "patchaudit: other: missing other 2.0" in proc.stdout
    assert "missing other/__init__.py" in proc.stdout
    gate = patchaudit("gate", "--python", env, "--baseline", out)
    assert gate.returncode == 1, gate.stdout
    assert "patchaudit: other: missing other/__init__.py" in gate.stdout
    named = patchaudit("baseline", "check", out, "other", "--python", env)
    assert named.returncode == 1 and "missing other/__init__.py" in named.stdout


def test_accept_of_a_path_that_does_not_exist_says_so(env: Path, tmp_path: Path) -> None:
    out = tmp_path / "svc.json"
    baseline.create(from_python(env), out, names=["svc"], who="alice")
    with pytest.raises(BaselineError, match="svc/nope.py is not in the environment") as info:
        baseline.accept(out, ["svc/nope.py"], reason="typo", who="carol")
    assert "already matches" not in str(info.value)
    proc = patchaudit("baseline", "accept", out, "svc/nope.py", "--reason", "typo")
    assert proc.returncode == 2 and "not in the environment" in proc.stderr


HAZARD = """import torch


def forward(x):
    if x.shape[0] == 5:
        torch.save(x, "/tmp/dump.pt")
    return x
"""


def _high(proc: subprocess.CompletedProcess[str]) -> int:
    return int(json.loads(proc.stdout)["summary"]["findings"]["high"])


def test_check_judges_an_unapproved_patch_as_the_gate_does(env: Path, tmp_path: Path) -> None:
    out = tmp_path / "svc.json"
    baseline.create(from_python(env), out, names=["svc"], who="alice")
    site = site_packages(env)
    (site / "svc" / "loader.py").write_text(HAZARD)

    scan = patchaudit("scan", "svc", "--python", env, "--format", "json", "--no-cache")
    assert _high(scan) >= 2, scan.stdout
    checked = patchaudit("baseline", "check", out, "--python", env, "--format", "json")
    assert _high(checked) == _high(scan)
    text = patchaudit("baseline", "check", out, "--python", env)
    gate = patchaudit("gate", "svc", "--python", env, "--baseline", out, "--no-cache")
    assert text.returncode == gate.returncode == 1
    for proc in (text, gate):
        assert "finding svc/loader.py:6 (high torch-save" in proc.stdout, proc.stdout
        assert "token-count-branch" in proc.stdout

    # The same patch with RECORD rewritten to agree: scan is fooled, the baseline's judgement is not.
    rewrite_record(site, "svc-1.0.dist-info", "svc/loader.py", HAZARD.encode())
    assert _high(patchaudit("scan", "svc", "--python", env, "--format", "json", "--no-cache")) == 0
    checked = patchaudit("baseline", "check", out, "--python", env, "--format", "json")
    assert _high(checked) == 2
    text = patchaudit("baseline", "check", out, "--python", env)
    gate = patchaudit("gate", "svc", "--python", env, "--baseline", out, "--no-cache")
    assert text.returncode == gate.returncode == 1
    assert "torch-save" in text.stdout and "torch-save" in gate.stdout


def test_create_help_says_out_is_required() -> None:
    proc = patchaudit("baseline", "create", "--help")
    assert proc.returncode == 0
    assert "required" in " ".join(proc.stdout.split()).split("--out", 1)[1].split("--", 1)[0]
