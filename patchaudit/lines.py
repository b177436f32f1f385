"""Physical source lines, numbered as Python, ast, libcst and site.py number them."""

from __future__ import annotations

import re

__all__ = ["source_lines", "pth_executable_lines"]

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
