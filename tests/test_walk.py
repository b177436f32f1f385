"""The read-only walk makes exactly the hook calls of libcst's own traversal, in the same order, on the same nodes."""

from __future__ import annotations

import email
import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import click
import libcst as cst
import packaging
import pytest
import rich

from patchaudit.analysis import walk
from patchaudit.hazards.engine import _Batched, _BatchedAttributes
from patchaudit.hazards.loading import load_rules
from patchaudit.hazards.tracker import Tracker

STDLIB = Path(json.__file__).parents[1]


def _files() -> list[Path]:
    """A few dozen varied real modules: the standard library and the wheels installed beside the tests."""
    picked = [STDLIB / name for name in ("ast.py", "dataclasses.py", "contextlib.py", "functools.py", "shlex.py")]
    picked += sorted(Path(json.__file__).parent.glob("*.py"))
    picked += sorted(Path(email.__file__).parent.glob("*.py"))[:8]
    picked += sorted((STDLIB / "asyncio").glob("*.py"))[:6]
    for package in (click, rich, packaging, cst):
        picked += sorted(Path(package.__file__).parent.glob("*.py"))[:5]
    return [path for path in picked if path.is_file() and path.stat().st_size < 60_000]


SHAPES = textwrap.dedent(
    '''\
    """Shapes with fields visited only sometimes."""
    from . import a
    from .b import *
    from c import (d as e, f,)
    x = f"{y!r:>{width}} {z=} {w}" ; v = [*a, *b]
    def g[T](a, /, b: int = 1, *c, d, **e) -> T:
        global q
        async with h() as (i, j), k: pass
        match a:
            case {"k": [1, *rest]} | Point(x=0) if rest: return (yield from rest)
            case _: ...
        return lambda p=1, *, q: (p := q) if p else not q
    @dec
    class C(B, metaclass=M):
        x: int = 1
        try:
            pass
        except* (E, F) as exc:
            raise X from exc
        else:
            del a[1:2, ::3], b.c
        finally:
            print(1 if 2 else 3, sep="")
    '''
)


def _every_hook(table: walk._Table) -> list[str]:
    names = []
    for kind, order in table.orders.items():
        names += [f"visit_{kind.__name__}", f"leave_{kind.__name__}"]
        for field, _ in order:
            names += [f"visit_{kind.__name__}_{field}", f"leave_{kind.__name__}_{field}"]
    return sorted(set(names))


def _rule_hooks() -> list[str]:
    """The hooks the rule pack and the Tracker define (libcst's no-op defaults left out)."""
    classes = [Tracker, *(rule for rule in load_rules() if rule.USES_LIBCST)]
    return sorted(
        {
            name
            for cls in classes
            for name in dir(cls)
            if name.startswith(("visit_", "leave_")) and not getattr(getattr(cls, name), "_is_no_op", False)
        }
    )


def _recorder(names: list[str], events: list[tuple[str, int]]) -> dict[str, list[Callable[[cst.CSTNode], None]]]:
    def hook(name: str) -> Callable[[cst.CSTNode], None]:
        return lambda node: events.append((name, id(node)))

    return {name: [hook(name)] for name in names}


def _both(module: cst.Module, names: list[str]) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    theirs: list[tuple[str, int]] = []
    ours: list[tuple[str, int]] = []
    plain = all(isinstance(getattr(cst, name.split("_", 1)[1], None), type) for name in names)
    hooks = _recorder(names, theirs)
    module.visit(_Batched(hooks) if plain else _BatchedAttributes(hooks))
    walker = walk.walker(_recorder(names, ours))
    assert walker is not None, "libcst's node types could not be read"
    walker.walk(module)
    return theirs, ours


@pytest.fixture(scope="module")
def table() -> walk._Table:
    found = walk._table()
    assert found is not None
    return found


@pytest.mark.parametrize("hooks", ["every hook", "the rule pack's hooks"])
def test_the_walk_makes_libcsts_calls_in_libcsts_order(table, hooks) -> None:
    names = _every_hook(table) if hooks == "every hook" else _rule_hooks()
    sources = [SHAPES.encode()] + [path.read_bytes() for path in _files()]
    assert len(sources) > 30
    compared = 0
    for source in sources:
        theirs, ours = _both(cst.parse_module(source), names)
        assert ours == theirs
        compared += len(theirs)
    assert compared > 10_000


def test_every_node_of_an_fstring_and_a_match_is_seen(table) -> None:
    theirs, ours = _both(cst.parse_module(SHAPES.encode()), _every_hook(table))
    seen = {name for name, _ in ours}
    for name in ("visit_FormattedStringExpression_format_spec", "visit_MatchMapping", "leave_ExceptStarHandler"):
        assert name in seen
    assert ours == theirs


def test_whitespace_is_passed_over_only_while_nothing_hooks_it(table) -> None:
    assert {cst.SimpleWhitespace, cst.Comma, cst.Name} <= table.hidden(frozenset(_rule_hooks_types()))
    hidden = table.hidden(frozenset({"Comment"}))
    assert cst.ParenthesizedWhitespace not in hidden and cst.SimpleWhitespace in hidden  # a comment can be under one
    theirs, ours = _both(cst.parse_module(b"f(a,  # note\n  b)\n"), ["visit_Comment", "leave_Call"])
    assert [name for name, _ in ours] == ["visit_Comment", "leave_Call"]
    assert ours == theirs


def _rule_hooks_types() -> set[str]:
    return {name.split("_")[1] for name in _rule_hooks()}


def test_a_deep_expression_walks_where_libcst_does() -> None:
    depth = min(sys.getrecursionlimit() // 8, 100)
    module = cst.parse_module(("x = " + "(" * depth + "1" + ")" * depth + "\n").encode())
    theirs, ours = _both(module, ["visit_Integer", "leave_Assign"])
    assert ours == theirs


@pytest.mark.parametrize(
    "kinds", [None, (cst.Name,), (cst.Call,), (cst.NamedExpr,), (cst.Attribute, cst.Name), (cst.Comment,)]
)
def test_nodes_of_a_type_are_libcsts_in_its_order(kinds) -> None:
    for source in [SHAPES.encode()] + [path.read_bytes() for path in _files()[:12]]:
        module = cst.parse_module(source)
        for root in [module, *module.body[:20]]:
            assert [id(n) for n in walk.nodes(root, kinds)] == [id(n) for n in walk._visited(root, kinds)]


@pytest.mark.parametrize(
    ("kinds", "opaque"),
    [
        ((cst.Call,), (cst.Lambda,)),
        ((cst.SimpleStatementLine,), (cst.FunctionDef,)),
        ((cst.Return,), (cst.FunctionDef, cst.Lambda)),
    ],
)
def test_nodes_below_an_opaque_type_are_not_entered_as_libcst_would_not(kinds, opaque) -> None:
    """An opaque node is met but not entered, as a visitor whose `visit_Lambda` returns False: the
    calls inside a lambda, the lines of a nested function are not among the nodes."""
    shapes = "def f(x):\n    g = lambda y: h(y)\n    def inner():\n        return k(x)\n    return g(x)\n"
    for source in [shapes.encode(), SHAPES.encode()] + [path.read_bytes() for path in _files()[:12]]:
        module = cst.parse_module(source)
        for root in [module, *module.body[:20]]:
            ours = walk.nodes(root, kinds, opaque)
            assert [id(n) for n in ours] == [id(n) for n in walk._visited(root, kinds, opaque)]
    module = cst.parse_module(shapes)
    calls = walk.nodes(module, (cst.Call,), (cst.Lambda,))
    assert [cst.Module([]).code_for_node(c.func) for c in calls] == ["k", "g"]  # type: ignore[attr-defined]
