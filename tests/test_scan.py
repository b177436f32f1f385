"""scan against real venvs with real pip installs of wheels built here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, patchaudit, pip_install, record_hash, site_packages

ALPHA = {
    "alpha/__init__.py": "from alpha.core import answer\n",
    "alpha/core.py": "def answer():\n    return 42\n",
    "alpha/data/table.bin": b"\x00\x01\x02" * 100,
}


def scan_json(python: Path, *args: str) -> tuple[int, dict]:
    proc = patchaudit("scan", "--python", python, "--format", "json", "--no-hazards", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def dist(report: dict, name: str) -> dict:
    (found,) = [d for d in report["distributions"] if d["name"] == name]
    return found


def drift_by_path(entry: dict) -> dict[str, dict]:
    return {d["path"]: d for d in entry["drift"]}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One venv holding several distributions; each test edits its own distribution."""
    root = tmp_path_factory.mktemp("scan")
    house = root / "wheels"
    wheels = [
        build_wheel(house, "alpha", "1.0", ALPHA, scripts={"alpha-tool": "#!python\nprint('tool')\n"}),
        build_wheel(house, "beta", "2.0", {"beta/__init__.py": "X = 1\n", "beta/mod.py": "Y = 2\n"}),
        build_wheel(house, "nv-a", "1.0", {"nvidia/a/__init__.py": "", "nvidia/a/lib.txt": "a"}),
        build_wheel(house, "nv-b", "1.0", {"nvidia/b/__init__.py": "", "nvidia/b/lib.txt": "b"}),
        build_wheel(house, "gamma", "1.0", {"gamma/__init__.py": "G = 1\n"}),
        build_wheel(house, "delta", "1.0", {"delta/__init__.py": "D = 1\n", "delta/weak.py": "W = 1\n"}),
        build_wheel(house, "epsilon", "1.0", {"epsilon/__init__.py": "E = 1\n"}),
        build_wheel(house, "zeta", "1.0", {"zeta/__init__.py": "Z = 1\n"}),
        build_wheel(house, "eta", "1.0", {"eta/__init__.py": "H = 1\n", "eta/b.py": "B = 1\n"}),
        build_wheel(house, "theta", "1.0", {"theta/__init__.py": "T = 1\n", "theta/linked.py": "L = 1\n"}),
    ]
    python = make_venv(root / "venv")
    pip_install(python, *wheels)
    return python


def test_clean_distribution_exits_zero(env: Path) -> None:
    code, report = scan_json(env, "beta")
    assert code == 0
    assert report["schema"] == "patchaudit/report/v1"
    beta = dist(report, "beta")
    assert beta["status"] == "clean" and beta["drift"] == []
    assert beta["files_checked"] >= 4
    assert report["summary"]["modified"] == 0
    assert report["target"]["paths"] == [str(site_packages(env))]


def test_modified_missing_added_and_bytecode(env: Path) -> None:
    site = site_packages(env)
    (site / "alpha/core.py").write_text("def answer():\n    return 43\n")
    (site / "alpha/data/table.bin").unlink()
    (site / "alpha/hotfix.py").write_text("import os\n")
    cache = site / "alpha/__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "core.cpython-311.pyc").write_bytes(b"not really bytecode")
    code, report = scan_json(env, "alpha")
    assert code == 1
    alpha = dist(report, "alpha")
    assert alpha["status"] == "drifted"
    drift = drift_by_path(alpha)
    assert drift["alpha/core.py"]["state"] == "modified"
    assert drift["alpha/core.py"]["expected"] == record_hash(ALPHA["alpha/core.py"].encode())
    assert drift["alpha/core.py"]["actual"] == record_hash(b"def answer():\n    return 43\n")
    assert drift["alpha/data/table.bin"] == {
        "path": "alpha/data/table.bin",
        "state": "missing",
        "expected": record_hash(ALPHA["alpha/data/table.bin"]),
        "actual": None,
    }
    assert drift["alpha/hotfix.py"]["state"] == "added"
    assert "alpha/__pycache__/core.cpython-311.pyc" not in drift
    summary = report["summary"]
    assert (summary["modified"], summary["missing"], summary["added"]) == (1, 1, 1)


def test_script_outside_site_packages_is_verified(env: Path) -> None:
    tool = env.parent / "alpha-tool"
    assert tool.exists()
    original = tool.read_bytes()
    try:
        tool.write_bytes(original + b"import pdb\n")
        _, report = scan_json(env, "alpha")
        drift = drift_by_path(dist(report, "alpha"))
        assert drift["../../../bin/alpha-tool"]["state"] == "modified"
    finally:
        tool.write_bytes(original)


SETTING = b"setting = 1\n"


def test_absolute_record_path(env: Path) -> None:
    site = site_packages(env)
    target = env.parent.parent / "share" / "gamma.conf"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(SETTING)
    record = next(site.glob("gamma-1.0.dist-info")) / "RECORD"
    with record.open("a") as fh:
        fh.write(f"{target},{record_hash(SETTING)},12\n")
    code, report = scan_json(env, "gamma")
    assert code == 0, report
    target.write_text("setting = 2\n")
    code, report = scan_json(env, "gamma")
    assert code == 1
    assert drift_by_path(dist(report, "gamma"))[str(target)]["state"] == "modified"


def test_namespace_directory_shared_by_two_distributions(env: Path) -> None:
    site = site_packages(env)
    code, report = scan_json(env, "nv-a", "nv-b")
    assert code == 0, "files of nv-b under nvidia/ are not 'added' to nv-a"
    (site / "nvidia/a/extra.so").write_bytes(b"\x7fELF")
    (site / "nvidia/stray.py").write_text("x = 1\n")
    try:
        code, report = scan_json(env, "nv-a", "nv-b")
        assert code == 1
        assert list(drift_by_path(dist(report, "nv-a"))) == ["nvidia/a/extra.so"]
        assert dist(report, "nv-b")["drift"] == []
        assert [d["path"] for d in report["environment"]["drift"]] == ["nvidia/stray.py"]
    finally:
        (site / "nvidia/a/extra.so").unlink()
        (site / "nvidia/stray.py").unlink()


def test_md5_and_hashless_entries_are_unverifiable(env: Path) -> None:
    site = site_packages(env)
    record = site / "delta-1.0.dist-info" / "RECORD"
    lines = record.read_text().splitlines()
    lines = [ln.replace(ln.split(",")[1], "md5=" + "A" * 22) if ln.startswith("delta/weak.py") else ln for ln in lines]
    record.write_text("\n".join(lines) + "\n")
    code, report = scan_json(env, "delta")
    assert code == 1
    delta = dist(report, "delta")
    assert delta["status"] == "unverifiable"
    assert delta["unverified"] == [{"path": "delta/weak.py", "reason": "md5 hash is not trusted"}]

    record = site / "epsilon-1.0.dist-info" / "RECORD"
    record.write_text("".join(ln.split(",")[0] + ",,\n" for ln in record.read_text().splitlines()))
    code, report = scan_json(env, "epsilon")
    assert code == 1
    assert dist(report, "epsilon")["status"] == "unverifiable"
    assert dist(report, "epsilon")["files_checked"] == 0


def test_missing_record_and_leftover_dist_info(env: Path) -> None:
    site = site_packages(env)
    old = site / "zeta-0.9.dist-info"
    shutil.copytree(site / "zeta-1.0.dist-info", old)
    (old / "METADATA").write_text("Metadata-Version: 2.1\nName: zeta\nVersion: 0.9\n\n")
    z0 = record_hash(b"Z = 0\n")
    (old / "RECORD").write_text(f"zeta/__init__.py,{z0},6\nzeta/old.py,{record_hash(b'')},0\n")
    try:
        code, report = scan_json(env, "zeta")
        versions = sorted(d["version"] for d in report["distributions"])
        assert versions == ["0.9", "1.0"]
        assert code == 1
        stale = drift_by_path(next(d for d in report["distributions"] if d["version"] == "0.9"))
        assert stale["zeta/__init__.py"]["state"] == "modified"
        assert stale["zeta/old.py"]["state"] == "missing"
        current = dist_version(report, "1.0")
        assert current["drift"] == [] and current["status"] == "unverifiable"
        assert current["unverified"] == [
            {"path": "zeta-1.0.dist-info", "reason": "also installed here as zeta-0.9.dist-info"}
        ]
        (old / "RECORD").unlink()
        code, report = scan_json(env, "zeta")
        assert dist_version(report, "0.9")["status"] == "unverifiable"
        assert "no RECORD" in dist_version(report, "0.9")["unverified"][0]["reason"]
    finally:
        shutil.rmtree(old)


def dist_version(report: dict, version: str) -> dict:
    return next(d for d in report["distributions"] if d["version"] == version)


def test_malformed_record_is_reported_not_a_crash(env: Path) -> None:
    site = site_packages(env)
    record = site / "eta-1.0.dist-info" / "RECORD"
    good = record.read_bytes()
    try:
        record.write_bytes(
            good + b"eta/bad64.py,sha256=@@@not-base64@@@,10\n"
            b"eta/short.py,sha256\n"
            b"\xff\xfe\x00junk\x80\n"
            b"eta/size.py,sha256=" + record_hash(b"").split("=", 1)[1].encode() + b",lots\n"
        )
        code, report = scan_json(env, "eta")
        assert code == 1
        eta = dist(report, "eta")
        assert eta["status"] == "unverifiable"
        reasons = " | ".join(u["reason"] for u in eta["unverified"])
        assert "not urlsafe base64" in reasons
        assert "fields, not 3" in reasons
        assert "not UTF-8" in reasons
        assert "not a non-negative integer" in reasons
        assert eta["files_checked"] >= 2, "the good lines are still checked"
    finally:
        record.write_bytes(good)


def test_symlink_and_hard_link(env: Path, tmp_path: Path) -> None:
    site = site_packages(env)
    linked = site / "theta/linked.py"
    original = linked.read_bytes()
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_bytes(original)
    linked.unlink()
    linked.symlink_to(elsewhere)
    init = site / "theta/__init__.py"
    init.write_text("T = 2\n")
    os.link(init, tmp_path / "other-venv-copy.py")
    code, report = scan_json(env, "theta")
    assert code == 1
    drift = drift_by_path(dist(report, "theta"))
    assert drift["theta/linked.py"]["state"] == "modified"
    assert f"symlink to {elsewhere}" in drift["theta/linked.py"]["note"]
    assert drift["theta/__init__.py"]["nlink"] == 2
    assert "hard link" in drift["theta/__init__.py"]["note"]


def test_unknown_distribution_and_bad_python_exit_2(env: Path, tmp_path: Path) -> None:
    proc = patchaudit("scan", "no-such-dist", "--python", env)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["patchaudit: error: no-such-dist is not installed in this environment"]
    proc = patchaudit("scan", "--python", tmp_path / "nope/bin/python")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_path_option_and_out_file(env: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = patchaudit("scan", "beta", "--path", site_packages(env), "--format", "json", "--out", out, "--no-hazards")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    report = json.loads(out.read_text())
    assert report["target"]["python"] is None
    assert dist(report, "beta")["status"] == "clean"


def test_human_output_names_the_file(env: Path) -> None:
    site = site_packages(env)
    (site / "beta/mod.py").write_text("Y = 3\n")
    try:
        proc = patchaudit("scan", "beta", "--python", env, "--no-hazards")
        assert proc.returncode == 1
        assert "\x1b[" not in proc.stdout, "no colour when not a tty"
        assert "drifted" in proc.stdout and "beta/mod.py" in proc.stdout and "modified" in proc.stdout
    finally:
        (site / "beta/mod.py").write_text("Y = 2\n")


def test_stale_record_in_the_wheel_is_record_mismatch_not_a_patch(tmp_path: Path) -> None:
    from pristine_helpers import build_wheel as build_wheel_with_record

    files = {"stale/__init__.py": b"", "stale/tail.py": b"LAST = 1\n"}
    built = build_wheel_with_record(
        tmp_path / "house", "stale", "1.0", files, record_hashes={"stale/tail.py": record_hash(b"LAST = 0\n")}
    )
    python = make_venv(tmp_path / "venv")
    pip_install(python, built)
    house = tmp_path / "wheelhouse"
    house.mkdir()
    built = built.rename(house / built.name)  # direct_url.json no longer leads to it
    code, report = scan_json(python, "stale")
    assert code == 1
    assert [d["path"] for d in dist(report, "stale")["drift"]] == ["stale/tail.py"], "without the wheel: drift"
    code, report = scan_json(python, "stale", "--wheelhouse", str(house))
    assert code == 0, "a wheel whose RECORD is wrong is a packaging fact, not drift"
    stale = dist(report, "stale")
    assert stale["status"] == "clean" and stale["unverified"] == []
    (entry,) = stale["drift"]
    assert (entry["path"], entry["state"], entry["wheel"]) == ("stale/tail.py", "record-mismatch", built.name)


def test_package_directory_swapped_for_a_symlink(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(tmp_path / "w", "iota", "1.0", {"iota/__init__.py": "I = 1\n"}))
    site = site_packages(python)
    copy = tmp_path / "iota-copy"
    shutil.copytree(site / "iota", copy)
    (copy / "evil.py").write_text("import os\n")
    shutil.rmtree(site / "iota")
    (site / "iota").symlink_to(copy)
    code, report = scan_json(python, "iota")
    assert code == 1
    (drift,) = dist(report, "iota")["drift"]
    assert drift["path"] == "iota" and drift["state"] == "modified"
    assert drift["note"] == f"package directory replaced by a symlink to {copy}"


def test_one_file_listed_under_two_algorithms_is_checked_under_both(tmp_path: Path) -> None:
    import base64
    import hashlib

    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(tmp_path / "w", "kappa", "1.0", {"kappa/__init__.py": "K = 1\n"}))
    record = next(site_packages(python).glob("kappa-1.0.dist-info")) / "RECORD"
    sha512 = base64.urlsafe_b64encode(hashlib.sha512(b"K = 1\n").digest()).rstrip(b"=").decode()
    record.write_text(record.read_text() + f"kappa/__init__.py,sha512={sha512},6\n")
    code, report = scan_json(python, "kappa")
    assert code == 0, report
    assert dist(report, "kappa")["drift"] == []


def test_out_to_an_unwritable_place_is_one_line_exit_2(env: Path, tmp_path: Path) -> None:
    for fmt in ("human", "json"):
        proc = patchaudit("scan", "beta", "--python", env, "--format", fmt, "--out", tmp_path / "no/such/dir/r.txt")
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("patchaudit: error: cannot write") and "Traceback" not in proc.stderr


def test_undecodable_and_control_characters_in_names_are_shown_escaped(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(tmp_path / "w", "lam", "1.0", {"lam/__init__.py": ""}))
    site = site_packages(python)
    with open(os.fsencode(site / "lam") + b"/bad\xff.txt", "wb") as fh:
        fh.write(b"x")
    (site / "lam" / "two\nlines.txt").write_text("y")
    proc = patchaudit("scan", "lam", "--python", python, "--no-hazards")
    assert proc.returncode == 1, proc.stderr
    assert "lam/bad\\xff.txt" in proc.stdout
    assert "lam/two\\nlines.txt" in proc.stdout
    report = json.loads(patchaudit("scan", "lam", "--python", python, "--no-hazards", "--format", "json").stdout)
    assert sorted(d["path"] for d in dist(report, "lam")["drift"]) == ["lam/bad\udcff.txt", "lam/two\nlines.txt"]


def test_a_patch_hidden_by_rewriting_record_is_found_against_the_wheelhouse(tmp_path: Path) -> None:
    files = {"mu/__init__.py": b"", "mu/guard.py": b"def check(x):\n    raise ValueError(x)\n"}
    built = build_wheel(tmp_path / "build", "mu", "1.0", files)
    python = make_venv(tmp_path / "venv")
    pip_install(python, built)
    house = tmp_path / "wheelhouse"
    house.mkdir()
    built = built.rename(house / built.name)
    site = site_packages(python)
    patched = b"def check(x):\n    pass\n"
    (site / "mu/guard.py").write_bytes(patched)
    record = site / "mu-1.0.dist-info/RECORD"
    lines = [
        f"mu/guard.py,{record_hash(patched)},{len(patched)}" if ln.startswith("mu/guard.py,") else ln
        for ln in record.read_text().splitlines()
    ]
    record.write_text("\n".join(lines) + "\n")
    code, report = scan_json(python, "mu")
    assert code == 0, "RECORD itself agrees with the patch: nothing to see without the wheel"
    code, report = scan_json(python, "mu", "--wheelhouse", str(house))
    assert code == 1
    (note,) = dist(report, "mu")["unverified"]
    assert "mu/guard.py" in note["reason"] and record_hash(files["mu/guard.py"]) in note["reason"]


def test_unchecked_hash_bytecode_that_disagrees_with_its_source_is_drift(tmp_path: Path) -> None:
    import py_compile
    import subprocess
    import sys

    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(tmp_path / "w", "nu", "1.0", {"nu/__init__.py": "", "nu/mod.py": "X = 1\n"}))
    site = site_packages(python)
    pyc = site / "nu/__pycache__" / f"mod.{sys.implementation.cache_tag}.pyc"
    unchecked = py_compile.PycInvalidationMode.UNCHECKED_HASH
    py_compile.compile(str(site / "nu/mod.py"), cfile=str(pyc), invalidation_mode=unchecked)
    code, report = scan_json(python, "nu")
    assert code == 0, "bytecode that matches its source is fine"

    evil = tmp_path / "evil.py"
    evil.write_text("print('EVIL')\nX = 1\n")
    py_compile.compile(str(evil), cfile=str(pyc), invalidation_mode=unchecked)
    ran = subprocess.run([str(python), "-c", "import nu.mod"], capture_output=True, text=True, check=True)
    assert ran.stdout == "EVIL\n", "the interpreter runs it although the source is pristine"
    code, report = scan_json(python, "nu")
    assert code == 1
    (drift,) = dist(report, "nu")["drift"]
    assert drift["path"] == f"nu/__pycache__/{pyc.name}" and drift["state"] == "modified"


def test_a_scan_of_many_distributions_on_worker_processes_reports_each_where_it_belongs(tmp_path: Path) -> None:
    """40 distributions, 600 files: the pool starts, and the package-directory walks and the pieces of the
    RECORDs (hashes and bytecode checks) go to the workers. An added file, a patched file and an
    unchecked-hash .pyc in three of them are each reported for their own distribution, the same on 1 and
    3 workers."""
    import py_compile
    import sys

    names = [f"many{n:02}" for n in range(40)]
    files = {f"{{0}}/m{k}.py": f"X = {k}\n" for k in range(14)}
    wheels = [
        build_wheel(
            tmp_path / "w", name, "1.0", {f"{name}/__init__.py": "", **{p.format(name): t for p, t in files.items()}}
        )
        for name in names
    ]
    python = make_venv(tmp_path / "venv")
    pip_install(python, *wheels, extra=("--no-compile",))  # the .pyc below is then in no RECORD
    site = site_packages(python)
    (site / "many35" / "extra.py").write_text("import os\n")
    (site / "many05" / "m3.py").write_text("X = 33\n")
    evil = tmp_path / "evil.py"
    evil.write_text("print('EVIL')\nX = 1\n")
    pyc = site / "many20" / "__pycache__" / f"m1.{sys.implementation.cache_tag}.pyc"
    py_compile.compile(str(evil), cfile=str(pyc), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)

    reports = []
    for workers in ("3", "1"):
        code, report = scan_json(python, "--no-cache", "--workers", workers)
        assert code == 1
        reports.append(report)
        found = {(d["name"], item["path"], item["state"]) for d in report["distributions"] for item in d["drift"]}
        assert found == {
            ("many35", "many35/extra.py", "added"),
            ("many05", "many05/m3.py", "modified"),
            ("many20", f"many20/__pycache__/{pyc.name}", "modified"),
        }, found
        assert report["summary"]["files_checked"] >= 600
    assert reports[0]["distributions"] == reports[1]["distributions"]


def test_a_drift_is_told_once_while_the_workers_still_hash_and_a_clean_env_never(tmp_path: Path) -> None:
    """verify(on_drift=...) is how the stages after the hashing get ready for a modified file (the scan
    loads its wheel lookup then): called once, as the first piece with a file unlike its RECORD comes back
    from a worker; never for an environment whose files all verify."""
    from patchaudit.check.verify import verify
    from patchaudit.target import environment

    names = [f"told{n:02}" for n in range(40)]
    wheels = [
        build_wheel(
            tmp_path / "w",
            name,
            "1.0",
            {f"{name}/__init__.py": "", **{f"{name}/m{k}.py": f"X = {k}\n" for k in range(14)}},
        )
        for name in names
    ]
    python = make_venv(tmp_path / "venv")
    pip_install(python, *wheels)
    env = environment.from_python(python)
    dists = environment.select(environment.distributions(env), names)

    def told() -> tuple[list[int], int]:
        calls: list[int] = []
        report = verify(env, dists, workers=3, on_drift=lambda: calls.append(len(calls)))
        return calls, sum(len(d.drift) for d in report.distributions)

    assert told() == ([], 0)
    (site_packages(python) / "told07" / "m3.py").write_text("X = 33\n")
    (site_packages(python) / "told31" / "m1.py").write_text("X = 11\n")
    assert told() == ([0], 2)


def test_a_scan_of_one_distribution_finds_added_files_however_its_record_spells_paths(tmp_path: Path) -> None:
    """The package directories to walk are read off RECORD bytes before any parsing; a RECORD edited to
    spell its paths `./pkg/...` still gets its directory walked, and an added file found."""
    from patchaudit.check.ownership import load, record_tops, top_dirs

    wheels = [
        build_wheel(tmp_path / "w", name, "1.0", {f"{name}/__init__.py": "", f"{name}/core.py": "X = 1\n"})
        for name in ("dotted", "plainpkg")
    ]
    python = make_venv(tmp_path / "venv")
    pip_install(python, *wheels)
    site = site_packages(python)
    record = next(site.glob("dotted-1.0.dist-info/RECORD"))
    record.write_text(record.read_text().replace("dotted/", "./dotted/"))
    for name in ("dotted", "plainpkg"):
        (site / name / "extra.py").write_text("import os\n")
        code, report = scan_json(python, "--no-cache", name)
        assert code == 1
        assert [(d["path"], d["state"]) for d in dist(report, name)["drift"]] == [(f"{name}/extra.py", "added")]

    from patchaudit.target.environment import distributions, from_python

    for installed in distributions(from_python(python)):
        raw = installed.record_path.read_bytes() if installed.record_path else None
        if installed.name == "plainpkg" or installed.name == "pip":
            assert record_tops(raw, installed.meta_dir.name) == top_dirs(load(installed, raw))


def test_a_bytecode_cache_reached_through_a_symlink_is_judged_by_what_it_holds(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "w", "cached", "1.0", {"cached/__init__.py": "", "cached/mod.py": "X = 1\n"})
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    package = site_packages(python) / "cached"
    elsewhere = tmp_path / "pycache-volume"
    shutil.move(package / "__pycache__", elsewhere)  # the cache kept on another volume, linked back
    (package / "__pycache__").symlink_to(elsewhere)
    assert any(elsewhere.glob("mod.*.pyc"))
    code, report = scan_json(python)
    assert code == 0, dist(report, "cached")["drift"]
    (elsewhere / "notes.txt").write_text("not bytecode\n")
    code, report = scan_json(python)
    assert code == 1
    assert [(d["path"], d["state"]) for d in dist(report, "cached")["drift"]] == [
        ("cached/__pycache__/notes.txt", "added")
    ]


def test_a_clean_scan_never_imports_difflib(env: Path) -> None:
    """Every module on the scan path is start-up time before the first file is hashed: a clean file
    is never diffed, so the diff machinery is never loaded."""
    script = Path(sys.executable).parent / "patchaudit"  # the console script, as a user runs it
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", str(script), "scan", "beta", "--python", str(env), "--no-hazards"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "patchaudit.check.verify" in imported
    assert not {m for m in imported if m.split(".")[0] == "difflib"}


def test_a_record_path_holding_a_newline_is_owned_not_added(tmp_path: Path) -> None:
    """The main process reads a RECORD's paths off its lines, and the workers' parse says whether every
    line was a simple one; a quoted path that runs over two lines is not, and the RECORD is parsed whole:
    the file it names is checked against its digest, not reported as added."""
    wheel = build_wheel(tmp_path / "w", "odd", "1.0", {"odd/__init__.py": "", "odd/core.py": "X = 1\n"})
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    site = site_packages(python)
    body = b"Y = 2\n"
    (site / "odd" / "two\nlines.py").write_bytes(body)
    record = next(site.glob("odd-1.0.dist-info/RECORD"))
    record.write_bytes(record.read_bytes() + b'"odd/two\nlines.py",' + record_hash(body).encode() + b",6\n")
    code, report = scan_json(python, "--no-cache", "odd")
    assert code == 0, report
    assert dist(report, "odd")["drift"] == []
    (site / "odd" / "two\nlines.py").write_bytes(b"Y = 3\n")
    code, report = scan_json(python, "--no-cache", "odd")
    assert code == 1
    assert [(d["path"], d["state"]) for d in dist(report, "odd")["drift"]] == [("odd/two\nlines.py", "modified")]


def test_the_workers_send_back_every_added_file_and_only_those(tmp_path: Path) -> None:
    """The workers walk the package directories and drop the files a RECORD they hold lists; what no
    RECORD lists still comes back and is reported: in a subdirectory of a clean distribution, in a
    directory two distributions share (the environment's), and beside a RECORD line with a quoted path.
    The same on worker processes and on none. (A directory that no RECORD names is walked and sent back
    whole, see test_pieces, but no distribution claims what is in it.)"""
    wheels = [
        build_wheel(tmp_path / "w", "solo", "1.0", {"solo/__init__.py": "", "solo/sub/core.py": "X = 1\n"}),
        build_wheel(tmp_path / "w", "ns-a", "1.0", {"space/a/__init__.py": "A = 1\n"}),
        build_wheel(tmp_path / "w", "ns-b", "1.0", {"space/b/__init__.py": "B = 1\n"}),
        build_wheel(tmp_path / "w", "quoted", "1.0", {"quoted/__init__.py": "", "quoted/a,b.json": "{}\n"}),
    ]
    python = make_venv(tmp_path / "venv")
    pip_install(python, *wheels)
    site = site_packages(python)
    assert b'"quoted/a,b.json"' in next(site.glob("quoted-1.0.dist-info/RECORD")).read_bytes()
    for workers in ("3", "1"):
        code, report = scan_json(python, "--no-cache", "--workers", workers)
        assert code == 0, report
    (site / "solo" / "sub" / "extra.py").write_text("import os\n")
    (site / "space" / "planted.py").write_text("import os\n")
    (site / "quoted" / "a,c.json").write_text("{}\n")
    (site / "stray").mkdir()
    (site / "stray" / "__init__.py").write_text("import os\n")
    for workers in ("3", "1"):
        code, report = scan_json(python, "--no-cache", "--workers", workers)
        assert code == 1
        found = {(d["name"], item["path"]) for d in report["distributions"] for item in d["drift"]}
        found |= {("", item["path"]) for item in report["environment"]["drift"]}
        assert found == {
            ("solo", "solo/sub/extra.py"),
            ("", "space/planted.py"),
            ("quoted", "quoted/a,c.json"),
        }, found
