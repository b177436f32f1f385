"""Which files run for a served model: its architectures through the framework's registry, then imports.

From each architecture's module the walk follows static imports (a module's packages run first) and
the framework's own indirection, `init_vllm_registered_model(..., architectures=[...])`, like an import.
Architectures of nested configs (`text_config`, ...) are followed last, so a chain through the wrapper's
own code is the one shown.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from patchaudit.report import Reach, ReachClass
from patchaudit.serving.config import ServedModel
from patchaudit.serving.graph import Graph, module_name
from patchaudit.serving.names import NameReach
from patchaudit.serving.registry import Registry

# module -> (the module it was reached from, the step: "path:line what")
Parents = dict[str, tuple[str | None, str]]


@dataclass(frozen=True, slots=True)
class Walk:
    """The modules that run for a model, each with the step that reached it."""

    parents: Parents = field(default_factory=dict)
    resolved: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = ()
    external: Parents = field(default_factory=dict)  # modules of other distributions the walk imports
    core: Parents = field(default_factory=dict)  # reached without leaving the model directories

    def imported(self, module: str) -> tuple[str, ...] | None:
        """The chain to a module of another distribution (transformers) that the walk imports."""
        found = self.external.get(module)
        if found is None:
            return None
        prev, step = found
        return (*self.via(prev), step) if prev is not None else (step,)

    def to_dict(self) -> dict[str, object]:
        return {
            "parents": {m: [p, s] for m, (p, s) in self.parents.items()},
            "external": {m: [p, s] for m, (p, s) in self.external.items()},
            "core": {m: [p, s] for m, (p, s) in self.core.items()},
            "resolved": list(self.resolved),
            "unresolved": list(self.unresolved),
        }

    @classmethod
    def from_dict(cls, data: object) -> Walk:
        """Typed back from a cache file; anything malformed raises ValueError."""
        if not isinstance(data, dict):
            raise ValueError("walk")
        tables: list[Parents] = []
        for name in ("parents", "external", "core"):
            table = data.get(name)
            if not isinstance(table, dict):
                raise ValueError("walk")
            parents: Parents = {}
            for module, item in table.items():
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], str)):
                    raise ValueError("walk")
                if item[0] is not None and not isinstance(item[0], str):
                    raise ValueError("walk")
                parents[module] = (item[0], item[1])
            tables.append(parents)
        lists = [data.get("resolved"), data.get("unresolved")]
        if not all(isinstance(x, list) and all(isinstance(i, str) for i in x) for x in lists):
            raise ValueError("walk")
        return cls(
            parents=tables[0],
            resolved=tuple(data["resolved"]),
            unresolved=tuple(data["unresolved"]),
            external=tables[1],
            core=tables[2],
        )

    def via(self, module: str, table: Parents | None = None) -> tuple[str, ...]:
        table = self.parents if table is None else table
        steps: list[str] = []
        at: str | None = module
        while at is not None and len(steps) < 1000:
            prev, step = table[at]
            steps.append(step)
            at = prev
        return tuple(reversed(steps))


def walk(model: ServedModel, registry: Registry, graph: Graph, roots: tuple[str, ...] = ()) -> Walk:
    """Every module that runs for the model; `core`: those reached without leaving the model directories
    `roots` (the model's own code and what it builds through the registry)."""
    core = _bfs(model, registry, graph, roots)
    full = _bfs(model, registry, graph, None)
    return Walk(
        parents=full.parents,
        resolved=full.resolved,
        unresolved=full.unresolved,
        external=full.external,
        core=core.parents,
    )


def _bfs(model: ServedModel, registry: Registry, graph: Graph, within: tuple[str, ...] | None) -> Walk:
    parents: Parents = {}
    external: Parents = {}
    queue: deque[str] = deque()
    resolved: list[str] = []
    unresolved: list[str] = []

    def reach(module: str, prev: str | None, step: str) -> None:
        if module in parents or module not in graph.modules:
            return
        if within is not None and not graph.modules[module].startswith(within):
            return
        parents[module] = (prev, step)
        queue.append(module)

    def through_registry(arch: str, prev: str | None, step: str | None) -> bool:
        entry = registry.entries.get(arch)
        if entry is None or entry.module not in graph.modules:
            return False
        if step is not None and entry.module not in parents:
            # the call site, then the registry's table line: two real lines
            parents.setdefault(f"\0{arch}@{prev}", (prev, step))
            prev = f"\0{arch}@{prev}"
        reach(entry.module, prev, f"{entry.where} {arch} -> {entry.module}")
        return True

    def drain() -> None:
        while queue:
            module = queue.popleft()
            path = graph.modules[module]
            parts = module.split(".")
            for n in range(1, len(parts)):
                package = ".".join(parts[:n])
                init = graph.modules.get(package)
                if init is not None:
                    reach(package, module, f"{init}:1 package of {module}")
            facts = graph.facts.get(module)
            if facts is None:
                continue
            for name, line in facts.imports:
                if name in graph.modules:
                    reach(name, module, f"{path}:{line} import {name}")
                else:
                    external.setdefault(name, (module, f"{path}:{line} import {name}"))
            for arch, line in facts.registry:
                through_registry(arch, module, f"{path}:{line} init_vllm_registered_model(architectures=[{arch!r}])")

    for arch in model.architectures:
        if through_registry(arch, None, None):
            entry = registry.entries[arch]
            resolved.append(f"{arch} -> {entry.module} ({entry.where})")
        else:
            unresolved.append(arch)
    drain()
    for key, arch in model.nested:
        nested = registry.entries.get(arch)
        if nested is not None and through_registry(arch, None, None):
            resolved.append(f"{key}: {arch} -> {nested.module} ({nested.where})")
        drain()
    clean = {m: p for m, p in parents.items() if not m.startswith("\0")}
    links = {m: p for m, p in parents.items() if m.startswith("\0")}
    return Walk(parents={**clean, **links}, resolved=tuple(resolved), unresolved=tuple(unresolved), external=external)


@dataclass(frozen=True, slots=True)
class Classifier:
    """Reach of a path of the framework's distribution; every other distribution's code is shared."""

    walk: Walk
    model_roots: tuple[str, ...]  # directories of the registry's model modules ("vllm/model_executor/models/")
    unknown_why: str | None  # set when no top-level architecture resolved or the registry was not read
    # a model file loaded through shared code: which of its names run, and its changed lines (None: not known)
    names: Mapping[str, tuple[NameReach, tuple[int, ...] | None]] = field(default_factory=dict)

    def of(self, path: str, line: int | None = None) -> Reach:
        """The reach of a file's change (`line`: of one line of it, a finding's)."""
        source = _source_of(path)
        named = module_name(source)
        module = named[0] if named is not None else None
        reached = module is not None and module in self.walk.parents
        if not any(path.startswith(root) for root in self.model_roots):
            via = self.walk.via(module) if reached and module is not None else ()
            return Reach(kind=ReachClass.SHARED, via=via)
        if module is not None and module in self.walk.core:
            return Reach(kind=ReachClass.RUNS, via=self.walk.via(module, self.walk.core))
        if reached and module is not None:
            return self._loaded(path, self.walk.via(module), line)
        if self.unknown_why is not None:
            return Reach(kind=ReachClass.UNKNOWN, why=self.unknown_why)
        if module is None:
            return Reach(kind=ReachClass.UNKNOWN, why="not a Python module")
        return Reach(kind=ReachClass.OTHER_MODEL)

    def _loaded(self, path: str, via: tuple[str, ...], line: int | None) -> Reach:
        """A model file loaded through shared code: its module-level code runs, a def or class body only
        when something reaches its name."""
        loaded = self._through_shared(via)
        found = self.names.get(path)
        if found is None:
            return Reach(kind=ReachClass.RUNS, via=via, why=f"{loaded}: its module-level code runs")
        names, changed = found
        taken = _taken(names.uses)
        if names.everything is not None:
            why = f"{loaded}, imported for {taken}; any of its names may run ({names.everything})"
            return Reach(kind=ReachClass.RUNS, via=via, why=why)
        lines = (line,) if line is not None else changed
        if lines is None:
            why = f"{loaded}, imported for {taken}; without pristine bytes the changed lines are not known"
            return Reach(kind=ReachClass.RUNS, via=via, why=why)
        held = names.outside(lines)
        if held is None:
            what = "the line" if line is not None else "a changed line"
            why = f"{loaded}, imported for {taken}; {what} runs (module-level code or a name that is reached)"
            return Reach(kind=ReachClass.RUNS, via=via, why=why)
        taken = f"other names ({taken})" if names.uses else taken
        why = f"{loaded}, imported for {taken}; {', '.join(held)} never runs for this model"
        return Reach(kind=ReachClass.OTHER_MODEL, via=via, why=why)

    def _through_shared(self, via: tuple[str, ...]) -> str:
        """Where the chain re-enters the model code from shared code (layers, engine): such a module is
        loaded and its module-level code runs, yet it is not the model that was built."""
        shared = [step for step in via if not step.startswith(self.model_roots)]
        where = shared[-1].split(" ", 1)[0] if shared else "?"
        return f"loaded through shared code ({where}), not built as this model"


def _taken(uses: tuple[str, ...]) -> str:
    """ "a (path:line), b (path:line)": the names importers take, each at its first use."""
    first: dict[str, str] = {}
    for use in uses:
        where, _, name = use.partition(" ")
        first.setdefault(name, where)
    shown = [f"{name} ({where})" for name, where in list(first.items())[:4]]
    more = f" and {len(first) - 4} more" if len(first) > 4 else ""
    return ", ".join(shown) + more if shown else "names that never run here"


def model_roots(registry: Registry, graph: Graph) -> tuple[str, ...]:
    """The directories holding the registry's model modules (a package's parent, a module's directory)."""
    from patchaudit.serving.registry import MODEL_DIRS

    roots: set[str] = set(MODEL_DIRS.get(registry.framework, ()) if registry.problem else ())
    for entry in registry.entries.values():
        path = graph.modules.get(entry.module)
        if path is None:
            continue
        parts = path.split("/")
        cut = -2 if parts[-1] == "__init__.py" else -1
        roots.add("/".join(parts[:cut]) + "/")
    return tuple(sorted(roots))


def _source_of(path: str) -> str:
    """`pkg/__pycache__/mod.cpython-312.pyc` -> `pkg/mod.py`; any other path as it is."""
    head, sep, name = path.rpartition("/__pycache__/")
    if sep and name.endswith(".pyc"):
        return f"{head}/{name.split('.', 1)[0]}.py"
    return path


def why_unknown(model: ServedModel, registry: Registry, walk: Walk, graph: Graph) -> str | None:
    if registry.problem is not None:
        return registry.problem
    if not graph.modules:
        return f"{registry.framework} {registry.version}'s RECORD lists none of its modules (an editable install?)"
    if not model.architectures:
        return f"{model.config} names no architectures"
    if walk.unresolved and len(walk.unresolved) == len(model.architectures):
        names = ", ".join(walk.unresolved)
        return f"architecture {names} is not in {registry.framework} {registry.version}'s registry"
    return None


def count(reaches: Mapping[str, Reach]) -> dict[str, int]:
    out = {kind.value: 0 for kind in ReachClass}
    for reach in reaches.values():
        out[reach.kind.value] += 1
    return out
