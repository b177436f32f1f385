"""The import scanner is a shortcut for `ast`: on the same files both must find the same imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from serving_helpers import FILES

from patchaudit.serving.graph import module_name
from patchaudit.serving.scanner import scan

ROOT = Path(__file__).resolve().parents[1]


def reference(source: bytes, module: str, is_package: bool, tops: frozenset[str]) -> set[tuple[str, int]]:
    """Every import a full parse finds, outside `if TYPE_CHECKING:` bodies, as the scanner names them."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            hidden |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found: set[tuple[str, int]] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            found |= {(a.name, node.lineno) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            found.add((base, node.lineno))
            found |= {(f"{base}.{a.name}", node.lineno) for a in node.names if a.name != "*"}
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and not node.args[0].value.startswith(".")
        ):
            found.add((node.args[0].value, node.lineno))
    return {(name, line) for name, line in found if name.partition(".")[0] in tops}


def corpus() -> list[tuple[str, bytes]]:
    files = [(p.relative_to(ROOT).as_posix(), p.read_bytes()) for p in sorted((ROOT / "patchaudit").rglob("*.py"))]
    return files + [(path, text.encode()) for path, text in FILES.items()]


@pytest.mark.parametrize("tops", [frozenset({"patchaudit"}), frozenset({"vllm"})])
def test_scanner_finds_what_ast_finds(tops: frozenset[str]) -> None:
    checked = 0
    for path, source in corpus():
        named = module_name(path)
        assert named is not None
        module, is_package = named
        found = set(scan(source, module, is_package, tops).imports)
        assert found == reference(source, module, is_package, tops), path
        checked += bool(found)
    assert checked > (20 if "patchaudit" in tops else 5)


def test_docstrings_type_checking_and_registry_calls() -> None:
    source = FILES["vllm/model_executor/models/kimi_k25.py"].encode()
    facts = scan(source, "vllm.model_executor.models.kimi_k25", False, frozenset({"vllm"}))
    names = {name for name, _ in facts.imports}
    assert "vllm.model_executor.models.glm4_moe" not in names  # docstring and TYPE_CHECKING only
    assert "vllm.model_executor.models.utils.init_vllm_registered_model" in names  # multi-line, relative
    ((arch, line),) = facts.registry
    assert arch == "DeepseekV2ForCausalLM"
    assert 'architectures=["DeepseekV2ForCausalLM"]' in source.decode().splitlines()[line - 1]
