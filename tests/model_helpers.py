"""Model directories written by the real Hub client (huggingface_hub) from a Hub served on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from hub_server import Repo, serve
from safetensors.numpy import save

REPO_ID = "acme/tiny-fp8"
QUANT_CONFIG = b"""{
  "producer": {"name": "modelopt", "version": "0.19.0"},
  "quantization": {
    "kv_cache_quant_algo": "FP8",
    "quant_algo": "FP8",
    "exclude_modules": ["lm_head"]
  }
}
"""
CONFIG = {
    "architectures": ["TinyForCausalLM"],
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 4096,
    "rope_theta": 1000000.0,
    "quantization_config": {"quant_method": "fp8", "kv_cache_quant_algo": "FP8", "activation_scheme": "static"},
}


def repo_files(readme: str = "v1") -> dict[str, bytes]:
    return {
        "config.json": json.dumps(CONFIG, indent=2).encode() + b"\n",
        "hf_quant_config.json": QUANT_CONFIG,
        "tokenizer_config.json": json.dumps(
            {"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}
        ).encode(),
        "tokenizer.json": json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}}).encode(),
        "README.md": readme.encode(),
        "model-00001-of-00002.safetensors": save({"embed": np.arange(64, dtype=np.float32).reshape(8, 8)}),
        "model-00002-of-00002.safetensors": save({"head": np.ones((8, 4), dtype=np.float16)}),
    }


def download(repo: Repo, hf_home: Path, local_dir: Path | None = None) -> str:
    """snapshot_download with the real client in a child process; returns the path it printed."""
    with serve(repo) as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        env.update(HF_HOME=str(hf_home), HF_ENDPOINT=url, HF_HUB_DISABLE_TELEMETRY="1", NO_PROXY="127.0.0.1")
        code = (
            "import sys\nfrom huggingface_hub import snapshot_download\n"
            "local = sys.argv[2] or None\n"
            "print(snapshot_download(sys.argv[1], local_dir=local))\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code, repo.repo_id, str(local_dir or "")],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def run(*args: str | os.PathLike[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The installed `patchaudit` console script, offline (HF_HUB_OFFLINE=1), with `env` added."""
    exe = Path(sys.executable).parent / "patchaudit"
    full = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    full.update(HF_HUB_OFFLINE="1", **env)
    from report_schema import check_output

    proc = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, env=full, timeout=300)
    check_output(proc.stdout)  # every JSON report the suite writes is held to the shipped schema
    return proc
