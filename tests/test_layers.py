"""The module map of DESIGN.md "Shape of the code": an import only ever points down; rules import only the rule API.

Every import counts, wherever it stands: a lazy import inside a function and one under TYPE_CHECKING couple
the modules just the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "patchaudit"

# Top to bottom. A module may import its own layer and any layer below it.
LAYERS: list[set[str]] = [
    {"cli", "__main__"},
    {"render", "cluster"},  # what the CLI prints (reports, verdicts, SARIF, metrics); the cluster driver
    {"gate", "baseline", "systemd"},
    # procs: running processes and service environments; models: model directories; image: an image read
    # layer by layer from its blobs; serving: which drift runs for the served model (registry + static
    # import graph, annotating a report)
    {"audit", "procs", "models", "image", "serving"},
    # facts: packaging facts (overwritten, regenerated) beside drift; errata: wheels known to ship a wrong RECORD
    # ownership: who owns which file, and added files; hooks: startup hooks nobody owns; pieces: what a
    # worker checks of a RECORD
    {"verify", "vcs", "fingerprint", "facts", "errata", "ownership", "hooks", "pieces"},
    {"revert", "diff"},
    {"hazards", "rule", "analysis", "hazardpool"},  # the engine, the rule API and analysis; the worker pool
    {"pristine"},
    {"bytecode"},
    {"hashing", "record", "environment", "policy", "atomic", "layout", "probe", "trust", "metadata", "dpkg"}
    | {"cpus", "lines", "cachedir", "statcache", "workers"}
    | {"rootfs"},  # rootfs: an environment read from a tree that is not the host's (--root)
    # safefs: the one bounded, typed read of a target's files; deadline: a run's --timeout; chase: paths
    # inside a tree that is not the host's, resolved against its root; beneath: the one way to write
    # below a target (descriptor walks)
    {"safefs", "deadline", "chase", "beneath"},
    {"report", "errors", "__init__"},
]
LEVEL = {name: n for n, names in enumerate(LAYERS) for name in names}
# Pairs that are downward yet kept apart: a drift source reports; it never plans a change.
APART = {("vcs", "revert")}


def _unit(module: str) -> str:
    """`patchaudit.revert.plan` -> `revert`; `patchaudit` itself -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every patchaudit import in `path`, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base == "patchaudit":
                # `from patchaudit.check import vcs` imports the module patchaudit.check.vcs
                for alias in node.names:
                    sub = PACKAGE / alias.name
                    named = sub.is_dir() or sub.with_suffix(".py").is_file()
                    found.append((node.lineno, f"patchaudit.{alias.name}" if named else "patchaudit"))
            else:
                found.append((node.lineno, base))
    return [(line, m) for line, m in found if m == "patchaudit" or m.startswith("patchaudit.")]


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_rules" not in p.parts)


def _package_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        return ".".join(parts)
    return ".".join(parts[:-1])


def test_every_module_has_a_layer() -> None:
    units = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in _modules()}
    assert sorted(units - set(LEVEL)) == [], "place the new module in LAYERS (and in DESIGN.md)"


def test_imports_only_point_down() -> None:
    upward = []
    for path in _modules():
        here = _unit("patchaudit." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts))
        for line, module in _imports(path, _package_of(path)):
            there = _unit(module)
            if LEVEL[there] < LEVEL[here] or (here, there) in APART:
                upward.append(f"{path.relative_to(ROOT)}:{line} ({here}) imports {module} ({there})")
    assert upward == []


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The control: the same parsing flags an import of a higher layer, lazy or not."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from patchaudit import gate\n    from patchaudit.cli.common import run\n")
    assert [m for _, m in _imports(probe, "patchaudit")] == ["patchaudit.gate", "patchaudit.cli.common"]
    assert all(LEVEL[_unit(m)] < LEVEL["revert"] for _, m in _imports(probe, "patchaudit"))
    relative = tmp_path / "relative.py"
    relative.write_text("from ..revert import plan\nfrom . import model\n")
    assert [m for _, m in _imports(relative, "patchaudit.check.vcs")] == ["patchaudit.revert", "patchaudit.check.vcs"]


def _rule_files() -> list[pytest.param]:
    out = []
    for path in sorted((ROOT / "rules").glob("*.py")):
        out.append(pytest.param(path, id=path.stem))
    return out


@pytest.mark.parametrize("path", _rule_files())
def test_rules_import_only_the_rule_api(path: Path) -> None:
    assert {m for _, m in _imports(path, "rules")} <= {"patchaudit.rule"}
