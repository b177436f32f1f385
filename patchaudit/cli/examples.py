"""The examples that end every command's --help: real command lines an operator runs as printed
(tests/test_cli_grammar.py parses each against its command)."""

from __future__ import annotations

VENV = "--python /srv/vllm/bin/python"
POLICY = "--policy /etc/patchaudit/vllm.toml"

EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (
        f"patchaudit scan {VENV}",
        f"patchaudit diff vllm {VENV}",
        "patchaudit --version",
    ),
    "scan": (
        f"patchaudit scan {VENV}",
        f"patchaudit scan vllm torch {VENV} --serve /models/Kimi-K2.5",
        "patchaudit scan --image oci:img:derived --base oci:img:base --format json --out report.json",
    ),
    "gate": (
        f"patchaudit gate {POLICY}",
        f"patchaudit gate vllm {VENV} --serve auto --timeout 60",
        f"patchaudit gate {POLICY} -- vllm serve /models/Kimi-K2.5",
    ),
    "diff": (
        f"patchaudit diff vllm {VENV}",
        f"patchaudit diff vllm vllm/config/model.py {VENV} > model.patch",
        "patchaudit diff vllm --image oci-archive:vllm.tar",
    ),
    "revert": (
        f"patchaudit revert vllm {VENV} --dry-run",
        f"patchaudit revert vllm vllm/config/model.py {VENV} --yes",
        f"patchaudit revert {VENV} --wheelhouse /srv/wheels --yes",
    ),
    "ps": (
        "patchaudit ps",
        "patchaudit ps --unit vllm.service --serve auto",
        f"patchaudit ps {VENV} --format json",
    ),
    "errata": (
        "patchaudit errata --list",
        "patchaudit errata pynvvideocodec-2.0.4-cp312-cp312-manylinux_2_28_x86_64.whl --out wheels.errata.toml",
    ),
    "metrics": (
        f"patchaudit metrics --textfile /var/lib/prometheus/node-exporter {VENV}",
        f"patchaudit metrics --textfile /var/lib/prometheus/node-exporter {POLICY} --name vllm",
    ),
    "baseline": (
        f"patchaudit baseline create {VENV} --out /etc/patchaudit/vllm.baseline.json",
        "patchaudit baseline check /etc/patchaudit/vllm.baseline.json",
    ),
    "baseline create": (
        f"patchaudit baseline create {VENV} --out /etc/patchaudit/vllm.baseline.json",
        f"patchaudit baseline create vllm {VENV} --out vllm.baseline.json --unit vllm.service",
        "patchaudit baseline create --model /srv/models/copied-ckpt",
    ),
    "baseline check": (
        "patchaudit baseline check /etc/patchaudit/vllm.baseline.json",
        "patchaudit baseline check vllm.baseline.json vllm --format json",
    ),
    "baseline accept": (
        "patchaudit baseline accept vllm.baseline.json vllm/config/model.py --reason 'GLM-5 rope fix'",
        "patchaudit baseline accept vllm.baseline.json vllm/models/glm.py --reason 'other model' --serve /models/Kimi",
    ),
    "systemd": (
        f"patchaudit systemd install vllm {POLICY}",
        "patchaudit systemd uninstall vllm",
    ),
    "systemd install": (
        f"patchaudit systemd install vllm {POLICY}",
        f"patchaudit systemd install vllm {POLICY} --timer --interval 5min",
        f"patchaudit systemd install vllm {POLICY} --warn-only --root /mnt/image",
    ),
    "systemd uninstall": (
        "patchaudit systemd uninstall vllm",
        "patchaudit systemd uninstall vllm --root /mnt/image",
    ),
    "quarantine": (
        f"patchaudit quarantine list {VENV}",
        f"patchaudit quarantine restore last {VENV} --dry-run",
    ),
    "quarantine list": (
        f"patchaudit quarantine list {VENV}",
        f"patchaudit quarantine list {VENV} --format json",
    ),
    "quarantine restore": (
        f"patchaudit quarantine restore last {VENV} --dry-run",
        f"patchaudit quarantine restore 20261204T064012Z-vllm-1a2b3c {VENV} --yes",
    ),
    "rules": (
        "patchaudit rules list",
        "patchaudit rules explain torch-save",
    ),
    "rules list": (
        "patchaudit rules list",
        "patchaudit rules list --rules ./my-rules",
        "patchaudit rules list --format markdown --out docs/rules.md",
    ),
    "rules explain": (
        "patchaudit rules explain torch-save",
        "patchaudit rules explain config-rope",
    ),
    "rules test": (
        "patchaudit rules test",
        "patchaudit rules test ./my-rules",
    ),
    "model": (
        "patchaudit model scan Qwen/Qwen3-8B-FP8",
        "patchaudit model revert Qwen/Qwen3-8B-FP8 --dry-run",
    ),
    "model scan": (
        "patchaudit model scan Qwen/Qwen3-8B-FP8",
        "patchaudit model scan Qwen/Qwen3-8B-FP8 --hub-cache /data/hf/hub --revision main",
        "patchaudit model scan /srv/models/copied-ckpt --format json --out model.json",
    ),
    "model diff": (
        "patchaudit model diff Qwen/Qwen3-8B-FP8",
        "patchaudit model diff Qwen/Qwen3-8B-FP8 config.json",
    ),
    "model revert": (
        "patchaudit model revert Qwen/Qwen3-8B-FP8 --dry-run",
        "patchaudit model revert Qwen/Qwen3-8B-FP8 --source /mnt/mirror/hub --yes",
    ),
    "cluster": (
        f"patchaudit cluster scan {VENV}",
        f"patchaudit cluster gate --address 10.0.0.1:6379 {POLICY}",
    ),
    "cluster scan": (
        f"patchaudit cluster scan {VENV}",
        "patchaudit cluster scan --address 10.0.0.1:6379 --format json --out cluster.json",
    ),
    "cluster gate": (
        f"patchaudit cluster gate --address 10.0.0.1:6379 {POLICY} --timeout 60",
        f"patchaudit cluster gate {VENV} --fail-on medium",
    ),
}


def examples(command: str) -> str:
    """The epilog of `patchaudit COMMAND --help`: its examples, one a line, never rewrapped."""
    lines = "\n".join(f"  {line}" for line in EXAMPLES[command])
    return f"Examples:\n\n\b\n{lines}"
