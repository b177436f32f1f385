"""Time `patchaudit ps` over a host running 500 Python processes against `ps -eo pid,lstart,cmd`.

Run by hand:
    python bench/bench_ps.py [--processes 500] [--rounds 7] [--python PY --import MOD]
Without --python it makes a venv under bench/.work and installs a small wheel into it with pip. One
Python process from that venv imports MOD (if given), then forks until N processes sleep (a
multiprocessing-style fleet). Both commands scan every process on the host, pair by pair after one
warm-up each; prints every pair, the median wall time of each (target: ps <= 0.200 s) and the ratio.
It then touches one RECORD-tracked file of the env and checks that ps names all N processes (stale, or
"may run changed code" where nothing says the file was loaded).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET_S = 0.200
FLEET = """
import os, sys, time
if sys.argv[2]:
    __import__(sys.argv[2])
n = int(sys.argv[1])
for _ in range(n - 1):
    if os.fork() == 0:
        time.sleep(3600)
        os._exit(0)
print("ready", flush=True)
time.sleep(3600)
"""


def make_env(work: Path) -> Path:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from wheels import build_wheel, make_venv, pip_install

    files = {f"fleet/mod{i}.py": f"VALUE = {i}\n" for i in range(200)}
    files["fleet/__init__.py"] = ""
    wheel = build_wheel(work / "wheels", "fleet", "1.0", files)
    if work.joinpath("venv").exists():
        shutil.rmtree(work / "venv")
    python = make_venv(work / "venv")
    pip_install(python, wheel)
    return python


def timed(cmd: list[str]) -> tuple[float, int, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc.returncode, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--python", help="Interpreter of the env the fleet runs from (default: a fresh venv).")
    parser.add_argument("--import", dest="module", default="", help="Module the fleet imports before forking.")
    args = parser.parse_args()

    python = Path(args.python) if args.python else make_env(HERE / ".work" / "ps")
    module = args.module or ("fleet.mod1" if not args.python else "")
    fleet = subprocess.Popen(
        [str(python), "-c", FLEET, str(args.processes), module],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert fleet.stdout is not None and fleet.stdout.readline().strip() == "ready"
        beside = Path(sys.executable).parent / "patchaudit"
        ours = [str(beside) if beside.exists() else sys.executable, *([] if beside.exists() else ["-m", "patchaudit"])]
        ours += ["ps", "--format", "json"]
        anchor = ["ps", "-eo", "pid,lstart,cmd"]
        total = len([p for p in os.listdir("/proc") if p.isdigit()])
        print(f"{args.processes} fleet processes from {python}; {total} processes on the host")
        timed(anchor)
        _, code, out = timed(ours)
        report = json.loads(out)
        fleet_pids = {fleet.pid} | {p["pid"] for p in report["processes"] if p["ppid"] == fleet.pid}
        print(f"ps saw {len(report['processes'])} Python processes, {len(fleet_pids)} of the fleet, exit {code}")
        # The fleet alone (--pid for each of its processes), then every process of the host, whose other
        # environments (a shared machine's) add their own RECORD walks.
        fleet_args = [a for pid in sorted(fleet_pids) for a in ("--pid", str(pid))]
        for label, cmd, anchor_cmd in (
            ("fleet", ours + fleet_args, ["ps", "-o", "pid,lstart,cmd", "-p", ",".join(map(str, sorted(fleet_pids)))]),
            ("host", ours, anchor),
        ):
            pairs = []
            timed(cmd)
            for _ in range(args.rounds):
                a, _, _ = timed(anchor_cmd)
                b, _, _ = timed(cmd)
                pairs.append((a, b))
                print(f"  [{label}] ps {a:6.3f}s   patchaudit ps {b:6.3f}s   ratio {b / a:5.2f}")
            ours_s = statistics.median(b for _, b in pairs)
            print(f"[{label}] anchor: {' '.join(anchor_cmd[:4])} ...   ours: {' '.join(cmd[:5])} ...")
            print(
                f"[{label}] median ps {statistics.median(a for a, _ in pairs):.3f}s, patchaudit ps {ours_s:.3f}s, "
                f"ratio {statistics.median(b / a for a, b in pairs):.2f}x (target <= {TARGET_S:.3f}s: "
                f"{'met' if ours_s <= TARGET_S else 'MISSED'})"
            )
        started = time.perf_counter()
        subprocess.run([*ours[:-3], "--version"], capture_output=True, check=False)
        print(f"interpreter and CLI start alone (patchaudit --version): {time.perf_counter() - started:.3f}s")
        # The fleet imported from this env: touch one tracked file and every fleet process is stale.
        mine = [p for p in report["processes"] if p["pid"] == fleet.pid]
        site = Path(mine[0]["site_dirs"][0]) if mine and mine[0]["site_dirs"] else None
        target = next(site.glob("fleet/mod1.py"), None) if site else None
        if target is not None:
            os.utime(target)
            os.chmod(target, target.stat().st_mode)  # a ctime after every start
            _, code, out = timed(ours)
            named = ("stale", "may-run-changed-code")
            stale = {p["pid"] for p in json.loads(out)["processes"] if p["status"] in named}
            seen = len(fleet_pids & stale)
            print(f"after touching {target.name}: exit {code}, {seen} of {len(fleet_pids)} fleet processes stale")
    finally:
        os.killpg(fleet.pid, signal.SIGKILL)
        fleet.wait()


if __name__ == "__main__":
    main()
