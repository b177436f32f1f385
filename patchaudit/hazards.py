"""Run the hazard rule pack over files; map findings to changed lines; apply suppressions."""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib.util
import inspect
import io
import json
import multiprocessing
import os
import re
import sys
import tokenize
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from patchaudit.errors import InvalidRulePack
from patchaudit.report import Finding, Severity
from patchaudit.rule import Example, FileContext, Hit, Rule

__all__ = [
    "SourceFile",
    "check_files",
    "check_file",
    "load_rules",
    "builtin_rules_dir",
    "pack_version",
    "pth_executable_lines",
    "ExampleResult",
    "run_example",
    "run_examples",
    "PARSE_ERROR",
    "UNUSED_IGNORE",
    "RULE_ERROR",
    "ENGINE_RULES",
]

# Findings the engine itself raises; they are not rule files but have metadata for renderers.
PARSE_ERROR = "parse-error"
UNUSED_IGNORE = "unused-ignore"
RULE_ERROR = "rule-error"
ENGINE_RULES: dict[str, tuple[Severity, str]] = {
    PARSE_ERROR: (
        Severity.MEDIUM,
        "The file does not parse as Python (syntax error, undecodable bytes, or a binary).",
    ),
    UNUSED_IGNORE: (Severity.LOW, "A `# patchaudit: ignore[...]` comment matches no finding."),
    RULE_ERROR: (Severity.LOW, "A rule raised an error on this file; its findings are missing."),
}

_IGNORE = re.compile(r"#\s*patchaudit:\s*ignore\[([^\]]*)\]")
# Below this many files to parse, a process pool costs more than it saves.
_POOL_MIN = 24


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceFile:
    """One file to check, as the scan found it."""

    path: str
    installed: bytes
    pristine: bytes | None
    drifted: bool = True


# -- loading ---------------------------------------------------------------------------------


def builtin_rules_dir() -> Path:
    """The built-in pack: `patchaudit/_rules` in a wheel, `<repo>/rules` in a source checkout."""
    here = Path(__file__).resolve().parent
    installed = here / "_rules"
    if installed.is_dir():
        return installed
    return here.parent / "rules"


def _load_rule_file(path: Path) -> type[Rule]:
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:12]
    module_name = f"patchaudit._loaded_rules.r{digest}_{path.stem.replace('-', '_')}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise InvalidRulePack(f"{path}: cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[module_name]
            raise InvalidRulePack(f"{path}: {type(exc).__name__}: {exc}") from exc
    found = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, Rule)
        and obj is not Rule
        and obj.__module__ == module_name
        and obj.ID
    ]
    if len(found) != 1:
        raise InvalidRulePack(f"{path}: a rule file defines exactly one Rule subclass with an ID, found {len(found)}")
    rule = found[0]
    problems = [attr for attr in ("MESSAGE", "EXPLANATION") if not getattr(rule, attr)]
    if not isinstance(rule.SEVERITY, Severity):
        problems.append("SEVERITY")
    if problems:
        raise InvalidRulePack(f"{path}: rule {rule.ID} does not declare {', '.join(problems)}")
    rule.SOURCE_FILE = str(path)
    return rule


@lru_cache(maxsize=16)
def _load_rules_cached(dirs: tuple[str, ...]) -> tuple[type[Rule], ...]:
    rules: dict[str, type[Rule]] = {}
    for directory in dirs:
        path = Path(directory)
        if not path.is_dir():
            raise InvalidRulePack(f"rule directory {path} does not exist")
        for file in sorted(path.glob("*.py")):
            if file.name.startswith("_"):
                continue
            rule = _load_rule_file(file)
            if rule.ID in rules or rule.ID in ENGINE_RULES:
                raise InvalidRulePack(
                    f"{file}: rule id {rule.ID} is already defined",
                    hint="give a user rule an id of its own",
                )
            rules[rule.ID] = rule
    return tuple(rules.values())


def load_rules(rule_dirs: Sequence[Path] = (), *, builtin: bool = True) -> list[type[Rule]]:
    """The built-in pack (unless builtin=False) plus the rules in `rule_dirs`, in load order."""
    dirs = ([builtin_rules_dir()] if builtin else []) + [Path(d) for d in rule_dirs]
    return list(_load_rules_cached(tuple(str(d.resolve()) for d in dirs)))


def pack_version(rules: Sequence[type[Rule]]) -> str:
    """A hash of the rule files and the engine: the cache key half that is not the file."""
    h = hashlib.sha256()
    for engine_file in (Path(__file__), Path(inspect.getfile(Rule))):
        h.update(engine_file.read_bytes())
    for rule in rules:
        h.update(rule.ID.encode() + b"\0")
        if rule.SOURCE_FILE:
            h.update(Path(rule.SOURCE_FILE).read_bytes())
    return h.hexdigest()


# -- .pth files ------------------------------------------------------------------------------


def pth_executable_lines(text: str) -> list[int]:
    """1-based numbers of the lines site.py executes in a .pth file (those starting `import`)."""
    return [
        number for number, line in enumerate(text.splitlines(), start=1) if line.startswith(("import ", "import\t"))
    ]


# -- one file --------------------------------------------------------------------------------


class _Tracker(cst.BatchableCSTVisitor):
    """Keeps the statement, function and `__main__` stacks that rules read from the context."""

    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context
        self._main_flags: list[bool] = []

    def _push(self, node: cst.CSTNode) -> None:
        self.context.stmts.append(node)

    def _pop(self, original_node: cst.CSTNode) -> None:
        self.context.stmts.pop()

    def visit_If(self, node: cst.If) -> None:
        self._push(node)
        is_main = _is_main_guard(node.test)
        self._main_flags.append(is_main)
        if is_main:
            self.context.main_guard_depth += 1

    def leave_If(self, node: cst.If) -> None:
        self._pop(node)
        if self._main_flags.pop():
            self.context.main_guard_depth -= 1

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._push(node)
        self.context.functions.append(node.name.value)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._pop(node)
        self.context.functions.pop()


def _add_statement_hooks(cls: type[_Tracker]) -> None:
    # libcst finds batched visitor methods by their __name__, so each gets a function of its own.
    for kind in ("SimpleStatementLine", "For", "While", "With", "Try", "TryStar", "ClassDef", "Match"):

        def visit(self: _Tracker, node: cst.CSTNode) -> None:
            self.context.stmts.append(node)

        def leave(self: _Tracker, original_node: cst.CSTNode) -> None:
            self.context.stmts.pop()

        visit.__name__, leave.__name__ = f"visit_{kind}", f"leave_{kind}"
        setattr(cls, visit.__name__, visit)
        setattr(cls, leave.__name__, leave)


_add_statement_hooks(_Tracker)


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__"]
    return bool(names and strings)


def _import_table(data: bytes) -> tuple[dict[str, str] | None, frozenset[str]]:
    """Local name -> imported qualified name for every import in the file (None if unknowable),
    and the names the file also binds some other way (those need libcst's scope analysis)."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, frozenset()
    table: dict[str, str] = {}
    rebound: set[str] = set()

    def bind(local: str, qualified: str) -> None:
        if table.get(local, qualified) != qualified:
            rebound.add(local)  # imported as two different things: let scope analysis decide
        table[local] = qualified

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                bind(local, alias.name if alias.asname else local)
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name == "*":
                    return None, frozenset()  # a star import can bind anything
                bind(alias.asname or alias.name, f"{module}.{alias.name}")
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            rebound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            rebound.add(node.name)
        elif isinstance(node, ast.arg):
            rebound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            rebound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            rebound.add(node.rest)
    return table, frozenset(rebound)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


_NEWLINE = re.compile(r"\r\n|\r|\n")


def _source_lines(text: str) -> list[str]:
    """Physical lines as Python and libcst number them: ended by \\r\\n, \\r or \\n only.

    Not str.splitlines, which also ends a line at \\f, \\x1c-\\x1e, \\x85 and \\u2028 and so shifts every
    line number after one of them.
    """
    lines = _NEWLINE.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def _ignores(text: str) -> dict[int, set[str]]:
    """Line -> rule ids named by `# patchaudit: ignore[...]` comments on it."""
    out: dict[int, set[str]] = {}

    def add(line: int, body: str) -> None:
        for match in _IGNORE.finditer(body):
            ids = {part.strip() for part in match.group(1).split(",") if part.strip()}
            out.setdefault(line, set()).update(ids)

    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                add(tok.start[0], tok.string)
    except (tokenize.TokenError, SyntaxError):
        out.clear()
        for number, line in enumerate(_source_lines(text), start=1):
            if "#" in line:
                add(number, line[line.index("#") :])
    return out


def _changed_lines(installed: str, pristine: str) -> set[int]:
    """1-based installed lines that differ from pristine, plus both neighbours of each deletion."""
    a = _source_lines(pristine)
    b = _source_lines(installed)
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            changed.update(range(j1 + 1, j2 + 1))
        elif tag == "delete":
            changed.update((j1, j1 + 1))
    return changed


def _active_rules(file: SourceFile, rules: Sequence[type[Rule]]) -> list[type[Rule]]:
    active = []
    for rule in rules:
        if not rule.applies_to(file.path):
            continue
        if rule.NEEDS_PRISTINE and (file.pristine is None or not file.drifted):
            continue
        if not rule.prefilter(file.installed):
            continue
        active.append(rule)
    return active


def _needs_parse(file: SourceFile, rules: Sequence[type[Rule]]) -> bool:
    """Whether checking this file costs a libcst pass (the engine's expensive step)."""
    if not file.path.endswith(".py"):
        return False
    return file.drifted or any(r.USES_LIBCST for r in _active_rules(file, rules))


def _parse_error_hit(message: str, line: int = 1) -> Hit:
    return Hit(
        rule=PARSE_ERROR,
        severity=ENGINE_RULES[PARSE_ERROR][0],
        line=max(line, 1),
        column=0,
        message=message,
        stmt_line=max(line, 1),
    )


def _run_rules(file: SourceFile, rules: Sequence[type[Rule]], *, exact: bool = False) -> tuple[list[Hit], str]:
    """Raw hits for one file, and its decoded text."""
    data = file.installed
    text = _decode(data)
    active = _active_rules(file, rules)
    hits: list[Hit] = []
    pristine_text = _decode(file.pristine) if file.pristine is not None else None
    for rule in active:
        if not rule.USES_LIBCST:
            hits.extend(rule(FileContext(path=file.path)).check_text(text, pristine_text))
    if not file.path.endswith(".py"):
        return hits, text
    cst_rules = [r for r in active if r.USES_LIBCST]
    if not cst_rules and not file.drifted:
        # Cheap checks only: a non-drifted file is parsed only when a rule could match.
        if b"\0" in data:
            hits.append(_parse_error_hit("binary content in a .py file"))
        return hits, text
    if b"\0" in data:
        return hits + [_parse_error_hit("binary content in a .py file")], text
    try:
        module = cst.parse_module(data)
    except cst.ParserSyntaxError as exc:
        return hits + [_parse_error_hit(f"does not parse: {exc.message}", exc.raw_line)], text
    except Exception as exc:  # undecodable bytes, bad coding cookie, recursion: report, never crash
        return hits + [_parse_error_hit(f"does not parse: {type(exc).__name__}: {exc}")], text
    if not cst_rules:
        return hits, text
    context = FileContext(
        path=file.path,
        wrapper=MetadataWrapper(module, unsafe_skip_copy=True),
        exact=exact,
    )
    context.imports, context.rebound = _import_table(data)
    visitors: list[cst.BatchableCSTVisitor] = [_Tracker(context)]
    visitors.extend(rule(context) for rule in cst_rules)
    try:
        cst.visit_batched(module, visitors)
        if context.pending:
            if exact or any(p.top is None for p in context.pending):
                positions = context.metadata(PositionProvider)
            else:
                positions = _statement_positions(module, [p.top for p in context.pending])
            for p in context.pending:
                start = positions[p.node].start  # type: ignore[attr-defined]
                stmt = positions[p.stmt].start.line if p.stmt is not None else start.line  # type: ignore[attr-defined]
                hits.append(
                    Hit(
                        rule=p.rule,
                        severity=p.severity,
                        line=start.line,
                        column=start.column,
                        message=p.message,
                        stmt_line=stmt,
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


def _statement_positions(module: cst.Module, tops: list[cst.CSTNode | None]) -> dict[cst.CSTNode, object]:
    """Positions of the nodes inside the given module-level statements only.

    PositionProvider generates code for the whole module with position tracking, four times the
    cost of plain code generation. Lines before a statement are counted from plain code instead,
    and positions are tracked only inside the statements that hold a finding.
    """
    wanted = {id(t) for t in tops if t is not None}
    out: dict[cst.CSTNode, object] = {}
    line = sum(module.code_for_node(empty).count("\n") for empty in module.header)
    for stmt in module.body:
        code = module.code_for_node(stmt)
        if id(stmt) in wanted:
            wanted.discard(id(stmt))
            mini = cst.Module(
                body=[stmt],
                header=[],
                footer=[],
                encoding=module.encoding,
                default_indent=module.default_indent,
                default_newline=module.default_newline,
                has_trailing_newline=module.has_trailing_newline,
            )
            for node, r in MetadataWrapper(mini, unsafe_skip_copy=True).resolve(PositionProvider).items():
                out[node] = CodeRange(
                    CodePosition(r.start.line + line, r.start.column),
                    CodePosition(r.end.line + line, r.end.column),
                )
            if not wanted:
                break
        line += code.count("\n")
    return out


def check_file(file: SourceFile, rules: Sequence[type[Rule]], *, exact: bool = False) -> list[Finding]:
    """Findings for one file, suppressions applied, before severity overrides.

    exact=True resolves every name through libcst's QualifiedNameProvider instead of the
    import-table shortcut; the results are the same, only slower (the tests check that).
    """
    hits, text = _run_rules(file, rules, exact=exact)
    ignores = _ignores(text) if b"patchaudit:" in file.installed else {}
    used: set[tuple[int, str]] = set()
    suppressed: list[bool] = []
    for hit in hits:
        is_suppressed = False
        for line in {hit.line, hit.stmt_line}:
            if hit.rule in ignores.get(line, ()):
                used.add((line, hit.rule))
                is_suppressed = True
        suppressed.append(is_suppressed)
    for line, ids in sorted(ignores.items()):
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

    changed: set[int] | None = None
    if file.drifted and file.pristine is not None:
        changed = _changed_lines(text, _decode(file.pristine))
    findings = []
    for hit, is_suppressed in zip(hits, suppressed, strict=True):
        if changed is not None and not (hit.always_in_change or hit.line in changed or hit.stmt_line in changed):
            continue
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


# -- many files ------------------------------------------------------------------------------

_WORKER_RULES: tuple[type[Rule], ...] = ()


def _init_worker(rule_dirs: tuple[str, ...]) -> None:
    global _WORKER_RULES
    _WORKER_RULES = tuple(load_rules([Path(d) for d in rule_dirs]))


def _work(file: SourceFile) -> list[Finding]:
    return check_file(file, _WORKER_RULES)


def _cache_key(file: SourceFile, version: str) -> str:
    h = hashlib.sha256()
    for part in (version.encode(), os.fsencode(file.path), b"d" if file.drifted else b"n"):
        h.update(part + b"\0")
    h.update(hashlib.sha256(file.installed).digest())
    h.update(hashlib.sha256(file.pristine).digest() if file.pristine is not None else b"-")
    return h.hexdigest()


def _cache_read(cache_dir: Path, key: str, path: str) -> list[Finding] | None:
    try:
        rows = json.loads((cache_dir / key[:2] / f"{key}.json").read_text())
        return [
            Finding(
                rule=r["rule"],
                severity=Severity(r["severity"]),
                path=path,
                line=r["line"],
                message=r["message"],
                in_change=r["in_change"],
                column=r["column"],
                suppressed=r["suppressed"],
            )
            for r in rows
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cache_write(cache_dir: Path, key: str, findings: list[Finding]) -> None:
    rows = [
        {
            "rule": f.rule,
            "severity": f.severity.value,
            "line": f.line,
            "message": f.message,
            "in_change": f.in_change,
            "column": f.column,
            "suppressed": f.suppressed,
        }
        for f in findings
    ]
    target = cache_dir / key[:2] / f"{key}.json"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(rows))
        os.replace(tmp, target)
    except OSError:
        pass  # a cache that cannot be written only costs time


def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def check_files(
    files: Iterable[SourceFile],
    *,
    rule_dirs: Sequence[Path] = (),
    severity_overrides: Mapping[str, Severity] | None = None,
    cache_dir: Path | None = None,
    workers: int | None = None,
) -> list[Finding]:
    """Run the built-in pack plus `rule_dirs` over `files`; findings sorted by path and line."""
    rules = load_rules(rule_dirs)
    files = list(files)
    results: list[list[Finding] | None] = [None] * len(files)
    keys: list[str] = []
    if cache_dir is not None:
        version = pack_version(rules)
        for index, file in enumerate(files):
            key = _cache_key(file, version)
            keys.append(key)
            results[index] = _cache_read(cache_dir, key, file.path)
    todo = [i for i, r in enumerate(results) if r is None]
    heavy = [i for i in todo if _needs_parse(files[i], rules)]
    heavy_set = set(heavy)
    for index in todo:
        if index not in heavy_set:
            results[index] = check_file(files[index], rules)
    n_workers = workers if workers is not None else _default_workers()
    if n_workers > 1 and len(heavy) >= _POOL_MIN:
        # Biggest files first, so that no worker is left with one huge file at the end.
        heavy.sort(key=lambda i: -len(files[i].installed))
        dirs = tuple(str(Path(d).resolve()) for d in rule_dirs)
        # fork: workers inherit the loaded pack, and callers need no `__main__` guard.
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        ctx = multiprocessing.get_context(method)
        with ProcessPoolExecutor(
            max_workers=n_workers, mp_context=ctx, initializer=_init_worker, initargs=(dirs,)
        ) as pool:
            for index, found in zip(heavy, pool.map(_work, [files[i] for i in heavy], chunksize=2), strict=True):
                results[index] = found
    else:
        for index in heavy:
            results[index] = check_file(files[index], rules)
    if cache_dir is not None:
        for index in todo:
            fresh = results[index]
            assert fresh is not None
            _cache_write(cache_dir, keys[index], fresh)
    overrides = dict(severity_overrides or {})
    out: list[Finding] = []
    for per_file in results:
        assert per_file is not None
        for finding in per_file:
            if finding.rule in overrides:
                finding = _with_severity(finding, overrides[finding.rule])
            out.append(finding)
    out.sort(key=lambda f: (f.path, f.line, f.column, f.rule))
    return out


def _with_severity(finding: Finding, severity: Severity) -> Finding:
    return Finding(
        rule=finding.rule,
        severity=severity,
        path=finding.path,
        line=finding.line,
        message=finding.message,
        in_change=finding.in_change,
        column=finding.column,
        suppressed=finding.suppressed,
    )


# -- a pack's own examples -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ExampleResult:
    """One VALID or INVALID example of a rule, run through the engine with that rule alone."""

    rule: str
    kind: str  # "valid" | "invalid"
    index: int
    ok: bool
    problem: str
    findings: tuple[Finding, ...]


def _as_example(example: str | Example) -> Example:
    return example if isinstance(example, Example) else Example(code=example)


def run_example(rule: type[Rule], kind: str, index: int, example: str | Example) -> ExampleResult:
    ex = _as_example(example)
    source = SourceFile(
        path=ex.path,
        installed=ex.code.encode(),
        pristine=ex.pristine.encode() if ex.pristine is not None else None,
        drifted=True,
    )
    found = tuple(f for f in check_file(source, [rule]) if not f.suppressed)
    own = [f for f in found if f.rule == rule.ID]
    problem = ""
    if kind == "valid":
        if found:
            problem = "expected no finding, got " + "; ".join(f"{f.rule} at line {f.line}: {f.message}" for f in found)
    else:
        if not own:
            other = "; ".join(f"{f.rule} at line {f.line}: {f.message}" for f in found)
            problem = "expected a finding, got none" + (f" (but: {other})" if other else "")
        elif ex.line is not None and not any(f.line == ex.line for f in own):
            problem = f"expected a finding at line {ex.line}, got lines {[f.line for f in own]}"
        elif ex.severity is not None and own[0].severity is not ex.severity:
            problem = f"expected severity {ex.severity.value}, got {own[0].severity.value}"
    return ExampleResult(rule=rule.ID, kind=kind, index=index, ok=not problem, problem=problem, findings=found)


def run_examples(rules: Sequence[type[Rule]]) -> list[ExampleResult]:
    """Every example of every rule; a rule with no VALID or no INVALID example fails too."""
    results = []
    for rule in rules:
        for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID)):
            if not examples:
                results.append(
                    ExampleResult(
                        rule=rule.ID,
                        kind=kind,
                        index=-1,
                        ok=False,
                        problem=f"the rule declares no {kind.upper()} example",
                        findings=(),
                    )
                )
            for index, example in enumerate(examples):
                results.append(run_example(rule, kind, index, example))
    return results
