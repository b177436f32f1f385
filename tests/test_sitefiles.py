"""What `ps` reads of an environment without a process: RECORD paths (fast path held to the parser),
change times, and the variables startup hooks set."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from wheels import build_wheel, make_venv, pip_install, site_packages

from patchaudit.procs.hookenv import hook_settings
from patchaudit.procs.serviceenv import effective
from patchaudit.procs.sitefiles import load_site
from patchaudit.target.record import parse_record, record_paths


def test_record_paths_equal_the_parsers_on_every_real_record() -> None:
    """The hash-free fast path lists exactly the paths `parse_record` accepts, on pip-written RECORDs."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    records = list(site.glob("*.dist-info/RECORD"))
    assert len(records) > 10
    for record in records:
        data = record.read_bytes()
        assert record_paths(data) == [e.path for e in parse_record(data).entries], record
    quoted = b'"a,b.py",sha256=AAAA,3\nplain.py,,\n\n'
    assert record_paths(quoted) == ["a,b.py", "plain.py"]


def test_change_times_of_tracked_files(tmp_path: Path) -> None:
    wheel = build_wheel(
        tmp_path / "w",
        "demo",
        "1.0",
        {
            "demo/__init__.py": "",
            "demo/a.py": "A = 1\n",
            "demo/b.py": "B = 1\n",
            "demo/__pycache__/b.cpython-311.pyc": b"\0" * 16,
            "demo/__pycache__/orphan.cpython-311.pyc": b"\0" * 16,
        },
    )
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel, extra=("--no-compile",))
    site = site_packages(python)
    before = time.time_ns()
    time.sleep(0.02)
    (site / "demo/a.py").write_text("A = 2\n")
    os.utime(site / "demo/__pycache__/orphan.cpython-311.pyc")
    os.utime(site / "demo/__pycache__/b.cpython-311.pyc")
    files = load_site(str(site))
    changed = {os.path.relpath(p, site) for p, _, _ in files.changed_after(before)}
    # an edited module, and bytecode with no listed source, are seen; bytecode of a listed source is
    # rewritten from it, so only its source is looked at
    assert changed == {"demo/a.py", "demo/__pycache__/orphan.cpython-311.pyc"}
    assert files.runs == ()  # no quarantine in this environment


def test_startup_hooks_that_set_the_environment(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "a_hotfix.pth").write_text(
        "/opt/extra\nimport os; os.environ['VLLM_ATTENTION_BACKEND'] = 'FLASHMLA'\n"
        "import os; os.environ.setdefault('NCCL_P2P_LEVEL', 'NVL'); os.putenv('HF_HUB_OFFLINE', '1')\n"
    )
    (site / "sitecustomize.py").write_text(
        "import os\nfrom os import environ\n\n"
        "environ.update({'VLLM_USE_V1': '0'}, TORCH_LOGS='+dynamo')\n"
        "os.environ.setdefault('VLLM_ATTENTION_BACKEND', 'FLASH_ATTN')  # already set by the .pth\n"
        "os.environ['CUDA_HOME'] = os.path.join('/opt', 'cuda')\n"
        "os.environ['UNRELATED'] = 'x'\n"
    )
    settings = hook_settings([str(site)])
    got = {n: (v.value, v.where.rsplit("/", 1)[-1]) for n, v in effective(settings).items()}
    assert got == {
        "VLLM_ATTENTION_BACKEND": ("FLASHMLA", "a_hotfix.pth:2"),
        "NCCL_P2P_LEVEL": ("NVL", "a_hotfix.pth:3"),
        "HF_HUB_OFFLINE": ("1", "a_hotfix.pth:3"),
        "VLLM_USE_V1": ("0", "sitecustomize.py:4"),
        "TORCH_LOGS": ("+dynamo", "sitecustomize.py:4"),
        "CUDA_HOME": ("<computed: os.path.join('/opt', 'cuda')>", "sitecustomize.py:6"),
    }
