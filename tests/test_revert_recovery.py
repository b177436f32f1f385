"""Interrupted runs through the real CLI: planted journals and manifests are refused and nothing outside the
environment is touched; read-only commands report an interrupted run and leave it as it is."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from pristine_helpers import build_wheel, make_venv, patchaudit, pip_install, site_packages

from patchaudit.check.verify import verify
from patchaudit.pristine.check import digest
from patchaudit.revert import locked, plan_revert
from patchaudit.revert.paths import staged_name
from patchaudit.revert.transaction import _prepare
from patchaudit.target import environment

FILES = {f"demo/mod{i}.py": f"VALUE = {i}\n".encode() for i in range(4)}
FILES["demo/__init__.py"] = b""


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("recovery-base")
    built = build_wheel(root / "build", "demo", "1.0", FILES)
    python = make_venv(root / "venv")
    pip_install(python, built)
    (root / "wheelhouse").mkdir()
    wheel = built.rename(root / "wheelhouse" / built.name)
    return root / "venv", wheel.parent


@pytest.fixture
def venv(base: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path, Path]:
    """(python, site-packages, wheelhouse) of a private copy of the venv."""
    src, wheelhouse = base
    shutil.copytree(src, tmp_path / "venv", symlinks=True)
    python = tmp_path / "venv" / "bin" / "python"
    return python, site_packages(python), wheelhouse


def tree(root: Path) -> dict[str, bytes | str]:
    """Every entry below `root`: file bytes, or a symlink's target; what a user would compare."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                out[rel] = path.read_bytes()
            else:
                out[rel] = "dir"
    return out


def plant_journal(state: Path, run_id: str, run_dir: Path, actions: list[dict], phase: str = "commit") -> Path:
    journal = state / "journal" / f"{run_id}.json"
    journal.parent.mkdir(parents=True, exist_ok=True)
    body = {"run_id": run_id, "op": "revert", "phase": phase, "run_dir": str(run_dir), "roots": [], "actions": actions}
    journal.write_text(json.dumps(body))
    return journal


def plant_manifest(run_dir: Path, files: list[dict], roots: list[str]) -> None:
    (run_dir / "files").mkdir(parents=True, exist_ok=True)
    manifest = {"schema": "patchaudit/quarantine/v1", "run_id": run_dir.name, "op": "revert", "dist": "demo"}
    manifest.update({"version": "1.0", "status": "complete", "roots": roots, "files": files})
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


def outside_attack(tmp_path: Path, state: Path) -> tuple[Path, Path]:
    """The attack as found: a journal in phase `commit` and its manifest, both pointing outside the env.

    Finishing it would move `staged.bin` over `created.txt`, delete `victim.txt` (its manifest hash
    matches) and write a manifest into `run/`, all outside the environment."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_bytes(b"precious\n")
    (outside / "staged.bin").write_bytes(b"attacker bytes\n")
    run_dir = outside / "run"
    plant_manifest(
        run_dir,
        [
            {
                "path": "victim.txt",
                "dest": str(outside / "victim.txt"),
                "quarantine": "files/victim.txt",
                "original": "file",
                "original_digest": digest(b"precious\n", "sha256"),
            }
        ],
        roots=[str(outside)],
    )
    actions = [
        {
            "path": "created.txt",
            "dest": str(outside / "created.txt"),
            "kind": "write",
            "staged": str(outside / "staged.bin"),
        },
        {"path": "victim.txt", "dest": str(outside / "victim.txt"), "kind": "remove", "staged": None},
    ]
    journal = plant_journal(state, "planted", run_dir, actions)
    return outside, journal


def test_planted_journal_outside_the_env_is_refused_by_every_command(
    venv: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    python, site, wheelhouse = venv
    state = python.parent.parent / ".patchaudit"
    (site / "demo/mod1.py").write_bytes(b"patched\n")
    outside, journal = outside_attack(tmp_path, state)
    before = tree(outside)
    planted = journal.read_bytes()

    # read-only commands report the run and change nothing
    for args in (
        ("scan",),
        ("diff", "demo", "--wheelhouse", str(wheelhouse)),
        ("quarantine", "list"),
        ("baseline", "create", "--out", str(tmp_path / "b.json")),
    ):
        proc = patchaudit(*args, "--python", str(python))
        assert proc.returncode in (0, 1), proc.stderr
        assert "revert run planted was interrupted" in proc.stderr, (args, proc.stderr)
        assert "patchaudit revert --resume --python" in proc.stderr
    proc = patchaudit("scan", "--python", str(python), "--format", "json")
    assert json.loads(proc.stdout)["environment"]["interrupted_runs"] == ["planted"]
    proc = patchaudit("gate", "demo", "--python", str(python))
    assert proc.returncode == 1
    assert "interrupted-revert planted" in proc.stdout and "patchaudit revert --resume" in proc.stdout

    # commands that write refuse the journal in one line, exit 2, and change nothing either
    writers = (
        ("revert", "--resume"),
        ("revert", "demo", "--wheelhouse", str(wheelhouse), "--yes"),
        ("quarantine", "restore", "any-run", "--yes"),
    )
    for args in writers:
        proc = patchaudit(*args, "--python", str(python))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        (line,) = proc.stderr.splitlines()
        assert line.startswith(f"patchaudit: error: refusing the interrupted-run journal {journal}")
        assert "nothing was changed" in line
    assert tree(outside) == before
    assert journal.read_bytes() == planted  # left for inspection
    assert (site / "demo/mod1.py").read_bytes() == b"patched\n"

    # once the planted journal is gone, revert works as before
    journal.unlink()
    proc = patchaudit("revert", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
    assert proc.returncode == 0, proc.stderr
    assert (site / "demo/mod1.py").read_bytes() == FILES["demo/mod1.py"]
    assert tree(outside) == before


def _legit_looking(site: Path, state: Path, run_id: str) -> tuple[list[dict], Path]:
    """Actions a run `run_id` of this environment could have journaled, and its run directory."""
    dest = site / "demo/mod2.py"
    staged = staged_name(dest, run_id)
    staged.write_bytes(b"staged bytes\n")
    return [
        {"path": "demo/mod2.py", "dest": str(dest), "kind": "write", "staged": str(staged)}
    ], state / "quarantine" / run_id


VARIANTS = [
    "dest-outside",
    "staged-elsewhere",
    "run-dir-outside",
    "run-dir-symlink",
    "staged-of-another-run",
    "relative",
]


@pytest.mark.parametrize("variant", VARIANTS)
def test_journal_not_written_by_a_run_of_this_env_is_refused(
    venv: tuple[Path, Path, Path], tmp_path: Path, variant: str
) -> None:
    python, site, _wheelhouse = venv
    state = python.parent.parent / ".patchaudit"
    outside = tmp_path / "outside"
    outside.mkdir()
    run_id = "20261202T000000Z-demo-abcdef"
    actions, run_dir = _legit_looking(site, state, run_id)
    if variant == "dest-outside":
        dest = outside / "created.txt"
        actions[0].update(dest=str(dest), staged=str(staged_name(dest, run_id)))
        staged_name(dest, run_id).write_bytes(b"attacker bytes\n")
    elif variant == "staged-elsewhere":
        # a staged name that is another file of the env: finishing would move mod3.py over mod2.py
        actions[0]["staged"] = str(site / "demo/mod3.py")
    elif variant == "run-dir-outside":
        run_dir = outside / run_id
    elif variant == "run-dir-symlink":
        (state / "quarantine").mkdir(parents=True)
        os.symlink(outside, run_dir)
    elif variant == "staged-of-another-run":
        run_id, run_dir = "20261202T000000Z-demo-other", state / "quarantine" / "20261202T000000Z-demo-other"
    elif variant == "relative":
        actions[0]["dest"] = "demo/mod2.py"
    journal = plant_journal(state, run_id, run_dir, actions)
    before_site, before_outside = tree(site), tree(outside)

    proc = patchaudit("revert", "--resume", "--python", str(python))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"patchaudit: error: refusing the interrupted-run journal {journal}"), line
    if variant == "dest-outside":
        assert "outside the environment's directories" in line
    assert "Traceback" not in proc.stderr
    assert tree(site) == before_site and tree(outside) == before_outside
    assert journal.exists()


def test_the_same_journal_written_by_this_env_is_finished(venv: tuple[Path, Path, Path]) -> None:
    """The control for the test above: the legitimate shape is accepted and finished."""
    python, site, _wheelhouse = venv
    state = python.parent.parent / ".patchaudit"
    run_id = "20261202T000000Z-demo-abcdef"
    actions, run_dir = _legit_looking(site, state, run_id)
    run_dir.mkdir(parents=True)
    plant_journal(state, run_id, run_dir, actions)
    (site / "demo/mod2.py").write_bytes(b"staged bytes\n")  # already what the run writes: it may replace it
    proc = patchaudit("revert", "--resume", "--python", str(python))
    assert proc.returncode == 0, proc.stderr
    assert f"finished interrupted revert {run_id}" in proc.stderr
    assert not list((state / "journal").glob("*.json"))


def test_planted_quarantine_run_never_writes_outside(venv: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """A manifest whose own `roots` name a directory outside, asking to remove a file there (original
    `missing`) and to put one back there: `quarantine restore` refuses it in one line."""
    python, site, _wheelhouse = venv
    state = python.parent.parent / ".patchaudit"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_bytes(b"precious\n")
    run_dir = state / "quarantine" / "planted-run"
    plant_manifest(
        run_dir,
        [
            {"path": "victim.txt", "dest": str(outside / "victim.txt"), "quarantine": "files/v", "original": "missing"},
            {
                "path": "new.txt",
                "dest": str(outside / "new.txt"),
                "quarantine": "files/new.txt",
                "original": "file",
                "original_digest": digest(b"attacker\n", "sha256"),
            },
        ],
        roots=[str(outside)],
    )
    (run_dir / "files/new.txt").write_bytes(b"attacker\n")
    before_site, before_outside = tree(site), tree(outside)
    proc = patchaudit("quarantine", "restore", "planted-run", "--python", str(python), "--yes")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.splitlines()
    assert "quarantine run planted-run: its manifest names" in line and "outside the environment" in line
    assert tree(outside) == before_outside and tree(site) == before_site
    assert (run_dir / "manifest.json").exists()


def test_symlinked_quarantine_run_is_refused(venv: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """A run directory that is a symlink to a directory elsewhere (its manifest naming files inside the
    env) is not a run of this environment: its copies would come from anywhere."""
    python, site, _wheelhouse = venv
    state = python.parent.parent / ".patchaudit"
    elsewhere = tmp_path / "elsewhere"
    item = {
        "path": "demo/mod0.py",
        "dest": str(site / "demo/mod0.py"),
        "quarantine": "files/demo/mod0.py",
        "original": "file",
        "original_digest": digest(b"import os\n", "sha256"),
    }
    plant_manifest(elsewhere, [item], roots=[])
    (elsewhere / "files/demo").mkdir(parents=True)
    (elsewhere / "files/demo/mod0.py").write_bytes(b"import os\n")
    (state / "quarantine").mkdir(parents=True)
    os.symlink(elsewhere, state / "quarantine" / "linked")
    proc = patchaudit("quarantine", "restore", "linked", "--python", str(python), "--yes")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "is a symlink" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert (site / "demo/mod0.py").read_bytes() == FILES["demo/mod0.py"]


def _interrupt(python: Path, wheelhouse: Path) -> str:
    """A real run stopped where a kill after staging stops it: journal in phase `commit`, nothing replaced."""
    env = environment.from_python(python)
    (dist,) = environment.select(environment.distributions(env), ["demo"])
    (report,) = verify(env, [dist]).distributions
    plan = plan_revert(env, dist, report, wheelhouse=[wheelhouse])
    with locked(env):
        state, _manifest = _prepare(env, plan)
    return state["run_id"]


def test_read_only_commands_report_an_interrupted_run_and_leave_it(
    venv: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    python, site, wheelhouse = venv
    state = python.parent.parent / ".patchaudit"
    (site / "demo/mod1.py").write_bytes(b"patched\n")
    run_id = _interrupt(python, wheelhouse)
    before = tree(python.parent.parent)

    diff = ("diff", "demo", "--wheelhouse", str(wheelhouse))
    for args in (("scan",), ("scan", "--format", "json"), diff, ("quarantine", "list")):
        proc = patchaudit(*args, "--python", str(python))
        assert proc.returncode in (0, 1), proc.stderr
        assert f"revert run {run_id} was interrupted" in proc.stderr
        assert "finished" not in proc.stderr and "rolled back" not in proc.stderr
    assert json.loads(patchaudit("scan", "--python", str(python), "--format", "json").stdout)["environment"][
        "interrupted_runs"
    ] == [run_id]
    proc = patchaudit("gate", "demo", "--python", str(python))
    assert proc.returncode == 1
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"patchaudit: environment: interrupted-revert {run_id}")
    assert f"patchaudit revert --resume --python {environment.from_python(python).python}" in first
    after = tree(python.parent.parent)
    after.pop(".patchaudit/cache", None)
    assert {k: v for k, v in after.items() if not k.startswith(".patchaudit/cache")} == {
        k: v for k, v in before.items() if not k.startswith(".patchaudit/cache")
    }
    assert (site / "demo/mod1.py").read_bytes() == b"patched\n"

    # the command it names finishes the run; the gate passes again
    proc = patchaudit("revert", "--resume", "--python", str(python))
    assert proc.returncode == 0, proc.stderr
    assert f"finished interrupted revert {run_id}" in proc.stderr
    assert (site / "demo/mod1.py").read_bytes() == FILES["demo/mod1.py"]
    assert not list((state / "journal").glob("*.json"))
    assert patchaudit("gate", "demo", "--python", str(python)).returncode == 0
    proc = patchaudit("scan", "--python", str(python), "--format", "json")
    assert "interrupted_runs" not in json.loads(proc.stdout)["environment"] and "interrupted" not in proc.stderr


def test_revert_without_dist_on_a_clean_environment_changes_nothing(venv: tuple[Path, Path, Path]) -> None:
    python, _site, _wheelhouse = venv
    proc = patchaudit("revert", "--python", str(python), "--yes")
    assert proc.returncode == 0 and "nothing to revert" in proc.stdout, proc.stdout + proc.stderr
    assert not (python.parent.parent / ".patchaudit/quarantine").exists()
