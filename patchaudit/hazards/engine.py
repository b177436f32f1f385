"""Run a rule pack over one file: prefilter, parse, one batched libcst pass, suppressions, change mapping."""

from __future__ import annotations

import ast
import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace

import libcst as cst
from libcst.metadata import MetadataWrapper

from patchaudit.analysis.module import ModuleAnalysis
from patchaudit.analysis.names import NameTable
from patchaudit.analysis.per_file import release
from patchaudit.analysis.walk import Walker, walker
from patchaudit.filters import RESPELLED
from patchaudit.hazards.changes import changed_lines, decode, ignores
from patchaudit.hazards.engine_rules import ENGINE_RULES, PARSE_ERROR, RULE_ERROR, UNUSED_IGNORE
from patchaudit.hazards.positions import Span, spans
from patchaudit.hazards.prefilter import Reduced, blocks
from patchaudit.hazards.prefilter import reduced as prefilter_reduced
from patchaudit.hazards.source import SourceFile
from patchaudit.hazards.tracker import Tracker
from patchaudit.report import Finding
from patchaudit.rule import FileContext, Hit, Pending, Rule

__all__ = ["check_file", "needs_parse", "active_rules"]


def active_rules(file: SourceFile, rules: Sequence[type[Rule]], *, prefilter: bool = True) -> list[type[Rule]]:
    active = []
    for rule in rules:
        if not rule.applies_to(file.path):
            continue
        if rule.NEEDS_PRISTINE and (file.pristine is None or not file.drifted):
            continue
        if prefilter and not rule.prefilter(file.installed):
            continue
        active.append(rule)
    return active


def needs_parse(file: SourceFile, rules: Sequence[type[Rule]]) -> bool:
    """Whether checking this file costs a parse (the engine's expensive step)."""
    if not file.path.endswith(".py"):
        return False
    return file.drifted or any(r.USES_LIBCST for r in active_rules(file, rules))


def _parse_error_hit(message: str, line: int | None = 1) -> Hit:
    line = max(line or 1, 1)
    return Hit(
        rule=PARSE_ERROR,
        severity=ENGINE_RULES[PARSE_ERROR][0],
        line=line,
        column=0,
        message=message,
        stmt_line=line,
    )


def _parsed(data: bytes) -> tuple[ast.Module | None, Hit | None]:
    """The ast of a .py file, or the parse error to report."""
    try:
        return ast.parse(data), None
    except SyntaxError as exc:
        return None, _parse_error_hit(f"does not parse: {exc.msg}", exc.lineno)
    except Exception as exc:  # undecodable bytes, bad coding cookie, recursion: report, never crash
        return None, _parse_error_hit(f"does not parse: {type(exc).__name__}: {exc}")


def _unchecked(self: cst.CSTNode) -> None:
    """In place of CSTNode.__post_init__ while libcst's parser builds a tree (_parse_cst)."""


def _parse_cst(source: bytes) -> cst.Module:
    """cst.parse_module without libcst's check of each node it builds.

    Every node's __post_init__ runs its _validate, a check meant for trees built by hand (a sixth
    of the parse, libcst's own comment marks it as a cost to move). Whether a file parses stays the
    native parser's answer; where the check disagrees with it (`x if y else(lambda: 1)` raises a
    TypeError in the check), the parser agrees with Python. A node a rule builds later
    (`with_changes`) is checked as before.
    """
    check = cst.CSTNode.__dict__["__post_init__"]
    cst.CSTNode.__post_init__ = _unchecked  # type: ignore[method-assign]
    try:
        return cst.parse_module(source)
    finally:
        cst.CSTNode.__post_init__ = check  # type: ignore[method-assign]


def _run_rules(
    file: SourceFile, rules: Sequence[type[Rule]], *, prefilter: bool = True, changed: set[int] | None = None
) -> tuple[list[Hit], str]:
    """Raw hits for one file, and its decoded text."""
    data = file.installed
    text = decode(data)
    active = active_rules(file, rules, prefilter=prefilter)
    hits: list[Hit] = []
    pristine_text = decode(file.pristine) if file.pristine is not None else None
    cst_rules = [r for r in active if r.USES_LIBCST]
    python = file.path.endswith(".py")
    binary = python and b"\0" in data
    # Parsed once, before the text rules, which are handed the tree: a file that verifies is parsed
    # only when a rule could match.
    tree, error = _parsed(data) if python and not binary and (cst_rules or file.drifted) else (None, None)
    for rule in active:
        if not rule.USES_LIBCST:
            context = FileContext(path=file.path, location=file.location, tree=tree)
            hits.extend(rule(context).check_text(text, pristine_text))
    if not python:
        return hits, text
    if binary:
        return hits + [_parse_error_hit("binary content in a .py file")], text
    if error is not None:
        return hits + [error], text
    if tree is None:
        return hits, text
    if not cst_rules:
        return hits, text
    names = NameTable.build(tree, data)
    analysis = ModuleAnalysis.build(tree, names)
    if prefilter:
        reduced = prefilter_reduced(data, analysis, cst_rules, changed, drifted=file.drifted)
    else:
        reduced = Reduced(data, [b[2][0].lineno for b in blocks(tree.body)], {}, {})
    if reduced is None:
        return hits, text
    source, firsts, inner, keepers = reduced
    try:
        module = _parse_cst(source)
    except Exception as exc:  # libcst is stricter than ast on a few inputs: report, never crash
        return hits + [_parse_error_hit(f"does not parse: {type(exc).__name__}: {exc}")], text
    context = FileContext(
        path=file.path,
        drifted=file.drifted,
        pristine=pristine_text if file.drifted else None,
        wrapper=MetadataWrapper(module, unsafe_skip_copy=True),
        names=names,
        analysis=analysis,
    )
    visitors: list[cst.BatchableCSTVisitor] = [Tracker(context)]
    visitors.extend(rule(context) for rule in cst_rules)
    try:
        _visit(module, visitors, _gates(module, firsts, inner, keepers))
        if context.pending:
            if not prefilter or any(p.top is None for p in context.pending):
                positions = spans(module)  # the whole module
            else:
                positions = _statement_positions(module, context.pending, firsts, inner)
            for p in context.pending:
                (line, column), _ = positions[p.node]
                stmt = positions[p.stmt][0][0] if p.stmt is not None else line
                head = _header(p.node)
                end = positions[head][1][0] if head in positions else line
                hits.append(
                    Hit(
                        rule=p.rule,
                        severity=p.severity,
                        line=line,
                        column=column,
                        message=p.message,
                        stmt_line=stmt,
                        end_line=end,
                    )
                )
    except Exception as exc:  # a user rule's bug must not stop the scan
        ids = ", ".join(r.ID for r in cst_rules)
        hits.append(
            Hit(
                rule=RULE_ERROR,
                severity=ENGINE_RULES[RULE_ERROR][0],
                line=1,
                column=0,
                message=f"rules [{ids}] failed: {type(exc).__name__}: {exc}",
                stmt_line=1,
            )
        )
    return hits, text


class _Batched(cst.CSTVisitor):
    """libcst's batched visitor with each node type's methods found once, not by name per node.

    libcst's own builds `visit_<Type>` and `visit_<Type>_<attribute>` names with an f-string
    and a dict lookup four times per node; here each is looked up once per node type (and
    attribute), and the attribute hooks cost nothing when no visitor has one.
    """

    def __init__(self, methods: dict[str, list[Callable[[cst.CSTNode], None]]]) -> None:
        super().__init__()
        self.methods = methods
        self.visits: dict[type, tuple[Callable[[cst.CSTNode], None], ...]] = {}
        self.leaves: dict[type, tuple[Callable[[cst.CSTNode], None], ...]] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        found = self.visits.get(kind)
        if found is None:
            found = self.visits[kind] = tuple(self.methods.get(f"visit_{kind.__name__}", ()))
        for method in found:
            method(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        kind = type(original_node)
        found = self.leaves.get(kind)
        if found is None:
            found = self.leaves[kind] = tuple(self.methods.get(f"leave_{kind.__name__}", ()))
        for method in found:
            method(original_node)

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


class _BatchedAttributes(_Batched):
    """_Batched for visitors that have `visit_<Type>_<attribute>` hooks too."""

    def __init__(self, methods: dict[str, list[Callable[[cst.CSTNode], None]]]) -> None:
        super().__init__(methods)
        self.hooks: dict[tuple[str, type, str], tuple[Callable[[cst.CSTNode], None], ...]] = {}
        # The node types that have a hook: every other node's attributes return at once.
        hooked = {name.split("_")[1] for name in methods if name.count("_") >= 2}
        self.hooked = frozenset(getattr(cst, name) for name in hooked if isinstance(getattr(cst, name, None), type))

    def _hooks(self, when: str, node: cst.CSTNode, attribute: str) -> tuple[Callable[[cst.CSTNode], None], ...]:
        key = (when, type(node), attribute)
        found = self.hooks.get(key)
        if found is None:
            found = self.hooks[key] = tuple(self.methods.get(f"{when}_{type(node).__name__}_{attribute}", ()))
        return found

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if type(node) in self.hooked:
            for method in self._hooks("visit", node, attribute):
                method(node)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        if type(original_node) in self.hooked:
            for method in self._hooks("leave", original_node, attribute):
                method(original_node)


def _visit(
    module: cst.Module,
    visitors: Sequence[cst.BatchableCSTVisitor],
    gates: Mapping[int, frozenset[int]] | None = None,
) -> None:
    """cst.visit_batched, the same calls in the same order: walked without rebuilding a node where it can be.

    At and below a node named in `gates` (by id), only the visitors of the indices given there are
    called: a rule walks only the statements it keeps.
    """
    found = [visitor.get_visitors() for visitor in visitors]

    def merged(allowed: frozenset[int] | None) -> dict[str, list[Callable[[cst.CSTNode], None]]]:
        methods: dict[str, list[Callable[[cst.CSTNode], None]]] = {}
        for index, hooks in enumerate(found):
            if allowed is None or index in allowed:
                for name, method in hooks.items():
                    methods.setdefault(name, []).append(method)
        return methods

    methods = merged(None)
    walking = walker(methods)
    if walking is not None:
        walkers: dict[frozenset[int], Walker] = {}
        by_node: dict[int, Walker] = {}
        for node, allowed in (gates or {}).items():
            gated = walkers.get(allowed)
            if gated is None:
                gated = walkers[allowed] = walker(merged(allowed)) or walking
            by_node[node] = gated
        walking.walk(module, by_node)
        return
    plain = all(isinstance(getattr(cst, name.split("_", 1)[1], None), type) for name in methods)
    module.visit(_Batched(methods) if plain else _BatchedAttributes(methods))


def _gates(
    module: cst.Module,
    firsts: list[int],
    inner: Mapping[int, list[int]],
    keepers: Mapping[tuple[int, int], frozenset[int]],
) -> dict[int, frozenset[int]]:
    """Which visitors walk each module-level statement and class member: the tracker (0) and the
    rules that keep it (rule i is visitor i + 1). A rule's findings lie in statements it keeps
    (the prefilter's promise), so it walks only those; a class, for every rule that keeps one of
    its members too. None where the lines do not match up."""
    gates: dict[int, frozenset[int]] = {}
    if not keepers or len(firsts) != len(module.body):
        return gates
    for stmt, first in zip(module.body, firsts, strict=True):
        allowed = {0, *(i + 1 for i in keepers[0, first])}
        lines = inner.get(first)
        members = stmt.body.body if isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock) else ()
        if lines is not None and len(members) == len(lines):
            for member, line in zip(members, lines, strict=True):
                mine = gates[id(member)] = frozenset({0, *(i + 1 for i in keepers[first, line])})
                allowed |= mine
        gates[id(stmt)] = frozenset(allowed)
    return gates


def _header(node: cst.CSTNode) -> cst.CSTNode:
    """The part of a finding's node that names it: a compound statement's test, not its body."""
    if isinstance(node, cst.If | cst.While | cst.IfExp):
        return node.test
    if isinstance(node, cst.Match):
        return node.subject
    if isinstance(node, cst.MatchCase):
        return node.pattern
    if isinstance(node, cst.For):
        return node.iter
    if isinstance(node, cst.With) and node.items:
        return node.items[-1]
    if isinstance(node, cst.FunctionDef | cst.ClassDef | cst.Try | cst.TryStar):
        return node.name if isinstance(node, cst.FunctionDef | cst.ClassDef) else node
    return node


def _in_change(hit: Hit, changed: set[int]) -> Hit | None:
    """The hit pointed at the first changed line of what it names, or None if none changed."""
    if hit.always_in_change or hit.line in changed:
        return hit
    span = [line for line in range(hit.line, max(hit.end_line, hit.line) + 1) if line in changed]
    if span:
        return replace(hit, line=span[0], column=0)
    if hit.stmt_line in changed:
        return replace(hit, line=hit.stmt_line, column=0)
    return None


def _statement_positions(
    module: cst.Module, pending: Sequence[Pending], firsts: list[int], inner: Mapping[int, list[int]]
) -> dict[cst.CSTNode, Span]:
    """Positions of the nodes inside the module-level statements that hold a finding only.

    Positions come from generating code with position tracking (spans): it runs only over the
    statements that hold a finding, and their first lines come from ast (`firsts`, one per
    statement of the module, in order); in a class whose members' lines are known (`inner`),
    only over the members that hold one.
    """
    wanted = {id(p.top) for p in pending if p.top is not None}
    out: dict[cst.CSTNode, Span] = {}
    if len(firsts) == len(module.body):
        for stmt, first in zip(module.body, firsts, strict=True):
            if id(stmt) in wanted:
                mine = [p for p in pending if p.top is stmt]
                found = _member_positions(module, stmt, inner.get(first), mine)
                out.update(found if found is not None else _shifted(module, stmt, first))
        return out
    line = sum(module.code_for_node(empty).count("\n") for empty in module.header)
    for stmt in module.body:
        code = module.code_for_node(stmt)
        if id(stmt) in wanted:
            wanted.discard(id(stmt))
            out.update(_moved(spans(_mini(module, stmt)), line))
            if not wanted:
                break
        line += code.count("\n")
    return out


def _moved(found: dict[cst.CSTNode, Span], lines: int) -> dict[cst.CSTNode, Span]:
    """Spans moved down by a number of lines."""
    return {node: ((a + lines, b), (c + lines, d)) for node, ((a, b), (c, d)) in found.items()}


def _shifted(
    module: cst.Module, stmt: cst.CSTNode, first: int, target: cst.CSTNode | None = None
) -> dict[cst.CSTNode, Span]:
    """Positions inside `stmt` generated on its own, moved so that `target` (default: stmt) starts at `first`."""
    found = spans(_mini(module, stmt))
    return _moved(found, first - found[target if target is not None else stmt][0][0])


def _member_positions(
    module: cst.Module, cls: cst.CSTNode, firsts: list[int] | None, pending: Sequence[Pending]
) -> dict[cst.CSTNode, Span] | None:
    """Positions inside the members of a class that hold a finding, each generated in a copy of
    the class that holds it alone (its indentation kept); None where that cannot answer."""
    if firsts is None or not isinstance(cls, cst.ClassDef) or not isinstance(cls.body, cst.IndentedBlock):
        return None
    members = cls.body.body
    if len(members) != len(firsts) or any(p.member is None for p in pending):
        return None
    out: dict[cst.CSTNode, Span] = {}
    wanted = {id(p.member) for p in pending}
    for member, first in zip(members, firsts, strict=True):
        if id(member) in wanted:
            alone = cls.with_changes(decorators=(), leading_lines=(), body=cls.body.with_changes(body=[member]))
            out.update(_shifted(module, alone, first, member))
    if any(p.node not in out or (p.stmt is not None and p.stmt not in out) for p in pending):
        return None  # a node reported from outside its member: the whole class answers
    return out


def _mini(module: cst.Module, stmt: cst.CSTNode) -> cst.Module:
    return cst.Module(
        body=[stmt],  # type: ignore[list-item]
        header=[],
        footer=[],
        encoding=module.encoding,
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        has_trailing_newline=module.has_trailing_newline,
    )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while one file's rules run, on again after it.

    A parse builds some ten objects per byte of source, and they all live until the file is done:
    left on, the collector walks them again at every few hundred allocations (a tenth or more of
    the time of an `--all-files` scan). The cycles a file leaves behind (closures, nodes held by
    them) are collected by the first collection after it, in one pass over what is left. What the
    rules cached of the file (per_file) is let go first: its trees go by their counts, and that
    pass walks only the cycles (a sixteenth of what it walked with the trees still held).
    """
    paused = gc.isenabled()  # else someone else turned it off, and turns it on
    gc.disable()
    try:
        yield
    finally:
        release()
        if paused:
            gc.enable()


def check_file(file: SourceFile, rules: Sequence[type[Rule]], *, prefilter: bool = True) -> list[Finding]:
    """Findings for one file, suppressions applied, before severity overrides.

    prefilter=False runs every rule over the whole file, skipping no file and no statement, and
    takes positions from libcst for the whole module; the results are the same, only slower
    (the tests check that). A drifted file whose bytes hold an escape that can spell a letter,
    or a backslash that joins lines, is checked so: `getattr(torch, "s\x61ve")` spells no `save`
    for a byte filter to find.
    """
    if file.drifted and RESPELLED.search(file.installed):
        prefilter = False
    changed: set[int] | None = None
    if file.drifted and file.pristine is not None:
        changed = changed_lines(decode(file.installed), decode(file.pristine))
    with _collector_paused():
        hits, text = _run_rules(file, rules, prefilter=prefilter, changed=changed)
    found_ignores = ignores(text) if b"patchaudit:" in file.installed else {}
    used: set[tuple[int, str]] = set()
    suppressed: list[bool] = []
    moved: list[Hit | None] = [_in_change(hit, changed) if changed is not None else hit for hit in hits]
    for hit, where in zip(hits, moved, strict=True):
        is_suppressed = False
        for line in {hit.line, hit.stmt_line, where.line if where is not None else hit.line}:
            if hit.rule in found_ignores.get(line, ()):
                used.add((line, hit.rule))
                is_suppressed = True
        suppressed.append(is_suppressed)
    for line, ids in sorted(found_ignores.items()):
        for rule_id in sorted(ids - {rule for (ln, rule) in used if ln == line}):
            suppressed.append(False)
            hits.append(
                Hit(
                    rule=UNUSED_IGNORE,
                    severity=ENGINE_RULES[UNUSED_IGNORE][0],
                    line=line,
                    column=0,
                    message=f"ignore[{rule_id}] matches no finding on this line",
                    stmt_line=line,
                )
            )

    findings = []
    moved += [_in_change(hit, changed) if changed is not None else hit for hit in hits[len(moved) :]]
    for kept, is_suppressed in zip(moved, suppressed, strict=True):
        if kept is None:
            continue
        hit = kept
        findings.append(
            Finding(
                rule=hit.rule,
                severity=hit.severity,
                path=file.path,
                line=hit.line,
                message=hit.message,
                in_change=file.drifted,
                column=hit.column,
                suppressed=is_suppressed,
            )
        )
    return findings
