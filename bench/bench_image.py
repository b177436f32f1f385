"""Time `patchaudit scan --image` of an image holding the vLLM wheel against `umoci unpack` of the same
image, and against `tar -x` of its layers followed by `sha256sum -P2` of every file; peak RSS of each.

Run by hand:
    python bench/bench_image.py --wheel vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl [--rounds 3]
    python bench/bench_image.py --site-packages VENV/lib/python3.11/site-packages --work SCRATCH --rounds 1
The second makes the image of a whole stack (`pip install vllm` in a venv: ~9 GB, one layer) with
`umoci insert`; give --work a scratch directory with room for the image and two unpacked copies.
The first installs the wheel with pip (`--no-deps --root ROOTFS --prefix /usr/local`) into bench/.work, makes an
OCI image of it with umoci (one gzip layer), then times the three commands round by round, each in its
own process (peak RSS from wait4). Prints every round, the medians and the ratio of scan to tar + sha256sum.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET_RATIO = 0.6
TARGET_RSS_MB = 300


def timed(argv: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, float, float]:
    """(wall seconds, peak RSS in MB, CPU seconds (user + system)) of the command and the children it
    waited for: on a shared machine the CPU time is the steadier figure."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in ok:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        sys.exit(f"bench: exit {code}: {' '.join(argv)}\n{err[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


SITE = "/usr/local/lib/python3.11/site-packages"


def build_site(work: Path, site: Path) -> Path:
    """An image of one layer holding `site` at /usr/local/lib/python3.11/site-packages (umoci insert)."""
    img = work / "img-site"
    if (img / "index.json").exists():
        return img
    shutil.rmtree(img, ignore_errors=True)
    subprocess.run(["umoci", "init", "--layout", str(img)], check=True)
    subprocess.run(["umoci", "new", "--image", f"{img}:latest"], check=True)
    created = f"COPY site-packages {SITE}"
    subprocess.run(
        ["umoci", "insert", "--image", f"{img}:latest", "--history.created_by", created, str(site), SITE], check=True
    )
    return img


def build(work: Path, wheel: Path) -> Path:
    img = work / "img"
    if (img / "index.json").exists():
        return img
    rootfs = work / "rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-warn-script-location"]
    subprocess.run([*pip, "--root", str(rootfs), "--prefix", "/usr/local", str(wheel)], check=True)
    subprocess.run(["umoci", "init", "--layout", str(img)], check=True)
    subprocess.run(["umoci", "new", "--image", f"{img}:latest"], check=True)
    created = f"RUN pip install {wheel.name}"
    subprocess.run(
        ["umoci", "insert", "--image", f"{img}:latest", "--history.created_by", created, str(rootfs), "/"], check=True
    )
    shutil.rmtree(rootfs)
    return img


def layers(img: Path) -> list[Path]:
    import json

    index = json.loads((img / "index.json").read_text())
    manifest = json.loads((img / "blobs/sha256" / index["manifests"][0]["digest"][7:]).read_text())
    return [img / "blobs/sha256" / layer["digest"][7:] for layer in manifest["layers"]]


def main() -> None:
    parser = argparse.ArgumentParser()
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--wheel", type=Path, help="install this wheel into the image's /usr/local")
    source.add_argument("--site-packages", type=Path, help="copy this site-packages directory into the image")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false", help="skip the first, untimed scan")
    parser.add_argument("--work", type=Path, default=HERE / ".work" / "image")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    img = build(args.work, args.wheel.resolve()) if args.wheel else build_site(args.work, args.site_packages)
    patchaudit = str(Path(sys.executable).parent / "patchaudit")
    out = args.work / "out"
    blobs = " ".join(str(p) for p in layers(img))
    tar_sha = (
        # umoci ends a layer without tar's two zero blocks: GNU tar wants them, so they are appended
        f"mkdir {out} && for b in {blobs}; do {{ zcat $b; head -c 2048 /dev/zero; }}"
        f" | tar -x -C {out}; done"
        f" && find {out} -type f -print0 | xargs -0 -n 500 -P2 sha256sum >/dev/null"
    )
    commands = {
        "scan --image": (
            [patchaudit, "scan", "--image", f"oci:{img}:latest", "--no-hazards", "--workers", "2"],
            (0, 1),
        ),
        "umoci unpack": (
            ["umoci", "unpack", "--rootless", "--image", f"{img}:latest", f"{out}-u"],
            (0,),
        ),
        "tar -x + sha256sum -P2": (["bash", "-c", tar_sha], (0,)),
    }
    if args.warm_up:
        timed(commands["scan --image"][0], commands["scan --image"][1])  # bytecode, page cache
    rows: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    for n in range(args.rounds):
        for name, (argv, ok) in commands.items():
            shutil.rmtree(out, ignore_errors=True)  # what the last round wrote, deleted untimed
            shutil.rmtree(f"{out}-u", ignore_errors=True)
            rows[name].append(timed(argv, ok))
            wall, peak, cpu = rows[name][-1]
            print(f"round {n + 1}: {name:<24} {wall:7.2f} s  cpu {cpu:7.2f} s  peak RSS {peak:7.1f} MB", flush=True)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(f"{out}-u", ignore_errors=True)
    med = {name: statistics.median(w for w, _, _ in r) for name, r in rows.items()}
    cpu = {name: statistics.median(c for _, _, c in r) for name, r in rows.items()}
    rss = {name: max(m for _, m, _ in r) for name, r in rows.items()}
    size = sum(p.stat().st_size for p in layers(img)) / 2**20
    print(f"image: {len(layers(img))} layer(s), {size:.0f} MB compressed")
    for name in commands:
        print(f"median {name:<24} {med[name]:7.2f} s  cpu {cpu[name]:7.2f} s  peak RSS {rss[name]:7.1f} MB")
    ratio = med["scan --image"] / med["tar -x + sha256sum -P2"]
    print(f"scan --image / (tar -x + sha256sum -P2) = {ratio:.2f} (target <= {TARGET_RATIO})")
    print(f"  in CPU time: {cpu['scan --image'] / cpu['tar -x + sha256sum -P2']:.2f}")
    print(f"scan --image / umoci unpack = {med['scan --image'] / med['umoci unpack']:.2f}")
    print(f"scan --image peak RSS {rss['scan --image']:.0f} MB (target < {TARGET_RSS_MB} MB)")


if __name__ == "__main__":
    main()
