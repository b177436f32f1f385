"""Options the one grammar added where a command lacked them: `cluster --fail-on`, `errata --out`,
`rules list --out`, and what `--version` names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, patchaudit, pip_install, site_packages

from patchaudit.cli.cluster import _node_args


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv whose `demo` holds a patch with a medium finding (env-mutation, in a module that set a
    variable already) and no high one."""
    root = tmp_path_factory.mktemp("options")
    source = "import os\n\n\ndef load():\n    os.environ.setdefault('NCCL_P2P_LEVEL', 'SYS')\n    return 1\n"
    wheel = build_wheel(root / "wh", "demo", "1.0", {"demo/__init__.py": "", "demo/mod.py": source})
    python = make_venv(root / "venv")
    pip_install(python, wheel)
    patch = "import os\n\n\ndef load():\n    os.environ['NCCL_P2P_LEVEL'] = 'NVL'\n    return 1\n"
    (site_packages(python) / "demo" / "mod.py").write_text(patch)
    return python


def test_cluster_fail_on_sets_the_threshold_on_every_node(patched: Path) -> None:
    """A node's verdict counts a medium finding only when told --fail-on medium (the policy says high)."""
    python = patched

    def problems(*args: str) -> list[str]:
        proc = patchaudit("cluster", "node", "demo", "--python", python, *args)
        assert proc.returncode == 1, proc.stderr
        return [p[0] for p in json.loads(proc.stdout)["verdict"]["problems"]]

    assert problems() == ["modified"]
    assert problems("--fail-on", "medium") == ["modified", "finding"]
    assert _node_args(("demo",), None, None, None, "medium") == ["demo", "--fail-on", "medium"]
    assert _node_args(("demo",), None, None, None, None) == ["demo"]  # a node's own policy decides


def test_gate_and_baseline_check_write_to_out(patched: Path, tmp_path: Path) -> None:
    """gate --out (also on its click-free fast path) and baseline check --out write what stdout would
    show; the exit code is the verdict's either way. baseline check --fail-on moves its threshold."""
    shown = patchaudit("gate", "demo", "--python", patched, "--no-cache")
    out = tmp_path / "gate.txt"
    written = patchaudit("gate", "demo", "--python", patched, "--no-cache", "--out", out)
    assert shown.returncode == written.returncode == 1 and written.stdout == ""
    assert out.read_text().splitlines()[:-1] == shown.stdout.splitlines()[:-1]  # the last line has the time
    assert out.read_text().splitlines()[-1].startswith("patchaudit gate: FAIL: 1 modified; ")
    prom = tmp_path / "gate.prom"
    assert patchaudit("gate", "demo", "--python", patched, "--format", "prometheus", "--out", prom).returncode == 1
    assert "patchaudit_gate_ok" in prom.read_text()
    unwritable = patchaudit("gate", "demo", "--python", patched, "--out", tmp_path / "no" / "such" / "dir")
    assert unwritable.returncode == 2 and unwritable.stderr.startswith("patchaudit: error: cannot write ")

    held = tmp_path / "baseline.json"
    assert patchaudit("baseline", "create", "demo", "--python", patched, "--out", held).returncode == 0
    default = patchaudit("baseline", "check", held, "--python", patched)
    medium = patchaudit("baseline", "check", held, "--python", patched, "--fail-on", "medium")
    assert default.returncode == medium.returncode == 1
    assert "env-mutation" not in default.stdout and "medium env-mutation" in medium.stdout
    report = tmp_path / "check.json"
    assert patchaudit("baseline", "check", held, "--python", patched, "--format", "json", "--out", report).returncode
    assert json.loads(report.read_text())["schema"] == "patchaudit/report/v1"


def test_errata_and_rules_list_write_to_out(tmp_path: Path) -> None:
    listed = patchaudit("errata", "--list")
    out = tmp_path / "errata.txt"
    written = patchaudit("errata", "--list", "--out", out)
    assert written.returncode == 0 and written.stdout == ""
    assert out.read_text() == listed.stdout

    rules = tmp_path / "rules.md"
    assert patchaudit("rules", "list", "--format", "markdown", "--out", rules).returncode == 0
    assert rules.read_text() == (Path(__file__).resolve().parent.parent / "docs" / "rules.md").read_text()


def test_version_names_the_rule_pack_and_the_errata() -> None:
    from patchaudit import __version__
    from patchaudit.check import errata as shipped
    from patchaudit.hazards import load_rules, pack_version

    proc = patchaudit("--version")
    assert proc.returncode == 0, proc.stderr
    first, rules, errata = proc.stdout.splitlines()
    assert first == f"patchaudit {__version__}"
    # the rule pack's version is the one a scan's report carries as run.rules (patchaudit.check.audit)
    pack = load_rules()
    assert rules.startswith(f"rule pack {pack_version(pack)[:16]} ({len(pack)} code rules, ")
    wheels = len({e.wheel for e in shipped.shipped()})
    assert errata == f"errata {shipped.digest()} ({wheels} wheels, {len(shipped.shipped())} members)"
