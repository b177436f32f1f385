"""Model directories at size: the gate's warm cost of `models = [...]`, and `model scan --deep` against sha256sum.

Run by hand (needs ~SIZE GB free where --dir is; it is deleted afterwards unless --keep):
    python bench/bench_models.py [--dir /tmp] [--files 120] [--gb 5.2] [--rounds 7]
It writes a hub-cache repo `models--bench--big` (FILES blobs named by their sha256, linked from one
snapshot, plus a config), then measures, pair by pair in one run:
  1. warm gate: `patchaudit gate --policy P` on a fresh venv (anchor: the same policy without `models`),
     each answered from its verdict cache; target: the model adds <= 50 ms (median difference);
  2. cold hashing: `patchaudit model scan REPO --deep` (no stat cache) against
     `xargs -P NPROC -n 1 sha256sum` over the same blobs, both from the page cache after one warm-up read;
     target: our speed >= 0.80x sha256sum's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARM_TARGET_S = 0.050
SPEED_TARGET = 0.80


def make_repo(base: Path, files: int, total: int) -> Path:
    repo = base / "hub" / "models--bench--big"
    commit = "b" * 40
    (repo / "blobs").mkdir(parents=True)
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    block = os.urandom(16 << 20)
    size = total // files
    for n in range(files):
        h = hashlib.sha256()
        tmp = repo / "blobs" / f"tmp{n}"
        with open(tmp, "wb") as fh:
            written = 0
            prefix = f"shard {n}\n".encode()
            fh.write(prefix)
            h.update(prefix)
            written = len(prefix)
            while written < size:
                chunk = block[: min(len(block), size - written)]
                fh.write(chunk)
                h.update(chunk)
                written += len(chunk)
        name = h.hexdigest()
        tmp.rename(repo / "blobs" / name)
        os.symlink(f"../../blobs/{name}", repo / "snapshots" / commit / f"shard-{n:05d}.bin")
    config = json.dumps({"quantization_config": {"quant_method": "fp8", "kv_cache_quant_algo": "FP8"}}).encode()
    sha1 = hashlib.sha1(b"blob %d\0" % len(config) + config).hexdigest()
    (repo / "blobs" / sha1).write_bytes(config)
    os.symlink(f"../../blobs/{sha1}", repo / "snapshots" / commit / "config.json")
    return repo


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - start, proc


def cpu_timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, user+sys CPU seconds) of one run: CPU time is what a loaded host inflates least."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, _proc = timed(cmd, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def warm_gate(cmd: list[str]) -> None:
    for _ in range(10):
        _t, proc = timed(cmd)
        if proc.returncode != 0:
            raise SystemExit(f"gate failed: {proc.stdout}{proc.stderr}")
        if "cached" in proc.stdout:
            return
        time.sleep(0.2)
    raise SystemExit("the gate never answered from its cache")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--files", type=int, default=120)
    parser.add_argument("--gb", type=float, default=5.2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--deep-only",
        action="store_true",
        help="Skip the gate part and call the scan through `python -c` (no console script or click needed).",
    )
    parser.add_argument("--gate-only", action="store_true", help="Skip the --deep comparison.")
    args = parser.parse_args()

    patchaudit = str(Path(sys.executable).parent / "patchaudit")
    base = Path(tempfile.mkdtemp(prefix="pa-models-bench-", dir=args.dir))
    try:
        started = time.perf_counter()
        repo = make_repo(base, args.files, int(args.gb * 1e9))
        blobs = sorted(str(p) for p in (repo / "blobs").iterdir())
        total = sum(os.path.getsize(p) for p in blobs)
        print(f"wrote {len(blobs)} blobs, {total / 1e9:.2f} GB in {time.perf_counter() - started:.1f}s: {repo}")

        env = {**os.environ, "PATCHAUDIT_CACHE_DIR": str(base / "pacache")}
        if not args.deep_only:
            gate_part(base, repo, patchaudit, env, args.rounds, total)
        if not args.gate_only:
            deep_part(repo, blobs, patchaudit, env, args.rounds, total, inproc=args.deep_only)
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def gate_part(base: Path, repo: Path, patchaudit: str, env: dict[str, str], rounds: int, total: int) -> None:
    """1. warm gate, with and without the model."""
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    plain, with_model = base / "plain.toml", base / "model.toml"
    plain.write_text('distributions = ["pip"]\n')
    with_model.write_text(f'distributions = ["pip"]\nmodels = ["{repo}"]\n')
    gate_a = [patchaudit, "gate", "--python", python, "--policy", str(plain)]
    gate_b = [patchaudit, "gate", "--python", python, "--policy", str(with_model)]
    cold_gate, proc = timed(gate_b, env)
    print(f"cold gate with the model (hashes {total / 1e9:.2f} GB): {cold_gate:.2f}s exit {proc.returncode}")
    warm_gate(gate_a)
    warm_gate(gate_b)
    a_runs, b_runs = [], []
    for _ in range(rounds):
        a_runs.append(cpu_timed(gate_a, env))
        b_runs.append(cpu_timed(gate_b, env))
    for i, what in ((0, "wall"), (1, "cpu")):
        a = statistics.median(r[i] for r in a_runs)
        b = statistics.median(r[i] for r in b_runs)
        added = b - a
        print(
            f"warm gate ({what}): without model {a * 1000:.1f} ms, with model {b * 1000:.1f} ms (medians of {rounds})"
        )
        verdict = "PASS" if added <= WARM_TARGET_S else "FAIL"
        print(f"  the model adds {added * 1000:.1f} ms (target <= {WARM_TARGET_S * 1000:.0f} ms): {verdict}")


INPROC = (
    "import sys\n"
    "from patchaudit.models.layout import resolve\n"
    "from patchaudit.models.scan import ModelScanOptions, scan_model\n"
    "report = scan_model(resolve(sys.argv[1]), ModelScanOptions(deep=True)).report\n"
    "sys.exit(1 if report.drift or report.findings else 0)\n"
)


def deep_part(
    repo: Path, blobs: list[str], patchaudit: str, env: dict[str, str], rounds: int, total: int, *, inproc: bool
) -> None:
    """2. cold --deep against sha256sum on all cores."""
    ncpu = os.cpu_count() or 1
    anchor = ["xargs", "-P", str(ncpu), "-n", "1", "sha256sum"]
    listing = "\n".join(blobs)
    subprocess.run(anchor, input=listing, capture_output=True, text=True, check=True)  # into the page cache
    ours = [patchaudit, "model", "scan", str(repo), "--deep", "--format", "json"]
    if inproc:
        ours = [sys.executable, "-c", INPROC, str(repo)]
    o_times, s_times = [], []
    for _ in range(max(3, rounds // 2)):
        start = time.perf_counter()
        subprocess.run(anchor, input=listing, capture_output=True, text=True, check=True)
        s_times.append(time.perf_counter() - start)
        t, proc = timed(ours, env)
        if proc.returncode != 0:
            raise SystemExit(f"model scan failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        o_times.append(t)
    o, s = statistics.median(o_times), statistics.median(s_times)
    speed = s / o
    print(f"cold --deep: patchaudit {o:.2f}s ({total / o / 1e9:.2f} GB/s), "
          f"sha256sum x{ncpu} {s:.2f}s ({total / s / 1e9:.2f} GB/s)")  # fmt: skip
    verdict = "PASS" if speed >= SPEED_TARGET else "FAIL"
    print(f"  speed ratio {speed:.2f}x sha256sum on {ncpu} cores (target >= {SPEED_TARGET:.2f}x): {verdict}")


if __name__ == "__main__":
    main()
