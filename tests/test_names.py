"""The name-resolution layer: every import form, aliases, getattr/__import__, scoping; agreement with libcst."""

from __future__ import annotations

import ast
import email
import json
import textwrap
from pathlib import Path

import click
import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, QualifiedNameProvider, QualifiedNameSource

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
