"""The Ray task: run this node's patchaudit and hand back its JSON. Standard library only, so it can
be shipped by value to workers whose Python does not import patchaudit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

# Per-node settings, read on the node: which environment to audit and which patchaudit to run.
NODE_PYTHON_ENV = "PATCHAUDIT_PYTHON"
NODE_COMMAND_ENV = "PATCHAUDIT_COMMAND"


def node_command() -> list[str]:
    configured = os.environ.get(NODE_COMMAND_ENV)
    if configured:
        return [configured]
    found = shutil.which("patchaudit")
    if found:
        return [found]
    return [sys.executable, "-m", "patchaudit"]


def run_node(args: list[str], timeout: float) -> dict[str, Any]:
    """`patchaudit cluster node ARGS` on this node; never raises (errors come back as values)."""
    import socket

    argv = [*node_command(), "cluster", "node", *args]
    if "--python" not in args and "--path" not in args and os.environ.get(NODE_PYTHON_ENV):
        argv += ["--python", os.environ[NODE_PYTHON_ENV]]
    host = socket.gethostname()
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=max(timeout, 1.0), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        # the node's own deadline: what the driver calls a timeout when it fires first, so the same
        return {"host": host, "timeout": f"patchaudit ran past {timeout:.0f}s on this node"}
    except OSError as exc:
        return {"host": host, "error": f"cannot run {argv[0]}: {exc.strerror or exc}"}
    if proc.returncode not in (0, 1):
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit {proc.returncode}"]
        return {"host": host, "error": lines[-1]}
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        return {"host": host, "error": "patchaudit on this node printed no JSON"}
    data["host"] = host
    return dict(data)
