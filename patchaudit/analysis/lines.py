"""Physical source lines, numbered as Python, ast, libcst and site.py number them; and code as its
tokens, for asking whether a piece of code stands in a text token for token."""

from __future__ import annotations

import io
import re
import tokenize

import libcst as cst

__all__ = ["source_lines", "pth_executable_lines", "line_opcodes", "code_tokens", "one_line"]


def one_line(node: cst.CSTNode, width: int = 60) -> str:
    """A node's code on one line, cut to `width` characters: how a finding quotes it."""
    text = " ".join(cst.Module([]).code_for_node(node).split())
    return text if len(text) <= width else text[: width - 3] + "..."


_NEWLINE = re.compile(r"\r\n|\r|\n")


def source_lines(text: str) -> list[str]:
    """The lines of `text`, each ended by \\r\\n, \\r or \\n only (the ending dropped).

    Not str.splitlines, which also ends a line at \\f, \\v, \\x1c-\\x1e, \\x85 and \\u2028 and so
    shifts every line number after one of them away from what a traceback, ast or libcst says.
    """
    lines = _NEWLINE.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def pth_executable_lines(text: str) -> list[int]:
    """1-based numbers of the lines site.py executes in a .pth file (those starting `import`)."""
    return [n for n, line in enumerate(source_lines(text), start=1) if line.startswith(("import ", "import\t"))]


def line_opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib opcodes from lines `a` to lines `b`, the common head and tail matched first.

    A hand patch touches a few lines of a large file: SequenceMatcher then only sees the middle.
    """
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    import difflib  # only where a changed file is compared: scans of clean files never load it

    inner = difflib.SequenceMatcher(None, a[head : len(a) - tail], b[head : len(b) - tail], autojunk=False)
    out: list[tuple[str, int, int, int, int]] = [("equal", 0, head, 0, head)] if head else []
    out += [(tag, i1 + head, i2 + head, j1 + head, j2 + head) for tag, i1, i2, j1, j2 in inner.get_opcodes()]
    if tail:
        out.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return out


_LAYOUT = frozenset(
    {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
)


def code_tokens(code: str) -> str:
    """The code's tokens, comments and layout left out, one space apart: a `#` inside a string stays."""
    try:
        return " ".join(t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in _LAYOUT)
    except (tokenize.TokenError, SyntaxError):  # unbalanced brackets, a bad indent: its words, at least
        return " ".join(code.split())
