"""Source lines as Python numbers them, and line opcodes that map a patch onto them."""

from __future__ import annotations

import ast
import random

import pytest

from patchaudit.analysis.lines import line_opcodes, pth_executable_lines, source_lines


@pytest.mark.parametrize("sep", ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"], ids=repr)
def test_lines_end_where_python_ends_them(sep: str) -> None:
    text = f"a = 1  # one{sep}still one\r\nb = 2\rc = 3\nd = {{}}\n"
    lines = source_lines(text)
    assert len(lines) == 4
    assert [n.lineno for n in ast.parse(text).body] == [1, 2, 3, 4]
    assert lines[3] == "d = {}"


def test_pth_lines_split_like_site_py() -> None:
    assert pth_executable_lines("/opt/a\x85import x\nimport y\r\n") == [2]


def test_opcodes_rebuild_the_new_lines() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 14))]
        b = list(a)
        for _ in range(rng.randint(0, 3)):
            roll = rng.random()
            if roll < 0.4 and b:
                del b[rng.randrange(len(b))]
            elif roll < 0.8:
                b.insert(rng.randint(0, len(b)), rng.choice("abcdef"))
            elif b:
                b[rng.randrange(len(b))] = "z"
        rebuilt: list[str] = []
        for tag, i1, i2, j1, j2 in line_opcodes(a, b):
            if tag == "equal":
                assert a[i1:i2] == b[j1:j2]
            rebuilt += b[j1:j2]
        assert rebuilt == b, (a, b)
