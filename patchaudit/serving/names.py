"""Which top-level names of a loaded model module may run, when shared code imports it for other names.

vLLM's shared code loads model modules it needs a helper from (0.33.0: a quantization config imports
DeepSeek-V4's MTP, which imports `get_spec_layer_idx_from_weight_name` from `deepseek_v2`). The module's
top-level statements then run; the bodies of its functions and of its classes' methods run only when
something reaches their name. Reached: what the importers take (`from m import a`, `m.a`), what the
module's own top-level code names (decorators, defaults, class bodies, plain statements), a def or
class a decorator registers under a string, and, from each reached def or class, every name its code
names. A name only checked with isinstance() or written in an annotation runs none of its code.
Fail closed: an importer that hands the module object on, a star import, a dotted `import a.b.m`, a
string naming the module, `globals()`, `sys.modules` or a module `__getattr__` makes every name reached.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# Names whose use in the module reaches its names by string: every name counts as reached.
# Methods that isinstance()/issubclass() run: a class defining one is reached wherever it is named.
HOOKS = frozenset({"__subclasshook__", "__instancecheck__", "__subclasscheck__"})
DYNAMIC = frozenset({"globals", "vars", "locals", "eval", "exec", "__import__"})


@dataclass(frozen=True, slots=True)
class Source:
    """One module of the walk: `partial` when it is a model module loaded only through shared code, whose
    names run only when reached; any other module runs whatever it names."""

    module: str  # dotted name
    path: str  # relative to the site directory
    is_package: bool
    data: bytes
    partial: bool


@dataclass(frozen=True, slots=True)
class NameReach:
    """`unreached`: (first line, last line, name) of bodies that never run for the model; `uses`: where
    the importers take names from the module ("path:line name"); `everything`: why all names count."""

    uses: tuple[str, ...] = ()
    unreached: tuple[tuple[int, int, str], ...] = ()
    everything: str | None = None

    def outside(self, lines: Iterable[int]) -> tuple[str, ...] | None:
        """The unreached names holding every one of `lines`, or None when a line may run."""
        names: list[str] = []
        for line in lines:
            name = next((n for a, b, n in self.unreached if a <= line <= b), None)
            if name is None:
                return None
            names.append(name)
        return tuple(dict.fromkeys(names)) if names else None

    def to_list(self) -> list[object]:
        return [list(self.uses), [list(u) for u in self.unreached], self.everything]

    @classmethod
    def from_list(cls, data: object) -> NameReach:
        """Typed back from a cache file; anything malformed raises ValueError."""
        if not (isinstance(data, list) and len(data) == 3 and isinstance(data[0], list) and isinstance(data[1], list)):
            raise ValueError("names")
        uses, spans, everything = data
        if not all(isinstance(u, str) for u in uses) or (everything is not None and not isinstance(everything, str)):
            raise ValueError("names")
        out: list[tuple[int, int, str]] = []
        for span in spans:
            if not (isinstance(span, list) and len(span) == 3 and isinstance(span[2], str)):
                raise ValueError("names")
            a, b, name = span
            if not (type(a) is int and type(b) is int):
                raise ValueError("names")
            out.append((a, b, name))
        return cls(uses=tuple(uses), unreached=tuple(out), everything=everything)


# (the top-level name whose body holds the use, None at module level; the name taken; "path:line name")
Take = tuple[str | None, str, str]


@dataclass(frozen=True, slots=True)
class _Module:
    source: Source
    seeds: set[str]
    refs: dict[str, set[str]]
    spans: list[tuple[int, int, str]]
    dynamic: str | None
    tree: ast.Module | None
    running: set[str]

    def owner(self, line: int) -> str | None:
        return next((n for a, b, n in self.spans if a <= line <= b), None)

    def every_name(self) -> set[str]:
        return set(self.refs) | {n for _, _, n in self.spans}


def name_reach(
    target: str,
    sources: Mapping[str, Source],
    importers: Mapping[str, Sequence[str]],
    by_string: Mapping[str, str] | None = None,
) -> NameReach:
    """Which names of `target` run: from what its importers take, where a partial importer's take counts
    only when the name holding it runs there, to a fixed point; with the bodies that never run.
    `by_string`: modules a string names (module -> where): every name of those counts."""
    group = [target]
    for module in group:  # the partial modules that import the target, directly or through each other
        group += [i for i in importers.get(module, ()) if sources[i].partial and i not in group]
    parsed = {m: _parse(sources[m]) for m in {*group, *(i for m in group for i in importers.get(m, ()))}}
    takes: dict[tuple[str, str], list[Take] | str] = {
        (i, m): _takes(m, parsed[i]) for m in group for i in importers.get(m, ())
    }
    reached = {m: _start(parsed[m]) for m in group}
    forced: dict[str, str] = {m: d for m in group if (d := parsed[m].dynamic) is not None}
    for module in group:
        if by_string and module in by_string and module not in forced:
            forced[module] = by_string[module]
            reached[module] |= parsed[module].every_name()
    changed = True
    while changed:
        changed = False
        for (importer, module), taken in takes.items():
            before = len(reached[module])
            if isinstance(taken, str):
                forced.setdefault(module, taken)
                reached[module] |= parsed[module].every_name()
            else:
                for owner, name, _ in taken:
                    if importer not in reached or owner is None or owner in reached[importer]:
                        reached[module] |= _closure({name}, parsed[module].refs) - reached[module]
            changed = changed or len(reached[module]) != before
    uses = [
        where
        for i in importers.get(target, ())
        if not isinstance(found := takes[(i, target)], str)
        for owner, _, where in found
        if i not in reached or owner is None or owner in reached[i]
    ]
    if target in forced:
        return NameReach(uses=tuple(uses), everything=forced[target])
    spans = parsed[target].spans
    return NameReach(uses=tuple(uses), unreached=tuple(s for s in spans if s[2] not in reached[target]))


def _parse(source: Source) -> _Module:
    try:
        tree = ast.parse(source.data)
    except (SyntaxError, ValueError):
        return _Module(source, set(), {}, [], f"{source.path} does not parse", None, set())
    seeds, refs, spans = _layout(tree)
    dynamic = _dynamic(tree)
    return _Module(source, seeds, refs, spans, f"{source.path} {dynamic}" if dynamic else None, tree, _running(tree))


def _start(module: _Module) -> set[str]:
    return module.every_name() if module.dynamic is not None else _closure(set(module.seeds), module.refs)


def _takes(target: str, importer: _Module) -> list[Take] | str:
    """What `importer` takes from `target`; a reason when it may take any name."""
    if importer.tree is None:
        return importer.dynamic or f"{importer.source.path} does not parse"
    path = importer.source.path
    package = importer.source.module if importer.source.is_package else importer.source.module.rpartition(".")[0]
    out: list[Take] = []
    aliases: set[str] = set()
    for node in ast.walk(importer.tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and node.value == target:
            return f"{path}:{line} names {target} in a string"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == target:
                    if alias.asname is None:
                        return f"{path}:{line} imports {target} by its dotted name"
                    aliases.add(alias.asname)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(package, node.module or "", node.level)
            for alias in node.names:
                if base == target:
                    if alias.name == "*":
                        return f"{path}:{line} imports * from {target}"
                    bound = alias.asname or alias.name
                    if bound in importer.running:  # a name only isinstance() checks runs none of its code
                        out.append((importer.owner(line) or bound, alias.name, f"{path}:{alias.lineno} {alias.name}"))
                elif f"{base}.{alias.name}" == target:
                    aliases.add(alias.asname or alias.name)
    if aliases:
        return _attribute_takes(importer, aliases, out)
    return out


def _attribute_takes(importer: _Module, aliases: set[str], out: list[Take]) -> list[Take] | str:
    """Names taken as `alias.name`; any other use of the alias hands the module on."""
    assert importer.tree is not None
    path = importer.source.path
    taken: set[int] = set()
    for node in ast.walk(importer.tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            taken.add(id(node.value))
            out.append((importer.owner(node.lineno), node.attr, f"{path}:{node.lineno} {node.value.id}.{node.attr}"))
    for node in ast.walk(importer.tree):
        if isinstance(node, ast.Name) and node.id in aliases and id(node) not in taken:
            return f"{path}:{node.lineno} hands the module {node.id} on"
    return out


def _running(tree: ast.Module) -> set[str]:
    """Names used where their code may run: not only as isinstance()/issubclass()'s class argument nor in
    an annotation, which name a class without running any of its code."""
    inert: set[int] = set()
    for node in ast.walk(tree):
        if _is_check(node):
            inert |= {id(n) for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}  # type: ignore[attr-defined]
        annotations: list[ast.AST | None] = []
        if isinstance(node, ast.arg):
            annotations.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        inert |= {id(n) for a in annotations if a is not None for n in ast.walk(a) if isinstance(n, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in inert}


def _is_check(node: ast.AST) -> bool:
    """`isinstance(x, C)` / `issubclass(x, C)`."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 2):
        return False
    return node.func.id in ("isinstance", "issubclass")


def _absolute(package: str, name: str, level: int) -> str:
    if level == 0:
        return name
    parts = package.split(".") if package else []
    parts = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join([*parts, name] if name else parts)


def _dynamic(tree: ast.Module) -> str | None:
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == "__getattr__":
            return f"line {stmt.lineno} defines a module __getattr__"
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in DYNAMIC:
            return f"line {node.lineno} uses {node.id}"
        if isinstance(node, ast.Attribute) and node.attr == "modules" and getattr(node.value, "id", None) == "sys":
            return f"line {node.lineno} uses sys.modules"
    return None


def _layout(tree: ast.Module) -> tuple[set[str], dict[str, set[str]], list[tuple[int, int, str]]]:
    """(names the top-level code reaches, names each def/class reaches, the bodies that run only when
    their top-level name is reached)."""
    seeds: set[str] = set()
    refs: dict[str, set[str]] = {}
    spans: list[tuple[int, int, str]] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and _registers(stmt):
            seeds.add(stmt.name)  # registered under a string: whatever looks it up may run it
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            seeds |= _header_names(stmt)
            refs.setdefault(stmt.name, set()).update(_names(stmt.body), _names(stmt.args))
            spans.append(_body_span(stmt, stmt.name))
        elif isinstance(stmt, ast.ClassDef):
            seeds |= _names(stmt.decorator_list) | _names(stmt.keywords)
            if any(isinstance(i, ast.FunctionDef) and i.name in HOOKS for i in stmt.body):
                seeds.add(stmt.name)  # isinstance() runs these
            mine = refs.setdefault(stmt.name, set())
            mine |= _names(stmt.bases)
            for item in stmt.body:  # a class body runs when the class is defined; its methods when called
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    seeds |= _header_names(item)
                    mine |= _names(item.body) | _names(item.args)
                    spans.append(_body_span(item, stmt.name))
                elif _alias(item) or (isinstance(item, ast.AnnAssign) and item.value is None):
                    mine |= _names([item])  # `model_cls = Model`, `layers: list[Layer]`: named, not run
                else:
                    seeds |= _names([item])
        elif _alias(stmt):
            assert isinstance(stmt, ast.Assign)
            for target in stmt.targets:  # `B = A` runs none of A's code: B names it
                refs.setdefault(target.id, set()).update(_names(stmt.value))  # type: ignore[attr-defined]
        else:
            seeds |= _names([stmt])
    return seeds, refs, spans


def _alias(stmt: ast.stmt) -> bool:
    """`B = A`, `B = m.A`, `B = (A, C)`: names bound to names, nothing called."""
    plain = (ast.Name, ast.Attribute, ast.Tuple, ast.List, ast.Constant, ast.Load, ast.expr_context)
    return (
        isinstance(stmt, ast.Assign)
        and all(isinstance(t, ast.Name) for t in stmt.targets)
        and all(isinstance(n, plain) for n in ast.walk(stmt.value))
    )


def _registers(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    """A decorator called with a string (`@CustomOp.register("name")`): a registration by name."""
    return any(
        isinstance(d, ast.Call) and any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in ast.walk(d))
        for d in node.decorator_list
    )


def _header_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """What runs when a def is executed: its decorators and default values."""
    return _names([*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d)])


def _body_span(node: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> tuple[int, int, str]:
    first = node.body[0]
    start = min([first.lineno, *(getattr(d, "lineno", first.lineno) for d in getattr(first, "decorator_list", []))])
    return start, node.end_lineno or first.lineno, name


def _names(nodes: Iterable[ast.AST] | ast.AST) -> set[str]:
    roots = [nodes] if isinstance(nodes, ast.AST) else list(nodes)
    return {n.id for root in roots for n in ast.walk(root) if isinstance(n, ast.Name)}


def _closure(start: set[str], refs: dict[str, set[str]]) -> set[str]:
    reached = set(start)
    todo = list(reached)
    while todo:
        for name in refs.get(todo.pop(), ()):
            if name not in reached:
                reached.add(name)
                todo.append(name)
    return reached
