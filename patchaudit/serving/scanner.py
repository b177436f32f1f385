"""What one module's bytes import, found without parsing the whole file.

A full `ast.parse` of vLLM's ~3,000 modules takes tens of seconds; the import statements are a small
part of each file. This scanner finds them by their keywords, skips those inside triple-quoted strings
and under `if TYPE_CHECKING:` (they never run), and parses each statement it keeps with `ast`, so a
statement is read as Python reads it. It also keeps two kinds of indirection that name a module
without importing it: `importlib.import_module("a.b")` with a constant name, and vLLM's
`init_vllm_registered_model(..., architectures=["Arch"])`, whose constant architectures the
framework's registry turns into modules.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

REGISTRY_CALL = b"init_vllm_registered_model("
_IMPORT_MODULE = re.compile(
    rb"""import_module\(\s*(['"])([\w.]+)\1\s*(?:,\s*(?:package\s*=\s*)?(__package__|__name__))?"""
)
_ARCHITECTURES = re.compile(rb"architectures\s*=\s*\[([^\]]*)\]")
_STRING = re.compile(rb"""(['"])(\w+)\1""")
_COMMENT = re.compile(rb"#[^\n]*")
_FROM_BYTES = re.compile(rb"from\s+(\.*[\w.]*)\s+import")
_FROM = re.compile(r"from\s+(\.*[\w.]*)\s+import\b(.*)", re.S)
_DOTTED = re.compile(r"\w+(?:\.\w+)*")
_TYPE_CHECKING = re.compile(rb"[ \t]*if[ \t]+(?:typing\.)?TYPE_CHECKING[ \t]*:[ \t]*(?:#[^\n]*)?\n")


@dataclass(frozen=True, slots=True)
class Facts:
    """Each (name, line): modules an import may name (filtered later against what exists), and the
    architectures a registry call builds."""

    imports: tuple[tuple[str, int], ...] = ()
    registry: tuple[tuple[str, int], ...] = ()

    def to_list(self) -> list[list[list[str | int]]]:
        return [[list(i) for i in self.imports], [list(r) for r in self.registry]]

    @classmethod
    def from_list(cls, data: object) -> Facts:
        """Typed back from a cache file; anything malformed raises ValueError."""
        if not isinstance(data, list) or len(data) != 2:
            raise ValueError("facts")
        parts: list[tuple[tuple[str, int], ...]] = []
        for group in data:
            if not isinstance(group, list):
                raise ValueError("facts")
            items = []
            for item in group:
                if not (isinstance(item, list) and len(item) == 2):
                    raise ValueError("facts")
                name, line = item
                if not isinstance(name, str) or not isinstance(line, int) or isinstance(line, bool):
                    raise ValueError("facts")
                items.append((name, line))
            parts.append(tuple(items))
        return cls(imports=parts[0], registry=parts[1])


def scan(data: bytes, module: str, is_package: bool, tops: frozenset[str]) -> Facts:
    """The imports and registry calls of `module` (a dotted name) whose source is `data`; only imports
    of the top-level packages `tops` are kept."""
    skipped = _string_ranges(data) + _type_checking_ranges(data)
    skipped.sort()
    starts = [a for a, _ in skipped]
    package = module if is_package else module.rpartition(".")[0]
    imports: list[tuple[str, int]] = []
    lines = _LineCounter(data)

    def hidden(pos: int) -> bool:
        n = bisect.bisect_right(starts, pos) - 1
        return n >= 0 and skipped[n][0] <= pos < skipped[n][1]

    pos = data.find(b"import")
    while pos >= 0:
        line_start = data.rfind(b"\n", 0, pos) + 1
        head = data[line_start:pos]
        stripped = head.strip()
        after = data[pos + 6 : pos + 7]
        stmt_start = -1
        if not stripped and after in (b" ", b"\t"):
            stmt_start = pos
        elif stripped.startswith(b"from") and after in (b" ", b"\t", b"("):
            stmt_start = line_start + len(head) - len(head.lstrip())
        if stmt_start >= 0 and not hidden(pos):
            end = _statement_end(data, pos)
            found = _parse_import(data[stmt_start:end], package, tops)
            if found:
                line = lines.at(stmt_start)
                imports += [(name, line) for name in found]
            pos = data.find(b"import", end)
            continue
        pos = data.find(b"import", pos + 6)
    for match in _IMPORT_MODULE.finditer(data):
        if hidden(match.start()):
            continue
        name = match.group(2).decode()
        if name.startswith("."):
            if match.group(3) is None:
                continue
            base = package if match.group(3) == b"__package__" else module
            name = _relative(base, name)
        if name.partition(".")[0] in tops:
            imports.append((name, data.count(b"\n", 0, match.start()) + 1))
    return Facts(imports=tuple(imports), registry=tuple(_registry_calls(data, hidden)))


class _LineCounter:
    """Line numbers of increasing offsets, counting each newline once."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos, self.line = data, 0, 1

    def at(self, pos: int) -> int:
        if pos < self.pos:
            self.pos, self.line = 0, 1
        self.line += self.data.count(b"\n", self.pos, pos)
        self.pos = pos
        return self.line


def _statement_end(data: bytes, pos: int) -> int:
    end = data.find(b"\n", pos)
    end = len(data) if end < 0 else end
    line = data[pos:end].split(b"#", 1)[0]
    if b"(" in line and b")" not in line:
        while end < len(data):  # to the line that closes the parenthesis, comments aside
            nxt = data.find(b"\n", end + 1)
            nxt = len(data) if nxt < 0 else nxt
            if b")" in data[end + 1 : nxt].split(b"#", 1)[0]:
                return nxt
            end = nxt
        return end
    while line.rstrip().endswith(b"\\"):
        nxt = data.find(b"\n", end + 1)
        nxt = len(data) if nxt < 0 else nxt
        line, end = data[end + 1 : nxt], nxt
    return end


def _parse_import(text: bytes, package: str, tops: frozenset[str]) -> list[str]:
    """Modules an `import ...` / `from ... import ...` statement may name, as absolute dotted names."""
    if text.startswith(b"from"):
        head = _FROM_BYTES.match(text)
        if head is None:
            return []
        module = head.group(1)
        if not module.startswith(b".") and module.partition(b".")[0].decode("utf-8", "replace") not in tops:
            return []
    elif not any(top.encode() in text for top in tops):
        return []
    stmt = _COMMENT.sub(b"", text.split(b";", 1)[0]).replace(b"\\\n", b" ").decode("utf-8", "replace")
    if stmt.startswith("import"):
        names = [part.split(" as ")[0].strip() for part in stmt[6:].split(",")]
        return [n for n in names if _DOTTED.fullmatch(n) and n.partition(".")[0] in tops]
    parts = _FROM.match(stmt)
    if parts is None:
        return []
    base, tail = parts.group(1), parts.group(2)
    if base.startswith("."):
        base = _relative(package, base)
    if not base or base.partition(".")[0] not in tops:
        return []
    out = [base]
    for part in tail.replace("(", " ").replace(")", " ").split(","):
        name = part.split(" as ")[0].strip()
        if name.isidentifier():
            out.append(f"{base}.{name}")
    return out


def _relative(package: str, name: str) -> str:
    level = len(name) - len(name.lstrip("."))
    parts = package.split(".") if package else []
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    rest = name[level:]
    return ".".join([*parts, rest] if rest else parts)


def _registry_calls(data: bytes, hidden: object) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    pos = data.find(REGISTRY_CALL)
    while pos >= 0:
        line_start = data.rfind(b"\n", 0, pos) + 1
        if not data[line_start:pos].lstrip().startswith(b"def") and not hidden(pos):  # type: ignore[operator]
            end = _call_end(data, pos + len(REGISTRY_CALL))
            args = data[pos:end]
            for arch_list in _ARCHITECTURES.finditer(args):
                for literal in _STRING.finditer(arch_list.group(1)):
                    at = pos + arch_list.start(1) + literal.start()
                    out.append((literal.group(2).decode(), data.count(b"\n", 0, at) + 1))
        pos = data.find(REGISTRY_CALL, pos + 1)
    return out


def _call_end(data: bytes, pos: int) -> int:
    depth = 1
    for n in range(pos, min(len(data), pos + 4000)):
        c = data[n]
        if c == 0x28:
            depth += 1
        elif c == 0x29:
            depth -= 1
            if depth == 0:
                return n
    return min(len(data), pos + 4000)


def _string_ranges(data: bytes) -> list[tuple[int, int]]:
    """Spans of triple-quoted strings (docstrings and their examples never run)."""
    out: list[tuple[int, int]] = []
    pos = 0
    double, single = data.find(b'"""'), data.find(b"'''")
    while double >= 0 or single >= 0:
        if single < 0 or 0 <= double < single:
            start, quote = double, b'"""'
        else:
            start, quote = single, b"'''"
        close = data.find(quote, start + 3)
        if close < 0:
            out.append((start, len(data)))
            return out
        pos = close + 3
        out.append((start, pos))
        if 0 <= double < pos:
            double = data.find(b'"""', pos)
        if 0 <= single < pos:
            single = data.find(b"'''", pos)
    return out


def _type_checking_ranges(data: bytes) -> list[tuple[int, int]]:
    """Bodies of `if TYPE_CHECKING:` blocks, up to the first line indented no deeper than the `if`."""
    out: list[tuple[int, int]] = []
    pos = data.find(b"TYPE_CHECKING")
    while pos >= 0:
        line_start = data.rfind(b"\n", 0, pos) + 1
        match = _TYPE_CHECKING.match(data, line_start)
        if match is not None:
            indent = len(data[line_start:pos]) - len(data[line_start:pos].lstrip())
            body = end = match.end()
            while end < len(data):
                nxt = data.find(b"\n", end)
                nxt = len(data) if nxt < 0 else nxt
                line = data[end:nxt]
                text = line.lstrip()
                if text and not text.startswith(b"#") and len(line) - len(text) <= indent:
                    break
                end = nxt + 1
            out.append((body, min(end, len(data))))
            pos = data.find(b"TYPE_CHECKING", max(end, pos + 1))
        else:
            pos = data.find(b"TYPE_CHECKING", pos + 1)
    return out
