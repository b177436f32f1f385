"""Revert, quarantine and undo through the real CLI on real venvs; kill -9 at several points; hostile input."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pristine_helpers import (
    ROOT,
    IndexServer,
    build_wheel,
    make_venv,
    patchaudit,
    pip_install,
    record_hash,
    site_packages,
)

from patchaudit.check.verify import verify
from patchaudit.errors import LockBusy
from patchaudit.revert import execute, locked, plan_revert
from patchaudit.target import environment

FILES = {f"demo/mod{i}.py": (f"VALUE_{i} = {i}\n" * 40).encode() for i in range(12)}
FILES["demo/__init__.py"] = b""
FILES["demo/data.bin"] = bytes(range(256)) * 8
FILES["demo/tool.py"] = b"#!/usr/bin/env python\nprint('tool')\n"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("revert-base")
    built = build_wheel(root / "build", "demo", "1.0", FILES, executable=("demo/tool.py",))
    python = make_venv(root / "venv")
    pip_install(python, built)
    # direct_url.json names the build path; moving the wheel away makes --wheelhouse/index the sources
    (root / "wheelhouse").mkdir()
    wheel = built.rename(root / "wheelhouse" / built.name)
    return root / "venv", wheel


@pytest.fixture
def venv(base: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path, Path]:
    """A private copy of the installed venv: (python, site-packages, wheelhouse dir)."""
    src, wheel = base
    dst = tmp_path / "venv"
    shutil.copytree(src, dst, symlinks=True)
    python = dst / "bin" / "python"
    return python, site_packages(python), wheel.parent


def run_json(*args: str | Path, env: dict[str, str] | None = None) -> tuple[int, dict]:
    changes = (args[:1] == ("revert",) or args[:2] == ("quarantine", "restore")) and "--dry-run" not in args
    proc = patchaudit(*map(str, args), "--format", "json", *(["--yes"] if changes else []), env=env)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def quarantined(venv_dir: Path, rel: str) -> list[bytes]:
    return [p.read_bytes() for p in (venv_dir / ".patchaudit/quarantine").glob(f"*/files/{rel}") if p.is_file()]


def test_revert_restores_removes_and_quarantines(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    (site / "demo/mod1.py").write_bytes(b"import pdb; pdb.set_trace()\n")
    (site / "demo/mod2.py").unlink()
    (site / "demo/added.py").write_bytes(b"print('debug')\n")
    (site / "demo/tool.py").write_bytes(b"#!/usr/bin/env python\nprint('patched')\n")
    (site / "demo/tool.py").chmod(0o600)
    pyc = site / "demo/__pycache__" / f"mod1.cpython-{sys.version_info[0]}{sys.version_info[1]}.pyc"
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(b"stale bytecode")

    code, out = run_json("revert", "demo", "--python", python, "--wheelhouse", wheelhouse)
    assert code == 0
    assert sorted(out["restored"]) == ["demo/mod1.py", "demo/mod2.py", "demo/tool.py"]
    assert out["removed"] == ["demo/added.py"] and out["refused"] == []
    for rel in ("demo/mod1.py", "demo/mod2.py", "demo/tool.py"):
        assert (site / rel).read_bytes() == FILES[rel]
    assert not (site / "demo/added.py").exists()
    assert not pyc.exists()
    assert (site / "demo/tool.py").stat().st_mode & 0o777 == 0o755
    assert (site / "demo/mod1.py").stat().st_mode & 0o777 == 0o644

    run = Path(out["quarantine"])
    assert run.parent == python.parent.parent / ".patchaudit/quarantine"
    assert (run / "files/demo/mod1.py").read_bytes() == b"import pdb; pdb.set_trace()\n"
    assert (run / "files/demo/added.py").read_bytes() == b"print('debug')\n"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    by_path = {f["path"]: f for f in manifest["files"]}
    assert by_path["demo/mod2.py"]["original"] == "missing"
    assert by_path["demo/mod1.py"]["original_digest"].startswith("sha256=")
    patch_text = (run / f"{run.name}.patch").read_text()
    assert "+import pdb; pdb.set_trace()" in patch_text

    # the .patch re-applies the patches onto the pristine files
    subprocess.run(["patch", "-p0", "-s", "-i", str(run / f"{run.name}.patch")], cwd=site, check=True)
    assert (site / "demo/mod1.py").read_bytes() == b"import pdb; pdb.set_trace()\n"


def test_undo_puts_back_exactly_and_quarantines_what_it_replaces(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    (site / "demo/mod3.py").write_bytes(b"PATCHED = True\n")
    (site / "demo/mod4.py").unlink()
    (site / "demo/extra.py").write_bytes(b"EXTRA = 1\n")
    _, out = run_json("revert", "demo", "--python", python, "--wheelhouse", wheelhouse)
    run_id = Path(out["quarantine"]).name

    listing = patchaudit("quarantine", "list", "--python", str(python))
    assert run_id in listing.stdout and listing.returncode == 0

    _, undo = run_json("quarantine", "restore", run_id, "--python", python)
    assert (site / "demo/mod3.py").read_bytes() == b"PATCHED = True\n"
    assert not (site / "demo/mod4.py").exists()
    assert (site / "demo/extra.py").read_bytes() == b"EXTRA = 1\n"
    # the undo quarantined the pristine file it replaced
    assert (Path(undo["quarantine"]) / "files/demo/mod3.py").read_bytes() == FILES["demo/mod3.py"]


def test_dry_run_writes_nothing(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    (site / "demo/mod5.py").write_bytes(b"X = 'patched'\n")
    code, out = run_json("revert", "demo", "--python", python, "--wheelhouse", wheelhouse, "--dry-run")
    assert out["restored"] == ["demo/mod5.py"] and out["quarantine"] is None
    assert (site / "demo/mod5.py").read_bytes() == b"X = 'patched'\n"
    assert not (python.parent.parent / ".patchaudit/quarantine").exists()


def test_a_distribution_whose_record_cannot_be_read_is_an_error_not_nothing_to_revert(
    venv: tuple[Path, Path, Path],
) -> None:
    """An unreadable RECORD hides every patch: "nothing to revert" with exit 0 would be a wrong answer."""
    python, site, wheelhouse = venv
    (site / "demo/mod5.py").write_bytes(b"X = 'patched'\n")
    record = site / "demo-1.0.dist-info/RECORD"
    record.rename(record.with_name("RECORD.real"))
    record.symlink_to("RECORD.real")
    proc = patchaudit("revert", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cannot plan a revert of demo: RECORD is a symlink" in proc.stderr
    assert "nothing to revert" not in proc.stdout
    assert (site / "demo/mod5.py").read_bytes() == b"X = 'patched'\n"


def test_only_named_paths_are_reverted(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    (site / "demo/mod5.py").write_bytes(b"A\n")
    (site / "demo/mod6.py").write_bytes(b"B\n")
    _, out = run_json("revert", "demo", "demo/mod6.py", "--python", python, "--wheelhouse", wheelhouse)
    assert out["restored"] == ["demo/mod6.py"]
    assert (site / "demo/mod5.py").read_bytes() == b"A\n"


def test_symlink_swapped_in_is_replaced_and_its_target_untouched(venv: tuple[Path, Path, Path], tmp_path: Path) -> None:
    python, site, wheelhouse = venv
    precious = tmp_path / "precious.txt"
    precious.write_bytes(b"do not touch\n")
    (site / "demo/mod7.py").unlink()
    (site / "demo/mod7.py").symlink_to(precious)
    _, out = run_json("revert", "demo", "--python", python, "--wheelhouse", wheelhouse)
    assert out["restored"] == ["demo/mod7.py"]
    assert not (site / "demo/mod7.py").is_symlink()
    assert (site / "demo/mod7.py").read_bytes() == FILES["demo/mod7.py"]
    assert precious.read_bytes() == b"do not touch\n"
    assert os.readlink(Path(out["quarantine"]) / "files/demo/mod7.py") == str(precious)


def test_read_only_file_is_reverted_to_the_pristine_mode(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    target = site / "demo/mod8.py"
    target.write_bytes(b"READ_ONLY_PATCH = 1\n")
    target.chmod(0o444)
    _, out = run_json("revert", "demo", "--python", python, "--wheelhouse", wheelhouse)
    assert out["restored"] == ["demo/mod8.py"]
    assert target.read_bytes() == FILES["demo/mod8.py"]
    assert target.stat().st_mode & 0o777 == 0o644


def test_hardlinked_file_gets_a_new_inode(venv: tuple[Path, Path, Path], tmp_path: Path) -> None:
    python, site, wheelhouse = venv
    shared = tmp_path / "uv-cache-copy.py"
    target = site / "demo/mod9.py"
    target.unlink()
    shared.write_bytes(b"EDITED_THROUGH_THE_CACHE = 1\n")
    os.link(shared, target)
    run_json("revert", "demo", "--python", python, "--wheelhouse", wheelhouse)
    assert target.read_bytes() == FILES["demo/mod9.py"]
    assert shared.read_bytes() == b"EDITED_THROUGH_THE_CACHE = 1\n"


def test_record_path_escaping_the_environment_is_refused(venv: tuple[Path, Path, Path], tmp_path: Path) -> None:
    python, site, wheelhouse = venv
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"outside the env\n")
    record = next(site.glob("demo-1.0.dist-info")) / "RECORD"
    rel = os.path.relpath(outside, site)
    with open(record, "a") as fh:
        fh.write(f"{rel},sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n")
        fh.write(f"{outside},sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n")
    (site / "demo/mod10.py").write_bytes(b"patched\n")
    code, out = run_json("revert", "demo", "--python", python, "--wheelhouse", wheelhouse)
    assert code == 1
    refused = {r["path"]: r["reason"] for r in out["refused"]}
    assert refused[rel] == "outside the environment's directories"
    assert refused[str(outside)] == "outside the environment's directories"
    assert out["restored"] == ["demo/mod10.py"]
    assert outside.read_bytes() == b"outside the env\n"


def test_wheel_of_another_build_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    installed = build_wheel(tmp_path / "installed", "demo", "1.0", FILES)
    python = make_venv(tmp_path / "venv")
    pip_install(python, installed)
    installed.unlink()  # direct_url.json names it: gone, so only the other build is left
    site = site_packages(python)
    other = dict(FILES)
    other["demo/mod0.py"] = b"REBUILT = True\n"
    wheel = build_wheel(tmp_path / "other", "demo", "1.0", other)
    (site / "demo/mod1.py").write_bytes(b"patched\n")
    proc = patchaudit("revert", "demo", "--python", str(python), "--wheelhouse", str(wheel.parent), "--yes")
    assert proc.returncode == 2, proc.stdout
    assert "demo/mod0.py" in proc.stderr
    assert record_hash(FILES["demo/mod0.py"]) in proc.stderr and record_hash(b"REBUILT = True\n") in proc.stderr
    assert (site / "demo/mod1.py").read_bytes() == b"patched\n"
    assert not (python.parent.parent / ".patchaudit/quarantine").exists()


def test_full_quarantine_target_changes_nothing(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    big = b"# patched\n" + b"x = 1\n" * 4000
    (site / "demo/mod11.py").write_bytes(big)

    def limit_file_size() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "patchaudit",
            "revert",
            "demo",
            "--python",
            str(python),
            "--wheelhouse",
            str(wheelhouse),
            "--yes",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        preexec_fn=limit_file_size,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"},
    )
    assert proc.returncode == 2, proc.stderr
    assert "nothing was changed" in proc.stderr
    assert (site / "demo/mod11.py").read_bytes() == big
    assert not list((python.parent.parent / ".patchaudit/journal").glob("*.json"))


def test_unwritable_quarantine_target_changes_nothing(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    state = python.parent.parent / ".patchaudit"
    state.mkdir()
    (state / "quarantine").write_text("a file where the quarantine directory should be")
    (site / "demo/mod3.py").write_bytes(b"patched\n")
    proc = patchaudit("revert", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
    assert proc.returncode == 2
    assert "nothing was changed" in proc.stderr
    assert (site / "demo/mod3.py").read_bytes() == b"patched\n"


def test_two_reverts_never_both_write(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    (site / "demo/mod2.py").write_bytes(b"patched\n")
    env = environment.from_python(python)
    (dist,) = environment.select(environment.distributions(env), ["demo"])
    (report,) = verify(env, [dist]).distributions
    plan = plan_revert(env, dist, report, wheelhouse=[wheelhouse])
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from patchaudit.target import environment; from patchaudit import revert;"
            "env = environment.from_python(__import__('pathlib').Path(sys.argv[1]));"
            "cm = revert.locked(env); cm.__enter__(); print('held', flush=True); time.sleep(30)",
            str(python),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LockBusy, match=f"pid {holder.pid}"):
            execute(env, plan, lock_wait=0.2)
        assert (site / "demo/mod2.py").read_bytes() == b"patched\n"
    finally:
        holder.kill()
        holder.wait()
    with locked(env, wait=1):
        pass
    assert execute(env, plan).restored == ("demo/mod2.py",)


def test_revert_from_the_index_by_range_requests(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    (site / "demo/mod4.py").write_bytes(b"patched\n")
    wheel = next(wheelhouse.glob("*.whl"))
    with IndexServer([wheel]) as server:
        code, out = run_json(
            "revert", "demo", "--python", python, env={"PIP_NO_INDEX": "", "PIP_INDEX_URL": server.url}
        )
        assert any("Range" in r or "bytes=" in r for r in server.requests)
    assert out["restored"] == ["demo/mod4.py"]
    assert (site / "demo/mod4.py").read_bytes() == FILES["demo/mod4.py"]
    # what was fetched is cached: the next revert needs no index at all
    (site / "demo/mod4.py").write_bytes(b"patched again\n")
    code, out = run_json("revert", "demo", "--python", python)
    assert out["restored"] == ["demo/mod4.py"]


# ------------------------------------------------------------------ kill -9 at several points

MANY = {f"many/m{i:03d}.py": hashlib.sha256(str(i).encode()).hexdigest().encode() * 1500 for i in range(300)}


@pytest.fixture(scope="module")
def many_base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("many")
    wheel = build_wheel(root / "wheelhouse", "many", "1.0", MANY)
    python = make_venv(root / "venv")
    pip_install(python, wheel)
    return root / "venv", wheel


def _journal_phase(state: Path) -> str | None:
    for path in (state / "journal").glob("*.json"):
        try:
            return json.loads(path.read_bytes())["phase"]
        except (OSError, ValueError, KeyError):
            return "prepare"
    return None


def _staged(site: Path) -> int:
    return sum(1 for _ in (site / "many").glob(".pa-*.tmp"))


def _quarantined(state: Path) -> int:
    return sum(1 for _ in state.glob("quarantine/*/files/many/*.py"))


def _restored(site: Path, wanted: dict[str, bytes]) -> int:
    return sum(1 for rel, data in wanted.items() if (site / rel).read_bytes() == data)


# Each point is met only while the run is alive (the journal is removed as its last step), so a kill
# there lands mid-run; 300 files of 96 KB keep every phase long enough for the poll to meet it.
KILL_POINTS = {
    "journal-written": lambda site, state, base: _journal_phase(state) is not None,
    "mid-quarantine": lambda site, state, base: _quarantined(state) >= base + 120,
    "mid-staging": lambda site, state, base: _staged(site) >= 150,
    "commit-begun": lambda site, state, base: _journal_phase(state) == "commit",
    "mid-commit": lambda site, state, base: _journal_phase(state) == "commit" and _staged(site) < 200,
}


def _kill_when(cmd: list[str], point: str, site: Path, state: Path) -> str:
    """Start `cmd`, SIGKILL it once `point` is met; the journal phase it died in (it must die mid-run)."""
    base = _quarantined(state)
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if KILL_POINTS[point](site, state, base):
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        code = proc.wait()
    assert code == -signal.SIGKILL, f"the run ended on its own (exit {code}) before {point}"
    phase = _journal_phase(state)
    assert phase is not None, "killed after the run had finished"
    return phase


def _many_venv(many_base: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path, Path, dict[str, bytes]]:
    """A copy of the venv with all 300 files patched (each stays 96 KB, so staging and undo take time)."""
    src, _wheel = many_base
    venv_dir = tmp_path / "venv"
    shutil.copytree(src, venv_dir, symlinks=True)
    python = venv_dir / "bin" / "python"
    site = site_packages(python)
    patched = {rel: b"# patched\n" + data for rel, data in MANY.items()}
    for rel, data in patched.items():
        (site / rel).write_bytes(data)
    return python, site, venv_dir / ".patchaudit", patched


def _revert_cmd(python: Path, wheel: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "patchaudit", "revert", "many", "--python", str(python), "--wheelhouse"] + [
        str(wheel.parent),
        "--yes",
        *extra,
    ]


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_kill_9_at_any_point_then_rerun(many_base: tuple[Path, Path], tmp_path: Path, point: str) -> None:
    _src, wheel = many_base
    python, site, state, patched = _many_venv(many_base, tmp_path)
    cmd = _revert_cmd(python, wheel, "--format", "json")

    phase = _kill_when(cmd, point, site, state)
    restored = _restored(site, MANY)
    if phase == "prepare":
        assert restored == 0, "a run killed before its commit phase changed files"
    if point == "mid-commit":
        assert phase == "commit" and 0 < restored < len(MANY), restored

    # a read-only command reports the interrupted run and leaves it
    proc = patchaudit("scan", "many", "--python", str(python))
    assert "was interrupted" in proc.stderr and _restored(site, MANY) == restored

    # whatever instant the kill hit, the next run recovers and finishes the job
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    verb = "finished" if phase == "commit" else "rolled back"
    assert f"{verb} interrupted revert" in again.stderr, again.stderr
    for rel, data in MANY.items():
        assert (site / rel).read_bytes() == data, rel
        assert patched[rel] in quarantined(python.parent.parent, rel), rel
    assert _staged(site) == 0
    assert not list((state / "journal").glob("*.json"))


@pytest.mark.parametrize("point", ["mid-quarantine", "mid-staging", "mid-commit"])
def test_kill_9_during_quarantine_restore_then_recover(
    many_base: tuple[Path, Path], tmp_path: Path, point: str
) -> None:
    _src, wheel = many_base
    python, site, state, patched = _many_venv(many_base, tmp_path)
    done = patchaudit(*_revert_cmd(python, wheel)[3:])
    assert done.returncode == 0, done.stderr
    (run_id,) = os.listdir(state / "quarantine")
    assert _restored(site, MANY) == len(MANY)

    cmd = [sys.executable, "-m", "patchaudit", "quarantine", "restore", run_id, "--python", str(python), "--yes"]
    phase = _kill_when(cmd, point, site, state)
    put_back = _restored(site, patched)
    if phase == "prepare":
        assert put_back == 0 and _restored(site, MANY) == len(MANY)
    if point == "mid-commit":
        assert phase == "commit" and 0 < put_back < len(MANY), put_back

    # `revert --resume` finishes the undo (or rolls it back): every file is one whole version, none lost
    proc = patchaudit("revert", "--resume", "--python", str(python))
    assert proc.returncode == 0, proc.stderr
    verb = "finished" if phase == "commit" else "rolled back"
    assert f"{verb} interrupted undo" in proc.stderr, proc.stderr
    expected = patched if phase == "commit" else MANY
    assert _restored(site, expected) == len(MANY)
    assert _staged(site) == 0 and not list((state / "journal").glob("*.json"))
    # and the undo can still be run (again) to its end
    proc = patchaudit("quarantine", "restore", run_id, "--python", str(python), "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _restored(site, patched) == len(MANY)


def test_record_edited_to_hide_a_patch_is_caught_by_an_authentic_wheel(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "build", "demo", "1.0", FILES)
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)  # direct_url.json publishes the wheel's sha256: an authentic source
    site = site_packages(python)
    hidden = b"HIDDEN = 'patched, and RECORD edited to match'\n"
    (site / "demo/mod1.py").write_bytes(hidden)
    record = next(site.glob("demo-1.0.dist-info")) / "RECORD"
    text = record.read_text().replace(
        f"demo/mod1.py,{record_hash(FILES['demo/mod1.py'])},{len(FILES['demo/mod1.py'])}",
        f"demo/mod1.py,{record_hash(hidden)},{len(hidden)}",
    )
    record.write_text(text)
    (site / "demo/mod2.py").write_bytes(b"visible patch\n")

    shown = patchaudit("diff", "demo", "--python", str(python))
    assert "+HIDDEN = " in shown.stdout and "+visible patch" in shown.stdout
    code, out = run_json("revert", "demo", "--python", python)
    assert code == 0
    assert {"demo/mod1.py", "demo/mod2.py"} <= set(out["restored"])
    assert (site / "demo/mod1.py").read_bytes() == FILES["demo/mod1.py"]
    assert hidden in quarantined(python.parent.parent, "demo/mod1.py")
    env = environment.from_python(python)
    (dist,) = environment.select(environment.distributions(env), ["demo"])
    (report,) = verify(env, [dist]).distributions
    assert [d.path for d in report.drift] == []


def test_symlinked_pycache_is_not_followed_out_of_the_environment(
    venv: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    python, site, wheelhouse = venv
    tag = f"cpython-{sys.version_info[0]}{sys.version_info[1]}"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f"mod3.{tag}.pyc").write_bytes(b"not the env's")
    (outside / f"mod4.{tag}.pyc").write_bytes(b"not the env's either")
    # demo/__pycache__ is a symlink that leads out of the environment
    shutil.rmtree(site / "demo/__pycache__", ignore_errors=True)
    (site / "demo/__pycache__").symlink_to(outside, target_is_directory=True)
    (site / "demo/mod3.py").write_bytes(b"PATCHED = 3\n")

    code, out = run_json("revert", "demo", "demo/mod3.py", "--python", python, "--wheelhouse", wheelhouse)
    assert code == 0 and out["restored"] == ["demo/mod3.py"]
    assert (site / "demo/mod3.py").read_bytes() == FILES["demo/mod3.py"]
    assert (outside / f"mod3.{tag}.pyc").read_bytes() == b"not the env's"
    assert (site / "demo/__pycache__").is_symlink()

    # a real __pycache__: its stale .pyc goes; a .pyc that is a symlink out is left, and so is its target
    (site / "demo/__pycache__").unlink()
    (site / "demo/__pycache__").mkdir()
    (site / "demo/__pycache__" / f"mod4.{tag}.pyc").symlink_to(outside / f"mod4.{tag}.pyc")
    (site / "demo/__pycache__" / f"mod5.{tag}.pyc").write_bytes(b"stale")
    (site / "demo/mod4.py").write_bytes(b"PATCHED = 4\n")
    (site / "demo/mod5.py").write_bytes(b"PATCHED = 5\n")
    code, out = run_json("revert", "demo", "--python", python, "--wheelhouse", wheelhouse)
    assert code == 0 and sorted(out["restored"]) == ["demo/mod4.py", "demo/mod5.py"]
    assert not (site / "demo/__pycache__" / f"mod5.{tag}.pyc").exists()
    assert (outside / f"mod4.{tag}.pyc").read_bytes() == b"not the env's either"


@pytest.mark.parametrize("ranges", [True, False], ids=["ranges", "whole-file"])
def test_index_wheel_of_another_build_is_refused_with_or_without_ranges(tmp_path: Path, ranges: bool) -> None:
    """The index's hash proves its file is what it publishes, not that it is the installed build."""
    installed = build_wheel(tmp_path / "installed", "demo", "1.0", FILES)
    python = make_venv(tmp_path / "venv")
    pip_install(python, installed)
    installed.unlink()  # direct_url.json's archive is gone: the index is the only source
    site = site_packages(python)
    other = build_wheel(tmp_path / "other", "demo", "1.0", {**FILES, "demo/mod0.py": b"REBUILT = True\n"})
    (site / "demo/mod1.py").write_bytes(b"patched\n")
    env = {"PIP_NO_INDEX": "", "PIP_INDEX_URL": ""}
    with IndexServer([other], ranges=ranges) as server:
        env["PIP_INDEX_URL"] = server.url
        for _ in range(2):  # the second run may find the wheel in patchaudit's own cache: same verdict
            proc = patchaudit("revert", "demo", "--python", str(python), "--yes", env=env)
            assert proc.returncode == 2, proc.stdout + proc.stderr
            assert "demo/mod0.py" in proc.stderr and record_hash(FILES["demo/mod0.py"]) in proc.stderr
    assert (site / "demo/mod0.py").read_bytes() == FILES["demo/mod0.py"]
    assert (site / "demo/mod1.py").read_bytes() == b"patched\n"
    assert not (python.parent.parent / ".patchaudit/quarantine").exists()


def _interrupted_after_staging(python: Path, site: Path, wheelhouse: Path) -> dict:
    """The on-disk state a kill right after staging leaves (journal in phase `commit`, nothing replaced)."""
    from patchaudit.revert.transaction import _prepare

    env = environment.from_python(python)
    (dist,) = environment.select(environment.distributions(env), ["demo"])
    (report,) = verify(env, [dist]).distributions
    plan = plan_revert(env, dist, report, wheelhouse=[wheelhouse])
    with locked(env):
        state, _manifest = _prepare(env, plan)
    assert _journal_phase(python.parent.parent / ".patchaudit") == "commit"
    return dict(state)


def test_recovery_never_overwrites_bytes_written_after_the_crash(venv: tuple[Path, Path, Path]) -> None:
    """A run killed after staging, before its first replace; then a file is edited again; then
    `revert --resume` finishes the run: the newer bytes must survive."""
    python, site, wheelhouse = venv
    (site / "demo/mod1.py").write_bytes(b"patch one\n")
    (site / "demo/mod2.py").write_bytes(b"patch two\n")
    (site / "demo/added.py").write_bytes(b"added\n")
    state = _interrupted_after_staging(python, site, wheelhouse)
    (site / "demo/mod1.py").write_bytes(b"newer work, written after the crash\n")
    (site / "demo/added.py").write_bytes(b"added, then edited after the crash\n")

    proc = patchaudit("revert", "--resume", "--python", str(python))
    assert proc.returncode == 0, proc.stderr
    assert "finished interrupted revert" in proc.stderr and "demo/mod1.py" in proc.stderr
    assert (site / "demo/mod1.py").read_bytes() == b"newer work, written after the crash\n"
    assert (site / "demo/added.py").read_bytes() == b"added, then edited after the crash\n"
    assert (site / "demo/mod2.py").read_bytes() == FILES["demo/mod2.py"]
    assert b"patch one\n" in quarantined(python.parent.parent, "demo/mod1.py")
    assert not list(site.glob("demo/.*.tmp"))
    proc = patchaudit("quarantine", "list", "--python", str(python))
    assert "incomplete" in proc.stdout
    # undoing the run puts back only what it changed, and keeps the newer bytes in its own quarantine
    proc = patchaudit("quarantine", "restore", state["run_id"], "--python", str(python), "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (site / "demo/mod2.py").read_bytes() == b"patch two\n"
    assert (site / "demo/mod1.py").read_bytes() == b"newer work, written after the crash\n"


def test_file_the_wheel_ships_is_never_removed_when_its_record_line_is_gone(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    record = next(site.glob("demo-1.0.dist-info")) / "RECORD"
    record.write_text("".join(ln for ln in record.read_text().splitlines(True) if not ln.startswith("demo/mod5.py,")))
    (site / "demo/stray.py").write_bytes(b"no RECORD owns me\n")
    code, out = run_json("revert", "demo", "--python", python, "--wheelhouse", wheelhouse)
    assert code == 1
    refused = {r["path"]: r["reason"] for r in out["refused"]}
    assert "ships this file" in refused["demo/mod5.py"]
    assert out["removed"] == ["demo/stray.py"]
    assert (site / "demo/mod5.py").read_bytes() == FILES["demo/mod5.py"]
    assert not (site / "demo/stray.py").exists()


def test_longest_legal_file_name_is_reverted(tmp_path: Path) -> None:
    long = "demo/" + "L" * 250 + ".py"  # 253 characters: a legal name that leaves no room for a suffix
    wheel = build_wheel(tmp_path / "wh", "demo", "1.0", {"demo/__init__.py": b"", long: b"Z = 1\n"})
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    site = site_packages(python)
    (site / long).write_bytes(b"Z = 'patched'\n")
    code, out = run_json("revert", "demo", "--python", python, "--wheelhouse", wheel.parent)
    assert code == 0 and out["restored"] == [long]
    assert (site / long).read_bytes() == b"Z = 1\n"
    assert not list((site / "demo").glob(".*.tmp"))


def _run_with_file_size_limit(args: list[str], limit: int) -> subprocess.CompletedProcess[str]:
    def limit_file_size() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "patchaudit", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        preexec_fn=limit_file_size,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"},
    )


def test_run_that_fails_while_staging_is_listed_as_rolled_back(tmp_path: Path) -> None:
    big = bytes(range(256)) * 256  # 64 KiB of binary: its patch is one line, staging it is not
    wheel = build_wheel(tmp_path / "wh", "big", "1.0", {"big/__init__.py": b"", "big/blob.bin": big})
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    site = site_packages(python)
    (site / "big/blob.bin").write_bytes(b"\0small")
    proc = _run_with_file_size_limit(
        ["revert", "big", "--python", str(python), "--wheelhouse", str(wheel.parent), "--yes"], 16384
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "nothing was changed" in proc.stderr
    assert (site / "big/blob.bin").read_bytes() == b"\0small"
    code, runs = run_json("quarantine", "list", "--python", python)
    assert [r["status"] for r in runs] == ["rolled-back"], runs
    again = patchaudit("quarantine", "restore", runs[0]["run_id"], "--python", str(python), "--yes")
    assert again.returncode == 2 and "rolled back" in again.stderr


def test_malformed_manifests_are_listed_as_unreadable_and_refused_in_one_line(
    venv: tuple[Path, Path, Path],
) -> None:
    python, site, wheelhouse = venv
    (site / "demo/mod3.py").write_bytes(b"patched\n")
    code, out = run_json("revert", "demo", "--python", python, "--wheelhouse", wheelhouse)
    assert code == 0
    root = python.parent.parent / ".patchaudit/quarantine"
    (good,) = os.listdir(root)
    bad = {
        "a-list": b"[1, 2]",
        "b-truncated": (root / good / "manifest.json").read_bytes()[:40],
        "c-missing-keys": json.dumps({"files": [{"path": "demo/mod3.py"}]}).encode(),
        "d-not-a-list": json.dumps({"files": 3}).encode(),
    }
    for name, text in bad.items():
        (root / name).mkdir()
        (root / name / "manifest.json").write_bytes(text)

    proc = patchaudit("quarantine", "list", "--python", str(python))
    assert proc.returncode == 0, proc.stderr
    assert good in proc.stdout and "complete" in proc.stdout
    for name in bad:
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith(name))
        assert "unreadable" in line
    code, runs = run_json("quarantine", "list", "--python", python)
    assert len(runs) == 5
    for name in bad:
        proc = patchaudit("quarantine", "restore", name, "--python", str(python), "--yes")
        assert proc.returncode == 2, proc.stderr
        assert "unreadable" in proc.stderr and "Traceback" not in proc.stderr
    assert (site / "demo/mod3.py").read_bytes() == FILES["demo/mod3.py"]


def test_restore_puts_back_mode_000_as_000(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    (site / "demo/mod6.py").write_bytes(b"patched\n")
    code, out = run_json("revert", "demo", "--python", python, "--wheelhouse", wheelhouse)
    assert code == 0
    (run,) = (python.parent.parent / ".patchaudit/quarantine").iterdir()
    manifest = json.loads((run / "manifest.json").read_bytes())
    (item,) = manifest["files"]
    item["original_mode"] = 0  # what a revert of a mode-000 file records
    (run / "manifest.json").write_text(json.dumps(manifest))
    proc = patchaudit("quarantine", "restore", run.name, "--python", str(python), "--yes")
    assert "put back demo/mod6.py" in proc.stdout, proc.stdout + proc.stderr
    assert os.stat(site / "demo/mod6.py").st_mode & 0o7777 == 0
