"""Which names run of each changed model file that the walk loads only through shared code.

The names come from patchaudit.serving.names; this module gathers what it reads: the file and the
modules of the walk that import it (and, through other model files loaded the same way, it), the
strings of the walk's code that name such a module (a lookup by name: every name of it counts), and
the file's changed lines against pristine bytes from the local sources.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped
from patchaudit.report import DistReport, Drift, DriftState
from patchaudit.serving.graph import Graph, module_name
from patchaudit.serving.names import NameReach, Source, name_reach
from patchaudit.serving.reach import Walk
from patchaudit.serving.registry import VLLM_LAYOUTS
from patchaudit.target.environment import Environment, InstalledDist

# changed file -> (which of its names run, its changed lines; None: no pristine bytes to tell them)
Names = dict[str, tuple[NameReach, tuple[int, ...] | None]]


def loaded_names(
    env: Environment,
    framework: InstalledDist,
    dist: DistReport,
    graph: Graph,
    steps: Walk,
    roots: tuple[str, ...],
    wheelhouse: tuple[Path, ...] = (),
) -> Names:
    """For each modified model file that the walk loads only through shared code: which of its names run,
    from the importers the walk loads, and its changed lines against pristine bytes (None: none found)."""
    loaded: dict[str, str] = {}
    for drift in dist.drift:
        named = module_name(drift.path)
        modified = drift.state is DriftState.MODIFIED and drift.path.startswith(roots)
        if modified and named is not None and named[0] in steps.parents and named[0] not in steps.core:
            loaded[drift.path] = named[0]
    if not loaded:
        return {}
    pristine = _pristine(env, framework, [d for d in dist.drift if d.path in loaded], wheelhouse)
    importers: dict[str, list[str]] = {}
    for module in steps.parents:
        for name, _ in graph.facts[module].imports if module in graph.facts else ():
            if name != module and module not in importers.get(name, ()):
                importers.setdefault(name, []).append(module)
    sources: dict[str, Source] = {}

    def source(module: str) -> Source:
        if module not in sources:
            path = graph.modules[module]
            partial = path.startswith(roots) and module not in steps.core
            data = read_capped(framework.location / path, Cap.SOURCE)
            sources[module] = Source(module, path, path.endswith("/__init__.py"), data, partial)
        return sources[module]

    out: Names = {}
    groups: dict[str, list[str]] = {}
    for path, module in loaded.items():
        try:
            source(module)
            group = groups[path] = [module]
            for m in group:
                group += [i for i in importers.get(m, ()) if source(i).partial and i not in group]
        except UnreadableFile as exc:
            out[path] = (NameReach(everything=f"cannot be read ({exc.why.value})"), None)
    strings = _named_in_strings(framework.location, graph, steps, {m for g in groups.values() for m in g})
    for path, group in groups.items():
        if path in out:
            continue
        installed = sources[group[0]].data
        before = pristine.get(path)
        changed = tuple(sorted(_changed(installed, before))) if before is not None else None
        out[path] = (name_reach(group[0], sources, importers, strings), changed)
    return out


def _named_in_strings(location: Path, graph: Graph, steps: Walk, modules: set[str]) -> dict[str, str]:
    """Modules that a string of the walk's code names ("pkg.mod" or "pkg.mod.Name", a lookup by name),
    each with the first place; the registry's tables are read as tables and left out."""
    if not modules:
        return {}
    names = b"|".join(re.escape(m.encode()) for m in sorted(modules, key=len, reverse=True))
    pattern = re.compile(rb"['\"](" + names + rb")(?:\.\w+)*['\"]")
    tables = {rel for rel, _ in VLLM_LAYOUTS}
    plain = [m.encode() for m in modules]
    found: dict[str, str] = {}
    for module in steps.parents:
        path = graph.modules.get(module)
        if path is None or path in tables:
            continue
        try:
            data = read_capped(location / path, Cap.SOURCE)
        except UnreadableFile:
            continue
        if not any(name in data for name in plain):  # most files name none of them: skip the regex
            continue
        for match in pattern.finditer(data):
            line = data.count(b"\n", 0, match.start()) + 1
            found.setdefault(match.group(1).decode(), f"{path}:{line} names it in a string")
    return found


def _changed(installed: bytes, pristine: bytes) -> set[int]:
    from patchaudit.hazards.changes import changed_lines, decode

    return changed_lines(decode(installed), decode(pristine))


def _pristine(
    env: Environment, framework: InstalledDist, drift: Sequence[Drift], wheelhouse: tuple[Path, ...]
) -> dict[str, bytes]:
    """Pristine bytes of `drift` from local sources (a wheelhouse, the installers' caches), or none."""
    from patchaudit.errors import PatchAuditError
    from patchaudit.pristine import find_pristine

    try:
        found = find_pristine(env, framework, drift=drift, wheelhouse=wheelhouse, offline=True)
    except PatchAuditError:
        return {}
    return {path: f.data for path, f in found.files.items()}
