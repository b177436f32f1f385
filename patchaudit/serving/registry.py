"""A serving framework's model registry, read from its source, never imported.

vLLM keeps `architecture -> (module, class)` tables: since 0.6 in `vllm/model_executor/models/registry.py`
(`_TEXT_GENERATION_MODELS`, ..., merged into `_VLLM_MODELS`), before that in the package's
`__init__.py` (`_MODELS`, merged from `_GENERATION_MODELS` and friends in 0.4/0.5). A module name is
relative to `vllm.model_executor.models` unless it starts with `vllm.` (0.33 keeps some models in
`vllm/models/`). SGLang names each model module's classes in `EntryClass`. A layout not recognised here
gives no registry and says why: nothing is guessed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped

VLLM_MODELS_PACKAGE = "vllm.model_executor.models"
# Where each vLLM layout keeps its tables, newest first, and the table that merges the others.
VLLM_LAYOUTS = (
    ("vllm/model_executor/models/registry.py", "_VLLM_MODELS"),
    ("vllm/model_executor/models/__init__.py", "_MODELS"),
)
SGLANG_MODELS = "sglang/srt/models/"
# Where each framework keeps its model code: where files are of unknown reach when the registry is not read.
MODEL_DIRS = {
    "vllm": ("vllm/model_executor/models/", "vllm/models/"),
    "sglang": (SGLANG_MODELS,),
}


@dataclass(frozen=True, slots=True)
class Entry:
    architecture: str
    module: str  # dotted module name
    cls: str
    where: str  # path:line of the table entry, relative to the site directory


@dataclass(frozen=True, slots=True)
class Registry:
    framework: str  # "vllm" | "sglang"
    version: str
    entries: dict[str, Entry] = field(default_factory=dict)
    problem: str | None = None  # why no entries could be read


def read_vllm(location: Path, version: str) -> Registry:
    """vLLM's architecture table, from the first layout that this version's files hold."""
    for rel, merged in VLLM_LAYOUTS:
        try:
            data = read_capped(location / rel, Cap.SOURCE)
        except UnreadableFile as exc:
            if exc.why.value == "missing":
                continue
            return Registry("vllm", version, problem=f"cannot read {rel}: {exc}")
        entries = _vllm_tables(data, rel, merged)
        if entries is None:
            continue
        return Registry("vllm", version, entries)
    where = " or ".join(rel for rel, _ in VLLM_LAYOUTS)
    return Registry("vllm", version, problem=f"vllm {version} keeps no registry table patchaudit reads in {where}")


def _vllm_tables(data: bytes, rel: str, merged: str) -> dict[str, Entry] | None:
    if f"{VLLM_MODELS_PACKAGE}.".encode() not in data:
        return None  # module names are resolved some other way than the one read here
    try:
        tree = ast.parse(data, rel)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a hostile file is no registry
        return None
    tables: dict[str, ast.Dict] = {}
    for node in tree.body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict):
            tables[target.id] = value
    if merged not in tables:
        return None
    entries: dict[str, Entry] = {}

    def take(table: ast.Dict, seen: frozenset[str]) -> None:
        for key, value in zip(table.keys, table.values, strict=True):
            if key is None:
                if isinstance(value, ast.Name) and value.id in tables and value.id not in seen:
                    take(tables[value.id], seen | {value.id})
                continue  # a comprehension copies entries listed elsewhere
            pair = _string_pair(value)
            if not isinstance(key, ast.Constant) or not isinstance(key.value, str) or pair is None:
                continue
            module, cls = pair
            name = module if module.startswith("vllm.") else f"{VLLM_MODELS_PACKAGE}.{module}"
            entries[key.value] = Entry(key.value, name, cls, f"{rel}:{key.lineno}")

    take(tables[merged], frozenset({merged}))
    return entries or None


def _string_pair(node: ast.expr) -> tuple[str, str] | None:
    if isinstance(node, ast.Tuple) and len(node.elts) == 2:
        a, b = node.elts
        if isinstance(a, ast.Constant) and isinstance(b, ast.Constant) and isinstance(a.value, str):
            return (a.value, b.value) if isinstance(b.value, str) else None
    return None


def read_sglang(location: Path, version: str, paths: list[str]) -> Registry:
    """SGLang's registry: every `sglang/srt/models/*.py` that sets `EntryClass` (a class or a list)."""
    entries: dict[str, Entry] = {}
    for rel in sorted(p for p in paths if p.startswith(SGLANG_MODELS) and p.endswith(".py")):
        try:
            data = read_capped(location / rel, Cap.SOURCE)
        except UnreadableFile:
            continue
        if b"EntryClass" not in data:
            continue
        try:
            tree = ast.parse(data, rel)
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # a hostile file is no registry
            continue
        module = rel[:-3].replace("/", ".").removesuffix(".__init__")
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and any(_named(t, "EntryClass") for t in node.targets)):
                continue
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            for value in values:
                if isinstance(value, ast.Name):
                    entries[value.id] = Entry(value.id, module, value.id, f"{rel}:{value.lineno}")
    if not entries:
        return Registry("sglang", version, problem=f"sglang {version}: no EntryClass found in {SGLANG_MODELS}")
    return Registry("sglang", version, entries)


def _named(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
