"""The name-resolution layer: every import form, aliases, getattr/__import__, scoping; agreement with libcst."""

from __future__ import annotations

import ast
import dataclasses
import email
import json
import textwrap
from pathlib import Path

import click
import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, QualifiedNameProvider, QualifiedNameSource

from patchaudit.analysis.module import NOT_CONSTANT, constant_value
from patchaudit.analysis.names import NameTable, canonical
from patchaudit.analysis.values import ref_of_cst


def _resolve(code: str, expr: str, scope=()) -> set[str]:
    table = NameTable.build(ast.parse(textwrap.dedent(code)))
    node = cst.parse_expression(expr)
    return {canonical(q) for q in table.resolve(ref_of_cst(node), tuple(scope))}


@pytest.mark.parametrize(
    ("code", "expr"),
    [
        ("import torch", "torch.save"),
        ("import os, torch", "torch.save"),
        ("import torch as t", "t.save"),
        ("import torch.serialization as ser", "ser.save"),
        ("import torch.serialization", "torch.serialization.save"),
        ("from torch.serialization import save", "save"),
        ("from torch import save as s", "s"),
        ("t = __import__('torch')", "t.save"),
        ("", "__import__('torch').save"),
        ("import importlib\nt = importlib.import_module('torch')", "t.save"),
        ("import torch", "getattr(torch, 'save')"),
        ("import torch\nsave = torch.save", "save"),
        ("import torch\nsave = getattr(torch, 'save')", "save"),
        ("from torch import *", "save"),
    ],
)
def test_every_import_form_reaches_torch_save(code: str, expr: str) -> None:
    assert "torch.save" in _resolve(code, expr)


def test_scoping_follows_python() -> None:
    code = """
    import numpy as np
    import torch

    def f(np):
        pass

    class A:
        torch = None

        def g(self):
            pass

    def h():
        global save
        save = torch.save
    """
    assert _resolve(code, "np.save", [("def", "f")]) == set()
    assert _resolve(code, "np.save", [("def", "other")]) == {"numpy.save"}
    # A class body is not an enclosing scope of its methods.
    assert _resolve(code, "torch.save", [("class", "A"), ("def", "g")]) == {"torch.save"}
    assert _resolve(code, "torch.save", [("class", "A")]) == set()
    assert _resolve(code, "save", []) == {"torch.save"}
    assert _resolve(code, "print", [("def", "h")]) == {"builtins.print"}


def test_alias_cycles_and_instances() -> None:
    assert _resolve("a = b\nb = a", "a.save") == set()
    assert _resolve("import pdb\np = pdb.Pdb()", "p.set_trace") == {"pdb.set_trace"}

    # Unpacking a display binds each target to its own value; any other unpacking computes in place.
    assert _resolve("import pdb\np, n = pdb.Pdb(), 0", "p.set_trace") == {"pdb.set_trace"}
    assert _resolve("import pdb\np, n = make()", "p.set_trace") == set()


def test_instance_attributes_bound_by_unpacking() -> None:
    code = """
    class Tap:
        def __init__(self, path, limit):
            self.path, self.limit = path, limit
            self.a, self.b = make()
    """
    table = NameTable.build(ast.parse(textwrap.dedent(code)))
    assigned = {
        attr: [ast.unparse(v) if v is not None else None for v in values]
        for (_, attr), values in table.instance_assigned.items()
    }
    assert assigned == {"path": ["path"], "limit": ["limit"], "a": [None], "b": [None]}


class _Scoped(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self, table: NameTable) -> None:
        super().__init__()
        self.table = table
        self.scope: list[tuple[str, str]] = []
        self.checked = 0
        self.problems: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope.append(("def", node.name.value))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope.append(("class", node.name.value))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.scope.append(("lambda", ""))

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self.scope.pop()

    def visit_Call(self, node: cst.Call) -> None:
        expected = {
            q.name
            for q in self.get_metadata(QualifiedNameProvider, node.func, set())
            if q.source is QualifiedNameSource.IMPORT
        }
        if not expected:
            return
        self.checked += 1
        # libcst drops calls from a chain (`Path(p).open` is `pathlib.Path.open`); the table keeps them.
        got = {q.replace("()", "") for q in self.table.resolve(ref_of_cst(node.func), tuple(self.scope))}
        if not expected <= got:
            self.problems.append(f"{cst.Module([]).code_for_node(node.func)}: {expected} not in {set(got)}")


def _files(package) -> list[Path]:
    return sorted(Path(package.__file__).parent.rglob("*.py"))


def test_agrees_with_libcst_on_every_imported_call_of_real_packages() -> None:
    checked = 0
    for path in _files(click) + _files(json) + _files(email):
        data = path.read_bytes()
        visitor = _Scoped(NameTable.build(ast.parse(data), data))
        MetadataWrapper(cst.parse_module(data)).visit(visitor)
        assert visitor.problems == [], path
        checked += visitor.checked
    assert checked > 300


def _table_shape(table: NameTable) -> object:
    """A table's bindings, strings and instance values, with each ast node named by its place."""

    def place(value: object) -> object:
        if isinstance(value, ast.AST):  # a node made for the table (`for save in ...`): its text
            found = getattr(value, "lineno", None)
            return (type(value).__name__, found, value.col_offset) if found else ast.dump(value)  # type: ignore[attr-defined]
        if isinstance(value, list | tuple):
            return tuple(place(v) for v in value)
        if dataclasses.is_dataclass(value):
            return (type(value).__name__, tuple(place(getattr(value, f.name)) for f in dataclasses.fields(value)))
        return value

    bindings = {(scope, name): place(found) for scope, names in table.bindings.items() for name, found in names.items()}
    assigned = {key: place(values) for key, values in table.instance_assigned.items()}
    return bindings, table.strings, assigned, table.class_bases, table.star_modules


_BINDS_INSIDE = """
import functools
import triton


@triton.heuristics({"HAS_BIAS": lambda args: args["B"] is not None})
def kernel(x):
    return x


@functools.lru_cache(maxsize=(n := 4))
def cached(y):
    return y


class Tap:
    @staticmethod
    def pick(f=lambda t: t.save):
        return f

    def run(self, xs):
        if (hit := len(xs)) == 5:
            print(hit)
        for self.i in (keep := [x for x in xs if (y := x)]):
            pass
        while (z := xs.pop()) is not None:
            break
        with open(z) as handle, (w := handle):
            pass
        try:
            pass
        except OSError as err:
            del err
        match xs:
            case [first, *rest]:
                pass
            case {"k": v, **others}:
                pass
        return sorted(xs, key=lambda s: s.n)
"""


def test_the_table_read_from_the_source_is_the_table_of_every_node() -> None:
    """With the source, a statement whose lines spell no `lambda` and no `:=` is bound without
    walking its expressions; the bindings are those found by visiting every node."""
    files = [path.read_bytes() for path in _files(click) + _files(json) + _files(email)]
    inside = [_BINDS_INSIDE.replace("\n", end).encode() for end in ("\n", "\r\n", "\r")]  # lines as ast counts them
    for data in [*inside, *files]:
        tree = ast.parse(data)
        assert _table_shape(NameTable.build(tree, data)) == _table_shape(NameTable.build(tree)), data[:60]


def _literal_eval_value(node: ast.expr) -> object:
    """constant_value as it read every node before: through ast.literal_eval."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_CONSTANT
    if isinstance(value, tuple | list | set | frozenset) and value and all(type(v) is int for v in value):
        return frozenset(value)
    return value if isinstance(value, bool | int | float | str | type(None)) else NOT_CONSTANT


def test_a_constant_is_read_as_literal_eval_reads_it() -> None:
    """constant_value reads a plain constant itself and refuses a name or a call without handing
    it to literal_eval (whose closures leave a cycle per call): the same value for every
    expression of real packages, and for the shapes literal_eval reads besides."""
    extra = "(5, 9); [2]; {3, 4}; -1; 1 + 2j; set(); {'a': 1}; f(1); x; x.y; ...; b'x'; not 1; (1, 'a')"
    trees = [ast.parse(extra), *(ast.parse(p.read_bytes()) for p in _files(click) + _files(json) + _files(email))]
    read = 0
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.expr):
                assert constant_value(node) == _literal_eval_value(node), ast.dump(node)
                read += 1
    assert read > 10_000


def test_no_cache_of_a_files_rules_outlives_its_check() -> None:
    """What the rules cache of a module (its helpers, its numeric names) is let go when its check
    ends: the tree goes with the check, not with the next file's."""
    from patchaudit.analysis import per_file
    from patchaudit.hazards import SourceFile, check_file, load_rules

    code = textwrap.dedent(
        """
        import os
        import torch

        CHECKS = False

        def forward(x, num_tokens):
            if num_tokens == 5:
                torch.save(x, "/tmp/x.pt")
            if CHECKS:
                raise ValueError(x)
            os.environ["X"] = "1"
            return x
        """
    ).encode()
    found = check_file(SourceFile(path="m.py", installed=code, pristine=None, drifted=True), load_rules())
    assert {"torch-save", "token-count-branch", "env-mutation"} <= {f.rule for f in found}
    assert len(per_file._CACHES) >= 8  # the rules' own, and the analysis's
    assert all(c.cache_info().currsize == 0 for c in per_file._CACHES)
