"""Revert then undo puts the whole tree back: bytes, modes and links, at every depth.

`snapshot` and `plant_patches` are shared with bench/roundtrip.py, which does the same on a copy of a real stack.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from pristine_helpers import build_wheel, make_venv, patchaudit, pip_install, site_packages

FILES = {
    "topmod.py": b"TOP = 1\n",
    "demo_hook.pth": b"import os\n",
    "demo/__init__.py": b"",
    "demo/sub/__init__.py": b"",
    "demo/sub/deep/__init__.py": b"",
    "demo/sub/deep/leaf.py": b"LEAF = 1\n" * 20,
    "demo/sub/mod.py": b"MOD = 2\n" * 20,
    "demo/tool.py": b"#!/usr/bin/env python\nprint('tool')\n",
}


def snapshot(root: Path) -> dict[str, tuple[str, int, bytes | str]]:
    """Every entry under root: kind, permission bits, bytes or link target.

    Left out: patchaudit's own state, and compiled bytecode (revert drops a touched module's `.pyc` by design and
    undo does not bring back a cache Python rebuilds).
    """
    out: dict[str, tuple[str, int, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != ".patchaudit"]
        for name in dirnames + filenames:
            if name.endswith(".pyc") and os.path.basename(dirpath) == "__pycache__":
                continue  # revert drops the bytecode of what it touches (by design); Python rewrites it
            path = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), b"")
            else:
                with open(path, "rb") as f:
                    out[rel] = ("file", stat.S_IMODE(st.st_mode), f.read())
    return out


def tree_difference(before: dict, after: dict) -> list[str]:
    lines = [f"gone: {p}" for p in sorted(before.keys() - after.keys())]
    lines += [f"new: {p}" for p in sorted(after.keys() - before.keys())]
    for p in sorted(before.keys() & after.keys()):
        if before[p] != after[p]:
            b, a = before[p], after[p]
            what = "kind" if b[0] != a[0] else "mode" if b[1] != a[1] else "content"
            lines.append(f"{what} differs: {p} ({oct(b[1])} -> {oct(a[1])})")
    return lines


@pytest.fixture
def patched(tmp_path: Path) -> tuple[Path, Path, Path]:
    wheelhouse = tmp_path / "wheelhouse"
    build_wheel(wheelhouse, "demo", "1.0", FILES, executable=("demo/tool.py",))
    python = make_venv(tmp_path / "venv")
    pip_install(python, *wheelhouse.glob("*.whl"))
    site = site_packages(python)
    # top-level module, a .pth hook the dist owns, nested files, a mode, a link, added and missing files
    (site / "topmod.py").write_bytes(b"TOP = 2  # patched\n")
    (site / "demo_hook.pth").write_bytes(b"import os; os.environ['X'] = '1'\n")
    (site / "demo/sub/deep/leaf.py").write_bytes(b"import pdb; pdb.set_trace()\n")
    (site / "demo/sub/deep/extra.py").write_bytes(b"EXTRA = 1\n")
    (site / "demo/sub/mod.py").unlink()
    (site / "demo/tool.py").chmod(0o700)
    (site / "demo/sub/__init__.py").unlink()
    (site / "demo/sub/__init__.py").symlink_to("deep/leaf.py")
    # startup hooks no distribution owns, at the top of site-packages
    (site / "sitecustomize.py").write_bytes(b"print('hook')\n")
    (site / "zz_hotfix.pth").write_bytes(b"import sys; sys.flags\n")
    (site / "zz_hotfix.pth").chmod(0o600)
    return python, site, wheelhouse


def test_revert_then_undo_restores_the_whole_tree(patched: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = patched
    venv = python.parent.parent
    before = snapshot(venv)

    proc = patchaudit("revert", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["refused"] == []
    assert (site / "topmod.py").read_bytes() == FILES["topmod.py"]
    assert not (site / "sitecustomize.py").exists()
    assert tree_difference(before, snapshot(venv)) != []

    run_id = Path(out["quarantine"]).name
    proc = patchaudit("quarantine", "restore", run_id, "--python", str(python), "--yes", "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    undo = json.loads(proc.stdout)
    assert undo["refused"] == []
    diff = tree_difference(before, snapshot(venv))
    assert diff == [], "\n".join(diff)


def test_a_run_that_touched_only_top_level_files_is_undone(patched: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = patched
    proc = patchaudit(
        "revert",
        "demo",
        "topmod.py",
        "demo_hook.pth",
        "--python",
        str(python),
        "--wheelhouse",
        str(wheelhouse),
        "--yes",
    )
    assert proc.returncode == 0, proc.stderr
    run_id = next(p.name for p in (python.parent.parent / ".patchaudit/quarantine").iterdir())
    proc = patchaudit("quarantine", "restore", run_id, "--python", str(python), "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (site / "topmod.py").read_bytes() == b"TOP = 2  # patched\n"
    assert (site / "demo_hook.pth").read_bytes() == b"import os; os.environ['X'] = '1'\n"
    shutil.rmtree(python.parent.parent / ".patchaudit")
