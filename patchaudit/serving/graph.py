"""The static import graph of one installed framework (vLLM: ~3,000 modules), built from the files' bytes.

Each module's imports come from patchaudit.serving.scanner. The graph is cached by the RECORD it was
built under: a file that verifies against RECORD holds the bytes RECORD's digest names, so its entry
stays valid while RECORD's bytes do; a drifted or added file is always read again, so a planted import
is followed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchaudit.fs.safefs import Cap, UnreadableFile, parse_json, read_capped
from patchaudit.serving.scanner import Facts, scan

CACHE_VERSION = 2
BATCHES = 16


@dataclass(frozen=True, slots=True)
class Graph:
    """Modules (dotted name -> path relative to the site directory) and what each one imports."""

    location: Path
    modules: Mapping[str, str]
    facts: Mapping[str, Facts]  # by dotted name
    unreadable: tuple[str, ...] = ()

    def path_of(self, module: str) -> str | None:
        return self.modules.get(module)


def module_name(path: str) -> tuple[str, bool] | None:
    """(dotted name, is a package) of a `.py` path relative to the site directory; None for other files."""
    if not path.endswith(".py") or "__pycache__" in path or path.startswith(("/", "../")) or "/../" in path:
        return None
    parts = path[:-3].split("/")
    if not all(p.isidentifier() for p in parts[:-1]):
        return None
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return (".".join(parts), False) if parts[-1].isidentifier() else None


def build(
    location: Path,
    paths: Iterable[str],
    *,
    changed: Iterable[str] = (),
    record: bytes = b"",
    cache_file: Path | None = None,
    workers: int = 1,
    keep: frozenset[str] = frozenset(),
) -> Graph:
    """The graph of the `.py` files among `paths` below `location`; `changed` paths are always read again.

    Imports of the top-level packages `keep` (another distribution: transformers) are kept as named.
    """
    modules: dict[str, str] = {}
    packages: dict[str, bool] = {}
    for path in paths:
        named = module_name(path)
        if named is not None:
            modules[named[0]] = path
            packages[named[0]] = named[1]
    tops = frozenset(name.partition(".")[0] for name in modules) | keep
    key = hashlib.sha256(repr(sorted(keep)).encode() + record).hexdigest() if record else ""
    cached = _load(cache_file, key) if cache_file is not None and key else {}
    fresh = set(changed)
    facts: dict[str, Facts] = {}
    todo: list[tuple[str, str, bool]] = []
    for name, path in modules.items():
        hit = cached.get(path) if path not in fresh else None
        if hit is not None:
            facts[name] = hit
        else:
            todo.append((name, path, packages[name]))
    unreadable: list[str] = []
    if todo:
        for name, result in _scan_all(location, todo, tops, workers):
            if result is None:
                unreadable.append(modules[name])
            else:  # `from a import b`: b is a module only when such a file exists
                kept = tuple(i for i in result.imports if i[0] in modules or i[0].partition(".")[0] in keep)
                facts[name] = Facts(imports=kept, registry=result.registry)
        if cache_file is not None and key:
            stored = {modules[n]: f for n, f in facts.items() if modules[n] not in fresh}
            _store(cache_file, key, stored)
    return Graph(location=location, modules=modules, facts=facts, unreadable=tuple(sorted(unreadable)))


def _scan_all(
    location: Path, todo: Sequence[tuple[str, str, bool]], tops: frozenset[str], workers: int
) -> Iterable[tuple[str, Facts | None]]:
    from patchaudit.parallel.workers import Pool

    count = max(1, min(BATCHES, len(todo) // 64))
    batches = [list(todo[n::count]) for n in range(count)]
    with Pool(_scan_batch, batches, (str(location), tops), workers=min(workers, count)) as pool:
        for index, batch in enumerate(batches):
            results = pool.result(index)
            for (name, _, _), result in zip(batch, results, strict=True):
                yield name, result


def _scan_batch(shared: tuple[str, frozenset[str]], batch: list[tuple[str, str, bool]]) -> list[Facts | None]:
    location, tops = shared
    out: list[Facts | None] = []
    for name, path, is_package in batch:
        try:
            data = read_capped(os.path.join(location, path), Cap.SOURCE)
        except UnreadableFile:
            out.append(None)
            continue
        out.append(scan(data, name, is_package, tops))
    return out


def _load(cache_file: Path, key: str) -> dict[str, Facts]:
    try:
        raw = parse_json(read_capped(cache_file, Cap.JSON))
    except (UnreadableFile, ValueError):
        return {}
    if not isinstance(raw, dict) or raw.get("version") != CACHE_VERSION or raw.get("record") != key:
        return {}
    entries = raw.get("modules")
    if not isinstance(entries, dict):
        return {}
    out: dict[str, Facts] = {}
    for path, data in entries.items():
        try:
            out[path] = Facts.from_list(data)
        except ValueError:
            return {}
    return out


def _store(cache_file: Path, key: str, facts: Mapping[str, Facts]) -> None:
    from patchaudit.fs.atomic import atomic_write

    data = {"version": CACHE_VERSION, "record": key, "modules": {p: f.to_list() for p, f in sorted(facts.items())}}
    with contextlib.suppress(OSError):  # a cache that cannot be written costs time, never a verdict
        atomic_write(cache_file, json.dumps(data, separators=(",", ":")), mode=0o600, durable=False)
