"""Worker processes (patchaudit.parallel.workers): results in task order, failures raised here, no hang."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from patchaudit.parallel.hashing import hash_many
from patchaudit.parallel.statcache import StatCache, StatKey
from patchaudit.parallel.workers import Pool, WorkerDied


def _where(shared: dict[str, int], task: int) -> tuple[int, int]:
    if task == shared.get("fail", -1):
        raise ValueError(f"task {task} is bad")
    if task == shared.get("die", -1):
        os.kill(os.getpid(), signal.SIGKILL)
    return os.getpid(), task * shared["times"]


def test_tasks_run_on_worker_processes_and_come_back_in_order() -> None:
    tasks = list(range(200))
    ticks: list[int] = []
    with Pool(_where, tasks, {"times": 3}, workers=3, progress=lambda i, _v: ticks.append(i)) as pool:
        assert pool.workers == 3
        results = [pool.result(i) for i in tasks]
    assert [value for _, value in results] == [t * 3 for t in tasks]
    assert os.getpid() not in {pid for pid, _ in results}
    assert sorted(ticks) == tasks


def test_one_worker_runs_each_task_here_when_its_result_is_asked_for() -> None:
    with Pool(_where, [1, 2], {"times": 2}, workers=1) as pool:
        assert pool.result(1) == (os.getpid(), 4)
        assert pool.result(0) == (os.getpid(), 2)


def test_more_tasks_than_a_pipe_holds_by_default() -> None:
    tasks = list(range(20_000))  # 80,000 bytes of task numbers: more than 64 KB
    with Pool(_where, tasks, {"times": 1}, workers=2) as pool:
        assert [pool.result(i)[1] for i in tasks] == tasks


def test_a_task_that_raises_raises_here_and_the_others_still_come_back() -> None:
    with Pool(_where, list(range(40)), {"times": 1, "fail": 7}, workers=3) as pool:
        with pytest.raises(ValueError, match="task 7 is bad"):
            pool.result(7)
        assert pool.result(39)[1] == 39


def test_a_worker_that_is_killed_is_an_error_not_a_hang() -> None:
    pool = Pool(_where, list(range(40)), {"times": 1, "die": 5}, workers=3)
    with pool, pytest.raises(WorkerDied, match="killed by signal 9"):
        for i in range(40):
            pool.result(i)


def test_with_a_thread_running_the_workers_are_started_afresh_and_agree(tmp_path: Path) -> None:
    """A progress bar's thread makes fork unsafe: the workers then start from a fresh interpreter."""
    files = []
    for n in range(600):
        path = tmp_path / f"f{n}"
        path.write_bytes(b"x" * n)
        files.append((str(path), "sha256"))
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with_thread = hash_many(files, workers=3)
    finally:
        stop.set()
        thread.join()
    assert with_thread == hash_many(files, workers=1)
    assert len(with_thread) == 600


def _cached(shared: StatCache, task: str) -> str | None:
    return shared.get(task, StatKey.of(os.stat(task)), "sha256")


def test_with_a_thread_running_the_stat_cache_goes_to_the_workers_too(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"a")
    cache = StatCache(tmp_path / "cache.json")
    cache.put(str(target), StatKey.of(os.stat(target)), "sha256=known")
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with Pool(_cached, [str(target)] * 4, cache, workers=2) as pool:
            assert [pool.result(i) for i in range(4)] == ["sha256=known"] * 4
    finally:
        stop.set()
        thread.join()


ORPHAN = """
import os, sys, time
from patchaudit.parallel.workers import Pool

def big(_, task):
    time.sleep(0.1)
    return os.getpid(), b"x" * 200_000  # more than a pipe holds: the worker waits for its parent to read

pool = Pool(big, list(range(12)), None, workers=2)
print(pool.result(0)[0], pool.result(1)[0], flush=True)
os.kill(os.getpid(), 9)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_workers_whose_parent_is_killed_do_not_linger() -> None:
    """Killed (SIGKILL, or SIGTERM's default), the parent cleans nothing up: its workers must end of themselves."""
    done = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL
    pids = {int(pid) for pid in done.stdout.split()}
    assert pids and os.getpid() not in pids
    deadline = time.monotonic() + 30
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_running(pid) for pid in pids)
