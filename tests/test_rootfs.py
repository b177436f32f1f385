"""`--root DIR`: a whole tree audited as if it were `/`, its links resolved inside it, nothing written there."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from report_schema import check_output
from wheels import build_wheel

from patchaudit.fs.beneath import chase, open_root
from patchaudit.fs.safefs import UnreadableFile

PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
FILES = {
    "tinymodel/__init__.py": "X = 1\n",
    "tinymodel/models/deepseek_v2.py": "def forward(x):\n    return x\n",
    "tinymodel/loader.py": "def load():\n    return 1\n",
}


def patchaudit(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "patchaudit"
    proc = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=120)
    check_output(proc.stdout)  # every JSON report is held to the shipped schema
    return proc


def read_only(tree: Path, *args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    """patchaudit over the tree mounted read-only (a private mount namespace: root's writes fail too)."""
    if os.geteuid() != 0:
        return patchaudit(*args)
    exe = Path(sys.executable).parent / "patchaudit"
    script = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
    argv = ["unshare", "--mount", "sh", "-c", script, "sh", str(tree), str(exe), *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def install_into(tree: Path, wheel: Path, prefix: str) -> Path:
    """A real `pip install --root TREE --prefix PREFIX`, as an image build does it."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-warn-script-location"]
        + ["--root", str(tree), "--prefix", prefix, str(wheel)],
        check=True,
        timeout=120,
    )
    return tree / prefix.lstrip("/") / "lib" / PY / "site-packages"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheels"), "tinymodel", "1.0", FILES)


def snapshot(tree: Path) -> dict[str, tuple[int, int, str]]:
    out = {}
    for base, dirs, files in os.walk(tree):
        for name in dirs + files:
            p = os.path.join(base, name)
            st = os.lstat(p)
            regular = os.path.isfile(p) and not os.path.islink(p)
            digest = hashlib.sha256(Path(p).read_bytes()).hexdigest() if regular else ""
            out[os.path.relpath(p, tree)] = (st.st_mode, st.st_mtime_ns, digest)
    return out


def test_chase_resolves_links_and_dotdot_inside_the_tree(tmp_path: Path) -> None:
    (tmp_path / "usr/lib").mkdir(parents=True)
    (tmp_path / "usr/lib/marker").write_text("inside")
    (tmp_path / "usr/lib64").symlink_to("/usr/lib")  # absolute: means the tree's /usr/lib
    (tmp_path / "etc").symlink_to("/../../../../etc")  # climbs past the top: stays at the tree's /
    (tmp_path / "loop").symlink_to("loop")
    fd = open_root(tmp_path)
    try:
        assert chase(fd, "/usr/lib64/marker").path == "/usr/lib/marker"
        assert chase(fd, "usr/../../../usr/lib64/../lib64").path == "/usr/lib"
        with pytest.raises(UnreadableFile):
            chase(fd, "/etc/passwd")  # the host's /etc/passwd exists; the tree's does not
        with pytest.raises(UnreadableFile):
            chase(fd, "/loop/x")
    finally:
        os.close(fd)


def test_root_scan_finds_image_layouts_and_never_writes(tmp_path: Path, wheel: Path) -> None:
    tree = tmp_path / "rootfs"
    site = install_into(tree, wheel, "/usr/local")
    venv_site = install_into(tree, wheel, "/opt/venv")
    # Debian's own directory, and another Python version beside this one
    debian = tree / "usr/lib/python3/dist-packages"
    other = tree / "usr/local/lib/python3.9/site-packages"
    for target in (debian, other):
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target)]
        subprocess.run([*pip, str(wheel)], check=True, timeout=120)
    # an image's own absolute links: /usr/lib64/pythonX.Y -> /usr/local/lib/pythonX.Y (the same directory)
    (tree / "usr/lib64").mkdir(parents=True)
    (tree / "usr/lib64" / PY).symlink_to(f"/usr/local/lib/{PY}")
    before = snapshot(tree)
    clean = patchaudit("scan", "--root", tree, "--format", "json")
    assert clean.returncode == 0, clean.stderr
    paths = json.loads(clean.stdout)["target"]["paths"]
    assert sorted(paths) == sorted(map(str, [site, venv_site, debian, other]))

    (site / "tinymodel/loader.py").write_text("def load():\n    breakpoint()\n    return 1\n")
    before = snapshot(tree)
    found = read_only(tree, "scan", "--root", tree)
    gate = read_only(tree, "gate", "--root", tree)
    diff = read_only(tree, "diff", "tinymodel", "--root", tree)
    assert found.returncode == 1, found.stderr
    assert "modified        tinymodel/loader.py" in found.stdout
    assert "[debugger]" in found.stdout
    assert gate.returncode == 1 and "1 modified" in gate.stdout
    assert "+    breakpoint()" in diff.stdout
    assert snapshot(tree) == before  # no cache, no journal, nothing at all written into the tree


def test_root_refuses_links_the_host_would_follow_out_of_the_tree(tmp_path: Path, wheel: Path) -> None:
    tree = tmp_path / "rootfs"
    site = install_into(tree, wheel, "/usr/local")
    (site / "tinymodel" / "conf").symlink_to("/etc")  # a directory link: the host would read its own /etc
    found = patchaudit("scan", "--root", tree)
    assert found.returncode == 2
    assert found.stderr.count("\n") == 1 and "leaves the tree" in found.stderr
    (site / "tinymodel" / "conf").unlink()
    record = site / "tinymodel-1.0.dist-info" / "RECORD"
    saved = record.read_bytes()
    record.unlink()
    record.symlink_to("/etc/passwd")  # metadata read from the host's /etc: refused, never parsed
    found = patchaudit("scan", "--root", tree)
    assert found.returncode == 2 and "leaves the tree" in found.stderr and "root:" not in found.stdout
    record.unlink()
    record.write_bytes(saved)
    record = site / "tinymodel-1.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + "../../../../../../../../etc/hostname,sha256=" + "A" * 43 + ",1\n")
    found = patchaudit("scan", "--root", tree)
    assert found.returncode == 2 and "outside" in found.stderr and "Traceback" not in found.stderr


def test_root_without_python_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "usr/local/lib").mkdir(parents=True)
    found = patchaudit("scan", "--root", tmp_path)
    assert found.returncode == 2 and "no site-packages" in found.stderr


def test_metrics_and_quarantine_list_read_a_root_tree_and_never_write(tmp_path: Path, wheel: Path) -> None:
    """The target group's --root on the read-only commands that had none: metrics, quarantine list."""
    tree = tmp_path / "rootfs"
    site = install_into(tree, wheel, "/usr/local")
    (site / "tinymodel/loader.py").write_text("def load():\n    breakpoint()\n    return 1\n")
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    before = snapshot(tree)
    metrics = read_only(tree, "metrics", "--root", tree, "--textfile", textfile, "--name", "image")
    listed = read_only(tree, "quarantine", "list", "--root", tree)
    assert metrics.returncode == 1, metrics.stderr
    assert "patchaudit_gate_ok 0" in (textfile / "patchaudit_image.prom").read_text()
    assert (
        'patchaudit_drifted_files{distribution="tinymodel",state="modified"} 1'
        in (textfile / "patchaudit_image.prom").read_text()
    )
    assert listed.returncode == 0 and listed.stdout == "no quarantine runs\n", listed.stderr
    assert snapshot(tree) == before
