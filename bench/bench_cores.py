"""Every figure of "does patchaudit use every core" in one run, for a many-core host (run by hand).

    python3 bench/bench_cores.py --python PY --out DIR [--patchaudit 'python3 -m patchaudit'] \
        [--subset transformers] [--anchor torch] [--budget 540]

1. cold verify of the whole env against `xargs -0 -P<cpus> -n 500 sha256sum` (bench_scan.py, with
   the peak RSS), then the cold-verify curve over --workers 1, 2, 4, 8, 16;
2. the warm gate over every distribution against `pip show ANCHOR` (bench_gate.py);
3. `scan --all-files --no-cache` of the whole env with every CPU;
4. the `--all-files` curve over --workers 16, 1, 8, 4, 2 for the subset, checking that every
   worker count reports the same findings.
Each step is cut short when the budget runs out; DIR gets results.json after every step and a log.
`--skip all-files` leaves out steps 3 and 4. Besides: the main process's own CPU time in a cold scan
(patchaudit run in this bench's own interpreter) and the import time of the scan path
(`-X importtime`); with `--compare 'python3 -m OLD'`, whether the JSON reports of the two builds
are identical (the `run` block aside) at --workers 1 and every CPU, cold and warm.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _harness import cpus

HERE = Path(__file__).resolve().parent


class Bench:
    def __init__(self, out: Path, budget: float) -> None:
        self.out = out
        self.deadline = time.monotonic() + budget
        self.results: dict[str, object] = {}
        self.log = open(out / "log.txt", "a")  # noqa: SIM115

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        (self.out / "results.json").write_text(json.dumps(self.results, indent=1, default=str))

    def timed(self, cmd: list[str], *, timeout: float, out: Path | None = None) -> dict[str, object]:
        """One run: wall time and exit status; a run past its time is killed and says so."""
        self.say("$ " + shlex.join(cmd))
        start = time.perf_counter()
        # Its own process group: a run past its time is killed with its worker processes, which would
        # otherwise go on using the cores while the next runs are timed.
        with open(out or os.devnull, "wb") as sink:
            proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.PIPE, start_new_session=True)
            try:
                _, err = proc.communicate(timeout=max(timeout, 1))
                row: dict[str, object] = {"wall": round(time.perf_counter() - start, 3), "code": proc.returncode}
                if proc.returncode not in (0, 1):
                    row["stderr"] = err.decode(errors="replace")[-2000:]
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                row = {"wall": None, "timed_out_after": round(timeout, 1)}
        self.say(f"  -> {row}")
        return row

    def script(self, name: str, args: list[str], timeout: float) -> None:
        """Run a sibling bench script, keeping its output in the log and its figures in the results."""
        figures = self.out / f"{name}.json"
        cmd = [sys.executable, str(HERE / f"bench_{name}.py"), *args, "--json", str(figures)]
        self.say("$ " + shlex.join(cmd))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(timeout, 1), check=False)
            self.say(proc.stdout + proc.stderr)
            self.results[name] = json.loads(figures.read_text()) if figures.exists() else {"code": proc.returncode}
        except subprocess.TimeoutExpired as exc:
            self.say(str(exc.stdout or "") + f"\n(timed out after {timeout:.0f}s)")
            self.results[name] = {"timed_out_after": timeout}
        self.save()


MAIN_CPU = """
import resource, sys, time
start = time.process_time()
from patchaudit.cli import _main
imported = time.process_time() - start
try:
    _main(sys.argv[1:], sys.argv[1:])
except SystemExit:
    pass
own = resource.getrusage(resource.RUSAGE_SELF)
sys.stderr.write(f"MAIN {own.ru_utime + own.ru_stime:.4f} {imported:.4f}\\n")
"""


def main_process(bench: Bench, pa: list[str], args: list[str], rounds: int) -> dict[str, object]:
    """The main process's CPU seconds in a cold scan (its workers' not counted), and the import time of
    the scan path (measured on one process: without the worker pool's own imports): what no number of
    workers can take off a cold scan. Median of `rounds`."""
    python = pa[: pa.index("-m")] if "-m" in pa else [sys.executable]
    cpu: list[float] = []
    for _ in range(rounds):
        proc = subprocess.run([*python, "-c", MAIN_CPU, *args], capture_output=True, text=True, check=False)
        line = next((ln for ln in proc.stderr.splitlines() if ln.startswith("MAIN ")), None)
        if line is None:
            return {"error": proc.stderr[-2000:]}
        cpu.append(float(line.split()[1]))
    # one process (--workers 1): forked workers inherit -X importtime and would add their own lines
    alone = [*args, "--workers", "1"]
    timed = subprocess.run([*python, "-X", "importtime", "-c", MAIN_CPU, *alone], capture_output=True, text=True)
    top = [ln.split("|") for ln in timed.stderr.splitlines() if ln.startswith("import time:") and "|" in ln]
    imports_us = sum(int(row[1]) for row in top[1:] if row[1].strip().isdigit())
    row = {"main_cpu_s": statistics.median(cpu), "main_cpu_all": cpu, "import_time_s": imports_us / 1e6}
    bench.say(f"  main process: {row}")
    return row


def compare(bench: Bench, ours: list[str], theirs: list[str], target: list[str], n: int) -> dict[str, object]:
    """Whether both builds write the same JSON report (its `run` block aside), cold and warm, at 1 and n
    workers; the warm runs use a cache directory of each build's own, filled by one run first."""
    import tempfile

    out: dict[str, object] = {}
    top = Path(tempfile.mkdtemp(prefix="pa-compare-"))
    for workers in sorted({1, n}):
        for mode in ("cold", "warm"):
            texts = []
            for name, pa in (("ours", ours), ("theirs", theirs)):
                cache = ["--no-cache"] if mode == "cold" else ["--cache-dir", str(top / f"{name}-{workers}")]
                cmd = [*pa, "scan", *target, "--no-hazards", "--format", "json", "--workers", str(workers), *cache]
                if mode == "warm":
                    subprocess.run(cmd, capture_output=True, check=False)
                dest = top / f"{name}-{workers}-{mode}.json"
                bench.timed([*cmd, "--out", str(dest)], timeout=max(bench.left() - 5, 1))
                report = json.loads(dest.read_text()) if dest.exists() else {"missing": True}
                report.pop("run", None)
                texts.append(json.dumps(report))
            out[f"{mode}_w{workers}"] = texts[0] == texts[1]
            bench.say(f"  reports {mode} --workers {workers}: {'identical' if texts[0] == texts[1] else 'DIFFER'}")
    shutil.rmtree(top, ignore_errors=True)
    return out


def findings_of(path: Path) -> list[object]:
    report = json.loads(path.read_text())
    return [(d["name"], d.get("findings", []), d.get("drift", [])) for d in report["distributions"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True)
    parser.add_argument("--path", help="name the env to patchaudit by this site-packages directory instead")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--patchaudit", default="python3 -m patchaudit")
    parser.add_argument("--subset", default="transformers")
    parser.add_argument("--anchor", default="torch", help="the distribution `pip show` is asked about")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for everything")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip", default="", help="comma-separated steps to leave out: curve, gate, all-files")
    parser.add_argument("--curve-rounds", type=int, default=1, help="runs per point of the curve (median)")
    parser.add_argument("--compare", help="another build's command, e.g. 'python3 -m patchaudit' on its path")
    parser.add_argument("--whole-timeout", type=float, default=150.0, help="seconds for --all-files of the env")
    parser.add_argument("--subset-workers", default="16,1,8,4,2", help="the --all-files curve, in this order")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    bench = Bench(args.out, args.budget)
    n = cpus()
    pa = shlex.split(args.patchaudit)
    target = ["--path", args.path] if args.path else ["--python", args.python]
    bench.results["host"] = {
        "cpus": n,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
        "load": os.getloadavg(),
        "sha256sum": subprocess.run(["sha256sum", "--version"], capture_output=True, text=True).stdout.split("\n")[0],
    }
    try:
        model = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name"))
        bench.results["host"]["cpu_model"] = model.split(":", 1)[1].strip()  # type: ignore[index]
    except (OSError, StopIteration):
        pass
    bench.say(f"host: {bench.results['host']}")
    bench.save()

    # 1. cold verify against sha256sum, then its curve
    bench.script(
        "scan",
        [
            *target,
            "--rounds",
            str(args.rounds),
            "--procs",
            str(n),
            "--rss",
            "--patchaudit",
            args.patchaudit,
        ],
        timeout=min(180, bench.left()),
    )
    verify_cmd = [*pa, "scan", *target, "--no-cache", "--no-hazards", "--format", "json"]
    curve: dict[str, object] = {}
    for w in (1, 2, 4, 8, 16):
        if w > n or bench.left() < 60 or "curve" in args.skip:
            continue
        rows = [
            bench.timed([*verify_cmd, "--workers", str(w)], timeout=min(60, bench.left()))
            for _ in range(args.curve_rounds)
        ]
        walls = [wall for r in rows if isinstance(wall := r.get("wall"), float)]
        curve[str(w)] = {"median": statistics.median(walls) if walls else None, "runs": rows}
    bench.results["verify_curve"] = curve
    bench.results["main_process"] = main_process(
        bench, pa, ["scan", *target, "--no-cache", "--no-hazards", "--format", "json", "--out", os.devnull], 3
    )
    if args.compare:
        bench.results["identical_reports"] = compare(bench, pa, shlex.split(args.compare), target, n)
    bench.save()

    # 2. the warm gate over every distribution
    if "gate" not in args.skip:
        bench.script(
            "gate",
            [
                "--python",
                args.python,
                *(["--path", args.path] if args.path else []),
                "--anchor",
                args.anchor,
                "--allow-drift",
                "--no-edit-check",
                "--patchaudit",
                args.patchaudit,
            ],
            timeout=min(120, bench.left()),
        )

    if "all-files" in args.skip:
        bench.results["load_after"] = os.getloadavg()
        bench.save()
        bench.say(json.dumps(bench.results, indent=1, default=str))
        return 0

    # 3. --all-files over the whole env with every CPU
    all_cmd = [*pa, "scan", *target, "--all-files", "--no-cache", "--format", "json"]
    whole: dict[str, object] = {"skipped": "no time left"}
    if bench.left() > 30:
        whole = bench.timed(
            [*all_cmd, "--workers", str(n)],
            timeout=min(args.whole_timeout, bench.left() - 20),
            out=args.out / "all.json",
        )
    if (args.out / "all.json").exists() and whole.get("code") in (0, 1):
        report = json.loads((args.out / "all.json").read_text())
        whole["summary"] = report.get("summary")
    (args.out / "all.json").unlink(missing_ok=True)
    bench.results["all_files_whole_env"] = whole
    bench.save()

    # 4. the --all-files curve over the subset
    sub_cmd = [*pa, "scan", args.subset, *target, "--all-files", "--no-cache", "--format", "json"]
    sub: dict[str, object] = {}
    seen: dict[str, list[object]] = {}
    for w in (int(x) for x in args.subset_workers.split(",")):
        if w > n or bench.left() < 10:
            continue
        dest = args.out / f"sub-{w}.json"
        sub[str(w)] = bench.timed([*sub_cmd, "--workers", str(w)], timeout=bench.left() - 5, out=dest)
        if dest.exists() and sub[str(w)].get("code") in (0, 1):  # type: ignore[union-attr]
            seen[str(w)] = findings_of(dest)
        dest.unlink(missing_ok=True)
        bench.results["all_files_subset"] = sub
        bench.save()
    if seen:
        first = next(iter(seen.values()))
        bench.results["all_files_subset_identical"] = all(v == first for v in seen.values())
        bench.results["all_files_subset_findings"] = sum(len(f) for _, f, _ in first)  # type: ignore[misc, arg-type]
    if "1" in sub and "16" in sub:
        one, many = sub["1"].get("wall"), sub["16"].get("wall")  # type: ignore[union-attr]
        if one and many:
            bench.results["all_files_speedup_16_vs_1"] = round(one / many, 2)
    bench.results["load_after"] = os.getloadavg()
    bench.save()
    bench.say(json.dumps(bench.results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
