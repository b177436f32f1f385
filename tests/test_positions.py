"""The engine's positions of libcst nodes are libcst's own PositionProvider's, node for node."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from patchaudit.hazards.positions import spans

STDLIB = Path(sysconfig.get_paths()["stdlib"])

SHAPES = {
    "crlf": "import os\r\n\r\ndef f(x):\r\n    if x == 5:\r\n        print(x)\r\n    return x\r\n",
    "cr": "x = 1\ry = (2 +\r     3)\rif x:\r    pass\r",
    "continuation": "total = 1 + \\\n    2 + \\\n    3\nvalue = f(a,\n  b)  # tail\n",
    "strings": 'doc = """one\ntwo\r\nthree"""\nf = f"{x!r:>{width}} and {y}"\nb = rb"\\x00"\n',
    "decorators": "@a.b(1)\n@c\nclass K(Base, metaclass=M):\n    @property\n    def p(self): return 1\n",
    "form feed and tabs": "\x0cimport sys\nif sys:\n\tpass\n\tx = [\n\t\t1,\n\t]\n",
    "no trailing newline": "def f():\n    return 1",
    "empty": "",
    "comments only": "# one\n\n   # two\n",
    "compound": (
        "try:\n    x = 1\nexcept (A, B) as e:\n    raise\nelse:\n    pass\nfinally:\n    y = lambda q, *r, **s: q\n"
        "with open(p) as f, g() as h:\n    match v:\n"
        "        case [1, *rest] if rest:\n            z = {k: w for k, w in d}\n"
        "async def g():\n    async for i in aiter():\n        await i\n    x: int = 5; y += 1\n"
    ),
}


def _same(code: str) -> None:
    module = cst.parse_module(code)
    theirs = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    ours = spans(module)
    assert set(ours) == set(theirs)
    for node, found in theirs.items():
        expected = ((found.start.line, found.start.column), (found.end.line, found.end.column))
        assert ours[node] == expected, (type(node).__name__, expected, ours[node])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_node_lies_where_libcst_puts_it(name: str) -> None:
    _same(SHAPES[name])


@pytest.mark.parametrize("module", ["argparse.py", "dataclasses.py", "email/_header_value_parser.py", "typing.py"])
def test_a_real_module_node_for_node(module: str) -> None:
    _same((STDLIB / module).read_text())
