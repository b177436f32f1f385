"""JSON configs compared key by key: `quantization.kv_cache_quant_algo: removed (was "FP8")`."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from patchaudit.fs.safefs import parse_json
from patchaudit.report import ConfigChange

CONFIG_SUFFIXES = (".json", ".jinja")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][\w\-]*$")


def is_config(repo_path: str) -> bool:
    return repo_path.endswith(CONFIG_SUFFIXES)


def _join(prefix: str, key: str) -> str:
    part = key if _PLAIN_KEY.match(key) else json.dumps(key)
    if not prefix:
        return part if _PLAIN_KEY.match(key) else f"[{part}]"
    return f"{prefix}.{part}" if _PLAIN_KEY.match(key) else f"{prefix}[{part}]"


def diff_values(file: str, old: Any, new: Any, prefix: str = "") -> list[ConfigChange]:
    """Every leaf that differs, by key path; lists of equal length are compared item by item."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[ConfigChange] = []
        for key in old:
            path = _join(prefix, str(key))
            if key not in new:
                out.append(ConfigChange(file=file, key=path, change="removed", old=old[key]))
            else:
                out.extend(diff_values(file, old[key], new[key], path))
        for key in new:
            if key not in old:
                out.append(ConfigChange(file=file, key=_join(prefix, str(key)), change="added", new=new[key]))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out.extend(diff_values(file, a, b, f"{prefix}[{i}]"))
        return out
    if type(old) is type(new) and (old == new or _both_nan(old, new)):
        return []
    return [ConfigChange(file=file, key=prefix or "(document)", change="changed", old=old, new=new)]


def _both_nan(a: Any, b: Any) -> bool:
    return isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)


def diff_config(file: str, old: bytes, new: bytes) -> list[ConfigChange] | None:
    """Key changes between two versions of a config; None when either side is not JSON (a template is
    one value: the whole text)."""
    if file.endswith(".jinja"):
        if old == new:
            return []
        return [
            ConfigChange(
                file=file,
                key="chat_template",
                change="changed",
                old=old.decode("utf-8", "replace"),
                new=new.decode("utf-8", "replace"),
            )
        ]
    try:
        a = parse_json(old)
        b = parse_json(new)
    except ValueError:
        return None
    return diff_values(file, a, b)


def key_line(text: bytes, key: str) -> int:
    """The line where the key path is written in `text` (1 when it is not there).

    A key written twice counts where JSON takes its value from: the last time.
    """
    try:
        lines = _KeyLines(text.decode("utf-8")).lines()
    except (UnicodeDecodeError, ValueError, IndexError):
        return 1
    return lines.get(key, 1)


class _KeyLines:
    """Walk a JSON text and note, for every key path (as `_join` spells it), the line of its key."""

    _SCALAR = re.compile(r"-?(?:\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|Infinity)|true|false|null|NaN")

    def __init__(self, text: str) -> None:
        self.text = text
        self.found: dict[str, int] = {}

    def lines(self) -> dict[str, int]:
        self._value(self._ws(0), "")
        return self.found

    def _ws(self, i: int) -> int:
        while i < len(self.text) and self.text[i] in " \t\r\n":
            i += 1
        return i

    def _value(self, i: int, path: str) -> int:
        c = self.text[i]
        if c == "{":
            i = self._ws(i + 1)
            if self.text[i] == "}":
                return i + 1
            while True:
                if self.text[i] != '"':
                    raise ValueError("key expected")
                key, end = json.decoder.scanstring(self.text, i + 1)  # type: ignore[attr-defined]
                sub = _join(path, key)
                self.found[sub] = self.text.count("\n", 0, i) + 1
                i = self._ws(end)
                if self.text[i] != ":":
                    raise ValueError("':' expected")
                i = self._ws(self._value(self._ws(i + 1), sub))
                if self.text[i] == "}":
                    return i + 1
                if self.text[i] != ",":
                    raise ValueError("',' expected")
                i = self._ws(i + 1)
        if c == "[":
            i, n = self._ws(i + 1), 0
            if self.text[i] == "]":
                return i + 1
            while True:
                i = self._ws(self._value(i, f"{path}[{n}]"))
                n += 1
                if self.text[i] == "]":
                    return i + 1
                if self.text[i] != ",":
                    raise ValueError("',' expected")
                i = self._ws(i + 1)
        if c == '"':
            return int(json.decoder.scanstring(self.text, i + 1)[1])  # type: ignore[attr-defined]
        match = self._SCALAR.match(self.text, i)
        if match is None:
            raise ValueError("value expected")
        return match.end()
