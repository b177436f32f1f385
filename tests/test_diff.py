"""`patchaudit diff`: a plain unified diff that `patch -p0` and `git apply -p0` re-apply."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pristine_helpers import build_wheel, make_venv, patchaudit, pip_install, record_hash, site_packages

from patchaudit.pristine.diff import unified

FILES = {
    "demo/__init__.py": b"",
    "demo/core.py": b"".join(f"def f{i}():\n    return {i}\n\n".encode() for i in range(30)),
    "demo/tail.py": b"LAST = 1",  # no newline at end of file
    "demo/gone.py": b"GONE = True\n",
    "demo/blob.bin": bytes(range(256)) * 4,
    "demo/sp ace,comma.py": b"A = 1\n",
    # a form feed (and other str.splitlines separators) is not a line end for patch(1)
    "demo/feed.py": "a = 1\n\x0c\ndef g():\n    # \x1c\x1d\x1e\x85\u2028\n    return 2\n".encode(),
}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("diff-base")
    built = build_wheel(root / "build", "demo", "1.0", FILES)
    python = make_venv(root / "venv")
    pip_install(python, built)
    (root / "wheelhouse").mkdir()
    built.rename(root / "wheelhouse" / built.name)
    return root / "venv", root / "wheelhouse"


@pytest.fixture
def venv(base: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path, Path]:
    shutil.copytree(base[0], tmp_path / "venv", symlinks=True)
    python = tmp_path / "venv/bin/python"
    return python, site_packages(python), base[1]


def patch_everything(site: Path) -> dict[str, bytes | None]:
    core = (
        (site / "demo/core.py")
        .read_bytes()
        .replace(b"return 7\n", b"import torch; torch.save(x, '/tmp/x')\n    return 7\n")
    )
    after = {
        "demo/core.py": core,
        "demo/tail.py": b"LAST = 2",
        "demo/added.py": b"print('debug')\n",
        "demo/gone.py": None,
    }
    for rel, data in after.items():
        if data is None:
            (site / rel).unlink()
        else:
            (site / rel).write_bytes(data)
    return after


def test_piped_diff_is_plain_and_reapplies_with_patch_p0(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    after = patch_everything(site)
    proc = patchaudit("diff", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse))
    assert proc.returncode == 1
    text = proc.stdout
    assert "\x1b[" not in text
    assert "--- demo/core.py\n+++ demo/core.py\n" in text
    assert "+    import torch; torch.save(x, '/tmp/x')\n" in text
    assert "--- /dev/null\n+++ demo/added.py\n" in text
    assert "--- demo/gone.py\n+++ /dev/null\n" in text
    assert "\\ No newline at end of file" in text

    reverted = patchaudit("revert", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
    assert reverted.returncode == 0, reverted.stderr
    assert (site / "demo/core.py").read_bytes() == FILES["demo/core.py"]
    subprocess.run(["patch", "-p0", "-s", "--no-backup-if-mismatch"], input=text.encode(), cwd=site, check=True)
    for rel, data in after.items():
        assert ((site / rel).read_bytes() if (site / rel).exists() else None) == data, rel


def test_git_apply_p0_accepts_it(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    after = patch_everything(site)
    text = patchaudit("diff", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse)).stdout
    patchaudit("revert", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
    subprocess.run(["git", "apply", "-p0"], input=text.encode(), cwd=site, check=True)
    for rel, data in after.items():
        assert ((site / rel).read_bytes() if (site / rel).exists() else None) == data, rel


def test_binary_file_is_one_line_and_paths_select_files(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    (site / "demo/blob.bin").write_bytes(b"\x00\x01patched")
    (site / "demo/tail.py").write_bytes(b"LAST = 3\n")
    proc = patchaudit("diff", "demo", "demo/blob.bin", "--python", str(python), "--wheelhouse", str(wheelhouse))
    assert proc.stdout == "Binary files demo/blob.bin and demo/blob.bin differ\n"


def test_clean_distribution_has_an_empty_diff_and_exit_0(venv: tuple[Path, Path, Path]) -> None:
    python, _, wheelhouse = venv
    proc = patchaudit("diff", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse))
    assert (proc.returncode, proc.stdout) == (0, "")


def test_color_is_opt_in_when_piped(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    (site / "demo/tail.py").write_bytes(b"LAST = 4\n")
    proc = patchaudit(
        "diff", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse), "--color", env={"TERM": "xterm"}
    )
    assert "LAST" in proc.stdout and "\x1b[" in proc.stdout


def test_stale_record_is_reported_as_record_mismatch(tmp_path: Path) -> None:
    stale = {"demo/tail.py": record_hash(b"LAST = 0")}
    built = build_wheel(tmp_path / "build", "demo", "1.0", FILES, record_hashes=stale)
    python = make_venv(tmp_path / "venv")
    pip_install(python, built)
    proc = patchaudit("diff", "demo", "--python", str(python), "--wheelhouse", str(built.parent))
    assert "demo/tail.py: record-mismatch" in proc.stdout
    reverted = patchaudit("revert", "demo", "--python", str(python), "--wheelhouse", str(built.parent), "--yes")
    assert "record-mismatch demo/tail.py" in reverted.stdout
    assert (site_packages(python) / "demo/tail.py").read_bytes() == b"LAST = 1"


def test_unified_handles_missing_newline_both_sides() -> None:
    text, binary = unified("a.py", b"x = 1", b"x = 2")
    assert not binary
    assert (
        text == "--- a.py\n+++ a.py\n@@ -1 +1 @@\n"
        "-x = 1\n\\ No newline at end of file\n+x = 2\n\\ No newline at end of file\n"
    )


def patch_odd_files(site: Path) -> dict[str, bytes]:
    after = {
        "demo/sp ace,comma.py": b"A = 1\nB = 2\n",
        "demo/new file.py": b"N = 1\n",
        "demo/feed.py": FILES["demo/feed.py"].replace(b"    return 2", b"    breakpoint()\n    return 2"),
    }
    for rel, data in after.items():
        (site / rel).write_bytes(data)
    return after


@pytest.mark.parametrize(
    "apply", [["patch", "-p0", "-s", "--no-backup-if-mismatch"], ["git", "apply", "-p0"]], ids=["patch", "git"]
)
def test_names_with_spaces_and_form_feeds_reapply(venv: tuple[Path, Path, Path], apply: list[str]) -> None:
    python, site, wheelhouse = venv
    after = patch_odd_files(site)
    proc = patchaudit("diff", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse))
    assert proc.returncode == 1, proc.stderr
    text = proc.stdout
    assert "\\ No newline at end of file" not in text
    assert "@@ -2,4 +2,5 @@\n \x0c\n def g():\n" in text
    assert "--- demo/sp ace,comma.py\t\n+++ demo/sp ace,comma.py\t\n" in text
    assert "--- /dev/null\n+++ demo/new file.py\t\n" in text

    reverted = patchaudit("revert", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
    assert reverted.returncode == 0, reverted.stderr
    assert not (site / "demo/new file.py").exists()
    subprocess.run(apply, input=text.encode(), cwd=site, check=True)
    for rel, data in after.items():
        assert (site / rel).read_bytes() == data, rel
    assert not (site / "demo/new").exists()


@pytest.mark.parametrize(
    "apply", [["patch", "-p0", "-s", "--no-backup-if-mismatch"], ["git", "apply", "-p0"]], ids=["patch", "git"]
)
def test_names_that_need_quoting_reapply(tmp_path: Path, apply: list[str]) -> None:
    names = ["pkg/tab\there.py", 'pkg/quo"te\\back.py', "pkg/caf\u00e9 \udcff.py"]
    (tmp_path / "pkg").mkdir()
    text = ""
    for name in names:
        os.fsencode(tmp_path / name)  # a name this file system can hold
        (tmp_path / name).write_bytes(b"x = 1\n")
        text += unified(name, b"x = 1\n", b"x = 2\n")[0]
    text += unified("pkg/new\tfile.py", None, b"y = 1\n")[0]
    subprocess.run(apply, input=text.encode("utf-8", "surrogateescape"), cwd=tmp_path, check=True)
    for name in names:
        assert (tmp_path / name).read_bytes() == b"x = 2\n", name
    assert (tmp_path / "pkg/new\tfile.py").read_bytes() == b"y = 1\n"


def test_unified_counts_lines_at_newlines_only() -> None:
    old = "a\x0cb\n# \x1c\x1d\x1e\x85\n\u2028x\n"
    new = "a\x0cb\n# \x1c\x1d\x1e\x85\ny\n"
    text, binary = unified("a.py", old.encode(), new.encode())
    assert not binary
    assert text == "--- a.py\n+++ a.py\n@@ -1,3 +1,3 @@\n a\x0cb\n # \x1c\x1d\x1e\x85\n-\u2028x\n+y\n"


def test_a_path_that_did_not_drift_is_named_on_stderr(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    (site / "demo/tail.py").write_bytes(b"LAST = 4\n")
    proc = patchaudit(
        "diff", "demo", "demo/tail.py", "demo/blob.bin", "--python", str(python), "--wheelhouse", str(wheelhouse)
    )
    assert proc.returncode == 1
    assert "+LAST = 4" in proc.stdout
    assert proc.stderr.strip().splitlines() == ["patchaudit: demo/blob.bin: not drifted"]
