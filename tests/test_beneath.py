"""The descriptor walk, and a pass over the package: every write, and every read, open, stat or
realpath below a target goes through it or is listed with its reason.

The hostile side, played by another user against root, is in tests/hostile/test_root_safety.py.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from patchaudit.errors import UnsafePath
from patchaudit.fs import beneath
from patchaudit.fs.safefs import UnreadableFile
from patchaudit.parallel.hashing import hash_file

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
# fails this test until it goes through patchaudit.fs.beneath or is listed here with its reason.
ALLOWED: dict[str, tuple[int, str]] = {
    "fs/atomic.py": (5, "the helper for patchaudit's own files: caches, state, outputs the user names"),
    "target/cachedir.py": (
        1,
        "makes a cache directory chosen by locate(), which as root skips any another user may write",
    ),
    "cli/common.py": (1, "--out FILE: a file the user names"),
    "cli/fastgate.py": (1, "--out FILE: a file the user names"),
    "cli/scan.py": (1, "--out FILE: a file the user names"),
    "hazards/cache.py": (3, "the hazard result cache, in the directory cachedir.locate() chose"),
    "gate/cache.py": (2, "the verdict cache, in the directory cachedir.locate() chose, and its oldest files"),
    "parallel/statcache.py": (1, "the stat cache, in the directory cachedir.locate() chose"),
    "pristine/http.py": (1, "the spool directory inside OwnCache, made private by OwnCache.writable()"),
    "pristine/index.py": (1, "a whole wheel kept in OwnCache (private; never another user's)"),
    "pristine/cache.py": (3, "OwnCache's partial downloads (private; never another user's)"),
    "gate/systemd.py": (3, "unit drop-ins in the system's unit directory; uninstall removes what install wrote"),
    "render/prometheus.py": (1, "--textfile: a file the operator names"),
    "gate/baseline.py": (1, "the baseline file the user names"),
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
        if rel == "fs/beneath.py":
            continue  # the helper itself
        text = path.read_text(encoding="utf-8")
        count = sum(1 for line in text.splitlines() if RAW.search(line) and not line.lstrip().startswith("def "))
        if count:
            found[rel] = count
    unlisted = {rel: n for rel, n in found.items() if rel not in ALLOWED}
    assert unlisted == {}, "write below a target through patchaudit.fs.beneath, or list it in ALLOWED with a reason"
    grown = {rel: (n, ALLOWED[rel][0]) for rel, n in found.items() if n > ALLOWED[rel][0]}
    assert grown == {}, "more raw writes than ALLOWED lists: use patchaudit.fs.beneath, or list the new one"


# --- the systematic pass, reads: every open, read, stat, listing or realpath of a path ---

READ = re.compile(
    r"(?<![\w.])open\(|\bos\.open\("
    r"|\.(read_bytes|read_text|iterdir)\("
    r"|os\.path\.realpath\(|\.resolve\(\)"
    r"|\bos\.(stat|lstat|readlink|listdir|scandir|walk)\("
    r"|\bos\.path\.(islink|isfile|isdir|exists|lexists)\("
    r"|\.(is_file|is_dir|is_symlink|exists)\(\)"
    r"|\bread_(capped|capped_text|capped_or_none|json|regular)\("
)

# Every read by a path string left in the package, and why it is not a read below a target that
# another user may swap: beneath.read_below / stat_below / real_dir / DirCache (directories reached by
# descriptors) and `dir_fd=` reads are the helper and are not counted. A new one fails this test until
# it goes through patchaudit.fs.beneath or is listed here with its reason.
READS_ALLOWED: dict[str, tuple[int, str]] = {
    "parallel/children.py": (2, "/proc/self/task: this process's own threads and their children, never a target"),
    "fs/atomic.py": (
        3,
        "patchaudit's own files (caches, state, outputs the user names), opened by atomic_write itself",
    ),
    "check/audit.py": (
        4,
        "RECORD, top_level.txt by read_below; the rest: existence checks, os.walk (never follows a link)",
    ),
    "gate/baseline.py": (
        3,
        "the baseline file the user names (follow=True); the RECORD by read_below; existence checks for a report line",
    ),
    "check/bytecode.py": (
        3,
        "a .pyc and its source (safefs, last link refused) compared for a verdict; no bytes shown",
    ),
    "target/cachedir.py": (1, "patchaudit's own cache directory, made if missing"),
    "target/cacheplace.py": (
        3,
        "patchaudit's own cache directory; as root, one another user may write is skipped",
    ),
    "cli/common.py": (
        2,
        "existence checks that choose a message or a path's spelling; nothing read is shown or written",
    ),
    "cli/model.py": (1, "whether a journal exists, to suggest recovery; nothing is read"),
    "cli/ps.py": (1, "ps --python/--path: site directories compared by their real paths; nothing below is read"),
    "cli/scan.py": (1, "--out FILE: a file the user names"),
    "cluster/driver.py": (1, "/dev/null for a child's stdin"),
    "parallel/cpus.py": (4, "this process's own cgroup files in /proc and /sys"),
    "target/dpkg.py": (6, "dpkg's own database under /var/lib/dpkg (root's), for Debian's own packages"),
    "target/environment.py": (
        6,
        "the interpreter, scheme and metadata directories the user names; direct_url.json by read_below;"
        " the journal names in patchaudit's own state directory (interrupted_runs)",
    ),
    "check/errata.py": (3, "the errata file shipped with patchaudit, or one the user names"),
    "gate/core.py": (
        2,
        "--root and the gate's journal directory in the state directory; the plan's own reads are in gate/plan.py",
    ),
    "gate/cache.py": (
        5,
        "the verdict cache in cachedir.locate()'s directory; stat rows compared, never read",
    ),
    "gate/plan.py": (
        6,
        "RECORD by read_below; patchaudit's own rules; package directories opened (no link below the root),"
        " listed by descriptor and stat'ed by dir_fd: stat keys only",
    ),
    "parallel/hashing.py": (
        3,
        "read_regular: a file's head for a verdict (no bytes shown); the stat cache's lstat only compares a key",
    ),
    "hazards/pool.py": (
        2,
        "sources the hazard rules parse (safefs, last link refused); a finding quotes the target's own line",
    ),
    "hazards/batch.py": (1, "the rule directories the user names"),
    "hazards/cache.py": (1, "the hazard result cache, in the directory cachedir.locate() chose"),
    "hazards/loading.py": (7, "patchaudit's own rule files and the rule directories the user names"),
    "check/hooks.py": (
        5,
        ".pth files and sitecustomize, safefs-bounded; follow=True as site.py follows a linked .pth itself",
    ),
    "image/pristine.py": (1, "a listing of the wheelhouse the user names, outside the image"),
    "image/source.py": (4, "the image archive or layout the user names; members go through beneath.chase"),
    "target/layout.py": (
        15,
        "pyvenv.cfg and the standard library of the interpreter the user names, to learn its scheme;"
        " whether running that interpreter is safe (foreign_input, moved here from probe)",
    ),
    "models/blobmatch.py": (1, "model files compared for similarity, safefs-bounded with the last link refused"),
    "models/digests.py": (1, "the model root's realpath as a cache key only"),
    "models/hubcache.py": (
        11,
        "a Hugging Face cache's refs and listings, safefs-bounded; blobs are hashed by hash_files (by descriptors)",
    ),
    "models/layout.py": (7, "tells the layout of the model directory the user names (is_dir, exists); nothing read"),
    "models/localdir.py": (
        5,
        "a model directory's listing and .gitattributes (safefs); files are hashed by descriptors",
    ),
    "models/manifest.py": (
        2,
        "the manifest in tree_state(), root's own for a tree it does not own; the config text by read_below",
    ),
    "models/pristine.py": (11, "pristine model blobs in the user's or root's hub cache, hashed before use"),
    "models/revert.py": (
        5,
        "the hub cache's own paths (realpath compared to hub_cache_dir()); a blob's link and mode read for the plan",
    ),
    "models/safetensors.py": (1, "a safetensors header, O_NONBLOCK and bounded, for a report line"),
    "models/scan.py": (1, "read_regular of a model file's head for a diff of configs (last link refused)"),
    "check/ownership.py": (
        14,
        "the RECORD by read_below; listings of package directories for untracked files, scandir never following a link",
    ),
    "check/pieces.py": (
        3,
        "bytecode headers and sources for the bytecode verdict (last link refused); hashing by DirCache",
    ),
    "gate/policy.py": (1, "the policy file the user names"),
    "pristine/cache.py": (9, "OwnCache: patchaudit's own private cache (never another user's, trust.py checks it)"),
    "pristine/direct_url.py": (
        2,
        "the archive direct_url.json names, hashed before use (a wheelhouse of links is followed as before)",
    ),
    "pristine/http.py": (3, "a file:// index the user configured, and the spool in OwnCache"),
    "pristine/index.py": (2, "pip's configuration files, and a wheelhouse directory the user configured"),
    "pristine/uvcache.py": (
        11,
        "uv's cache, only when trust.py found it root's or the runner's alone; members are hashed before use",
    ),
    "pristine/wheelhouse.py": (1, "a wheelhouse directory the user names"),
    "pristine/zipwheel.py": (2, "a wheel file already chosen and hashed; WHEEL safefs-bounded"),
    "target/probe.py": (
        6,
        "pyvenv.cfg and the interpreter the user names (or the venv directory holding it), before running it"
        " (run only when root's alone)",
    ),
    "procs/assess.py": (
        7,
        "a running process's files through /proc/PID (the kernel's magic links, which a descriptor walk would misread)",
    ),
    "procs/cgroup.py": (6, "cgroupfs and /run/systemd, the kernel's and systemd's own"),
    "procs/entry.py": (
        2,
        "a process's entry script through /proc/PID/root (follow=True: a magic link), safefs-bounded",
    ),
    "procs/foreign.py": (4, "/proc/PID/root and /proc/PID/exe, the kernel's magic links"),
    "procs/hookenv.py": (2, ".pth files of a process's environment through /proc/PID/root, safefs-bounded"),
    "procs/proc.py": (4, "/proc files of a process"),
    "procs/pyenv.py": (6, "a process's pyvenv.cfg and site directories through /proc/PID/root, safefs-bounded"),
    "procs/sitefiles.py": (
        2,
        "a process's RECORDs through /proc/PID/root (a magic link), safefs-bounded; the quarantine's existence",
    ),
    "procs/unitfile.py": (7, "systemd unit files and drop-ins (root's), and /run/systemd"),
    "render/prometheus.py": (1, "--textfile: a file the operator names"),
    "render/sarif.py": (1, "a rule file's URI in the report"),
    "revert/commit.py": (1, "the run directory, in the 0700 state directory"),
    "revert/fileops.py": (2, "the lock file in the 0700 state directory; a __pycache__ listed by the descriptor walk"),
    "revert/paths.py": (
        6,
        "scheme roots and the 0700 state directory (as root, checked by refuse_unsafe_root); destinations by real_dir",
    ),
    "revert/quarantine.py": (3, "run directories in the 0700 state directory"),
    "revert/recovery.py": (1, "journals in the 0700 state directory"),
    "revert/state.py": (2, "journal and manifests in the 0700 state directory, safefs-bounded"),
    "target/rootfs.py": (
        12,
        "the tree the user names with --root, found by beneath.chase; os.walk never follows a link",
    ),
    "serving/annotate.py": (2, "the RECORD by read_below; the serving graph cache in cachedir.locate()'s directory"),
    "serving/argv.py": (1, "/proc/self/cgroup"),
    "serving/config.py": (3, "the model config the user names (follow=True)"),
    "serving/graph.py": (
        2,
        "sources parsed for the serving graph, safefs-bounded with the last link refused; the graph cache",
    ),
    "serving/hf.py": (2, "sources parsed for the serving graph, safefs-bounded with the last link refused"),
    "serving/loaded.py": (2, "sources parsed for the serving graph, safefs-bounded with the last link refused"),
    "serving/procs.py": (1, "/proc of a running server"),
    "serving/registry.py": (2, "sources parsed for the serving graph, safefs-bounded with the last link refused"),
    "parallel/statcache.py": (1, "the stat cache in cachedir.locate()'s directory"),
    "gate/systemd.py": (6, "unit files in the system's unit directory (root's)"),
    "target/trust.py": (6, "walks owners and modes up from a path to decide whom it trusts (lstat, never follows)"),
    "check/vcs.py": (8, "an editable project's git checkout (by gitpython), compared with its commit"),
}


def raw_reads(text: str) -> int:
    return sum(
        1
        for line in text.splitlines()
        if READ.search(line) and "dir_fd=" not in line and not line.lstrip().startswith(("def ", "#"))
    )


def test_every_raw_read_is_the_helper_or_listed_with_its_reason() -> None:
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ("fs/beneath.py", "fs/safefs.py"):
            continue  # the helpers themselves
        count = raw_reads(path.read_text(encoding="utf-8"))
        if count:
            found[rel] = count
    unlisted = {rel: n for rel, n in found.items() if rel not in READS_ALLOWED}
    assert unlisted == {}, (
        "read below a target through patchaudit.fs.beneath, or list it in READS_ALLOWED with a reason"
    )
    grown = {rel: (n, READS_ALLOWED[rel][0]) for rel, n in found.items() if n > READS_ALLOWED[rel][0]}
    assert grown == {}, "more raw reads than READS_ALLOWED lists: use patchaudit.fs.beneath, or list the new one"


def test_the_read_pass_sees_each_kind_of_raw_read() -> None:
    planted = [
        "data = open(path, 'rb').read()",
        "fd = os.open(path, os.O_RDONLY)",
        "text = (site / 'x.pth').read_text()",
        "real = os.path.realpath(dest.parent)",
        "st = os.lstat(path)",
        "if os.path.islink(path):",
        "names = os.listdir(site)",
        "data = read_capped(path, Cap.RECORD)",
    ]
    assert [raw_reads(line) for line in planted] == [1] * len(planted)
    assert raw_reads("data = read_below(path, Cap.RECORD)") == 0
    assert raw_reads("data = read_capped(name, cap, dir_fd=fd)") == 0


def test_a_link_is_followed_only_out_of_a_directory_no_other_user_can_write(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.mkdir()
    (target / "mod.py").write_bytes(b"X = 1\n")
    own = tmp_path / "own"
    own.mkdir(mode=0o755)
    (own / "lib64").symlink_to(target)  # a venv's lib64 -> lib: the owner's own link
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone may plant a link here
    (shared / "pkg").symlink_to(target)

    assert beneath.read_below(own / "lib64" / "mod.py", 1024) == b"X = 1\n"
    assert beneath.real_dir(own / "lib64" / "new" / "dir") == str(target / "new" / "dir")
    with pytest.raises(UnreadableFile, match="link in a directory others can write"):
        beneath.read_below(shared / "pkg" / "mod.py", 1024)
    with pytest.raises(UnsafePath, match="link in a directory others can write"):
        beneath.real_dir(shared / "pkg")
    state = hash_file(str(shared / "pkg" / "mod.py"))
    assert state.digest is None and state.error is not None and "others can write" in state.error
    assert hash_file(str(own / "lib64" / "mod.py")).digest is not None


def test_a_directory_cache_keeps_few_descriptors_open(tmp_path: Path) -> None:
    for i in range(20):
        (tmp_path / f"d{i}").mkdir()
        (tmp_path / f"d{i}" / "f").write_bytes(b"")
    before = len(os.listdir("/proc/self/fd"))
    with beneath.DirCache(limit=4) as dirs:
        for i in range(20):
            fd, name = dirs.open_file(str(tmp_path / f"d{i}" / "f"))
            assert beneath.lstat_at(fd, name) is not None
        assert len(os.listdir("/proc/self/fd")) <= before + 4
    assert len(os.listdir("/proc/self/fd")) == before
