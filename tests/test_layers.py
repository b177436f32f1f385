"""The module map of DESIGN.md "Shape of the code": an import only ever points down; rules import only the rule API.

Two levels. LAYERS orders the units of patchaudit (its packages and the few modules at its top); INSIDE
orders the modules of the packages that hold several stages. A module may import its own layer and any
layer below it, at both levels; no two modules import each other, directly or round a longer loop,
beyond the loops CYCLES names. Every import counts, wherever it stands: a lazy import inside a function
and one under TYPE_CHECKING couple the modules just the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "patchaudit"

# Top to bottom: the stages a report passes through, read upwards.
LAYERS: list[set[str]] = [
    {"cli", "__main__"},
    {"render", "cluster"},  # what the CLI prints (reports, verdicts, SARIF, metrics); the cluster driver
    {"gate"},  # policy -> audit (-> baseline) -> one verdict; baselines and approvals; systemd wiring
    # procs: running processes and service environments; models: model directories; image: an image read
    # layer by layer from its blobs; serving: which drift runs for the served model (annotates a report)
    {"procs", "models", "image", "serving"},
    {"check"},  # checking bytes: RECORD/git/md5sums vs disk -> drift, facts, errata, hooks; one audit
    {"revert"},  # plan, transaction + recovery, file operations, quarantine
    # the rule engine and its worker pool, the rules' only API, what their byte filters see, analysis
    {"hazards", "rule", "filters", "analysis"},
    {"pristine"},  # where pristine bytes come from: one module per source; diffs against them
    {"target"},  # opening the target: interpreter probe, layout, --root trees, trust, metadata, RECORD, dpkg
    {"parallel"},  # the engine: worker processes, hashing on every CPU, the stat cache, CPUs, the deadline
    {"fs"},  # the one bounded read, the one descriptor walk below a root, paths in a foreign tree, atomic writes
    {"report", "errors", "__init__"},  # the data every layer shares
]
LEVEL = {name: n for n, names in enumerate(LAYERS) for name in names}

# Top to bottom inside the stage packages and pristine; every module of these packages is listed (__init__ is
# the package's own).
INSIDE: dict[str, list[set[str]]] = {
    "target": [
        {"environment", "rootfs", "__init__"},  # rootfs: an environment read from a tree that is not the host's
        {"dpkg", "cachedir", "layout"},
        {"probe", "trust", "metadata", "record", "cacheplace"},
    ],
    "check": [
        {"audit", "__init__"},
        {"verify"},
        {"hooks", "pieces", "facts", "errata", "vcs", "fingerprint"},
        {"ownership", "bytecode"},
    ],
    "parallel": [{"hashing", "__init__"}, {"statcache", "workers", "cpus", "deadline"}, {"children"}],
    "fs": [{"atomic", "__init__"}, {"safefs", "beneath"}],
    "pristine": [
        {"diff"},  # unified diffs of pristine vs installed bytes, through the package's lookups
        {"__init__"},
        {"index"},
        {"cache"},
        {"direct_url", "uvcache", "wheelhouse", "check"},
        {"http", "interface", "zipwheel"},
        {"session"},
        {"origins"},
    ],
}
INNER = {pkg: {name: n for n, names in enumerate(layers) for name in names} for pkg, layers in INSIDE.items()}
# Pairs that are downward yet kept apart: a drift source reports; it never plans a change.
APART = {("check.vcs", "revert")}
# Loops left: a package and its click group; the reader of a
# --root tree and the environment it builds; the human renderer and its serving section.
CYCLES = [
    {"patchaudit.cli", "patchaudit.cli.group"},
    {"patchaudit.target.environment", "patchaudit.target.rootfs"},
    {"patchaudit.render.human", "patchaudit.render.serving"},
]


def _unit(module: str) -> str:
    """`patchaudit.revert.plan` -> `revert`; `patchaudit` itself -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _inner(module: str) -> str:
    """`patchaudit.check.verify` -> `verify`; `patchaudit.check` -> `__init__`."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


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
            folder = ROOT.joinpath(*base.split("."))
            if base.startswith("patchaudit") and folder.is_dir():
                # `from patchaudit.check import vcs` imports the module patchaudit.check.vcs
                for alias in node.names:
                    sub = folder / alias.name
                    named = sub.is_dir() or sub.with_suffix(".py").is_file()
                    found.append((node.lineno, f"{base}.{alias.name}" if named else base))
            else:
                found.append((node.lineno, base))
    return [(line, m) for line, m in found if m == "patchaudit" or m.startswith("patchaudit.")]


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_rules" not in p.parts)


def _name(path: Path) -> str:
    """patchaudit/check/verify.py -> patchaudit.check.verify; patchaudit/check/__init__.py -> patchaudit.check."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(path: Path) -> str:
    name = _name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _module_of(module: str, known: set[str]) -> str:
    """The module an import reaches: `patchaudit.check.verify.verify` (a name in it) -> `patchaudit.check.verify`."""
    while module not in known and "." in module:
        module = module.rpartition(".")[0]
    return module


def _upward(path: Path, line: int, module: str) -> str | None:
    """Why this import points up, or None."""
    here_name = _name(path)
    here, there = _unit(here_name), _unit(module)
    if LEVEL[there] < LEVEL[here]:
        return f"{path.relative_to(ROOT)}:{line} ({here}) imports {module} ({there})"
    if any(here_name.startswith(f"patchaudit.{a}") and module.startswith(f"patchaudit.{b}") for a, b in APART):
        return f"{path.relative_to(ROOT)}:{line} ({here_name}) imports {module}, kept apart"
    inner = INNER.get(here)
    if inner is not None and there == here:
        mine, theirs = _inner(here_name), _inner(module)
        if inner[theirs] < inner[mine]:
            return f"{path.relative_to(ROOT)}:{line} ({here}/{mine}) imports {module} ({here}/{theirs})"
    return None


def _graph() -> dict[str, set[str]]:
    paths = _modules()
    known = {_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        here = _name(path)
        reached = {_module_of(m, known) for _, m in _imports(path, _package_of(path))}
        graph[here] = {m for m in reached if m in known and m != here}
    return graph


def _loops(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return loops


def test_every_module_has_a_layer() -> None:
    names = [_name(p) for p in _modules()]
    missing = sorted({_unit(n) for n in names} - set(LEVEL))
    missing += sorted(n for n in names if _unit(n) in INNER and _inner(n) not in INNER[_unit(n)])
    assert missing == [], "place the new module in LAYERS or INSIDE (and in DESIGN.md)"


def test_imports_only_point_down() -> None:
    upward = []
    for path in _modules():
        for line, module in _imports(path, _package_of(path)):
            why = _upward(path, line, module)
            if why is not None:
                upward.append(why)
    assert upward == []


def test_no_import_cycles_beyond_the_known_ones() -> None:
    loops = _loops(_graph())
    assert [sorted(c) for c in loops if c not in CYCLES] == []


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The control: the same parsing flags an import of a higher layer or a higher module, lazy or not."""
    planted = PACKAGE / "check" / "ownership.py"  # a real module's place; the file written is a stand-in
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f():\n    from patchaudit import gate\n    from patchaudit.cli.common import run\n"
        "from patchaudit.check import verify\nfrom patchaudit.fs import safefs\n"
    )
    found = _imports(probe, "patchaudit.check")
    assert sorted(m for _, m in found) == [
        "patchaudit.check.verify",
        "patchaudit.cli.common",
        "patchaudit.fs.safefs",
        "patchaudit.gate",
    ]
    flagged = sorted(m for line, m in found if _upward(planted, line, m) is not None)
    assert flagged == ["patchaudit.check.verify", "patchaudit.cli.common", "patchaudit.gate"]
    relative = tmp_path / "relative.py"
    relative.write_text("from ..revert import plan\nfrom . import verify\n")
    assert [m for _, m in _imports(relative, "patchaudit.check")] == [
        "patchaudit.revert.plan",
        "patchaudit.check.verify",
    ]


def test_the_check_catches_a_loop() -> None:
    """The control: two modules that import each other form a loop the test names."""
    graph = _graph()
    graph["patchaudit.target.probe"] = graph["patchaudit.target.probe"] | {"patchaudit.target.layout"}
    assert {"patchaudit.target.layout", "patchaudit.target.probe"} in _loops(graph)


def _rule_files() -> list[pytest.param]:
    out = []
    for path in sorted((ROOT / "rules").glob("*.py")):
        out.append(pytest.param(path, id=path.stem))
    return out


@pytest.mark.parametrize("path", _rule_files())
def test_rules_import_only_the_rule_api(path: Path) -> None:
    assert {m for _, m in _imports(path, "rules")} <= {"patchaudit.rule"}
