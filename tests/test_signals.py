"""SIGINT and SIGTERM at random moments of real runs (hashing, rules, revert, gate): every run ends
within a second with 130/143, leaves no process behind, and its caches and journals stay coherent.

PATCHAUDIT_SIGNAL_STACK=DIR (a copy of a real site-packages) and PATCHAUDIT_SIGNALS=N run N more
signals over scans of that tree; unset, that test is skipped.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pristine_helpers import ROOT, build_wheel, make_venv, patchaudit, pip_install, site_packages

PR_SET_CHILD_SUBREAPER = 36  # prctl(2)
DEADLINE = 1.0  # seconds from the signal to the exit
CODE = """
def handle_{i}(batch, tokens):
    total = 0
    for row in batch:
        if row.shape[0] == {i}:
            total += len(tokens)
        elif row is None:
            raise ValueError("empty row {i}")
        else:
            total -= {i}
    return total


class Layer{i}:
    def forward(self, x):
        y = x * {i}
        if y.sum() > {i}:
            return y.mean()
        return y
"""
REVERTED = {f"sigrev/m{i}.py": (f"VALUE_{i} = {i}\n" * 2000).encode() for i in range(60)}


@pytest.fixture(scope="module", autouse=True)
def _orphans_come_here() -> Iterator[None]:
    """This process adopts what a run leaves behind (PR_SET_CHILD_SUBREAPER): a child the run never
    reaped stays a zombie here until looked at, whatever the machine's init does with orphans."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(python, site-packages, wheelhouse): one dist of many modules and big files, one to revert."""
    root = tmp_path_factory.mktemp("signals")
    files: dict[str, bytes | str] = {f"sigdemo/mod{i}.py": CODE.format(i=i) * 2 for i in range(400)}
    files.update({f"sigdemo/blob{i}.bin": bytes([i]) * (1 << 20) for i in range(16)})
    demo = build_wheel(root / "wheels", "sigdemo", "1.0", files)
    rev = build_wheel(root / "wheels", "sigrev", "1.0", REVERTED)
    python = make_venv(root / "venv")
    pip_install(python, demo, rev)
    return python, site_packages(python), root / "wheels"


def _group(pgid: int) -> list[int]:
    """Processes of the process group (the run and every worker it forked) still alive or unreaped."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                found.append(int(entry))
    return found


def _describe(pid: int) -> str:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        state = f"{fields[0]} ppid {fields[1]}"
        line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} {state} {line[:120]}"


def _left_behind(pgid: int) -> list[str]:
    """What of process group `pgid` is still there once its leader was reaped, described; each is then
    killed and, if this process adopted it, reaped, so nothing outlives the test."""
    group = _group(pgid)
    left = [_describe(pid) for pid in group]
    if group:
        os.killpg(pgid, signal.SIGKILL)
        for pid in group:  # the orphans this process adopted
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return left


def _wait_for_handlers(proc: subprocess.Popen[bytes]) -> None:
    """Until the run catches SIGTERM: the interpreter's own start (before any code of patchaudit runs,
    its signals are Python's) is over."""
    status = Path(f"/proc/{proc.pid}/status")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            caught = next(line for line in status.read_text().splitlines() if line.startswith("SigCgt:"))
        except (OSError, StopIteration):
            return
        if int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.002)


def _exiting(pid: int) -> bool:
    """Whether the process has begun to exit (the kernel's PF_EXITING, set before its memory is let
    go): it has ended for a signal, which it no longer takes, though it is not yet a zombie that
    `poll()` sees."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    flags = int(stat.rsplit(")", 1)[1].split()[6])
    return bool(flags & 0x4)


def _signal_run(cmd: list[str], delay: float, signum: int, again: float | None = None) -> tuple[int, float] | None:
    """Start `cmd`, send `signum` `delay` seconds after patchaudit's code started; (exit code, seconds to
    exit), or None if it ended first."""
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    _wait_for_handlers(proc)
    time.sleep(delay)
    if proc.poll() is not None or _exiting(proc.pid):
        proc.communicate()
        return None
    sent = time.monotonic()
    proc.send_signal(signum)
    if again is not None:  # Ctrl-C pressed twice
        time.sleep(again)
        if proc.poll() is None:
            proc.send_signal(signum)
    try:
        _out, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{cmd[3:5]} still running 10 s after {signal.Signals(signum).name}")
    took = time.monotonic() - sent
    left = _left_behind(proc.pid)
    assert not left, f"{cmd[3:5]}: processes left after {signal.Signals(signum).name} at {delay:.2f}s: {left}"
    assert b"Traceback" not in err, err.decode()
    return proc.returncode, took


def _hammer(cmd: list[str], count: int, longest: float, after: Callable[[], None] | None, rng: random.Random) -> int:
    """`count` signals, alternately SIGINT and SIGTERM, each at a random moment of a fresh run of `cmd`."""
    hits = tries = 0
    while hits < count:
        tries += 1
        assert tries < count * 4, f"the run ends before {longest}s: signals never land"
        signum = (signal.SIGINT, signal.SIGTERM)[hits % 2]
        delay = rng.uniform(0.0, longest)
        outcome = _signal_run(cmd, delay, signum)
        if outcome is None:  # the run ended first: set the stage again, and aim earlier on a fast machine
            longest = max(0.05, longest * 0.7)
            if after is not None:
                after()
            continue
        code, took = outcome
        name = signal.Signals(signum).name
        assert code == 128 + signum, f"{name} at {delay:.2f}s: exit {code}"
        assert took < DEADLINE, f"{name} at {delay:.2f}s: {took:.2f}s to exit"
        hits += 1
        if after is not None:
            after()
    return hits


def _pa(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "patchaudit", *map(str, args)]


def _report(*args: str | Path) -> dict:
    proc = patchaudit(*map(str, args), "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    return {"distributions": report["distributions"], "summary": report["summary"]}


def test_fifty_signals_over_scans_reverts_and_gates(stack: tuple[Path, Path, Path]) -> None:
    python, site, wheels = stack
    rng = random.Random(30)
    cold = _report("scan", "--python", python, "--all-files", "--no-cache")
    hits = 0
    # hashing and then the rules over every file, uncached, on two workers
    hits += _hammer(_pa("scan", "--python", python, "--all-files", "--no-cache", "--workers", "2"), 16, 0.8, None, rng)
    # the same with caches written as it goes: whatever instant it was stopped, a cached scan agrees with a cold one
    hits += _hammer(_pa("scan", "--python", python, "--all-files", "--workers", "2"), 12, 0.8, None, rng)
    assert _report("scan", "--python", python, "--all-files") == cold
    # the gate
    hits += _hammer(_pa("gate", "--python", python, "--no-cache", "--workers", "2"), 14, 0.35, None, rng)
    gated = patchaudit("gate", "--python", str(python))
    assert gated.returncode == 0, gated.stdout + gated.stderr

    # revert: whatever instant it was stopped, the next revert finishes or rolls back, and the files are pristine
    def patch() -> None:
        for rel, data in REVERTED.items():
            (site / rel).write_bytes(b"# patched\n" + data)

    def recover() -> None:
        again = patchaudit("revert", "sigrev", "--python", str(python), "--wheelhouse", str(wheels), "--yes")
        assert again.returncode == 0, again.stderr
        assert all((site / rel).read_bytes() == data for rel, data in REVERTED.items())
        assert not list((python.parent.parent / ".patchaudit/journal").glob("*.json"))
        patch()

    patch()
    revert = _pa("revert", "sigrev", "--python", python, "--wheelhouse", wheels, "--yes")
    hits += _hammer(revert, 8, 0.7, recover, rng)
    assert hits == 50
    listed = patchaudit("quarantine", "list", "--python", str(python))
    assert listed.returncode == 0 and listed.stdout.count("complete") >= 8, listed.stdout + listed.stderr


def test_a_second_signal_never_hangs(stack: tuple[Path, Path, Path]) -> None:
    python, _site, _ = stack
    cmd = _pa("scan", "--python", python, "--all-files", "--no-cache", "--workers", "2")
    for delay, again in ((0.3, 0.0), (0.5, 0.01), (0.9, 0.05), (1.2, 0.2)):
        outcome = _signal_run(cmd, delay, signal.SIGINT, again=again)
        assert outcome is not None, "the scan ended before the signal"
        code, took = outcome
        assert code == 130 and took < DEADLINE, (delay, again, code, took)


@pytest.mark.skipif(not os.environ.get("PATCHAUDIT_SIGNAL_STACK"), reason="PATCHAUDIT_SIGNAL_STACK not set")
def test_signals_over_a_real_stack() -> None:
    site = Path(os.environ["PATCHAUDIT_SIGNAL_STACK"])
    count = int(os.environ.get("PATCHAUDIT_SIGNALS", "100"))
    rng = random.Random()
    cold = _report("scan", "--path", site, "--all-files", "--no-cache")
    half = count // 2
    _hammer(_pa("scan", "--path", site, "--all-files", "--no-cache"), half, 8.0, None, rng)
    _hammer(_pa("scan", "--path", site, "--all-files"), count - half, 8.0, None, rng)
    assert _report("scan", "--path", site, "--all-files") == cold


def _forked(pid: int) -> bool:
    """Whether the run has forked a child of its own (a warm gate's stat process) that is still alive."""
    try:
        return bool(Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    except OSError:
        return False


def test_a_signal_during_the_warm_gates_forked_stat_pass_leaves_no_process(tmp_path: Path) -> None:
    """A warm gate stats a large tree in forked processes: SIGTERM to the gate (systemd stopping a
    start), or SIGINT to its whole process group (Ctrl-C), while they run ends it with 143/130, and no
    process of the group is left."""
    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(tmp_path / "wheels", "sigtree", "1.0", {"sigtree/__init__.py": ""}))
    data = site_packages(python) / "sigtree" / "data"
    for d in range(120):  # 60,000 files the warm gate stats: tens of milliseconds on each of two processes
        (data / f"d{d:03}").mkdir(parents=True)
        for f in range(500):
            (data / f"d{d:03}" / f"f{f}.bin").touch()
    cmd = _pa("gate", "sigtree", "--python", python, "--workers", "2")
    for _ in range(3):  # the first run verifies and keeps its verdict (the files are added: exit 1)
        warm = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        if "cached" in warm.stdout:
            break
        time.sleep(0.1)
    assert warm.returncode == 1 and "cached" in warm.stdout, warm.stdout + warm.stderr
    landed = {signal.SIGTERM: 0, signal.SIGINT: 0}
    for attempt in range(40):
        signum = (signal.SIGTERM, signal.SIGINT)[attempt % 2]
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        while proc.poll() is None and not _forked(proc.pid):
            pass
        if proc.poll() is not None:  # it ended before a child was seen: try again
            proc.communicate()
            continue
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        try:
            _out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"the gate still runs 10 s after {signal.Signals(signum).name}")
        left = _left_behind(proc.pid)
        assert not left, f"processes left after {signal.Signals(signum).name}: {left}"
        assert proc.returncode == 128 + signum, (signal.Signals(signum).name, proc.returncode, err.decode())
        assert b"Traceback" not in err, err.decode()
        landed[signum] += 1
        if min(landed.values()) >= 3:
            break
    assert min(landed.values()) >= 3, f"signals that landed while children ran: {landed}"


@pytest.mark.parametrize("signum", [None, signal.SIGTERM, signal.SIGINT])
def test_no_child_outlives_the_run_counted_or_not(
    stack: tuple[Path, Path, Path], tmp_path: Path, signum: signal.Signals | None
) -> None:
    """A child patchaudit never counted (a library's helper process) is killed and reaped when the run
    ends, normally or by a signal: none is left to init, which in a container may never reap it."""
    python, _site, _ = stack
    script = tmp_path / "run.py"
    script.write_text(
        "import os, sys, time\n"
        "if os.fork() == 0:\n"  # an uncounted helper: lives 30 s unless killed
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "from patchaudit.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    args = ["scan", "--python", str(python), "--no-cache", "--workers", "2"]
    if signum:  # the rules over every file too: long enough to be stopped half-way
        args.append("--all-files")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(script), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    if signum:
        _wait_for_handlers(proc)
        time.sleep(0.4)
        assert proc.poll() is None, "the scan ended before the signal"
        proc.send_signal(signum)
    _out, err = proc.communicate(timeout=120)  # the helper, left alive, would hold stderr 30 s
    assert proc.returncode in ((128 + signum,) if signum else (0, 1)), err.decode()
    left = _left_behind(proc.pid)
    assert not left, f"processes left after the run: {left}"


@pytest.mark.parametrize(("raised", "shown"), [("os.kill(os.getpid(), signal.SIGTERM)", False), ("1 / 0", True)])
def test_a_signal_inside_a_finaliser_ends_the_run_quietly(raised: str, shown: bool) -> None:
    """A signal that lands while Python runs a finaliser or a weakref callback (an import's module
    lock) raises `Interrupted` where it cannot propagate: the run still ends by the deadline with the
    signal's code, and no traceback is printed for it; any other error lost there is still shown."""
    code = (
        "import os, signal, time\n"
        "from patchaudit.parallel.children import on_signals\n"
        "on_signals()\n"
        "class Finaliser:\n"
        f"    def __del__(self):\n        {raised}\n"
        "f = Finaliser()\n"
        "del f\n"
        "time.sleep(0 if " + str(shown) + " else 5)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert proc.returncode == (0 if shown else 128 + signal.SIGTERM), proc.stderr
    assert ("Traceback" in proc.stderr) is shown, proc.stderr
