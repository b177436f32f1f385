"""The operator's first day: what a new user sees on a terminal and in a pipe, on a real venv.

Commands that need a terminal run in a real pseudo-terminal of a given width; every hint a command
prints (the undo line, the next steps) is run here exactly as printed, from another directory.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shlex
import shutil
import signal
import struct
import sys
import termios
import time
from pathlib import Path

import pytest
from pristine_helpers import ROOT, build_wheel, make_venv, patchaudit, pip_install, site_packages

from patchaudit.check import audit
from patchaudit.target import environment

FILES = {
    "demo/__init__.py": b"",
    "demo/core.py": b"".join(f"def f{i}():\n    return {i}\n\n".encode() for i in range(20)),
    "demo/io.py": b"def load(path):\n    return open(path).read()\n",
}
PATCHED = FILES["demo/core.py"].replace(b"    return 5\n", b"    breakpoint()\n    breakpoint()\n    breakpoint()\n")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("operator")
    built = build_wheel(root / "build", "demo", "1.0", FILES)
    python = make_venv(root / "venv")
    pip_install(python, built)
    (root / "wheelhouse").mkdir()
    built.rename(root / "wheelhouse" / built.name)
    return root / "venv", root / "wheelhouse"


@pytest.fixture
def venv(base: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path, Path]:
    """(python, site-packages, wheelhouse) of a private copy with demo/core.py patched."""
    shutil.copytree(base[0], tmp_path / "venv", symlinks=True)
    python = tmp_path / "venv/bin/python"
    site = site_packages(python)
    (site / "demo/core.py").write_bytes(PATCHED)
    return python, site, base[1]


def terminal(*args: str | Path, cols: int = 100, answer: str = "", cwd: Path = ROOT) -> tuple[int, str]:
    """Run the CLI on a pseudo-terminal `cols` wide (stdin, stdout and stderr); type `answer`."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(TERM="xterm", PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1")
    pid, fd = pty.fork()
    if pid == 0:  # the child: size its terminal, then become the command
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
            os.chdir(cwd)
            os.execve(sys.executable, [sys.executable, "-m", "patchaudit", *map(str, args)], env)
        finally:
            os._exit(127)
    if answer:
        os.write(fd, answer.encode())
    chunks: list[bytes] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    else:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", text)  # colours, cursor moves
    return os.waitstatus_to_exitcode(status), text.removeprefix(answer.replace("\n", "\n"))


def hints(text: str) -> list[list[str]]:
    """Every command the output suggests (`undo:` lines, the commands after `next:`), each joined
    from its backslash-continued lines as a shell would read them when pasted."""
    found = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        body = lines[i].removeprefix("undo: ").strip()
        if body.startswith("patchaudit "):
            while body.endswith("\\") and i + 1 < len(lines):
                i += 1
                body = body[:-1] + lines[i].strip()
            found.append(shlex.split(body))
        i += 1
    return found


def run_hint(words: list[str], cwd: Path, answer: str = "") -> tuple[int, str]:
    """A hint as printed, run from `cwd` on a terminal (as pasted by a user who answers `answer`)."""
    assert words[0] == "patchaudit"
    return terminal(*words[1:], answer=answer, cwd=cwd)


def test_scan_of_a_directory_without_distributions_fails_closed(venv: tuple[Path, Path, Path]) -> None:
    python, _site, _ = venv
    root = python.parent.parent
    commands = (
        ("scan",),
        ("diff", "demo"),
        ("revert", "--dry-run"),
        ("baseline", "create", "--out", str(root / "b.json")),
    )
    for args in commands:
        proc = patchaudit(*args, "--path", str(root))
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "is this the site-packages directory?" in proc.stderr, proc.stderr


def test_no_hazards_claims_no_findings_and_quiet_prints_only_what_is_wrong(venv: tuple[Path, Path, Path]) -> None:
    python, site, _ = venv
    proc = patchaudit("scan", "--python", str(python), "--no-hazards")
    assert proc.returncode == 1 and "1 modified" in proc.stdout
    assert "findings" not in proc.stdout, proc.stdout
    quiet = patchaudit("scan", "--python", str(python), "-q")
    assert quiet.returncode == 1 and "demo/core.py" in quiet.stdout, quiet.stdout
    assert "1 distribution," not in quiet.stdout and "next:" not in quiet.stdout, quiet.stdout
    (site / "demo/core.py").write_bytes(FILES["demo/core.py"])
    clean = patchaudit("scan", "--python", str(python), "--quiet")
    assert clean.returncode == 0 and clean.stdout == "", clean.stdout


def test_gate_counts_findings_in_plurals(venv: tuple[Path, Path, Path]) -> None:
    python, _site, _ = venv
    proc = patchaudit("gate", "--python", str(python), "--no-cache")
    assert proc.returncode == 1
    summary = proc.stdout.splitlines()[-1]
    assert "3 findings" in summary and "1 modified" in summary, summary


def test_usage_errors_are_one_line() -> None:
    for args in (("scan", "--bogus"), ("revert",) * 1 + ("--format", "xml"), ("nosuchcommand",)):
        proc = patchaudit(*args)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("patchaudit: error: "), proc.stderr


def test_commands_that_change_files_refuse_without_yes_when_they_cannot_ask(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    proc = patchaudit("revert", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse), input="n\n")
    assert proc.returncode == 2 and "--yes" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert (site / "demo/core.py").read_bytes() == PATCHED
    whole = patchaudit("revert", "--python", str(python), "--wheelhouse", str(wheelhouse), input="y\n")
    assert whole.returncode == 2 and (site / "demo/core.py").read_bytes() == PATCHED, whole.stderr
    done = patchaudit("revert", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
    assert done.returncode == 0 and (site / "demo/core.py").read_bytes() == FILES["demo/core.py"], done.stderr
    undo = patchaudit("quarantine", "restore", "last", "--python", str(python), input="y\n")
    assert undo.returncode == 2 and (site / "demo/core.py").read_bytes() == FILES["demo/core.py"], undo.stderr


def test_paths_the_way_a_shell_user_types_them(venv: tuple[Path, Path, Path], tmp_path: Path) -> None:
    python, site, wheelhouse = venv
    absolute = str(site / "demo/core.py")
    relative = os.path.relpath(absolute, tmp_path)
    for typed, cwd in ((absolute, ROOT), (relative, tmp_path), ("demo/core.py", ROOT)):
        proc = patchaudit("diff", "demo", typed, "--python", str(python), "--wheelhouse", str(wheelhouse), cwd=cwd)
        assert proc.returncode == 1 and "+    breakpoint()" in proc.stdout, (typed, proc.stderr)
    typo = patchaudit("revert", "demo", "demo/coer.py", "--python", str(python), "--yes")
    assert typo.returncode == 2 and "no such file in demo: demo/coer.py" in typo.stderr, typo.stderr
    clean = patchaudit(
        "diff", "demo", str(site / "demo/io.py"), "--python", str(python), "--wheelhouse", str(wheelhouse)
    )
    assert clean.returncode == 0 and "not drifted" in clean.stderr, clean.stderr
    done = patchaudit(
        "revert", "demo", absolute, "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes", cwd=tmp_path
    )
    assert done.returncode == 0 and (site / "demo/core.py").read_bytes() == FILES["demo/core.py"], done.stdout


def test_every_hint_runs_as_printed(venv: tuple[Path, Path, Path], tmp_path: Path) -> None:
    python, site, wheelhouse = venv
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code, scanned = terminal("scan", "--python", python, "--wheelhouse", wheelhouse)
    assert code == 1
    steps = hints(scanned)
    assert [s[1] for s in steps] == ["diff", "revert"], scanned
    for step, expect in zip(steps, (1, 0), strict=True):  # diff: there is a patch; revert --dry-run: it can go
        code, out = run_hint(step, elsewhere)
        assert code == expect and "demo/core.py" in out, (step, out)
    assert (site / "demo/core.py").read_bytes() == PATCHED  # the suggested revert is a dry run

    done = patchaudit("revert", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
    assert done.returncode == 0
    (undo,) = hints(done.stdout)
    assert "--python" in undo
    code, out = run_hint(undo, elsewhere, answer="y\n")
    assert code == 0, out
    assert (site / "demo/core.py").read_bytes() == PATCHED
    (again,) = hints(out)  # the undo is undoable too
    code, out = run_hint(again, elsewhere, answer="y\n")
    assert code == 0 and (site / "demo/core.py").read_bytes() == FILES["demo/core.py"], out


def test_quarantine_restore_dry_run_last_and_a_prompt_that_lists_files(venv: tuple[Path, Path, Path]) -> None:
    python, site, wheelhouse = venv
    patchaudit("revert", "demo", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
    dry = patchaudit("quarantine", "restore", "last", "--python", str(python), "--dry-run")
    assert dry.returncode == 0 and "would put back demo/core.py" in dry.stdout, dry.stdout + dry.stderr
    assert (site / "demo/core.py").read_bytes() == FILES["demo/core.py"]
    code, out = terminal("quarantine", "restore", "last", "--python", python, answer="n\n")
    assert code == 2 and "put back demo/core.py" in out and "Put back 1 file of demo" in out, out
    assert out.index("put back demo/core.py") < out.index("Put back 1 file")
    assert (site / "demo/core.py").read_bytes() == FILES["demo/core.py"]
    runs = json.loads(patchaudit("quarantine", "list", "--python", str(python), "--format", "json").stdout)
    code, out = terminal("quarantine", "restore", "last", "--python", python, answer="y\n")
    assert code == 0 and (site / "demo/core.py").read_bytes() == PATCHED, out
    assert runs[-1]["run_id"] in out


@pytest.mark.parametrize("cols", [60, 100])
def test_screens_fit_without_splitting_a_word(venv: tuple[Path, Path, Path], cols: int) -> None:
    python, _site, _ = venv
    piped = patchaudit("scan", "--python", str(python))
    words = set(piped.stdout.split())
    code, shown = terminal("scan", "--python", python, cols=cols)
    assert code == 1
    lines = shown.splitlines()
    assert "next: " in shown and [h[:3] for h in hints(shown)] == [["patchaudit", "diff", "demo"]] + [
        ["patchaudit", "revert", "demo"]
    ], shown
    # no line wider than the screen but for one holding a word wider than the screen (a long path)
    wide = {w for w in words | set(shown.split()) if len(w) > cols - 8}
    assert all(len(line) <= cols or any(w in line for w in wide) for line in lines), shown
    # wrapped between words (commands with a backslash that a shell reads as a space): every word whole,
    # but for a word wider than the screen, which is folded
    split = [w for w in shown.split() if w not in words and w != "\\" and not any(w in long for long in wide)]
    assert not split, split


def test_progress_counts_the_report_s_own_files(venv: tuple[Path, Path, Path]) -> None:
    python, _site, _ = venv
    seen: dict[str, tuple[int, int | None]] = {}
    env = environment.from_python(python)
    options = audit.ScanOptions(all_files=True, use_cache=False)
    report = audit.scan(env, options, progress=lambda phase, done, total: seen.__setitem__(phase, (done, total)))
    checked = report.summary()["files_checked"]
    assert seen["hashing"] == (checked, checked)
    assert seen["rules"] == (3, 3)  # the three .py files


def test_fetch_without_a_network_says_the_index_could_not_be_reached(venv: tuple[Path, Path, Path]) -> None:
    python, _site, _ = venv
    import socket

    with socket.socket() as sock:  # a loopback port nothing listens on: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {"PIP_NO_INDEX": "", "PIP_INDEX_URL": f"http://127.0.0.1:{port}/simple/"}
    proc = patchaudit("scan", "--python", str(python), "--fetch", "--format", "json", env=env)
    assert proc.returncode == 1, proc.stderr
    (demo,) = [d for d in json.loads(proc.stdout)["distributions"] if d["name"] == "demo"]
    reasons = [u["reason"] for u in demo["unverified"]]
    assert any("the package index could not be reached" in r and f"127.0.0.1:{port}" in r for r in reasons), reasons
    shown = patchaudit("scan", "--python", str(python), "--fetch", "-v", env=env)
    assert "the package index could not be reached" in shown.stdout, shown.stdout
