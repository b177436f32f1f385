"""`patchaudit ps` against real processes started from real venvs: a revert, a reinstalled extension
module, a systemd-style cgroup, a process of another user, a process that exited."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, patchaudit, pip_install, record_hash, site_packages

ENGINE = "def serve():\n    import time\n    while True:\n        time.sleep(3600)\n"
PATCHED = ENGINE.replace("def serve():", "def serve():\n    breakpoint  # debugging the worker")

# The service: imports the engine, starts a worker with multiprocessing (its own interpreter, which
# imports the engine too), says both pids, then waits to be killed.
SERVICE = """
import multiprocessing, sys, time
import svc.engine
ctx = multiprocessing.get_context(sys.argv[1])
worker = ctx.Process(target=svc.engine.serve, daemon=True)
worker.start()
while worker.pid is None:
    time.sleep(0.01)
time.sleep(0.3)
print(worker.pid, flush=True)
time.sleep(3600)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A venv with the `svc` test wheel installed by pip, and a wheelhouse holding that wheel."""
    root = tmp_path_factory.mktemp("procs")
    wheel = build_wheel(root / "wheelhouse", "svc", "1.0", {"svc/__init__.py": "", "svc/engine.py": ENGINE})
    python = make_venv(root / "venv")
    pip_install(python, wheel)
    return python, wheel.parent


@pytest.fixture
def venv(built: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    src, wheelhouse = built
    dst = tmp_path / "venv"
    shutil.copytree(src.parent.parent, dst, symlinks=True)
    return dst / "bin" / "python", wheelhouse


class Running:
    """A process tree started for a test, killed at the end whatever happens."""

    def __init__(self, argv: list[str], **kwargs: object) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True, **kwargs)  # type: ignore[call-overload]

    def line(self) -> str:
        assert self.proc.stdout is not None
        got = self.proc.stdout.readline().strip()
        assert got, "the test process said nothing"
        return got

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


@pytest.fixture
def running() -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for r in started:
        r.stop()


def start(running: list[Running], argv: list[str], **kwargs: object) -> Running:
    r = Running(argv, **kwargs)
    running.append(r)
    return r


def ps_json(*args: str) -> tuple[int, dict]:
    proc = patchaudit("ps", *args, "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_a_reverted_module_names_the_service_and_its_worker(
    venv: tuple[Path, Path], running: list[Running], method: str
) -> None:
    python, wheelhouse = venv
    site = site_packages(python)
    (site / "svc/engine.py").write_text(PATCHED)  # the hand patch the service was started with
    time.sleep(0.05)
    service = start(running, [str(python), "-c", SERVICE, method])
    worker = int(service.line())
    parent = service.proc.pid

    # Nothing changed since they started: both run what is on disk.
    before = patchaudit("ps", "--pid", str(parent), "--pid", str(worker))
    assert before.returncode == 0, before.stdout + before.stderr
    assert before.stdout.count("runs what is on disk") == 2

    reverted = patchaudit(
        "revert", "svc", "svc/engine.py", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes"
    )
    assert reverted.returncode == 0, reverted.stderr
    assert (site / "svc/engine.py").read_text() == ENGINE
    # revert ends by naming both processes that may still run the patched engine (imported by `-c` code:
    # nothing in /proc says whether it was)
    still = [ln for ln in reverted.stderr.splitlines() if ln.startswith("may still run the old code")]
    assert {f"pid {parent} ", f"pid {worker} "} <= {ln.split(": ", 1)[1].split("started")[0] for ln in still}

    proc = patchaudit("ps", "--pid", str(parent), "--pid", str(worker))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for pid in (parent, worker):
        (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"pid {pid} ")]
        assert f"from {python.parent.parent}:" in line
        assert (
            ": may run changed code: 1 file it may have imported changed since it started (engine.py reverted " in line
        )
        assert line.endswith(f"to be sure, restart pid {pid}")
    assert proc.stdout.count("reverted svc/engine.py (svc, run ") == 2

    code, report = ps_json("--pid", str(parent), "--pid", str(worker))
    assert code == 1 and report["schema"] == "patchaudit/ps/v1"
    assert report["summary"]["may-run-changed-code"] == 2 and report["summary"]["stale"] == 0
    by_pid = {p["pid"]: p for p in report["processes"]}
    for pid in (parent, worker):
        (change,) = by_pid[pid]["changed"]
        assert change["path"] == str(site / "svc/engine.py") and change["kind"] == "reverted"
        assert "-svc-" in change["run_id"] and change["distribution"] == "svc"
    if method == "fork":  # a forked worker runs the modules its parent loaded
        assert by_pid[worker]["code_since"] == by_pid[parent]["started"]

    # Undo the revert: `quarantine restore` names them too.
    run_id = by_pid[parent]["changed"][0]["run_id"]
    restored = patchaudit("quarantine", "restore", run_id, "--python", str(python), "--yes")
    assert restored.returncode == 0, restored.stderr
    # (spawn also starts multiprocessing's resource tracker from the venv: it is named as well)
    for pid in (parent, worker):
        assert f"may still run the old code: pid {pid} started" in restored.stderr


def repack(dist_name: str, dest: Path) -> Path:
    """The installed distribution's files (a binary wheel pip took from the package index) as a wheel again."""
    dist = metadata.distribution(dist_name)
    info = next(p for p in dist.files or () if p.name == "WHEEL")
    info_dir = info.parent.as_posix()
    tag = next(ln.split(":", 1)[1].strip() for ln in info.read_text().splitlines() if ln.startswith("Tag:"))
    skip = {f"{info_dir}/{n}" for n in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")}
    members = {}
    for f in dist.files or ():
        posix = f.as_posix()
        if posix in skip or posix.endswith(".pyc") or posix.startswith(".."):
            continue
        members[posix] = Path(f.locate()).read_bytes()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for path, data in members.items():
        writer.writerow([path, record_hash(data), len(data)])
    writer.writerow([f"{info_dir}/RECORD", "", ""])
    members[f"{info_dir}/RECORD"] = out.getvalue().encode()
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"{dist.metadata['Name'].lower()}-{dist.version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in members.items():
            zf.writestr(path, data)
    return wheel


def test_an_extension_module_reinstalled_under_a_running_process_is_named(
    tmp_path: Path, running: list[Running]
) -> None:
    wheel = repack("markupsafe", tmp_path / "wheels")
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    site = site_packages(python)
    (speedups,) = site.glob("markupsafe/_speedups*.so")
    server = start(
        running,
        [str(python), "-c", "import markupsafe._speedups; print('ready', flush=True); input()"],
        stdin=subprocess.PIPE,
    )
    assert server.line() == "ready"
    pid = str(server.proc.pid)
    assert patchaudit("ps", "--pid", pid).returncode == 0

    old_inode = speedups.stat().st_ino
    time.sleep(0.05)
    pip_install(python, wheel, extra=("--force-reinstall",))
    assert speedups.stat().st_ino != old_inode  # pip wrote a new file; the process maps the old one

    proc = patchaudit("ps", "--pid", pid)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{speedups.name} replaced while mapped" in proc.stdout
    assert f"replaced markupsafe/{speedups.name} (mapped, MarkupSafe" in proc.stdout
    code, report = ps_json("--pid", pid)
    mapped = [c for c in report["processes"][0]["changed"] if c["mapped"]]
    assert [(c["path"], c["kind"]) for c in mapped] == [(str(speedups), "replaced")]


CGROUP_ROOT = Path("/sys/fs/cgroup/unified")


def _cgroup_writable() -> bool:
    return os.geteuid() == 0 and os.access(CGROUP_ROOT, os.W_OK) and (CGROUP_ROOT / "cgroup.procs").exists()


@pytest.mark.skipif(not _cgroup_writable(), reason="needs root and a writable cgroup2 hierarchy")
def test_unit_finds_every_process_in_its_cgroup(venv: tuple[Path, Path], running: list[Running]) -> None:
    python, wheelhouse = venv
    unit = f"pa-test-{uuid.uuid4().hex[:8]}.service"
    group = CGROUP_ROOT / unit
    group.mkdir()
    try:
        # The service enters the unit's cgroup before it starts its worker, as under systemd.
        argv = [str(python), "-c", f"open('{group}/cgroup.procs', 'w').write('0')\n" + SERVICE, "spawn"]
        service = start(running, argv)
        worker = int(service.line())
        first = patchaudit("ps", "--unit", unit)
        assert first.returncode == 0, first.stdout + first.stderr
        reverted = patchaudit("revert", "svc", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
        assert reverted.returncode == 0, reverted.stderr  # nothing drifted: nothing to revert
        (site_packages(python) / "svc/engine.py").write_text(PATCHED)  # edited under the running service
        proc = patchaudit("ps", "--unit", unit)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        for pid in (service.proc.pid, worker):
            (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"pid {pid} ({unit}) started")]
            assert "(engine.py changed)" in line and line.endswith(f"restart {unit}")
    finally:
        for r in running:
            r.stop()
        for _ in range(100):  # killed processes leave the cgroup once reaped
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.05)
    missing = patchaudit("ps", "--unit", unit)
    assert missing.returncode == 2 and f"no cgroup named {unit}" in missing.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as another user")
def test_processes_that_cannot_be_read_are_listed_not_a_crash(
    venv: tuple[Path, Path], running: list[Running], tmp_path: Path
) -> None:
    python, _ = venv
    service = start(running, [str(python), "-c", "print('ready', flush=True); input()"], stdin=subprocess.PIPE)
    assert service.line() == "ready"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    exe = Path(sys.executable).parent / "patchaudit"
    try:
        subprocess.run([str(exe), "--version"], user="nobody", cwd="/", capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("user nobody cannot run this installation of patchaudit")
    as_nobody = subprocess.run(
        [str(exe), "ps", "--pid", str(service.proc.pid), "--pid", str(gone.pid)],
        capture_output=True,
        text=True,
        user="nobody",
        cwd="/",
    )
    assert as_nobody.returncode == 1, as_nobody.stderr
    assert f"pid {service.proc.pid} (python) started" in as_nobody.stdout
    assert "cannot be inspected: Permission denied" in as_nobody.stdout
    assert f"pid {gone.pid}: exited" in as_nobody.stdout
    assert "Traceback" not in as_nobody.stderr


def test_bad_selection_is_a_usage_error() -> None:
    proc = patchaudit("ps", "--unit", "vllm", "--pid", "1")
    assert proc.returncode == 2 and "not both" in proc.stderr
    proc = patchaudit("ps", "--unit", "vllm.timer")
    assert proc.returncode == 2 and "not a service unit" in proc.stderr


DEBIAN_PYTHON = Path("/usr/bin/python3")


def _in_private_mounts(script: str) -> subprocess.CompletedProcess[str]:
    """Run `script` as root in a private mount namespace (the machine's own directories stay untouched)."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0 or not DEBIAN_PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail("CI runs as root with unshare(1) and Debian's python3")
        pytest.skip("needs root, unshare(1) and Debian's python3")
    proc = subprocess.run(
        [unshare, "-m", "--propagation", "private", "bash", "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.parametrize("how", ["system", "system-site-packages-venv"])
def test_code_in_the_system_dist_packages_is_examined(built: tuple[Path, Path], tmp_path: Path, how: str) -> None:
    """A system interpreter imports from /usr/local/lib/python3.X/dist-packages; a venv made with
    --system-site-packages from it does too. A change there is a change to what they run."""
    _, wheelhouse = built
    (wheel,) = wheelhouse.glob("svc-*.whl")
    version = subprocess.run(
        [str(DEBIAN_PYTHON), "-I", "-S", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    local = f"/usr/local/lib/python{version}/dist-packages"
    python = str(DEBIAN_PYTHON)
    make = ""
    if how != "system":
        python = str(tmp_path / "venv/bin/python")
        make = f"{DEBIAN_PYTHON} -m venv --without-pip --system-site-packages {tmp_path / 'venv'}"
    out = tmp_path / "ps.json"
    script = f"""
set -e
mkdir -p {local}
mount -t tmpfs -o mode=0755 tmpfs {local}
PIP_CONFIG_FILE=/dev/null {sys.executable} -m pip --python {DEBIAN_PYTHON} install -q --no-index --no-deps \
    --no-cache-dir --disable-pip-version-check --break-system-packages --no-warn-script-location {wheel}
{make}
{python} -c 'import svc.engine, sys, time; print("ready", flush=True); time.sleep(60)' > {tmp_path}/ready &
pid=$!
for _ in $(seq 100); do grep -q ready {tmp_path}/ready && break; sleep 0.1; done
sleep 0.05
echo '# edited' >> {local}/svc/engine.py
set +e
{Path(sys.executable).parent / "patchaudit"} ps --pid $pid --format json > {out}
echo "exit=$?"
kill $pid
"""
    proc = _in_private_mounts(script)
    assert proc.stdout.splitlines()[-1] == "exit=1", proc.stdout + proc.stderr
    (report,) = json.loads(out.read_text())["processes"]
    assert local in report["site_dirs"]
    assert report["status"] == "may-run-changed-code"
    assert [c["path"] for c in report["changed"]] == [f"{local}/svc/engine.py"]


def test_a_file_edited_after_its_revert_is_changed_not_reverted(
    venv: tuple[Path, Path], running: list[Running]
) -> None:
    python, wheelhouse = venv
    site = site_packages(python)
    (site / "svc/engine.py").write_text(PATCHED)
    service = start(running, [str(python), "-c", SERVICE, "spawn"])
    service.line()
    reverted = patchaudit("revert", "svc", "--python", str(python), "--wheelhouse", str(wheelhouse), "--yes")
    assert reverted.returncode == 0, reverted.stderr
    pid = str(service.proc.pid)
    assert ps_json("--pid", pid)[1]["processes"][0]["changed"][0]["kind"] == "reverted"
    (site / "svc/engine.py").write_text(ENGINE + "# edited again by hand\n")
    (change,) = ps_json("--pid", pid)[1]["processes"][0]["changed"]
    assert (change["kind"], change["run_id"]) == ("changed", None)


RESTARTS = """
import os, sys, time
import svc.engine
if os.environ.get("RESTARTED"):
    print("child", os.getpid(), flush=True)
else:
    print("parent", flush=True)
    sys.stdin.readline()
    os.environ["RESTARTED"] = "1"
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, *sys.argv])  # the same command line, fresh code
time.sleep(3600)
"""


def test_a_child_that_execs_itself_with_the_same_argv_runs_fresh_code(
    venv: tuple[Path, Path], running: list[Running], tmp_path: Path
) -> None:
    python, _ = venv
    script = tmp_path / "serve.py"
    script.write_text(RESTARTS)
    parent = start(running, [str(python), str(script)], stdin=subprocess.PIPE)
    assert parent.line() == "parent"
    time.sleep(0.05)
    (site_packages(python) / "svc/engine.py").write_text(ENGINE + "# changed before the restart\n")
    assert parent.proc.stdin is not None
    parent.proc.stdin.write("\n")
    parent.proc.stdin.flush()
    word, child = parent.line().split()
    assert word == "child"
    proc = patchaudit("ps", "--pid", child)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "runs what is on disk" in proc.stdout
    assert ps_json("--pid", str(parent.proc.pid))[1]["processes"][0]["status"] == "may-run-changed-code"


def test_the_entry_module_on_the_command_line_is_known_to_be_loaded(
    venv: tuple[Path, Path], running: list[Running]
) -> None:
    """`python -m svc.engine` runs svc/engine.py: a change there is run code (stale), while a change to a module
    nothing says it imported only may be."""
    python, _ = venv
    site = site_packages(python)
    (site / "svc/helper.py").write_text("")  # not tracked: any RECORD-tracked file stands for "unknown"
    engine = start(running, [str(python), "-c", "print('ready', flush=True); input()"], stdin=subprocess.PIPE)
    # -i: stay at the prompt after running the module (its stdin is a pipe that stays open)
    module = start(running, [str(python), "-u", "-i", "-m", "svc.engine"], stdin=subprocess.PIPE)
    assert engine.line() == "ready"
    time.sleep(0.3)
    (site / "svc/engine.py").write_text(ENGINE + "# changed\n")
    by_pid = {
        p["pid"]: p for p in ps_json("--pid", str(engine.proc.pid), "--pid", str(module.proc.pid))[1]["processes"]
    }
    assert by_pid[module.proc.pid]["status"] == "stale"
    assert by_pid[module.proc.pid]["changed"][0]["loaded"] is True
    assert by_pid[engine.proc.pid]["status"] == "may-run-changed-code"
    proc = patchaudit("ps", "--pid", str(engine.proc.pid))
    assert proc.returncode == 1 and "may run changed code" in proc.stdout and "to be sure, restart pid" in proc.stdout


def test_a_zombie_is_gone_not_a_failure(running: list[Running]) -> None:
    code = "import os, time\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nprint(pid, flush=True)\ntime.sleep(60)\n"
    parent = start(running, [sys.executable, "-c", code])
    zombie = parent.line()
    for _ in range(100):
        if "Z" in Path(f"/proc/{zombie}/stat").read_text().rpartition(")")[2].split()[0]:
            break
        time.sleep(0.02)
    proc = patchaudit("ps", "--pid", zombie)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ps_json("--pid", zombie)[1]["processes"][0]["status"] == "gone"


def test_a_venv_reached_through_a_symlink_is_one_environment(running: list[Running], tmp_path: Path) -> None:
    wheel = repack("markupsafe", tmp_path / "wheels")
    pip_install(make_venv(tmp_path / "venv"), wheel)
    (tmp_path / "srv").symlink_to(tmp_path / "venv")  # /srv/vllm -> /data/venvs/vllm, as hosts set it up
    python = tmp_path / "srv" / "bin" / "python"
    server = start(
        running,
        [str(python), "-c", "import markupsafe._speedups; print('ready', flush=True); input()"],
        stdin=subprocess.PIPE,
    )
    assert server.line() == "ready"
    time.sleep(0.05)
    pip_install(python, wheel, extra=("--force-reinstall",))
    code, report = ps_json("--pid", str(server.proc.pid))
    (process,) = report["processes"]
    assert len({os.path.realpath(d) for d in process["site_dirs"]}) == len(process["site_dirs"])
    real = [os.path.realpath(c["path"]) for c in process["changed"]]
    assert len(real) == len(set(real)), real
    assert code == 1 and process["status"] == "stale"


def test_target_options_keep_the_processes_of_that_environment(
    venv: tuple[Path, Path], running: list[Running], tmp_path: Path
) -> None:
    """`ps --python PY` (or --path SITE) lists the processes that run from that environment only."""
    python, _wheelhouse = venv
    other = tmp_path / "other"
    shutil.copytree(python.parent.parent, other, symlinks=True)
    sleeper = "import svc.engine, time; print(1, flush=True); time.sleep(3600)"
    ours = start(running, [str(python), "-c", sleeper])
    theirs = start(running, [str(other / "bin" / "python"), "-c", sleeper])
    ours.line(), theirs.line()

    def pids(*args: str) -> set[int]:
        _code, report = ps_json(*args)
        return {p["pid"] for p in report["processes"]} & {ours.proc.pid, theirs.proc.pid}

    assert pids() == {ours.proc.pid, theirs.proc.pid}
    assert pids("--python", str(python)) == {ours.proc.pid}
    assert pids("--path", str(site_packages(other / "bin" / "python"))) == {theirs.proc.pid}
