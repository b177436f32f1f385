"""`patchaudit gate` as systemd runs it: the console script, a real venv, real edits, exit codes."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, patchaudit, pip_install, record_hash, site_packages

from patchaudit.errors import ExitCode
from patchaudit.gate.core import GateOptions, run

CORE = "def answer():\n    return 42\n"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One venv; every test patches a distribution of its own."""
    root = tmp_path_factory.mktemp("gate")
    house = root / "wheels"
    names = ["steady", "hidden", "approved", "hazard", "added", "viapolicy", "newline", "restored", "bytecode"]
    wheels = [build_wheel(house, n, "1.0", {f"{n}/__init__.py": "", f"{n}/core.py": CORE}) for n in names]
    python = make_venv(root / "venv")
    pip_install(python, *wheels)
    return python


def gate(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return patchaudit("gate", *args)


def warm(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    """Run the gate until it answers from its cache; a verdict taken right after a write is not kept."""
    for _ in range(3):
        proc = gate(*args)
        if "cached" in proc.stdout:
            return proc
        time.sleep(0.1)
    return proc


def summary(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stdout.splitlines()
    assert lines, proc.stderr
    assert lines[-1].startswith("patchaudit gate: "), proc.stdout
    return lines[-1]


def test_clean_distribution_passes_with_one_summary_line(env: Path) -> None:
    proc = gate("steady", "--python", env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("\n") == 1
    line = summary(proc)
    assert line.startswith("patchaudit gate: ok: no problems; 1 distribution")
    assert "\x1b[" not in proc.stdout  # no colour for the journal


def test_warm_gate_catches_an_edit_that_keeps_size_and_mtime(env: Path, tmp_path: Path) -> None:
    cached = warm("hidden", "--python", env)
    assert cached.returncode == 0
    assert "cached" in summary(cached)  # the run reused the verdict

    target = site_packages(env) / "hidden" / "core.py"
    before = target.stat()
    reference = tmp_path / "reference"
    reference.touch()
    subprocess.run(["touch", "-r", str(target), str(reference)], check=True)
    target.write_text(CORE.replace("42", "43"))  # same size
    subprocess.run(["touch", "-r", str(reference), str(target)], check=True)
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)

    proc = gate("hidden", "--python", env)
    assert proc.returncode == 1, proc.stdout
    first = proc.stdout.splitlines()[0]
    assert first.startswith("patchaudit: hidden: modified hidden/core.py (expected sha256=")
    assert record_hash(CORE.replace("42", "43").encode()) in first
    assert "1 modified" in summary(proc)
    again = gate("hidden", "--python", env)  # the verdict for the patched file is cached too
    assert again.returncode == 1 and "cached" in summary(again)


def test_approved_patch_passes_and_fails_again_when_edited(env: Path, tmp_path: Path) -> None:
    target = site_packages(env) / "approved" / "core.py"
    patched = CORE.replace("42", "4200")
    target.write_text(patched)
    policy = tmp_path / "policy.toml"
    policy.write_text(
        f'python = "{env}"\ndistributions = ["approved"]\n\n'
        "[[approved]]\n"
        'distribution = "approved"\npath = "approved/core.py"\n'
        f'hash = "{record_hash(patched.encode())}"\nreason = "bigger answer for the benchmark"\n'
    )
    proc = gate("--policy", policy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 approved patch" in summary(proc)

    assert "cached" in summary(warm("--policy", policy))
    # The policy file is part of the fingerprint: dropping the approval takes effect at once.
    policy.write_text(policy.read_text().replace('path = "approved/core.py"', 'path = "approved/other.py"'))
    proc = gate("--policy", policy)
    assert proc.returncode == 1, proc.stdout
    policy.write_text(policy.read_text().replace('path = "approved/other.py"', 'path = "approved/core.py"'))
    assert gate("--policy", policy).returncode == 0

    target.write_text(patched + "# and one more thing\n")
    proc = gate("--policy", policy)
    assert proc.returncode == 1, proc.stdout
    assert "patchaudit: approved: modified approved/core.py" in proc.stdout


def test_hazard_in_a_patch_is_one_line_with_its_rule(env: Path) -> None:
    target = site_packages(env) / "hazard" / "core.py"
    target.write_text("def answer():\n    breakpoint()\n    return 42\n")
    proc = gate("hazard", "--python", env)
    assert proc.returncode == 1
    assert "patchaudit: hazard: finding hazard/core.py:2 (high debugger:" in proc.stdout
    # Findings below --fail-on are not problems; the drift still is.
    low = gate("hazard", "--python", env, "--fail-on", "none")
    assert low.returncode == 1
    assert "finding" not in low.stdout and "modified hazard/core.py" in low.stdout


def test_warm_gate_sees_a_file_added_in_a_new_subdirectory(env: Path) -> None:
    assert "cached" in summary(warm("added", "--python", env))
    (site_packages(env) / "added" / "sub").mkdir()
    (site_packages(env) / "added" / "sub" / "extra.py").write_text("X = 1\n")
    proc = gate("added", "--python", env)
    assert proc.returncode == 1
    assert "patchaudit: added: added added/sub/extra.py" in proc.stdout


def test_policy_names_target_and_distributions(env: Path, tmp_path: Path) -> None:
    policy = tmp_path / "pyproject.toml"
    policy.write_text(f'[tool.patchaudit]\npath = "{site_packages(env)}"\ndistributions = ["viapolicy"]\n')
    proc = gate("--policy", policy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 distribution" in summary(proc)


def test_policy_with_an_unknown_key_fails_closed(env: Path, tmp_path: Path) -> None:
    policy = tmp_path / "vllm.toml"
    policy.write_text(f'python = "{env}"\ndistributions = ["steady"]\nfail_opne = true\n')
    proc = gate("--policy", policy)
    assert proc.returncode == 2
    assert proc.stdout.startswith(f"patchaudit: error: {policy}: unknown key 'fail_opne'")
    assert "ERROR" in summary(proc)

    opened = gate("--policy", policy, "--fail-open")
    assert opened.returncode == 0
    assert "FAIL-OPEN" in summary(opened) and "unknown key 'fail_opne'" in opened.stdout


def test_missing_baseline_fails_closed_unless_the_policy_fails_open(env: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"
    proc = gate("steady", "--python", env, "--baseline", missing)
    assert proc.returncode == 2
    assert f"baseline {missing} does not exist" in proc.stdout

    policy = tmp_path / "open.toml"
    policy.write_text(f'python = "{env}"\ndistributions = ["steady"]\nbaseline = "nowhere.json"\nfail_open = true\n')
    opened = gate("--policy", policy)
    assert opened.returncode == 0
    assert "FAIL-OPEN" in summary(opened)


def test_input_errors_exit_two(env: Path) -> None:
    assert gate("not-installed", "--python", env).returncode == 2
    assert gate("steady", "--python", "/nonexistent/bin/python").returncode == 2
    bad_option = gate("steady", "--fail-on", "critical")
    assert bad_option.returncode == 2  # click's own message, through the slow path
    assert "critical" in bad_option.stderr


def test_help_goes_through_click() -> None:
    proc = gate("--help")
    assert proc.returncode == 0
    assert "--policy" in proc.stdout and "--fail-open" in proc.stdout


def test_internal_error_is_exit_three_and_fails_open_when_told(env: Path) -> None:
    broken = GateOptions(names=(42,), python=env, use_cache=False)  # type: ignore[arg-type]
    verdict = run(broken)
    assert verdict.exit_code == ExitCode.INTERNAL
    assert verdict.problems[0].kind == "error" and "internal error" in verdict.problems[0].detail
    opened = run(GateOptions(names=(42,), python=env, use_cache=False, fail_open=True))  # type: ignore[arg-type]
    assert opened.exit_code == ExitCode.CLEAN and opened.failed_open


def test_fast_path_parses_what_click_would_and_hands_the_rest_to_click() -> None:
    from patchaudit.cli.fastgate import parse

    assert parse(["vllm", "torch", "--python=/srv/bin/python", "--fail-on", "none", "--no-cache"]) == (
        ["vllm", "torch"],
        {"python": "/srv/bin/python", "fail_on": "none"},
        {"no_cache"},
    )
    assert parse(["--", "--odd-name"]) == (["--odd-name"], {}, set())
    for unknown in (["--help"], ["-h"], ["--fail-on", "critical"], ["--policy"], ["--python", "a", "--python", "b"]):
        assert parse(unknown) is None


def test_interrupted_revert_fails_the_gate(env: Path) -> None:
    journal = env.parent.parent / ".patchaudit" / "journal"
    assert "cached" in summary(warm("steady", "--python", env))
    journal.mkdir(parents=True, exist_ok=True)
    (journal / "20261202-0001.json").write_text("{}")
    try:
        proc = gate("steady", "--python", env)
        assert proc.returncode == 1
        first = proc.stdout.splitlines()[0]
        assert first.startswith("patchaudit: environment: interrupted-revert 20261202-0001")
        assert "`patchaudit revert --resume --python " in first and "finishes or rolls it back" in first
        assert (journal / "20261202-0001.json").read_text() == "{}"  # the gate reads; it never finishes a run
    finally:
        (journal / "20261202-0001.json").unlink()
    assert gate("steady", "--python", env).returncode == 0


def test_a_directory_without_distributions_fails_closed_and_writes_nothing(env: Path, tmp_path: Path) -> None:
    wrong = site_packages(env).parent  # lib/python3.X: one level above site-packages
    empty = tmp_path / "srv"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a site-packages directory\n")
    for target in (wrong, empty):
        proc = gate("--path", target)
        assert proc.returncode == 2, proc.stdout
        assert proc.stdout.splitlines()[0] == (
            f"patchaudit: error: no distributions in {target}: is this the site-packages directory?"
        )
        assert "ERROR" in summary(proc)
        assert not (target / ".patchaudit").exists()
        assert gate("--path", target, "--fail-on", "none").returncode == 2
        assert not (target / ".patchaudit").exists()


def test_a_file_name_with_a_newline_cannot_forge_journal_lines(env: Path) -> None:
    forged = "x.py\npatchaudit gate: ok: no problems; 1 distribution, 2 files; exit 0"
    (site_packages(env) / "newline" / forged).write_text("X = 1\n")
    proc = gate("newline", "--python", env)
    assert proc.returncode == 1, proc.stdout
    lines = proc.stdout.splitlines()
    assert len(lines) == 2, proc.stdout
    assert lines[0] == "patchaudit: newline: added newline/" + forged.replace("\n", "\\n") + (
        " (expected - got " + record_hash(b"X = 1\n") + ")"
    )
    assert summary(proc).startswith("patchaudit gate: FAIL: 1 added;")


def test_each_gate_keeps_its_verdict_in_a_file_of_its_own(env: Path, tmp_path: Path) -> None:
    """A warm gate reads only its own verdict file: another gate's, even one that is no JSON at all,
    is no concern of it."""
    cache = tmp_path / "cache"
    assert " cached;" in summary(warm("steady", "--python", env, "--cache-dir", cache))
    (keyed,) = cache.iterdir()
    (mine,) = keyed.glob("gate-*.json")
    assert " cached;" in summary(warm("steady", "--fail-on", "low", "--python", env, "--cache-dir", cache))
    (other,) = set(keyed.glob("gate-*.json")) - {mine}
    other.write_text("{")
    assert " cached;" in summary(gate("steady", "--python", env, "--cache-dir", cache))
    again = gate("steady", "--fail-on", "low", "--python", env, "--cache-dir", cache)
    assert again.returncode == 0 and " cached;" not in summary(again)


def test_a_verdict_file_cut_short_or_grown_is_not_used(env: Path, tmp_path: Path) -> None:
    """The listings follow the verdict file's JSON line raw, sized by it: a file that lost or gained
    bytes there (a full disk, a stray write) is a miss, and the gate audits again."""
    cache = tmp_path / "cache"
    assert " cached;" in summary(warm("steady", "--python", env, "--cache-dir", cache))
    (verdicts,) = next(cache.iterdir()).glob("gate-*.json")
    whole = verdicts.read_bytes()
    assert whole.count(b"\n") >= 1 and b"\0" in whole.split(b"\n", 1)[1]
    for changed in (whole[:-1], whole + b"x", whole.replace(b"\0", b"\0\0", 1)):
        verdicts.write_bytes(changed)
        proc = gate("steady", "--python", env, "--cache-dir", cache)
        assert proc.returncode == 0 and " cached;" not in summary(proc), proc.stdout + proc.stderr
        assert " cached;" in summary(warm("steady", "--python", env, "--cache-dir", cache))
        whole = verdicts.read_bytes()


def test_a_warm_gate_imports_no_threads_typing_worker_pools_or_dataclasses(env: Path, tmp_path: Path) -> None:
    """The gate runs before every service start: its warm path pays for every module it imports."""
    import sys

    args = ["gate", "steady", "--python", str(env), "--cache-dir", str(tmp_path / "cache")]
    assert " cached;" in summary(warm(*args[1:]))
    listed = tmp_path / "modules"
    script = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(listed)!r}, 'w').write('\\n'.join(sorted(sys.modules))))\n"
        "from patchaudit.cli import main\n"
        f"main({args!r})\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0 and " cached;" in summary(proc), proc.stdout + proc.stderr
    modules = set(listed.read_text().splitlines())
    assert "patchaudit.gate.plan" in modules
    assert modules & {"threading", "typing", "patchaudit.parallel.workers", "click"} == set()
    # a kept verdict that still holds is printed without a dataclass (dataclasses loads inspect, ast, dis)
    assert modules & {"dataclasses", "inspect", "patchaudit.gate.core", "patchaudit.gate.verdict"} == set()


def test_the_newest_verdict_files_are_kept(tmp_path: Path) -> None:
    from patchaudit.gate.cache import CACHE_KEEP, _drop_oldest

    for i in range(CACHE_KEEP + 3):
        made = tmp_path / f"gate-{i:02}.json"
        made.write_text("{}")
        os.utime(made, ns=(i * 10**9, i * 10**9))
    (tmp_path / "stat-v1.json").write_text("{}")
    _drop_oldest(tmp_path)
    kept = [f"gate-{i:02}.json" for i in range(3, CACHE_KEEP + 3)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [*kept, "stat-v1.json"]


def test_fingerprint_is_the_same_on_any_number_of_processes_and_sees_every_edit(env: Path, tmp_path: Path) -> None:
    """A warm gate stats ~100,000 entries of a real stack, cut into blocks shared out over forked
    processes (one large root, as torch's, split among them); the verdict must not depend on how many,
    and an edit anywhere (size and mtime kept) must show."""
    from patchaudit.gate.plan import BLOCK_ROWS, FilePlan
    from patchaudit.target import environment

    tree = tmp_path / "tree"
    for d in range(12):
        (tree / f"d{d:02}" / "sub").mkdir(parents=True)
        for f in range(BLOCK_ROWS // 2):
            (tree / f"d{d:02}" / "sub" / f"m{f}.py").write_text("x = 1\n")
    for f in range(BLOCK_ROWS * 3):  # one directory of thousands of names, as torch's include/ATen/ops
        (tree / "d05" / f"h{f}.h").write_text("")
    plan, built, _ = FilePlan.build(environment.from_python(env), [], extra_files=[], extra_roots=[tree])
    tree_blocks = [b for b in plan.blocks if plan.roots[b[0]] == str(tree)]
    assert len(tree_blocks) >= 9 and any(item > 1 for _, _, item, _ in tree_blocks)  # cut inside a directory
    plan = FilePlan.from_dict(plan.to_dict())
    assert [plan.fingerprint(n, min_rows=1) for n in (1, 2, 3, 8)] == [built] * 4

    for victim in (tree / "d07" / "sub" / "m99.py", tree / "d05" / f"h{BLOCK_ROWS * 2}.h"):
        before = victim.stat()
        victim.write_text("x = 2\n")
        os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = {plan.fingerprint(n, min_rows=1) for n in (1, 3)}
        assert len(after) == 1 and built not in after
        plan, built, _ = FilePlan.build(environment.from_python(env), [], extra_files=[], extra_roots=[tree])


def test_warm_gate_sees_a_file_added_where_the_directory_mtime_was_put_back(env: Path) -> None:
    """A warm gate stats the names it listed before while a directory's own row is unchanged: a name
    added behind a restored mtime still changes the directory's ctime, and the audit runs again."""
    sub = site_packages(env) / "restored" / "sub"  # below the package: no top-level row of site-packages sees it
    sub.mkdir()
    (sub / "one.py").write_text("X = 1\n")
    cached = warm("restored", "--python", env)
    assert cached.returncode == 1 and "cached" in summary(cached) and "1 added" in summary(cached)
    before = sub.stat()
    (sub / "two.py").write_text("X = 2\n")
    os.utime(sub, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert sub.stat().st_mtime_ns == before.st_mtime_ns
    proc = gate("restored", "--python", env)
    assert proc.returncode == 1, proc.stdout
    assert "patchaudit: restored: added restored/sub/two.py" in proc.stdout
    assert "2 added" in summary(proc) and "cached" not in summary(proc)


def test_warm_gate_sees_bytecode_no_record_lists_rewritten_in_place(env: Path, tmp_path: Path) -> None:
    """Every entry is stat'ed, not only RECORD's: an unchecked-hash .pyc that Python would run instead
    of its source, written over one no RECORD lists (its directory untouched), fails the warm gate."""
    import py_compile

    source = site_packages(env) / "bytecode" / "core.py"
    tag = subprocess.run(
        [str(env), "-c", "import sys; print(sys.implementation.cache_tag)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    pyc = source.parent / "__pycache__" / f"core.{tag}.opt-1.pyc"
    pyc.parent.mkdir(exist_ok=True)
    py_compile.compile(str(source), cfile=str(pyc), optimize=1)  # a valid compile: not drift, not added
    assert "cached" in summary(warm("bytecode", "--python", env))

    patched = tmp_path / "core.py"
    patched.write_text(CORE.replace("42", "43"))
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    fake = Path(py_compile.compile(str(patched), cfile=str(tmp_path / "fake.pyc"), invalidation_mode=mode))
    listed = pyc.parent.stat()
    with open(pyc, "r+b") as out:  # in place: the __pycache__ directory keeps its mtime and ctime
        out.truncate(0)
        out.write(fake.read_bytes())
    assert pyc.parent.stat().st_ctime_ns == listed.st_ctime_ns
    proc = gate("bytecode", "--python", env)
    assert proc.returncode == 1, proc.stdout
    assert f"bytecode/__pycache__/core.{tag}.opt-1.pyc" in proc.stdout


def _tree(root: Path, outside: Path) -> None:
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "x.py").write_text("x = 1\n")
    for d in ("a/b/c", "a/d", "e"):
        (root / d).mkdir(parents=True)
        for n in range(3):
            (root / d / f"m{n}.py").write_text(f"n = {n}\n")
    (root / "a" / "linked").symlink_to(outside)
    (root / "dangling").symlink_to(root.parent / "nowhere")


def test_cached_listing_gives_the_rows_of_a_listing_walk(tmp_path: Path) -> None:
    """A warm check stats the names the last walk listed (nothing is listed again): the rows are the
    walk's while nothing changed, and any change shows, a linked directory never entered."""
    from patchaudit.gate.plan import _cached_rows, _tree_walk

    def _walk(root: str, seen: set[str]) -> tuple[list[tuple[int, ...]], str]:
        groups, listing = _tree_walk(root, seen)
        return [row for group in groups for row in group], listing

    def _cached(root: str, listing: str) -> list[tuple[int, ...]]:
        parts = listing.split("\0")
        return [row for unit in range(len(parts) // 2 + 1) for row in _cached_rows(root, parts, unit, 0, None)]

    root = tmp_path / "pkg"
    _tree(root, tmp_path / "outside")
    seen: set[str] = set()
    rows, listing = _walk(str(root), seen)
    assert _cached(str(root), listing) == rows
    assert len(rows) == 1 + 5 + 12  # the root by path, 5 directories by descriptor, 12 other entries
    assert str(root / "a" / "b" / "c" / "m2.py") in seen and str(root / "a" / "linked") in seen
    assert not any(p.startswith(str(root / "a" / "linked") + "/") for p in seen)

    def changed(change: Callable[[], object]) -> bool:
        change()
        return _cached(str(root), listing) != rows

    victim = root / "a" / "b" / "c" / "m1.py"
    before = victim.stat()
    time.sleep(0.01)
    # an edit, its size and mtime put back: the row of that file changes (its ctime)
    assert changed(lambda: (victim.write_text("n = 7\n"), os.utime(victim, ns=(0, before.st_mtime_ns))))
    rows, listing = _walk(str(root), set())
    d = root / "a" / "d"
    mtime = d.stat().st_mtime_ns
    time.sleep(0.01)
    # a name added, the directory's mtime put back: its ctime still changed
    assert changed(lambda: ((d / "new.py").write_text(""), os.utime(d, ns=(0, mtime))))
    rows, listing = _walk(str(root), set())
    time.sleep(0.01)
    assert changed(lambda: (d / "new.py").rename(d / "renamed.py"))
    rows, listing = _walk(str(root), set())
    time.sleep(0.01)
    assert changed(lambda: (root / "e" / "m0.py").chmod(0o600))
    rows, listing = _walk(str(root), set())
    if os.geteuid() == 0:  # a new owner, mode and size and times as they were: its ctime changed
        time.sleep(0.01)
        assert changed(lambda: os.chown(root / "e" / "m0.py", 1, 1))
        rows, listing = _walk(str(root), set())
    # a directory swapped for a link to a copy of it (its own mtime kept): never opened through the link
    copy = tmp_path / "copy"
    shutil.copytree(root / "a" / "b", copy, copy_function=shutil.copy2)
    shutil.copystat(root / "a" / "b", copy)
    mtime = (root / "a").stat().st_mtime_ns
    time.sleep(0.01)
    shutil.rmtree(root / "a" / "b")
    (root / "a" / "b").symlink_to(copy)
    assert changed(lambda: os.utime(root / "a", ns=(0, mtime)))
    assert [r for r in _cached(str(root), listing) if len(r) == 1] == [(errno.ENOTDIR,)]
