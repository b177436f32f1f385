"""Source text of a checked file: decoding, suppression comments, lines changed against pristine."""

from __future__ import annotations

import io
import re
import tokenize

from patchaudit.analysis.lines import line_opcodes, source_lines

__all__ = ["decode", "ignores", "changed_lines"]

_IGNORE = re.compile(r"#\s*patchaudit:\s*ignore\[([^\]]*)\]")


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def ignores(text: str) -> dict[int, set[str]]:
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
        for number, line in enumerate(source_lines(text), start=1):
            if "#" in line:
                add(number, line[line.index("#") :])
    return out


def changed_lines(installed: str, pristine: str) -> set[int]:
    """1-based installed lines that differ from pristine, plus both neighbours of each deletion."""
    a = source_lines(pristine)
    b = source_lines(installed)
    changed: set[int] = set()
    for tag, _i1, _i2, j1, j2 in line_opcodes(a, b):
        if tag in ("replace", "insert"):
            changed.update(range(j1 + 1, j2 + 1))
        elif tag == "delete":
            changed.update((j1, j1 + 1))
    return changed
