"""Options the one grammar added where a command lacked them: `cluster --fail-on`, `errata --out`,
`rules list --out`, and what `--version` names."""

from __future__ import annotations

import json
from pathlib import Path

from wheels import build_wheel, make_venv, patchaudit, pip_install, site_packages

from patchaudit.cli.cluster import _node_args


def test_cluster_fail_on_sets_the_threshold_on_every_node(tmp_path: Path) -> None:
    """A node's verdict counts a medium finding only when told --fail-on medium (the policy says high)."""
    source = "def load():\n    return 1\n"
    wheel = build_wheel(tmp_path / "wh", "demo", "1.0", {"demo/__init__.py": "", "demo/mod.py": source})
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    patched = "import os\n\n\ndef load():\n    os.environ['NCCL_P2P_LEVEL'] = 'NVL'\n    return 1\n"
    (site_packages(python) / "demo" / "mod.py").write_text(patched)

    def problems(*args: str) -> list[str]:
        proc = patchaudit("cluster", "node", "demo", "--python", python, *args)
        assert proc.returncode == 1, proc.stderr
        return [p[0] for p in json.loads(proc.stdout)["verdict"]["problems"]]

    assert problems() == ["modified"]
    assert problems("--fail-on", "medium") == ["modified", "finding"]
    assert _node_args(("demo",), None, None, None, "medium") == ["demo", "--fail-on", "medium"]
    assert _node_args(("demo",), None, None, None, None) == ["demo"]  # a node's own policy decides


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
    from patchaudit import errata as shipped
    from patchaudit.hazards import load_rules, pack_version

    proc = patchaudit("--version")
    assert proc.returncode == 0, proc.stderr
    first, rules, errata = proc.stdout.splitlines()
    assert first == f"patchaudit {__version__}"
    # the rule pack's version is the one a scan's report carries as run.rules (patchaudit.audit)
    pack = load_rules()
    assert rules.startswith(f"rule pack {pack_version(pack)[:16]} ({len(pack)} code rules, ")
    wheels = len({e.wheel for e in shipped.shipped()})
    assert errata == f"errata {shipped.digest()} ({wheels} wheels, {len(shipped.shipped())} members)"
