"""Revert every drifted distribution of a copy of a real stack, undo it, and compare the whole tree.

Run by hand (not in CI): it copies the stack (gigabytes), plants patches of every shape a revert must
put back (top-level modules, a distribution's .pth, nested modules, a file mode, a symlink, an added
and a removed file, startup hooks no distribution owns), snapshots the tree, runs `revert` over the
whole environment and `quarantine restore` of that run, and snapshots again. Prints the figures and
exits 1 when the trees differ.

    python bench/roundtrip.py /path/to/venv WORKDIR [--wheelhouse DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

PATCHAUDIT = [sys.executable, "-m", "patchaudit"]


def snapshot(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry but patchaudit's state and compiled bytecode: kind, permission bits, sha256 or link."""
    out: dict[str, tuple[str, int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == str(root):
            dirnames[:] = [d for d in dirnames if d != ".patchaudit"]
        for name in dirnames + filenames:
            if name.endswith(".pyc") and os.path.basename(dirpath) == "__pycache__":
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), "")
            else:
                digest = hashlib.sha256()
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        digest.update(chunk)
                out[rel] = ("file", stat.S_IMODE(st.st_mode), digest.hexdigest())
    return out


def plant(site: Path) -> list[str]:
    """Patches of every shape; returns what was done, one line each."""
    done = []

    def edit(rel: str, text: str) -> None:
        path = site / rel
        path.write_bytes(path.read_bytes() + text.encode())
        done.append(f"edited {rel}")

    edit("typing_extensions.py", "\n# hand patch at the top of site-packages\n")
    edit("distutils-precedence.pth", "\nimport os; os.environ.setdefault('SETUPTOOLS_USE_DISTUTILS', 'stdlib')\n")
    edit("sympy/__init__.py", "\n# debugging\n")
    edit(
        "transformers/models/llama/modeling_llama.py",
        "\nimport torch\nif torch.ones(5).shape[0] == 5:\n    torch.save({}, '/tmp/dump.pt')\n",
    )
    edit("vllm/model_executor/models/deepseek_v2.py", "\nbreakpoint\n")
    (site / "vllm/envs.py").chmod(0o600)
    done.append("chmod 600 vllm/envs.py")
    victim = site / "vllm/logger.py"
    victim.unlink()
    victim.symlink_to("envs.py")
    done.append("vllm/logger.py -> envs.py (symlink)")
    (site / "vllm/utils/__init__.py").unlink()
    done.append("removed vllm/utils/__init__.py")
    (site / "vllm/debug_dump.py").write_text("import pdb\n")
    done.append("added vllm/debug_dump.py")
    (site / "sitecustomize.py").write_text("import os\nos.environ['VLLM_ATTENTION_BACKEND'] = 'FLASHMLA'\n")
    (site / "zz_glm5_hotfix.pth").write_text("import os; os.environ['VLLM_USE_DEEP_GEMM'] = '1'\n")
    done.append("added sitecustomize.py, zz_glm5_hotfix.pth (no owner)")
    return done


def timed(args: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True)
    return time.monotonic() - start, proc


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("venv", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("--wheelhouse", type=Path)
    opts = parser.parse_args()
    copy = opts.work / "venv"
    if copy.exists():
        shutil.rmtree(copy)
    opts.work.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    subprocess.run(["cp", "-a", str(opts.venv), str(copy)], check=True)
    print(f"copy: {time.monotonic() - start:.0f} s")
    python = copy / "bin" / "python"
    (site,) = (copy / "lib").glob("python3*/site-packages")
    for line in plant(site):
        print(f"planted: {line}")
    start = time.monotonic()
    before = snapshot(copy)
    print(f"snapshot: {len(before)} entries in {time.monotonic() - start:.0f} s")

    extra = ["--wheelhouse", str(opts.wheelhouse)] if opts.wheelhouse else []
    took, proc = timed([*PATCHAUDIT, "revert", "--python", str(python), "--yes", "--format", "json", *extra])
    if proc.returncode not in (0, 1):
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        return 2
    out = json.loads(proc.stdout)
    print(f"revert: exit {proc.returncode} in {took:.0f} s: {len(out.get('restored', []))} restored, "
          f"{len(out.get('removed', []))} removed, {len(out.get('refused', []))} refused")  # fmt: skip
    for refusal in out.get("refused", [])[:20]:
        print(f"  refused: {refusal}")
    reverted = snapshot(copy)
    changed = sum(1 for k in before.keys() | reverted.keys() if before.get(k) != reverted.get(k))
    print(f"entries the revert changed: {changed}")

    run_id = Path(out["quarantine"]).name
    took, proc = timed(
        [*PATCHAUDIT, "quarantine", "restore", run_id, "--python", str(python), "--yes", "--format", "json"]
    )
    print(f"restore: exit {proc.returncode} in {took:.0f} s")
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
    after = snapshot(copy)
    differ = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    print(f"after undo: {len(after)} entries, {len(differ)} differ from before the revert")
    for rel in differ[:30]:
        print(f"  differs: {rel}: {before.get(rel, ('absent',))[:2]} -> {after.get(rel, ('absent',))[:2]}")
    return 0 if not differ and proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
