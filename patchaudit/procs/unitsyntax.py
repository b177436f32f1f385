"""systemd's grammars for what sets a service's environment, as systemd 252 reads them.

- unit files (systemd.syntax(7)): `#`/`;` comment lines (also between continuation lines), a trailing
  backslash joins the next line with a space, keys and values stripped;
- `Environment=` (systemd.exec(5)): words split as the shell does, single or double quotes, C escapes
  (`\\x41`, `\\t`, `\\s`, ...) in and out of quotes; a syntax error drops the rest of the line;
- environment files (systemd.exec(5), `EnvironmentFile=`): one `KEY=value` per line, quotes, escaped
  newlines, comments; the state machine of systemd's env-file parser;
- specifiers (systemd.unit(5)): `%n`, `%i`, `%h`, ... expanded before any of it applies.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

COMMENTS = "#;"
WHITESPACE = " \t\n\r"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SHELL_NEED_ESCAPE = '"\\`$'


class SyntaxProblem(ValueError):
    """A value systemd refuses (it logs and ignores the setting)."""


def env_name_ok(name: str) -> bool:
    return bool(_NAME.match(name))


def unit_lines(text: str) -> Iterator[tuple[int, str | None, str, str]]:
    """(first line number, section, key, value) of every assignment in a unit file or drop-in."""
    section: str | None = None
    continuation: str | None = None
    first = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        stripped = raw.lstrip(WHITESPACE)
        if stripped and stripped[0] in COMMENTS:
            continue  # a comment, also between continuation lines: skipped, the continuation goes on
        if continuation is None:
            first = number
            line = raw
        else:
            line = continuation + raw
        escaped = False
        for c in line:
            escaped = not escaped and c == "\\"
        if escaped:
            continuation = line[:-1] + " "
            continue
        continuation = None
        line = line.strip(WHITESPACE)
        if not line:
            continue
        if line.startswith("["):
            section = line[1:-1] if line.endswith("]") else None
            continue
        key, sep, value = line.partition("=")
        if sep:
            yield first, section, key.strip(WHITESPACE), value.strip(WHITESPACE)
    if continuation is not None:
        line = continuation.strip(WHITESPACE)
        key, sep, value = line.partition("=")
        if sep and not line.startswith("["):
            yield first, section, key.strip(WHITESPACE), value.strip(WHITESPACE)


_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                   "\\": "\\", '"': '"', "'": "'", "s": " "}  # fmt: skip


def _cunescape_one(text: str, i: int) -> tuple[str, int]:
    """The character a C escape at text[i] (just after the backslash) stands for, and the index after it."""
    if i >= len(text):
        raise SyntaxProblem("a backslash ends the value")
    c = text[i]
    if c in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[c], i + 1
    if c == "x":
        digits = text[i + 1 : i + 3]
        if len(digits) != 2 or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise SyntaxProblem(f"bad \\x escape: \\{text[i : i + 3]}")
        code = int(digits, 16)
        if code == 0:
            raise SyntaxProblem("\\x00 is not allowed")
        return chr(code), i + 3
    if c in "uU":
        n = 4 if c == "u" else 8
        digits = text[i + 1 : i + 1 + n]
        if len(digits) != n or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise SyntaxProblem(f"bad \\{c} escape")
        code = int(digits, 16)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise SyntaxProblem(f"bad \\{c} escape")
        return chr(code), i + 1 + n
    if c in "01234567":
        digits = text[i : i + 3]
        if len(digits) != 3 or not all(d in "01234567" for d in digits):
            raise SyntaxProblem("bad octal escape")
        code = int(digits, 8)
        if code == 0 or code > 255:
            raise SyntaxProblem("bad octal escape")
        return chr(code), i + 3
    raise SyntaxProblem(f"unknown escape \\{c}")


def words(value: str) -> Iterator[str]:
    """`Environment=`'s words: split at whitespace, quotes removed, C escapes resolved (systemd's
    extract_first_word with CUNESCAPE|UNQUOTE). SyntaxProblem at the word that cannot be read."""
    i, n = 0, len(value)
    while True:
        while i < n and value[i] in WHITESPACE:
            i += 1
        if i >= n:
            return
        word: list[str] = []
        quote: str | None = None
        while i < n:
            c = value[i]
            if quote is None:
                if c in WHITESPACE:
                    break
                if c in "'\"":
                    quote = c
                    i += 1
                elif c == "\\":
                    char, i = _cunescape_one(value, i + 1)
                    word.append(char)
                else:
                    word.append(c)
                    i += 1
            elif c == quote:
                quote = None
                i += 1
            elif c == "\\":
                char, i = _cunescape_one(value, i + 1)
                word.append(char)
            else:
                word.append(c)
                i += 1
        if quote is not None:
            raise SyntaxProblem("unbalanced quotes")
        yield "".join(word)


def env_file(text: str) -> list[tuple[int, str, str]]:
    """(line, name, value) of an environment file, as systemd 252's env-file parser reads it (later
    assignments of a name replace earlier ones when applied). Invalid names are left out."""
    out: list[tuple[int, str, str]] = []
    state = "pre_key"
    key: list[str] = []
    value: list[str] | None = None
    key_ws: int | None = None
    value_ws: int | None = None
    line = 1
    start = 1

    def push() -> None:
        name = "".join(key[:key_ws] if key_ws is not None else key)
        text_value = "".join(value or [])
        if state == "value" and value_ws is not None and value is not None:
            text_value = "".join(value[:value_ws])
        if env_name_ok(name):
            out.append((start, name, text_value))

    for c in text:
        if state == "pre_key":
            if c in COMMENTS:
                state = "comment"
            elif c not in WHITESPACE:
                state, key, key_ws, start = "key", [c], None, line
            elif c == "\n":
                line += 1
        elif state == "key":
            if c == "\n":
                state, key = "pre_key", []
                line += 1
            elif c == "=":
                state, value_ws, value = "pre_value", None, None
            else:
                if c not in WHITESPACE:
                    key_ws = None
                elif key_ws is None:
                    key_ws = len(key)
                key.append(c)
        elif state == "pre_value":
            if c == "\n":
                push()
                state, key, value = "pre_key", [], None
                line += 1
            elif c == "'":
                state = "single"
            elif c == '"':
                state = "double"
            elif c == "\\":
                state = "value_escape"
            elif c not in WHITESPACE:
                state = "value"
                value = (value or []) + [c]
        elif state == "value":
            if c == "\n":
                push()
                state, key, value = "pre_key", [], None
                line += 1
            elif c == "\\":
                state, value_ws = "value_escape", None
            else:
                if c not in WHITESPACE:
                    value_ws = None
                elif value_ws is None:
                    value_ws = len(value or [])
                value = (value or []) + [c]
        elif state == "value_escape":
            state = "value"
            if c != "\n":
                value = (value or []) + [c]
            else:
                line += 1
        elif state == "single":
            if c == "'":
                state = "pre_value"
            else:
                line += c == "\n"
                value = (value or []) + [c]
        elif state == "double":
            if c == '"':
                state = "pre_value"
            elif c == "\\":
                state = "double_escape"
            else:
                line += c == "\n"
                value = (value or []) + [c]
        elif state == "double_escape":
            state = "double"
            if c in SHELL_NEED_ESCAPE:
                value = (value or []) + [c]
            elif c != "\n":
                value = (value or []) + ["\\", c]
            else:
                line += 1
        elif state == "comment":
            if c == "\\":
                state = "comment_escape"
            elif c == "\n":
                state = "pre_key"
                line += 1
        elif state == "comment_escape":
            state = "comment"  # systemd 252: an escaped newline continues the comment
            line += c == "\n"
    if state in ("pre_value", "value", "value_escape", "single", "double", "double_escape"):
        push()
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Specifiers:
    """What the `%` specifiers of one unit stand for (systemd.unit(5), "Specifiers")."""

    unit: str  # vllm@a.service
    fragment: str = ""
    manager: Mapping[str, str] | None = None  # per-manager values: u U h s g G t S C L E T V H l m b v a ...

    def table(self) -> dict[str, str]:
        name, _, suffix = self.unit.rpartition(".")
        prefix, at, instance = name.partition("@")
        table = {
            "n": self.unit,
            "N": unescape_name(name),
            "p": prefix,
            "P": unescape_name(prefix),
            "i": instance if at else "",
            "I": unescape_name(instance) if at else "",
            "f": "/" + (unescape_name(instance) if at and instance else unescape_name(prefix)).lstrip("/"),
            "j": prefix.rsplit("-", 1)[-1],
            "J": unescape_name(prefix.rsplit("-", 1)[-1]),
            "y": self.fragment,
            "Y": self.fragment.rpartition("/")[0] if self.fragment else "",
            "%": "%",
        }
        table.update(self.manager or {})
        return table


def expand(text: str, specifiers: Specifiers) -> str:
    """`text` with every `%x` replaced; SyntaxProblem for a specifier systemd does not know."""
    if "%" not in text:
        return text
    table = specifiers.table()
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(text):
            raise SyntaxProblem("a lone % ends the value")
        spec = text[i + 1]
        if spec not in table:
            raise SyntaxProblem(f"unknown specifier %{spec}")
        out.append(table[spec])
        i += 2
    return "".join(out)


def unescape_name(text: str) -> str:
    """systemd-escape --unescape: `-` is `/`, `\\xNN` a byte."""
    out = bytearray()
    i = 0
    raw = text.encode("utf-8", "surrogateescape")
    while i < len(raw):
        b = raw[i]
        if b == ord("-"):
            out.append(ord("/"))
            i += 1
        elif b == ord("\\") and raw[i + 1 : i + 2] == b"x" and len(raw) >= i + 4:
            try:
                out.append(int(raw[i + 2 : i + 4], 16))
                i += 4
            except ValueError:
                out.append(b)
                i += 1
        else:
            out.append(b)
            i += 1
    return out.decode("utf-8", "surrogateescape")
