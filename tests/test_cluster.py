"""`patchaudit cluster` on a real Ray cluster of three nodes on this machine, on loopback only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # Ray then keeps every node on 127.0.0.1

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402
from wheels import build_wheel, make_venv, patchaudit, pip_install, record_hash, site_packages  # noqa: E402

NODES = 3
MOD = "X = 1\n"


class Nodes:
    """Three nodes, each pointed at its own venv (PATCHAUDIT_PYTHON) through its own wrapper that can be
    told to be slow (a busy node)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.wheels = tmp / "wheels"
        wheel = build_wheel(self.wheels, "demo", "1.0", {"demo/__init__.py": "", "demo/mod.py": MOD})
        self.pythons: list[Path] = []
        self.delays: list[Path] = []
        self.wrappers: list[Path] = []
        exe = Path(sys.executable).parent / "patchaudit"
        for i in range(NODES):
            python = make_venv(tmp / f"venv{i}")
            pip_install(python, wheel)
            self.pythons.append(python)
            delay = tmp / f"delay{i}"
            delay.write_text("0")
            wrapper = tmp / f"patchaudit{i}"
            wrapper.write_text(f'#!/bin/sh\nsleep "$(cat {delay})"\nexec {exe} "$@"\n')
            wrapper.chmod(0o755)
            self.delays.append(delay)
            self.wrappers.append(wrapper)
        self.cluster = Cluster()
        self.handles = []
        for i in range(NODES):
            env = {"PATCHAUDIT_PYTHON": str(self.pythons[i]), "PATCHAUDIT_COMMAND": str(self.wrappers[i])}
            self.handles.append(self.cluster.add_node(num_cpus=1, env_vars=env))
        self.cluster.wait_for_nodes()
        self.address = self.cluster.address

    def mod(self, i: int) -> Path:
        return site_packages(self.pythons[i]) / "demo" / "mod.py"

    def run(self, *args: str | os.PathLike[str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return patchaudit("cluster", "scan", "--address", self.address, "--timeout", str(timeout), *args)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    n = Nodes(tmp_path_factory.mktemp("cluster"))
    try:
        # Before anything is sent: every node listens on loopback.
        ray.init(address=n.address, log_to_driver=False)
        try:
            addresses = {node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}
        finally:
            ray.shutdown()
        assert addresses == {"127.0.0.1"}
        yield n
    finally:
        n.cluster.shutdown()


def rewrite_record(record: Path, site: Path) -> None:
    """Re-hash every hashed RECORD line from disk, as someone hiding a patch would."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO(record.read_text())))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for path, digest, size in rows:
        if digest:
            data = (site / path).read_bytes()
            digest, size = record_hash(data), str(len(data))
        writer.writerow([path, digest, size])
    record.write_text(out.getvalue())


def node_of(result: dict, python: Path) -> dict:
    (found,) = [node for node in result["nodes"] if node["python"] == str(python)]
    return found


def test_identical_nodes_pass_and_a_patched_node_is_named_with_its_file(nodes: Nodes) -> None:
    proc = nodes.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(": clean: ") == NODES
    assert proc.stdout.rstrip().splitlines()[-1].startswith("patchaudit cluster: ok: 3 nodes, 3 answered")

    nodes.mod(1).write_text("X = 2\n")
    try:
        proc = nodes.run("--format", "json")
        assert proc.returncode == 1, proc.stderr
        result = json.loads(proc.stdout)
        patched = node_of(result, nodes.pythons[1])
        assert patched["status"] == "answered" and patched["verdict"]["exit_code"] == 1
        assert [d["path"] for d in patched["report"]["distributions"][0]["drift"]] == ["demo/mod.py"]
        (outlier,) = [o for o in result["outliers"] if o["distribution"] == "demo"]
        assert outlier["node"] == patched["node"] and outlier["paths"] == ["demo/mod.py"]

        text = nodes.run().stdout
        assert f"node {patched['node']}: demo/mod.py differs from the 2 other nodes" in text
        assert f"node {patched['node']}: FAIL: 1 modified" in text
    finally:
        nodes.mod(1).write_text(MOD)


def test_a_patch_hidden_by_rewriting_record_is_still_an_outlier(nodes: Nodes) -> None:
    site = site_packages(nodes.pythons[2])
    record = next(site.glob("demo-1.0.dist-info")) / "RECORD"
    saved = record.read_bytes()
    nodes.mod(2).write_text("X = 3\n")
    rewrite_record(record, site)  # RECORD now agrees with the patch: that node alone cannot tell
    try:
        proc = nodes.run("--format", "json")
        result = json.loads(proc.stdout)
        hidden = node_of(result, nodes.pythons[2])
        assert hidden["verdict"]["exit_code"] == 0  # RECORD cannot see it ...
        assert proc.returncode == 1  # ... the other nodes can
        assert [(o["node"], o["paths"]) for o in result["outliers"]] == [(hidden["node"], ["demo/mod.py"])]
    finally:
        nodes.mod(2).write_text(MOD)
        record.write_bytes(saved)


def test_another_version_on_one_node_is_named(nodes: Nodes) -> None:
    newer = build_wheel(nodes.tmp / "newer", "demo", "1.1", {"demo/__init__.py": "", "demo/mod.py": MOD})
    older = nodes.wheels / "demo-1.0-py3-none-any.whl"
    pip_install(nodes.pythons[0], newer)
    try:
        proc = nodes.run("--format", "json")
        assert proc.returncode == 1
        result = json.loads(proc.stdout)
        odd = node_of(result, nodes.pythons[0])
        messages = [(o["node"], o["message"]) for o in result["outliers"]]
        assert messages == [(odd["node"], "has demo 1.1, the 2 other nodes 1.0")]
    finally:
        pip_install(nodes.pythons[0], older, extra=("--force-reinstall",))


def test_a_busy_node_is_reported_and_the_command_ends_within_its_timeout(nodes: Nodes) -> None:
    nodes.delays[2].write_text("120")
    try:
        started = time.monotonic()
        proc = nodes.run("--format", "json", timeout=15)
        elapsed = time.monotonic() - started
        assert proc.returncode == 1, proc.stderr
        result = json.loads(proc.stdout)
        statuses = sorted(n["status"] for n in result["nodes"])
        assert statuses == ["answered", "answered", "timeout"], result["nodes"]
        assert elapsed < 15 + 20  # the timeout, plus interpreter and Ray client start
    finally:
        nodes.delays[2].write_text("0")


def test_a_node_stopped_mid_run_is_reported(nodes: Nodes) -> None:
    nodes.delays[1].write_text("60")
    args = ["cluster", "scan", "--address", nodes.address, "--timeout", "40", "--format", "json"]
    exe = Path(sys.executable).parent / "patchaudit"
    started = time.monotonic()
    proc = subprocess.Popen([str(exe), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)  # the tasks are placed; node 1's is sleeping in its wrapper
    nodes.cluster.remove_node(nodes.handles[1])
    out, err = proc.communicate(timeout=120)
    elapsed = time.monotonic() - started
    assert proc.returncode == 1, err
    result = json.loads(out)
    by_python = {n["python"]: n for n in result["nodes"] if n["python"]}
    assert set(by_python) == {str(nodes.pythons[0]), str(nodes.pythons[2])}
    stopped = [n for n in result["nodes"] if n["status"] != "answered"]
    assert len(stopped) == 1 and stopped[0]["status"] in ("error", "dead", "timeout")
    assert elapsed < 40 + 20


def test_without_ray_the_error_names_the_extra(tmp_path: Path) -> None:
    code = "import sys; sys.modules['ray'] = None; from patchaudit.cli import main; main(sys.argv[1:])"
    proc = subprocess.run(
        [sys.executable, "-c", code, "cluster", "scan", "--address", "127.0.0.1:1"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "patchaudit[ray]" in proc.stderr


def test_an_address_nobody_answers_is_one_line_and_exit_2() -> None:
    started = time.monotonic()
    proc = patchaudit("cluster", "scan", "--address", "127.0.0.1:1", "--timeout", "30")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "cannot connect to the Ray cluster at 127.0.0.1:1" in proc.stderr
    assert time.monotonic() - started < 20


def test_auto_finds_a_head_bound_to_loopback(nodes: Nodes) -> None:
    # As a new user's shell has it: Ray's loopback switch unset, the head's address in RAY_ADDRESS.
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    env["RAY_ADDRESS"] = nodes.address
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "patchaudit"), "cluster", "scan", "--address", "auto"]
        + ["--timeout", "180", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.stderr == ""
    found = json.loads(proc.stdout)
    assert found["summary"]["answered"] >= 2  # an earlier test may have stopped a node
    by_address = nodes.run("--format", "json")  # the same cluster named by its address
    assert proc.returncode == by_address.returncode
    assert found["summary"] == json.loads(by_address.stdout)["summary"]
    assert {n["address"] for n in found["nodes"]} == {"127.0.0.1"}


def _patchaudit_cluster(*args: str) -> subprocess.Popen[str]:
    exe = Path(sys.executable).parent / "patchaudit"
    return subprocess.Popen(
        [str(exe), "cluster", "scan", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _ended(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[str, str]:
    """Its output once it ends; killed (and the test failed) when it does not end in time."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise


def test_a_gcs_that_never_answers_ends_at_the_timeout_and_a_signal_ends_it_at_once() -> None:
    import signal
    import socket

    with socket.socket() as mute:  # listens, never speaks: what a hung or wrong service looks like
        mute.bind(("127.0.0.1", 0))
        mute.listen(64)
        address = f"127.0.0.1:{mute.getsockname()[1]}"

        started = time.monotonic()
        proc = _patchaudit_cluster("--address", address, "--timeout", "5")
        out, err = _ended(proc)
        elapsed = time.monotonic() - started
        assert proc.returncode == 2, err
        assert err == f"patchaudit: error: no answer from the Ray GCS at {address} within 5s\n"  # no Ray noise
        assert elapsed < 6.5

        for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
            proc = _patchaudit_cluster("--address", address, "--timeout", "120")
            time.sleep(5)  # past the imports, inside Ray's connection attempts
            sent = time.monotonic()
            proc.send_signal(sig)
            out, err = _ended(proc)
            assert time.monotonic() - sent < 1.0
            assert proc.returncode == code
            assert err == f"patchaudit: interrupted ({sig.name})\n"

    started = time.monotonic()
    proc = _patchaudit_cluster("--address", address, "--timeout", "5")  # now nothing listens there at all
    out, err = _ended(proc)
    assert proc.returncode == 2 and err.count("\n") == 1
    assert time.monotonic() - started < 6
