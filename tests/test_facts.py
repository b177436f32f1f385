"""Packaging facts are not patches: overwritten, record-mismatch, regenerated; real wheels, pip and uv."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pristine_helpers import patchaudit
from wheels import build_wheel, make_venv, pip_install, record_hash, site_packages

from patchaudit.check import bytecode

# The lender's file holds a guard; the borrower's file of the same name prints and runs a process.
LENDER_BACKEND = "def build():\n    if not ready():\n        raise RuntimeError('not ready')\n    return 1\n"
BORROWER_BACKEND = (
    "import subprocess\n\ndef build():\n    print('building')\n    subprocess.run(['true'])\n    return 2\n"
)
CODEC = bytes(range(256)) * 32  # 8 KiB "extension module"


def run(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return patchaudit(*map(str, args), env={"UV_CACHE_DIR": os.devnull, **(env or {})})


def scan(python: Path, *args: str | os.PathLike[str], env: dict[str, str] | None = None) -> tuple[int, dict]:
    proc = run("scan", "--python", python, "--format", "json", *args, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def dist(report: dict, name: str) -> dict:
    (found,) = [d for d in report["distributions"] if d["name"] == name]
    return found


def by_path(entry: dict) -> dict[str, dict]:
    return {d["path"]: d for d in entry["drift"]}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """lender, then borrower, both shipping a top-level `shared_backend.py`, installed by real pip."""
    root = tmp_path_factory.mktemp("shared")
    house = root / "house"
    lender = build_wheel(house, "lender", "1.0", {"lender/__init__.py": "", "shared_backend.py": LENDER_BACKEND})
    borrower = build_wheel(
        house, "borrower", "2.0", {"borrower/__init__.py": "", "shared_backend.py": BORROWER_BACKEND}
    )
    python = make_venv(root / "venv")
    pip_install(python, lender)
    pip_install(python, borrower)
    return python, house


def test_path_of_two_distributions_is_overwritten_naming_the_winner(shared: tuple[Path, Path]) -> None:
    python, house = shared
    code, report = scan(python, "--wheelhouse", house)
    assert code == 0, report
    lender = dist(report, "lender")
    assert lender["status"] == "clean"
    (entry,) = lender["drift"]
    assert entry["path"] == "shared_backend.py"
    assert entry["state"] == "overwritten"
    assert entry["winner"] == "borrower 2.0"
    assert entry["actual"] == record_hash(BORROWER_BACKEND.encode())
    # The hazard pass never diffs borrower's file against lender's pristine one: no removed-guard, no print-call.
    assert [(f["rule"], f["severity"]) for f in lender["findings"]] == [("overwritten", "info")]
    assert dist(report, "borrower")["drift"] == []
    assert report["summary"]["overwritten"] == 1 and report["summary"]["modified"] == 0

    code, report = scan(python, "lender", "--wheelhouse", house, "--all-files")
    assert code == 0
    assert {f["rule"] for f in dist(report, "lender")["findings"]} == {"overwritten"}


def test_gate_passes_overwritten_unless_the_policy_raises_it(shared: tuple[Path, Path], tmp_path: Path) -> None:
    python, _ = shared
    proc = run("gate", "--python", python, "--no-cache")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    policy = tmp_path / "policy.toml"
    policy.write_text(f'python = "{python}"\n\n[severity]\noverwritten = "high"\n')
    proc = run("gate", "--policy", policy, "--no-cache")
    assert proc.returncode == 1, proc.stdout
    assert "lender: finding shared_backend.py:0 (high overwritten: installed by borrower 2.0" in proc.stdout


def test_a_patch_of_a_shared_path_is_still_drift(shared: tuple[Path, Path]) -> None:
    python, house = shared
    target = site_packages(python) / "shared_backend.py"
    target.write_text(BORROWER_BACKEND + "import torch; torch.save({}, '/tmp/x.pt')\n")
    try:
        code, report = scan(python, "--wheelhouse", house)
        assert code == 1
        lender = by_path(dist(report, "lender"))["shared_backend.py"]
        assert lender["state"] == "modified"
        assert lender["co_owners"] == ["borrower 2.0"]
        assert "also installed by borrower 2.0" in lender["note"]
        assert by_path(dist(report, "borrower"))["shared_backend.py"]["state"] == "modified"
        for name in ("lender", "borrower"):
            rules = {f["rule"] for f in dist(report, name)["findings"] if f["severity"] == "high"}
            # the patch is caught in both; lender's guard is never "removed" by borrower's unrelated file
            assert rules == {"torch-save"}, (name, rules)
    finally:
        target.write_text(BORROWER_BACKEND)


@pytest.fixture(scope="module")
def understated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A wheel whose RECORD says its extension is 1 KiB with another hash; the member is 8 KiB."""
    root = tmp_path_factory.mktemp("understated")
    wheel = build_wheel(
        root / "build",
        "vcodec",
        "2.0.4",
        {"vcodec/__init__.py": "", "vcodec/_codec.so": CODEC},
        record_hashes={"vcodec/_codec.so": record_hash(CODEC[:1024])},
        record_sizes={"vcodec/_codec.so": 1024},
    )
    python = make_venv(root / "venv")
    pip_install(python, wheel)
    house = root / "house"
    house.mkdir()
    return python, wheel.rename(house / wheel.name)  # direct_url.json no longer leads to it


def test_wheel_whose_record_understates_a_member_is_record_mismatch(understated: tuple[Path, Path]) -> None:
    python, wheel = understated
    code, report = scan(python, "vcodec")
    assert code == 1, "without the wheel the file stays modified"
    entry = by_path(dist(report, "vcodec"))["vcodec/_codec.so"]
    assert entry["state"] == "modified"
    assert "no wheel at hand to tell a patch from a wheel whose RECORD is wrong" in entry["note"]

    code, report = scan(python, "vcodec", "--wheelhouse", wheel.parent)
    assert code == 0, report
    vcodec = dist(report, "vcodec")
    assert vcodec["status"] == "clean" and vcodec["unverified"] == []
    (entry,) = vcodec["drift"]
    assert (entry["state"], entry["wheel"]) == ("record-mismatch", wheel.name)
    assert report["summary"]["record-mismatch"] == 1


def test_a_patch_beside_a_wrong_record_is_still_drift(understated: tuple[Path, Path]) -> None:
    python, wheel = understated
    target = site_packages(python) / "vcodec" / "_codec.so"
    target.write_bytes(CODEC[:-1] + b"\x00")
    try:
        code, report = scan(python, "vcodec", "--wheelhouse", wheel.parent)
        assert code == 1
        assert by_path(dist(report, "vcodec"))["vcodec/_codec.so"]["state"] == "modified"
    finally:
        target.write_bytes(CODEC)


def test_a_local_index_is_read_offline_for_a_wheel_whose_record_is_wrong(
    understated: tuple[Path, Path], tmp_path: Path
) -> None:
    """An air-gapped host installs from a mirror on disk (a `file://` simple index, or find-links): it
    holds the wheel, reading it sends nothing anywhere, so a scan without --fetch reads it."""
    python, wheel = understated
    files = tmp_path / "mirror" / "files"
    files.mkdir(parents=True)
    shutil.copy2(wheel, files / wheel.name)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    page = tmp_path / "mirror" / "simple" / "vcodec"
    page.mkdir(parents=True)
    (page / "index.html").write_text(f'<a href="../../files/{wheel.name}#sha256={digest}">{wheel.name}</a>\n')
    simple = (tmp_path / "mirror" / "simple").as_uri()
    # the mirror is one real pip reads
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--index-url", simple, "vcodec==2.0.4"]
        + ["-d", str(tmp_path / "got")],
        check=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""},
    )
    assert (tmp_path / "got" / wheel.name).is_file()

    for where in ({"PIP_NO_INDEX": "0", "PIP_INDEX_URL": simple, "PIP_FIND_LINKS": ""}, {"PIP_FIND_LINKS": str(files)}):
        code, report = scan(python, "vcodec", env=where)  # no --fetch
        assert code == 0, (where, report)
        (entry,) = dist(report, "vcodec")["drift"]
        assert (entry["state"], entry["wheel"]) == ("record-mismatch", wheel.name)

    # a mirror whose file is not what its page publishes is not evidence: modified, and no error
    (files / wheel.name).write_bytes(wheel.read_bytes() + b"junk")
    code, report = scan(python, "vcodec", env={"PIP_NO_INDEX": "0", "PIP_INDEX_URL": simple, "PIP_FIND_LINKS": ""})
    assert code == 1
    assert by_path(dist(report, "vcodec"))["vcodec/_codec.so"]["state"] == "modified"

    # a remote index is not read offline: the file stays modified, naming what was tried
    code, report = scan(python, "vcodec", env={"PIP_NO_INDEX": "0", "PIP_INDEX_URL": "http://127.0.0.1:9/simple"})
    assert code == 1
    assert "no wheel at hand" in by_path(dist(report, "vcodec"))["vcodec/_codec.so"]["note"]


MOD = b"def f():\n    return 1\n"


def _pyc(magic: bytes, flags: int, field: bytes, code: object) -> bytes:
    return magic + flags.to_bytes(4, "little") + field + marshal.dumps(code)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel shipping `__pycache__/mod.cpython-3XY.pyc` in RECORD; pip's compile step rewrites it."""
    root = tmp_path_factory.mktemp("compiled")
    stale = _pyc(
        importlib.util.MAGIC_NUMBER,
        0,
        (12345).to_bytes(4, "little") + (len(MOD)).to_bytes(4, "little"),
        compile(MOD, "mod.py", "exec"),
    )
    tag = sys.implementation.cache_tag
    files = {"kappa/__init__.py": "", "kappa/mod.py": MOD, f"kappa/__pycache__/mod.{tag}.pyc": stale}
    python = make_venv(root / "venv")
    pip_install(python, build_wheel(root / "w", "kappa", "1.0", files))
    return python


def test_installer_recompiled_bytecode_is_regenerated(compiled: Path) -> None:
    rel = f"kappa/__pycache__/mod.{sys.implementation.cache_tag}.pyc"
    code, report = scan(compiled, "kappa")
    assert code == 0, report
    (entry,) = dist(report, "kappa")["drift"]
    assert (entry["path"], entry["state"]) == (rel, "regenerated")
    assert "code equals a fresh compile" in entry["note"]
    assert report["summary"]["regenerated"] == 1


def test_bytecode_with_a_valid_header_but_other_code_is_drift(compiled: Path) -> None:
    site = site_packages(compiled)
    pyc = site / f"kappa/__pycache__/mod.{sys.implementation.cache_tag}.pyc"
    kept = pyc.read_bytes()
    evil = compile(b"def f():\n    import os; os.system('id')\n", "mod.py", "exec")
    pyc.write_bytes(kept[:16] + marshal.dumps(evil))  # Python would run it: the header matches the source
    try:
        code, report = scan(compiled, "kappa")
        assert code == 1
        assert by_path(dist(report, "kappa"))[pyc.relative_to(site).as_posix()]["state"] == "modified"
    finally:
        pyc.write_bytes(kept)


def test_bytecode_is_judged_by_the_magic_of_the_python_it_is_named_for(tmp_path: Path) -> None:
    """A `.cpython-312.pyc` carries 3.12's magic and 3.12's source hash, whoever runs patchaudit."""
    other = "cpython-312" if sys.implementation.cache_tag != "cpython-312" else "cpython-311"
    magic = bytecode.magic_for(other)
    assert magic is not None and magic != importlib.util.MAGIC_NUMBER
    placeholder = b"compiled by another Python"
    files = {"lam/__init__.py": "", "lam/mod.py": MOD, f"lam/__pycache__/mod.{other}.pyc": placeholder}
    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(tmp_path / "w", "lam", "1.0", files))
    pyc = site_packages(python) / f"lam/__pycache__/mod.{other}.pyc"
    rel = f"lam/__pycache__/mod.{other}.pyc"

    pyc.write_bytes(_pyc(magic, 0b11, bytecode.source_hash(magic, MOD), 0))
    code, report = scan(python, "lam")
    assert code == 0, report
    (entry,) = dist(report, "lam")["drift"]
    assert (entry["path"], entry["state"]) == (rel, "regenerated")
    assert f"for {other} (header checked; code not compared)" in entry["note"]

    ours = importlib.util.MAGIC_NUMBER
    pyc.write_bytes(_pyc(ours, 0b11, bytecode.source_hash(ours, MOD), 0))  # this Python's magic: wrong here
    code, report = scan(python, "lam")
    assert code == 1
    assert by_path(dist(report, "lam"))[rel]["state"] == "modified"


def test_wheelhouse_candidates_are_tried_until_one_is_the_installed_build(tmp_path: Path) -> None:
    """Several wheels of one version side by side: the exact tags first, then each in turn."""
    tag = "cp311-cp311-linux_x86_64"
    files = {"multi/__init__.py": "", "multi/core.py": "def answer():\n    return 42\n"}
    installed = build_wheel(tmp_path / "build", "multi", "1.0", files, tag=tag)
    other = build_wheel(tmp_path / "other", "multi", "1.0", {**files, "multi/core.py": "X = 1\n"}, tag=tag)
    house = tmp_path / "house"
    house.mkdir()
    # auditwheel-style names (the WHEEL files keep linux_x86_64): both are loose matches; the wrong one sorts first
    shutil.copy(other, house / "multi-1.0-cp311-cp311-manylinux_2_17_x86_64.whl")
    shutil.copy(installed, house / "multi-1.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    shutil.copy(installed, house / "multi-1.0-cp312-cp312-manylinux_2_28_x86_64.whl")  # another Python: never
    python = make_venv(tmp_path / "venv")
    pip_install(python, installed, extra=("--no-compile",))
    (site_packages(python) / "multi" / "core.py").write_text("def answer():\n    return 4200\n")
    code, report = scan(python, "multi", "--wheelhouse", house)
    assert code == 1
    multi = dist(report, "multi")
    assert multi["unverified"] == [], "the other build was tried and passed over"
    assert by_path(multi)["multi/core.py"]["state"] == "modified"
    proc = run("diff", "multi", "--python", python, "--wheelhouse", house)
    assert "-    return 42" in proc.stdout and "+    return 4200" in proc.stdout, proc.stderr


def test_explicit_wheel_check_names_what_it_tried_when_no_wheel_is_found(
    understated: tuple[Path, Path], tmp_path: Path
) -> None:
    python, _ = understated
    empty = tmp_path / "empty"
    empty.mkdir()
    code, report = scan(python, "vcodec", "--wheelhouse", empty)
    assert code == 1
    vcodec = dist(report, "vcodec")
    (note,) = vcodec["unverified"]
    assert note["path"] == "vcodec-2.0.4.dist-info"
    assert f"tried wheelhouse {empty}" in note["reason"]
    assert "no wheel at hand" in by_path(vcodec)["vcodec/_codec.so"]["note"]


def uv() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def uv_install(root: Path, cache: Path, wheel: Path, *, link_mode: str) -> Path:
    venv = root / f"uv-{link_mode}"
    subprocess.run([uv(), "venv", "-q", "-p", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            uv(),
            "pip",
            "install",
            "-q",
            "--python",
            str(python),
            "--cache-dir",
            str(cache),
            "--no-index",
            "--link-mode",
            link_mode,
            str(wheel),
        ],
        check=True,
        env={**os.environ, "UV_NO_CONFIG": "1"},
    )
    return python


def test_uv_cache_is_a_pristine_source_unless_it_is_the_installed_file(tmp_path: Path) -> None:
    wheel = build_wheel(
        tmp_path / "w",
        "vcodec",
        "2.0.4",
        {"vcodec/__init__.py": "", "vcodec/_codec.so": CODEC},
        record_hashes={"vcodec/_codec.so": record_hash(CODEC[:1024])},
        record_sizes={"vcodec/_codec.so": 1024},
    )
    cache = tmp_path / "uv-cache"
    copied = uv_install(tmp_path, cache, wheel, link_mode="copy")
    wheel.unlink()  # only uv's cache holds the wheel's bytes now
    with_cache = {"UV_CACHE_DIR": str(cache)}
    code, report = scan(copied, "vcodec", env=with_cache)
    assert code == 0, report
    (entry,) = dist(report, "vcodec")["drift"]
    assert entry["state"] == "record-mismatch"
    assert "uv cache" in entry["note"]


def test_uv_hardlinked_install_never_vouches_for_itself(tmp_path: Path) -> None:
    """uv's default install hard-links from its cache: that copy is the installed file, not evidence."""
    wheel = build_wheel(
        tmp_path / "w",
        "vcodec",
        "2.0.4",
        {"vcodec/__init__.py": "", "vcodec/_codec.so": CODEC},
        record_hashes={"vcodec/_codec.so": record_hash(CODEC[:1024])},
        record_sizes={"vcodec/_codec.so": 1024},
    )
    cache = tmp_path / "uv-cache"
    python = uv_install(tmp_path, cache, wheel, link_mode="hardlink")
    site = site_packages(python)
    assert (site / "vcodec" / "_codec.so").stat().st_nlink == 2
    code, report = scan(python, "vcodec", env={"UV_CACHE_DIR": str(cache)})
    assert code == 1
    entry = by_path(dist(report, "vcodec"))["vcodec/_codec.so"]
    assert entry["state"] == "modified"
    assert "no wheel at hand" in entry["note"]
    # the wheel itself, beside the cache, still tells
    code, report = scan(python, "vcodec", "--wheelhouse", wheel.parent, env={"UV_CACHE_DIR": str(cache)})
    assert code == 0, report
    assert dist(report, "vcodec")["drift"][0]["state"] == "record-mismatch"


def test_uv_install_of_two_wheels_sharing_a_path(tmp_path: Path) -> None:
    house = tmp_path / "house"
    lender = build_wheel(house, "lender", "1.0", {"lender/__init__.py": "", "shared_backend.py": LENDER_BACKEND})
    borrower = build_wheel(
        house, "borrower", "2.0", {"borrower/__init__.py": "", "shared_backend.py": BORROWER_BACKEND}
    )
    cache = tmp_path / "uv-cache"
    python = uv_install(tmp_path, cache, lender, link_mode="hardlink")
    subprocess.run(
        [uv(), "pip", "install", "-q", "--python", str(python), "--cache-dir", str(cache), "--no-index", str(borrower)],
        check=True,
        env={**os.environ, "UV_NO_CONFIG": "1"},
    )
    code, report = scan(python, env={"UV_CACHE_DIR": str(cache)})
    assert code == 0, report
    (entry,) = dist(report, "lender")["drift"]
    assert (entry["state"], entry["winner"]) == ("overwritten", "borrower 2.0")


def test_human_output_groups_by_file_and_never_splits_a_path(shared: tuple[Path, Path]) -> None:
    python, _ = shared
    site = site_packages(python)
    long_dir = site / "borrower" / ("deeply_nested_package_name_" * 4).rstrip("_")
    long_dir.mkdir()
    deep = long_dir / "a_module_with_a_long_name_that_would_wrap_in_a_narrow_terminal.py"
    rel = deep.relative_to(site).as_posix()
    body = "".join(f"print('line {n}')\n" for n in range(12)) + "breakpoint()\n"
    (site / "borrower" / "__init__.py").write_text(body)
    try:
        proc = run("scan", "--python", python, env={"COLUMNS": "60"})
        assert proc.returncode == 1
        out = proc.stdout
        lines = out.splitlines()
        assert "  modified        borrower/__init__.py" in lines
        high = [ln for ln in lines if "[debugger]" in ln]
        assert len(high) == 1 and high[0].startswith("    high")
        assert not any("[print-call]" in ln for ln in lines), "12 low findings are counted, not listed"
        assert any("12 low/medium/info findings in this file (print-call 12; -v lists them)" in ln for ln in lines)
        assert any(
            ln.startswith("  overwritten") and "shared_backend.py, installed by borrower 2.0" in ln for ln in lines
        )
        deep.write_text("X = 1\n")
        time.sleep(0.01)
        out = run("scan", "--python", python, env={"COLUMNS": "60"}).stdout
        assert any(ln.endswith(rel) or rel + "  (" in ln for ln in out.splitlines()), out
        verbose = run("scan", "--python", python, "-v", env={"COLUMNS": "60"}).stdout
        assert verbose.count("[print-call]") == 12
    finally:
        (site / "borrower" / "__init__.py").write_text("")
        shutil.rmtree(long_dir)
