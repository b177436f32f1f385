"""Revert 6 patched files of vLLM 0.33.0: bytes moved from a Range-capable index, and time vs force-reinstall.

Run by hand (not a test):

    .venv/bin/python bench/bench_revert.py \
        --wheel BENCH/wheels/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl \
        --venv BENCH/vllm-venv --scratch BENCH/scratch-revert

where BENCH is a work directory outside the repository (`pip download --no-deps vllm==0.33.0` into
BENCH/wheels, installed with `--no-deps` into the venv BENCH/vllm-venv).

Anchor, measured in the same run on the same scratch venv:
    pip install --force-reinstall --no-deps --no-index <wheel>
Targets: bytes moved from the index < 2% of the wheel; revert from a warm wheelhouse <= 0.1x the anchor's time.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from patchaudit.check.verify import verify
from patchaudit.pristine.cache import OwnCache
from patchaudit.pristine.http import Transfer
from patchaudit.pristine.index import IndexConfig, PackageIndex
from patchaudit.revert import execute, plan_revert
from patchaudit.target import environment

ROOT = Path(__file__).resolve().parents[1]
PATCH = b"\nimport torch as _t\nif _t.cuda.is_available() and 5 == 5:\n    _t.save({}, '/tmp/patchaudit-bench.pt')\n"
WANTED = (
    "vllm/model_executor/models/deepseek_v2.py",
    "vllm/config/model.py",
    "vllm/model_executor/layers/quantization/fp8.py",
    "vllm/v1/worker/gpu_model_runner.py",
    "vllm/entrypoints/openai/api_server.py",
    "vllm/engine/arg_utils.py",
)


class RangeServer:
    """Serves one wheel under a PEP 503 page, honouring Range, counting body bytes sent."""

    def __init__(self, wheel: Path) -> None:
        self.wheel = wheel
        self.sent = 0
        self.requests = 0
        data_len = wheel.stat().st_size
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server.requests += 1
                if self.path.startswith("/simple/"):
                    body = f'<a href="/files/{wheel.name}">{wheel.name}</a>'.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    server.sent += len(body)
                    return
                m = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
                if not m:
                    self.send_error(416)
                    return
                if m.group(1) == "":
                    start, end = data_len - int(m.group(2)), data_len - 1
                else:
                    start, end = int(m.group(1)), min(int(m.group(2) or data_len - 1), data_len - 1)
                with open(wheel, "rb") as fh:
                    fh.seek(start)
                    body = fh.read(end - start + 1)
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{end}/{data_len}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                server.sent += len(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/simple"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def patch_files(site: Path, rels: list[str]) -> None:
    for rel in rels:
        with open(site / rel, "ab") as fh:
            fh.write(PATCH)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wheel", type=Path, required=True, help="the installed distribution's wheel")
    parser.add_argument(
        "--venv", type=Path, required=True, help="a venv with the wheel installed; copied, never modified"
    )
    parser.add_argument("--scratch", type=Path, required=True, help="a directory to copy the venv into (replaced)")
    parser.add_argument("--dist", default="vllm")
    args = parser.parse_args()

    if args.scratch.exists():
        shutil.rmtree(args.scratch)
    print(f"copying {args.venv} -> {args.scratch}", flush=True)
    shutil.copytree(args.venv, args.scratch, symlinks=True)
    python = args.scratch / "bin" / "python"
    env = environment.from_python(python)
    every = environment.distributions(env)
    (dist,) = environment.select(every, [args.dist])
    site = dist.location
    rels = [r for r in WANTED if (site / r).is_file()]
    if len(rels) < 6:
        extra = sorted(
            p.relative_to(site).as_posix() for p in (site / "vllm").rglob("*.py") if p.stat().st_size > 20000
        )
        rels += [r for r in extra if r not in rels][: 6 - len(rels)]
    print("patched:", *rels, sep="\n  ")
    wheel_size = args.wheel.stat().st_size

    # 1. from the index, by range requests
    patch_files(site, rels)
    (report,) = verify(env, [dist], every=every).distributions
    server = RangeServer(args.wheel)
    transfer = Transfer()
    cache = OwnCache(args.scratch / ".bench-cache")
    source = PackageIndex(IndexConfig(index_url=server.url), transfer=transfer, cache=cache)
    t0 = time.perf_counter()
    plan = plan_revert(env, dist, report, sources=[source])
    result = execute(env, plan)
    index_time = time.perf_counter() - t0
    assert sorted(result.restored) == sorted(rels), result
    assert not result.unverified, result.unverified
    moved = max(transfer.bytes_received, server.sent)

    # 2. from a warm wheelhouse, end to end through the CLI (verify included)
    patch_files(site, rels)
    cmd = [
        sys.executable,
        "-m",
        "patchaudit",
        "revert",
        args.dist,
        "--python",
        str(python),
        "--wheelhouse",
        str(args.wheel.parent),
        "--yes",
    ]
    subprocess.run(["cat", str(args.wheel)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    revert_time = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr

    # 3. the anchor: force-reinstall the same wheel into the same scratch venv
    patch_files(site, rels)
    anchor = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "--force-reinstall",
        "--no-deps",
        "--no-index",
        "--disable-pip-version-check",
        "-q",
        str(args.wheel),
    ]
    t0 = time.perf_counter()
    subprocess.run(anchor, check=True)
    anchor_time = time.perf_counter() - t0

    print()
    print(f"wheel: {args.wheel.name}  {wheel_size / 1e6:.1f} MB, {len(report.drift)} drifted files reverted")
    print(
        f"index revert: {moved:,} bytes in {transfer.requests} requests = {moved / wheel_size:.3%} of the wheel "
        f"(target < 2%), {index_time:.2f}s"
    )
    print(f"warm wheelhouse revert (CLI, verify included): {revert_time:.2f}s")
    print(f"anchor pip --force-reinstall --no-deps: {anchor_time:.2f}s")
    print(f"ratio revert/anchor: {revert_time / anchor_time:.3f}x (target <= 0.1x)")
    print("revert command:  " + " ".join(cmd))
    print("anchor command:  " + " ".join(anchor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
