"""The descriptor walk, and a pass over the package: every write below a target goes through it.

The hostile side, played by another user against root, is in tests/hostile/test_root_safety.py.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from patchaudit import beneath
from patchaudit.errors import UnsafePath

PACKAGE = Path(__file__).resolve().parents[1] / "patchaudit"


def test_a_symlinked_directory_on_the_way_ends_the_walk(tmp_path: Path) -> None:
    root = tmp_path / "site"
    (root / "pkg").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "pkg" / "sub").symlink_to(outside)
    with pytest.raises(UnsafePath, match="symlink or not a directory"):
        beneath.walk(root, ["pkg", "sub"])
    with pytest.raises(UnsafePath), beneath.parent_of(root / "pkg/sub/new.py", [root], create=True):
        pass
    assert list(outside.iterdir()) == []


def test_a_walk_acts_on_the_directory_it_opened_even_when_it_is_moved(tmp_path: Path) -> None:
    root = tmp_path / "site"
    (root / "pkg").mkdir(parents=True)
    with beneath.parent_of(root / "pkg/mod.py", [root]) as (fd, name):
        os.rename(root / "pkg", tmp_path / "moved")
        (tmp_path / "elsewhere").mkdir()
        (root / "pkg").symlink_to(tmp_path / "elsewhere")
        beneath.write_new_at(fd, name, b"x = 1\n", 0o4755)
    assert (tmp_path / "moved/mod.py").read_bytes() == b"x = 1\n"
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert stat.S_IMODE(os.stat(tmp_path / "moved/mod.py").st_mode) == 0o755


def test_paths_outside_every_root_and_dot_dot_names_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "site"
    root.mkdir()
    with pytest.raises(UnsafePath, match="outside"):
        beneath.split_under(tmp_path / "other" / "x", [root])
    with pytest.raises(UnsafePath):
        beneath.open_dir_at(os.open(root, os.O_RDONLY), "..")


def test_missing_directories_are_made_only_when_asked(tmp_path: Path) -> None:
    root = tmp_path / "site"
    root.mkdir()
    with pytest.raises(FileNotFoundError), beneath.parent_of(root / "a/b/c.py", [root]):
        pass
    with beneath.parent_of(root / "a/b/c.py", [root], create=True) as (fd, name):
        beneath.write_new_at(fd, name, b"", 0o644)
    assert (root / "a/b/c.py").is_file()


def test_private_dirs_are_0700_all_the_way_down(tmp_path: Path) -> None:
    made = beneath.private_dir(tmp_path / "home/trees/key")
    for path in (tmp_path / "home", tmp_path / "home/trees", made):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert beneath.owned_privately(made) is None


def test_modes_written_never_carry_setuid_setgid_or_sticky() -> None:
    assert beneath.safe_mode(0o4755) == 0o755
    assert beneath.safe_mode(0o2755) == 0o755
    assert beneath.safe_mode(0o1777) == 0o777
    assert beneath.safe_mode(0o100644) == 0o644


# --- the systematic pass: raw writes on paths, outside the helper ---

RAW = re.compile(
    r"os\.(replace|unlink|rename|remove|mkdir|makedirs|chmod|symlink|rmdir)\("
    r"|\.(write_bytes|write_text|mkdir|chmod|unlink|rename|symlink_to|touch)\("
    r"|shutil\.(copy\w*|move|rmtree)\("
    r"|\bopen\([^)]*['\"][wax]"
    r"|\b(atomic_write|write_new)\("
)

# Every raw write left in the package, and why it never touches a path below a target. A new one
# fails this test until it goes through patchaudit.beneath or is listed here with its reason.
ALLOWED: dict[str, tuple[int, str]] = {
    "atomic.py": (5, "the helper for patchaudit's own files: caches, state, outputs the user names"),
    "cachedir.py": (1, "makes a cache directory chosen by locate(), which as root skips any another user may write"),
    "cli/common.py": (1, "--out FILE: a file the user names"),
    "cli/scan.py": (1, "--out FILE: a file the user names"),
    "hazards/cache.py": (3, "the hazard result cache, in the directory cachedir.locate() chose"),
    "gate/cache.py": (1, "the verdict cache, in the directory cachedir.locate() chose"),
    "statcache.py": (1, "the stat cache, in the directory cachedir.locate() chose"),
    "pristine/http.py": (1, "the spool directory inside OwnCache, made private by OwnCache.writable()"),
    "pristine/index.py": (1, "a whole wheel kept in OwnCache (private; never another user's)"),
    "pristine/cache.py": (3, "OwnCache's partial downloads (private; never another user's)"),
    "systemd.py": (3, "unit drop-ins in the system's unit directory; uninstall removes what install wrote"),
    "render/prometheus.py": (1, "--textfile: a file the operator names"),
    "baseline.py": (1, "the baseline file the user names"),
    "models/manifest.py": (1, "the model manifest, in cachedir.tree_state(): root's own for a tree it does not own"),
    "serving/annotate.py": (1, "the serving graph cache, in the directory cachedir.locate() chose"),
    "serving/graph.py": (1, "the serving graph cache, in the directory cachedir.locate() chose"),
    "revert/state.py": (1, "journal and manifests, in the 0700 state directory"),
    "revert/recovery.py": (1, "a finished journal, in the 0700 state directory"),
    "revert/transaction.py": (9, "the run directory and journal, in the 0700 state directory"),
    "revert/fileops.py": (1, "a .pyc unlinked by dir_fd= in a __pycache__ opened through the walk"),
}


def test_every_raw_write_is_the_helper_or_listed_with_its_reason() -> None:
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "beneath.py":
            continue  # the helper itself
        text = path.read_text(encoding="utf-8")
        count = sum(1 for line in text.splitlines() if RAW.search(line) and not line.lstrip().startswith("def "))
        if count:
            found[rel] = count
    unlisted = {rel: n for rel, n in found.items() if rel not in ALLOWED}
    assert unlisted == {}, "write below a target through patchaudit.beneath, or list it in ALLOWED with a reason"
    grown = {rel: (n, ALLOWED[rel][0]) for rel, n in found.items() if n > ALLOWED[rel][0]}
    assert grown == {}, "more raw writes than ALLOWED lists: use patchaudit.beneath, or list the new one"
